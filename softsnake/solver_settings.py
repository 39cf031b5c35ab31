"""Every setting of the solver in one place: what it is, its unit, and why it has its value.

``Solver(model, settings=None, **overrides)`` starts from ``SolverSettings()`` (the engine's one
policy: robots and commands change the budget where they need to, never the formulation) and
applies the keyword overrides. The settings stay public attributes of the solver; changing one
between steps takes effect at the next step.
"""

import dataclasses
import math

from .errors import ConfigError

LINEAR_SOLVERS = ("auto", "batched", "per_world", "block")
TETRAHEDRON_OPERATORS = ("stored", "matrix_free")
ELASTIC_WARM_START_MIN_NEWTON = 3
"""Newton iterations from which ``elastic_warm_start="auto"`` tries the elastic warm start: the energy
audit settles every case with it from 3 on and not at 1 or 2 (experiments/results/convergence.md)."""
MOMENTUM_BALANCE_WORDS = ("auto", "bodies")
"""The words ``momentum_balance`` takes besides True and False."""
MOMENTUM_BALANCE_MIN_NEWTON = 16
"""Newton iterations from which ``momentum_balance="auto"`` balances momentum: a stiff bar pulled at 0.1 s
steps rests at its converged stretch from 16 x 100 on balanced (to 1e-4), 15 % short at 8 x 100
(experiments/results/convergence.md, "Momentum balance by default")."""
COMPENSATED_POSITIONS_MAX_STEP = 1.0 / 600.0
"""The longest substep [s] at which ``compensated_positions="auto"`` keeps positions as float32 pairs: the coarse
snake at rest creeps 149 um in 3 s at 1/960 s with float32 positions and 85 um at 1/1920 s, 0.8 um at 1/480 s and
3.1 um at 1/240 s; compensated, at most 4 um at every step (experiments/results/snake_at_rest.md, fortieth session;
before it, on another round-off path, 18 / 209 / 1.5 / 8 um)."""


@dataclasses.dataclass(frozen=True)
class SolverSettings:
    """The solver's budget, its tolerances and the regularisations of its rows.

    Budget (seed 001 runs 2 substeps x 4 Newton x 20 conjugate residual iterations per frame):

    Attributes:
        substeps: substeps per ``Solver.step`` (the paper: 2).
        newton_iterations: Newton iterations per substep, at most (the paper: 4). One is not safe
            everywhere: a stiff column standing on the ground at 1/30 s rocks on, also with friction off;
            from 2 on every passive body of the energy audit settles (experiments/results/convergence.md,
            "Energy audit" and "The 2-iteration column repaired"). The default is 16 (8 until the
            fourteenth session): a world stops at ``newton_tolerance``, so converged worlds pay nothing
            for it, and 8 left a wheeled module (the snake's, 0.19 kg on two 10 g wheels, mu 1) pushed
            sideways at 1.5 or 2 times its grip tipping over (its roll converges linearly while the
            wheels slide: 0.1 rad/s off after 8 iterations, 0.005 after 12, a step's error the next
            steps grew to a jump at 0.9-1.2 m/s); at 16 it slides upright at 1.5 to 3 times its grip
            (convergence.md, "Light wheels").
        newton_tolerance: a world stops iterating (holds its point for the rest of the substep) once the
            root of its merit has fallen by this factor from the substep's start [-]: converged worlds
            do no more work. 0 runs every iteration.
        newton_floor: a world also stops once the root of its merit is within this factor of its round-off
            floor [-] and has stopped falling (``newton_floor_stall``): the floor is what float32's rounding of
            its positions alone leaves in its merit (each coordinate x stored to about 2^-23 |x| / sqrt(12),
            carried through its rows and, balanced with float32 positions, its momentum gap, which compensated
            positions carry without rounding; ``multipliers.row_round_off``), estimated
            once per substep. Below that floor the merit only wanders, so a relative ``newton_tolerance`` under
            it is never met: with the tolerance alone the engine's own scenes ended 94-100 % of their substeps
            at the floor after all 16 iterations, and a warm start already there (a vine at rest: 47 % of a
            64-vine batch's substeps) ran every iteration. The estimate errs high (0.016 to 1.25 times the floor
            observed): stopping within 2 times it at once left frictional particles and bodies up to 1.04 mm
            from a step solved far past convergence (0.15 mm with the tolerance alone); stopping there once the
            merit stalls, 0.15 mm at most, in 2-6 iterations instead of 8-16 (experiments/results/convergence.md,
            "The engine stops at the round-off floor"). The default is 2 (0 until the twenty-first session, the
            vines' own since the seventeenth); 0 never stops there.
        newton_floor_stall: a world within ``newton_floor`` of its round-off floor stops only once its last Newton
            step left at least this share of the merit before it [-] (the default 0.5: the root fell by less than
            1.41 times), or at once where it starts the substep there; 0 stops at the first iteration within the
            floor. The floor's estimate errs high (0.016-0.34 times the floor observed on frictional particles
            and bodies): a merit still falling fast below it is still converging. On the vines, whose floor the
            estimate meets (0.27-1.25 times), waiting cost 50 % more iterations (5.2 against 3.4 per substep in
            cluttered scene 1) and ended no closer to a step solved far past convergence (0.0025 against 0.0014
            tube diameters): they run 0 (``softsnake.robots.vine.simulation.SOLVER_DEFAULTS``;
            experiments/results/convergence.md, "The engine stops at the round-off floor").
        linear_iterations: conjugate residual iterations per Newton iteration, at most (the paper: 20).
        linear_tolerance: a world's linear solve stops once its preconditioned residual has fallen by
            this factor [-]: converged worlds do no more work, and a solve never iterates on round-off.
            0 runs every iteration.
        linear_solver: "batched" (kernels over all rows of all worlds, 4 launches per iteration),
            "per_world" (one thread per world, the whole solve one launch: many small worlds, and the
            CPU), "block" (one thread block per world, the whole solve one launch: large worlds on a
            GPU), or "auto" (per_world on the CPU; on a GPU block where no world has more than
            ``BLOCK_MAX_ROWS`` rows, otherwise batched for fewer worlds than the GPU has
            multiprocessors and block from then on: ``softsnake.solver.auto_linear_solver``, set from
            an H100's measurements). All give the same iterates, up to float round-off on a GPU (block
            and batched add their inner products in trees); on the CPU batched equals per_world bit
            for bit.
        tetrahedron_operator: how the linear solve applies the tetrahedra's rows of J and J^T: "stored" (the
            default: from the stored CSR of J and its transpose, every row's entries) or "matrix_free" (from each
            tetrahedron's rotation R and inverse rest shape B, ``constraints.tetrahedron.TetrahedronOperator``; the
            other rows stay stored). The same operator up to float round-off, so the same iterates up to it (a
            coarse snake's 2 s gait ends 0.017 mm apart at 8 x 40, inside the 0.04 mm that a micrometre's change of
            its start makes). It reads about a tenth of the bytes per tetrahedron (88 against ~960 per product),
            the bound of a batch of thousands of paper-mesh snakes on a GPU, and computes the entries again: on a
            2-core CPU a snake solved alone, in cache, takes 8 % longer per frame, eight in one batched pass 16 %
            less (experiments/tetrahedron_operator.py; experiments/results/gpu.md, section 23). "stored" stays the
            default until a GPU has measured it.
        warm_start: start each substep from the contact rows' multipliers of the last one (rescaled to
            the new substep length), carried in ``State.multipliers``: contacts keep their forces
            (sticking contacts hold with fewer Newton iterations) instead of rebuilding them every
            substep; every other row starts from zero (``ConstraintType.carries_multipliers``). The
            carried contact multipliers are first fitted to the prediction
            (``contact.fit_carried_contact_multipliers``): scaled so that they move the particle, or the
            body's contact point, at most back to the surface and back to its start, since the rows that
            passed a weight down to them (a soft body's elements, a wheel's hinge) start from zero
            (carried whole, a stiff block on the ground ran away at 2-4 Newton iterations, a cart on two
            light wheels at 1/30 s at every budget of the plain iteration: experiments/results/
            convergence.md, "The warm start fitted to the prediction", "Bodies' carried contacts fitted").
            A converged step does not depend on its start.
        elastic_warm_start: with ``warm_start``, try a second start every substep that also carries the
            multipliers of a soft body's rows (tetrahedra, distance rows, attachments:
            ``ConstraintType.tries_carried_multipliers``), and keep it per world unless its merit begins
            more than ``kernels.multipliers.SECOND_START_MARGIN`` (4) times the first start's
            (``newton.elastic_start_commands``; two more assemblies per substep, none in a model without
            such rows). Restarted from zero, those rows keep a short solve's residual in a body at rest:
            without this start the snake link on its stand bent 21 % too much at 8 x 40 (coarse) and 7 %
            at 8 x 100 (paper mesh); with it both rest within 0.03 % of converged at every budget from
            8 x 40 to 16 x 400, and the paper mesh within 0.3 % at the paper's 4 x 20
            (experiments/results/convergence.md, "The stand"). Carrying them unconditionally blew up the
            snake's gait and stiff bodies; keeping the second start only where its merit was lower (no
            margin) let a stand at 8 x 100 stall where the plain start's iteration ends (its end a few
            times the first start's merit, so it was never kept). Where a world's chamber pressures changed
            since the last substep the margin is 1 (the carried forces balanced other rest lengths): with 4
            there too, the paper-mesh snake's gait at 8 x 40 travelled 15 % short in 10 s. "auto" (the
            default) uses it from ``ELASTIC_WARM_START_MIN_NEWTON`` (3) Newton iterations on, where it settles every case of
            the energy audit, about 15 times quieter than without (fastest point late in the run
            3.1e-5 to 3.8e-5 m/s at 3 x 40 to 8 x 100, against 4.5e-4 to 6.1e-4); at 1 and 2 Newton
            iterations it left more stiff passive bodies moving (up to 3.4 m/s at 2 x 160, against 0.15
            without), so "auto" leaves it off there. True or False force it on or off.
        line_search: backtrack a Newton step that raised its world's residual (the merit
            r^T D^-1 r of the Newton system, D its Jacobi diagonal): the world halves its step
            instead, at most ``line_search_halvings`` times in a row, and one more assembly after the
            last iteration judges the last step. Off by default: the iteration holds the friction
            force direction and mu lambda_n fixed within a step, so a step that starts sliding can
            raise the merit on its way to the solution, and backtracking then costs the iterations
            the solution needs (a wheeled module pushed sideways at twice its grip tumbled with
            the line search at 8 x 100 and slid correctly without it). Nor does it keep a short
            budget from adding energy: a stiff soft block (1 MPa) resting on the ground at dt = 1/60 s
            gains speeds of metres per second at 2 x 20..160 and 4 x 40..160 iterations, faster with it
            than without it (measured before the warm start was fitted to the prediction, which
            removed that runaway: experiments/results/convergence.md, "Where the energy comes from").
        line_search_halvings: the most consecutive halvings of one step [-].
        wander_limit: a substep whose Newton loop has not converged and ends with a merit more than this many
            times the least merit it visited goes back to that point (multipliers and positions) [-]; 0: off.
            One more assembly then judges the loop's last step, which no assembly judged before; a converged
            world keeps its point. With ``line_search`` on the line search's own final check ends the substep
            instead (it halves a last step that raised the merit; the line search never wanders). Why: full Newton
            steps are not a descent method; where steps turn loaded contact rows of heavy rotations, the iterate
            can wander away from a near-solution, and the budget stops it wherever it stands. A vine of heavy
            rotations grown along a wall (experiments/results/convergence.md, "Where Newton stalls, and where it
            wanders"): one balanced substep's merit fell from 2e-3 to 3.5e-8 in 2 iterations and rose to 1.7e-4 by
            200; that rollout reached 19 J at 40 m/s, unflagged. Why 1000 and not 1 (always the least point): on
            the same rollouts the limits 1 and 10 made most losses at 30 x 60 to 100 x 120 larger, up to 5 times
            (an early iterate of least merit is no better an answer); at 1000 every loss stays within 3.3 mm of
            the limit off, and both runaways (412 mm rms at 200 x 200, 56 at 400 x 400) are gone (9 and 6 of
            their 1 536 substeps went back). In the shipped snake and vine scenes no substep goes back
            (``NewtonCounts.wander_returns`` counts them). It costs one assembly per substep where some world did
            not converge: the snake's frame 1.6 %, the vines' step 1 % (experiments/results/wander_limit.md). The golden
            scenes never go back; they moved by up to 2e-6 (m, m/s) because the substep's velocity correction
            now uses J at the end point (the end assembly's) rather than at the point before.
        momentum_balance: carry the momentum residual g = M (x - x~) - J(x)^T lambda in the Newton
            right-hand side and add its M-norm to the merit (``softsnake.kernels.rows``), so that a
            converged step is the implicit-Euler step exactly, whatever it started from (the step of
            ENGINE.md: dx = M^-1 (J^T dlambda - g)). The plain iteration (seed 001's, g taken as 0) lands
            where its path ends, x~ + sum_k M^-1 J_k^T dlambda_k, and that lag depends on the start: at every
            budget up to 32 x 200 a double pendulum's warm and cold runs end 0.7 mm apart (5 mm from the
            implicit-Euler trajectory), bodies on a slope 6.5 mm apart, and a stiff bar pulled at 0.1 s steps
            rests 4.5 % short warm and 0.3 % cold even at 64 x 400; balanced,
            they agree to 1e-6 .. 2e-5 m and the bar to 1e-4 (experiments/start_independence.py,
            experiments/results/convergence.md, "Momentum balance by default"). The balanced iteration needs
            more Newton iterations where loaded rows turn: below 16 it can be much worse than the plain one
            (the bar at 4 x 20: 7.4 times its stretch, plain 1.01; at 8 x 100 0.85, plain 0.96). "auto" (the
            default) balances from ``MOMENTUM_BALANCE_MIN_NEWTON`` (16) Newton iterations on, the default
            budget, and leaves the plain iteration to shorter budgets (the vine's old 4 x 20, the paper's 4 x 20),
            whose answers are their budget's anyway. True or False force it; the gradients
            (``softsnake.gradients``) differentiate the implicit-Euler step. "bodies" balances the rigid bodies'
            momentum and leaves the particles' to the plain iteration: a light body's rows turn with it within a
            step (the snake's 10 g wheels), where the plain iteration's lag adds energy (the snake standing still
            under its 8 x 40 creeps 0.74 mm in 10 s, balanced it rests), while a short budget's balanced soft
            rows end further from converged (the snake's 10 s gait +1.65 % balanced, +0.85 % plain, +0.61 %
            with "bodies"); the snake runs it (``SNAKE_START``; experiments/results/convergence.md, "A snake at
            rest").
        compensated_positions: keep every position (a particle's, a body's centre and rotation) as a float32 pair,
            the value the constraints read and the remainder its rounding dropped (``softsnake.kernels.compensated``),
            so that the velocity (x - x_n) / h carries no rounding of the positions. Float32 positions resolve
            velocities only to their spacing over h (6e-5 m/s at h = 1/1920 s 0.3 m from the world's frame), and
            what rolls freely keeps that: at 1/1920 s the coarse snake at rest gathers 5e-9 J and creeps 0.09 mm in
            3 s, compensated 6.3e-11 J and 0.3 um (experiments/results/convergence.md, "Compensated positions",
            "Rotations as pairs"). Velocities are kept as pairs too, and the contact rows read the pairs themselves: a sliding
            particle then stops within 0.001 mm of where implicit Euler puts it at every step to 1/15360 s, the
            same wherever it is (convergence.md, "Contacts at small steps"). A body's rotation pair keeps turns
            below its quaternion's spacing: a pendulum released from rest swings at 1/9600 s, where a float32
            quaternion never started (convergence.md, "A body's rotation at small substeps"). It costs two vec3
            per particle and two spatial_vector per body in the state, four more per entity in the solver,
            an entity and a row kernel per assembly, and, since the Newton loop's round-off floor then counts no
            rounding of the positions, the rest of the budget where a substep used to stop at that floor (the
            resting snake at 1/1920 s: 1.7 times the wall time). "auto" (the default) keeps them for substeps of at
            most ``COMPENSATED_POSITIONS_MAX_STEP`` (1/600 s: from 5 substeps of the snake's 1/120 s frame), where
            float32's rounding shows; at longer substeps every result is bit for bit the float32 one, as with
            False. True or False force it.

    Contacts:

    Attributes:
        contact_margin: distance [m] within which a contact slot turns active at the prediction:
            a slot stays inactive (and cheap) until its point comes this close to the obstacle.
        fb_epsilon: the corner a = b = 0 of the Fischer-Burmeister function is smoothed by this
            length [m], far below any gap or slip a robot resolves and far above float32 round-off
            of the gaps (about 1e-7 m at 1 m from the world's origin).
        contact_regularization: proximal compliance of normal rows relative to their J M^-1 J^T [-]:
            keeps the linear system regular when contacts outnumber the degrees of freedom (a box on
            four corners) without moving the solution (the rows' residual carries none of it).
        friction_regularization: the same for friction rows [-].

    Rows:

    Attributes:
        min_stiffness_ratio: floor of a sampled moment curve's tangent stiffness, relative to the
            spring's reference stiffness [-]: a flat stretch of the curve would make the row's
            compliance infinite.

    Blow-up check (every step on the device; its flags read back every ``check_interval`` steps):

    Attributes:
        check_finite: raise SimulationError when a world blows up.
        check_interval: steps between two reads of the check's flags [-]. The check itself runs every
            step and its flags keep the worst finding until read, so a blow-up is never missed, only
            reported up to ``check_interval - 1`` steps late; a read is one small device-to-host copy
            that waits for the device, which on a GPU costs more than a small step (1: every step).
        max_speed: linear speed [m/s] above which a world counts as blown up: far beyond any robot
            here, reached within a few steps by a diverging solve.
        max_angular_speed: angular speed [rad/s] of a body above which its world counts as blown up
            (a wheel of 1 cm at 1000 m/s turns at 1e5 rad/s).
        energy_growth_limit: a world whose kinetic energy grew by more than this factor to the power 3/4
            in each of two consecutive steps (32 for 100) counts as blown up; so does one whose energy grew by
            more than this factor in one step, where it moves faster than ``runaway_speed`` or its energy
            before the step was at least a tenth of its recent peak (not a turning point), and one moving
            faster than ``runaway_speed`` whose energy grew steadily by more than this factor squared (10 000
            for 100) over a streak of steps of more than 1.25 times each (``kernels.checks``), each time
            judged from more than ``energy_floor``: a diverging solve grows a
            world's energy by orders of magnitude per step, or over two steps of 84 and 87 times (an
            unconverged stiff block, warm started before the start was fitted to the prediction:
            ``experiments/results/convergence.md``); actuation and gravity by far less (free fall from rest:
            4 times from the first step to the second, less after), an impact or a snap-through in one step
            mostly (a wrinkling vine link: up to 29 times, then at most 7.3). An external force that really
            does multiply a moving world's energy by 32 in two steps running needs this raised.
        runaway_speed: speed [m/s] of a world's fastest particle or body from which the streak rule of the
            energy check judges it, and the one-step rule even at a turning point. Slower, physics multiplies
            kinetic energy by any factor from potential energy (a pendulum leaving its turning point: 100
            times in one step; a body toppling from an unstable rest: 5 times per step at 1/30 s), and a
            diverging solve passes 10 m/s within a few steps of its start. Raise it for scenes that really
            move faster.
        energy_floor: kinetic energy [J] below which growth is not judged (a world starting from rest).

    Execution:

    Attributes:
        capture_graph: capture a step's launches (every substep, Newton iteration and linear solve,
            and the blow-up check) as a graph and replay it in later steps: a CUDA graph on a GPU, Warp's
            CPU graph (its API capture, replayed in C++) on the CPU. The same kernels on the same arrays
            in the same order, so the same results to the bit, without the per-launch cost of Python and
            the driver (a 30-body vine on one CPU core: 0.29 ms per step against 0.52). The graph ends a
            substep's Newton loop once every world has converged by a conditional branch (on a GPU a
            conditional node, CUDA 12.4 or later), as the host does without one. Ignored with
            ``Solver(profile=True)``, while gradients are recorded, and on a GPU whose CUDA driver or
            Warp's toolkit is older than 12.4.
    """

    substeps: int = 2
    newton_iterations: int = 16
    newton_tolerance: float = 1.0e-5
    newton_floor: float = 2.0
    newton_floor_stall: float = 0.5
    linear_iterations: int = 100
    linear_tolerance: float = 1.0e-3
    linear_solver: str = "auto"
    tetrahedron_operator: str = "stored"
    warm_start: bool = True
    elastic_warm_start: bool | str = "auto"
    line_search: bool = False
    line_search_halvings: int = 3
    wander_limit: float = 1000.0
    momentum_balance: bool | str = "auto"
    compensated_positions: bool | str = "auto"
    contact_margin: float = 0.01
    fb_epsilon: float = 1.0e-9
    contact_regularization: float = 1.0e-2
    friction_regularization: float = 1.0e-2
    min_stiffness_ratio: float = 1.0e-3
    check_finite: bool = True
    max_speed: float = 1000.0
    max_angular_speed: float = 1.0e5
    energy_growth_limit: float = 100.0
    runaway_speed: float = 10.0
    energy_floor: float = 1.0e-6
    check_interval: int = 1
    capture_graph: bool = True

    def __post_init__(self):
        for name, least in (("substeps", 1), ("newton_iterations", 1), ("linear_iterations", 1), ("check_interval", 1),
                            ("line_search_halvings", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not float(value).is_integer() or value < least:
                raise ConfigError(f"{name} must be a {'positive' if least else 'non-negative'} integer, got {value!r}")
            object.__setattr__(self, name, int(value))
        for name in ("newton_tolerance", "newton_floor", "newton_floor_stall", "linear_tolerance", "contact_margin", "fb_epsilon",
                     "contact_regularization", "friction_regularization", "min_stiffness_ratio", "energy_floor",
                     "wander_limit"):
            value = float(getattr(self, name))
            if not (math.isfinite(value) and value >= 0.0):
                raise ConfigError(f"{name} must be non-negative and finite, got {getattr(self, name)!r}")
            object.__setattr__(self, name, value)
        if 0.0 < self.wander_limit < 1.0:
            raise ConfigError(f"wander_limit must be 0 (off) or at least 1, got {self.wander_limit!r}")
        for name in ("max_speed", "max_angular_speed", "energy_growth_limit", "runaway_speed"):
            value = float(getattr(self, name))
            if not (math.isfinite(value) and value > 0.0):
                raise ConfigError(f"{name} must be positive and finite, got {getattr(self, name)!r}")
            object.__setattr__(self, name, value)
        if self.linear_solver not in LINEAR_SOLVERS:
            raise ConfigError(f"linear_solver must be one of {', '.join(LINEAR_SOLVERS)}, got {self.linear_solver!r}")
        if self.tetrahedron_operator not in TETRAHEDRON_OPERATORS:
            raise ConfigError(f"tetrahedron_operator must be one of {', '.join(TETRAHEDRON_OPERATORS)}, got "
                              f"{self.tetrahedron_operator!r}")
        for name, words in (("elastic_warm_start", ("auto",)), ("momentum_balance", MOMENTUM_BALANCE_WORDS),
                            ("compensated_positions", ("auto",))):
            value = getattr(self, name)
            if isinstance(value, str) and value in words:
                continue
            if isinstance(value, str) or value not in (True, False):  # also numpy booleans, 0 and 1
                raise ConfigError(f"{name} must be True, False or {' or '.join(repr(w) for w in words)}, got {value!r}")
            object.__setattr__(self, name, bool(value))
        for name in ("warm_start", "line_search", "check_finite", "capture_graph"):
            object.__setattr__(self, name, bool(getattr(self, name)))

    @property
    def uses_elastic_warm_start(self):
        """Whether a substep tries the elastic warm start: ``warm_start`` on, and ``elastic_warm_start`` True,
        or "auto" with at least ``ELASTIC_WARM_START_MIN_NEWTON`` Newton iterations."""
        if not self.warm_start:
            return False
        if self.elastic_warm_start == "auto":
            return self.newton_iterations >= ELASTIC_WARM_START_MIN_NEWTON
        return self.elastic_warm_start

    @property
    def uses_momentum_balance(self):
        """Whether the Newton iteration balances momentum, of every entity or of the bodies alone:
        ``momentum_balance`` True or "bodies", or "auto" with at least ``MOMENTUM_BALANCE_MIN_NEWTON`` Newton
        iterations."""
        if self.momentum_balance == "auto":
            return self.newton_iterations >= MOMENTUM_BALANCE_MIN_NEWTON
        return bool(self.momentum_balance)

    def compensates_positions(self, h):
        """Whether substeps of ``h`` [s] keep positions as float32 pairs: ``compensated_positions`` True, or "auto"
        and h at most ``COMPENSATED_POSITIONS_MAX_STEP``."""
        if self.compensated_positions == "auto":
            return h <= COMPENSATED_POSITIONS_MAX_STEP
        return bool(self.compensated_positions)

    @property
    def balances_bodies_only(self):
        """Whether the balanced iteration leaves the particles to the plain one (``momentum_balance`` "bodies")."""
        return self.momentum_balance == "bodies"

    def replace(self, **overrides):
        """A copy with ``overrides`` (unknown names are a ConfigError naming them)."""
        names = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(overrides) - names)
        if unknown:
            raise ConfigError(f"unknown solver setting(s): {', '.join(unknown)} (known: {', '.join(sorted(names))})")
        return dataclasses.replace(self, **overrides)
