"""Solver: the compliant-constraint, non-smooth Newton time stepper of seed 001, section IV.

One ``step(state_in, state_out, control, dt)`` advances every world by dt [s] in ``substeps``
substeps. Each substep predicts positions, detects contacts, starts from the multipliers of the
last substep (warm start: the contact rows', carried in ``State.multipliers``), runs Newton
iterations until each world converges (``softsnake.newton``), each solving its linear system by Jacobi-preconditioned
conjugate residual (``softsnake.linear_solve``), and sets the velocities from the positions; each world's substep
runs in a frame centred on that world (``softsnake.kernels.world_frame``), so that where a world sits does not
round its physics.
Nothing inside a step reads back to the host, so a whole step is captured as a graph and replayed
(``SolverSettings.capture_graph``: a CUDA graph on a GPU, Warp's CPU graph on the CPU); the Newton loop ends
once every world has converged by a conditional branch inside the graph, and until then its iterations skip the
items of the worlds that have (``Solver.held_worlds``: a batch pays for its slowest world's iterations only in that
world); the blow-up check runs on the device in every step and its flags are read back every ``check_interval``
steps.

The launches of a substep are recorded once (``wp.launch(record_cmd=True)``) and replayed every
substep: a launch from Python costs tens of microseconds on the CPU, a replay a few. They are
recorded again when the substep length, the arrays of the state or control passed to ``step``, the
model's gravity or one of the solver's settings change.

Every setting, with its unit and the reason for its value, is ``softsnake.SolverSettings``.
"""

import collections
import contextlib
import functools
import time

import numpy as np
import warp as wp

from . import newton, residuals
from .constraints import CONSTRAINT_TYPES
from .errors import ConfigError, SimulationError
from .input_checks import InputCheck, step_span
from .kernels import checks, multipliers
from .linear_solve import matrix_free_transpose, solve_commands, stored_transpose
from .model import Control
from .newton_counts import ROUND_OFF_MARGIN, NewtonCounts
from .solver_settings import SolverSettings
from .validation import time_step

BLOCK_MAX_ROWS = 1024
"""Up to this many rows in its largest world, "auto" runs a GPU's linear solves one thread block per world
(``linear_solve.whole_solve_threads``: about 2 rows per thread, 512 threads at 1024 rows): a small
world's iteration then costs a few microseconds, where the batched solver's 4 launches cost about 18 us
whatever the size (measured on an H100: ``auto_linear_solver``). Between the vines' 120-240 rows and the
snakes' 28 332 the crossing is not measured: from the per-iteration costs at the two ends (block: 4.6 us per
row a thread walks; batched: 18 us), it lies near 1000 rows."""


def auto_linear_solver(model):
    """The linear solver "auto" picks (``SolverSettings.linear_solver``), from an H100's measurements
    (experiments/results/gpu.md, sections 2 and 8; ms per step, medians):

    - On the CPU, "per_world" (one thread per world; a GPU's thread blocks are one thread there).
    - On a GPU, "block" for worlds of at most ``BLOCK_MAX_ROWS`` rows: one 30-body vine (120 rows) 3.6 ms
      against 38.2 (per_world) and 28.7 (batched); 1024 vines of 15 links (240 rows) 12.4 against 457.5 and
      54.0. One GPU thread per world never won there: it walks a world's whole solve in sequence.
    - On a GPU, for larger worlds, "batched" while there are fewer worlds than the GPU has multiprocessors
      (paper-mesh snakes, 28 332 rows: 1 / 10 / 32 / 128 snakes 14.6 / 28.0 / 44.9 / 186 ms per frame
      against 84.6 / 147 / 166 / 205 for one block per world, which leaves most of the GPU idle), "block"
      from then on (256 snakes: 262 against 341 ms, 1024: 876 against 1295; the first H100 session; 256 again
      in the third: 265 against 342).

    Warp's own ``warp.optim.linear.cr`` (``batch_offsets``, the same operator and preconditioner) is no
    choice: the solves alone, 20 iterations (gpu.md, section 9), took it 1.94 ms for one snake against the
    batched solver's 1.54, 5.79 for 32 snakes against 4.63, and 3.55 ms for 4096 vines against one block per
    vine's 0.58; it also guards none of its divisions (a converged world turns NaN)."""
    if model.device.is_cpu:
        return "per_world"
    if model.largest_world_rows <= BLOCK_MAX_ROWS or model.world_count >= model.device.sm_count:
        return "block"
    return "batched"


RECORDINGS_KEPT = 2
"""How many recordings (a step's launches on one set of state and control arrays, with their graphs) a
Solver keeps: two states stepped in turn (``step(state_0, state_1)``, then the other way round) replay theirs
instead of recording all of a step's launches again at every step. A recording keeps its arrays alive (its
launches point at them), so each one more kept could hold one more state a caller has dropped."""

PROFILE_PHASES = ("predict", "assemble", "solve", "update", "finish", "check")
"""The phases of a step that ``Solver(profile=True)`` times."""

FLAG_NAMES = {int(checks.NONFINITE): "a non-finite state", int(checks.TOO_FAST): "a speed above {max_speed:g} m/s",
              int(checks.SPINNING): "an angular speed above {max_angular_speed:g} rad/s",
              int(checks.ENERGY_GROWTH): "kinetic energy grown more than {energy_growth_limit:g} times in one step",
              int(checks.ENERGY_RUNAWAY): "kinetic energy grown steadily more than {energy_growth_streak:g} times over "
                                          "consecutive steps of more than {streak_step_growth:g} times each, a point "
                                          "faster than {runaway_speed:g} m/s",
              int(checks.ENERGY_GROWTH_TWO_STEPS): "kinetic energy grown more than {energy_growth_two_steps:.3g} times in "
                                                   "each of two steps"}


def _launched():
    """What ``Solver.record`` returns for a launch it ran at once or an empty one: replaying it does nothing."""


class Solver:
    """Non-smooth Newton solver with compliant constraints, many worlds at once.

    Args:
        model: the finalized :class:`softsnake.Model`
        settings: a :class:`softsnake.SolverSettings` (default: ``SolverSettings()``)
        profile: time the phases of every step into ``profile_seconds`` (each phase bracketed by
            ``wp.synchronize``; the results are the same, the step slower)
        **overrides: any field of ``SolverSettings`` (``substeps=1``, ``linear_iterations=40`` ...)

    Every setting is also a public attribute; a change between steps takes effect at the next step.
    """

    def __init__(self, model, settings=None, *, profile=False, **overrides):
        settings = (settings or SolverSettings()).replace(**overrides)
        self.model = model
        for name, value in vars(settings).items():
            setattr(self, name, value)
        if self.linear_solver == "auto":
            self.linear_solver = auto_linear_solver(model)
        self.step_count = 0
        self.profile = bool(profile)
        self.profile_seconds = dict.fromkeys(PROFILE_PHASES, 0.0)
        """Wall time [s] per phase since construction or ``reset_profile`` (``profile=True`` only):
        "predict" (prediction and contact detection), "assemble" (rows, J, J^T, right-hand sides, the
        line search's merit), "solve" (the linear solves), "update" (multipliers and positions),
        "finish" (velocities) and "check" (the blow-up check)."""
        self._allocate()
        self.planar = 1 if model.planar_axis >= 0 else 0
        """1 for a planar model (the kernels' flag), 0 otherwise."""
        self.constraint_types = [t for t in CONSTRAINT_TYPES if getattr(model, f"{t.name}_count")]
        """The constraint types this model has items of, in row order."""
        for ctype in self.constraint_types:
            ctype.allocate(self)
        self.input_check = InputCheck(model)
        self.row_carried = self._row_mask(lambda ctype: ctype.carries_multipliers)
        """1 on the rows whose multipliers the warm start carries into the next substep."""
        self.row_tried = self._row_mask(lambda ctype: ctype.carries_multipliers or ctype.tries_carried_multipliers)
        """1 on the rows whose multipliers the elastic warm start's second start carries."""
        self.row_from_start = self._row_mask(lambda ctype: ctype.rows_from_start(bool(self.planar)))
        """1 on the rows whose residual measures a motion since the substep's start (``kernels.compensated``)."""
        self.row_reads_remainders = self._row_mask(lambda ctype: ctype.reads_remainders)
        """1 on the rows whose kernel evaluates them at the compensated positions itself (``remainder_inputs``)."""
        self._has_tried_rows = any(ctype.tries_carried_multipliers for ctype in self.constraint_types)
        self._transposes = {}
        """``transpose()``'s layouts by ``tetrahedron_operator``."""
        self._recordings = collections.OrderedDict()
        """Recordings by key (``_recording_key_of``), least recently used first, at most ``RECORDINGS_KEPT``."""
        self._recording_key = None
        """The key of the last step's recording (``residual_norms`` evaluates that step)."""
        self.compensating = False
        """Whether the substeps being recorded keep positions as float32 pairs (``SolverSettings.compensates_positions``
        of their length; the command builders of ``softsnake.newton`` read it)."""
        self._checked = set()
        self._launch_now = False
        self._skipping_held = False
        self._checked_through = 0
        """The last step whose blow-up flags the host has read."""

    def _row_mask(self, chosen):
        """An int array over the rows: 1 on the rows of the constraint types ``chosen(ctype)`` picks (True: every
        row of an item; a list of booleans: the item's rows it marks)."""
        mask = np.zeros(max(self.model.row_count, 1), dtype=np.int32)
        for ctype in self.constraint_types:
            rows = ctype.rows_per_item(bool(self.planar))
            marked = chosen(ctype)
            marked = list(marked) if isinstance(marked, (list, tuple)) else [bool(marked)] * rows
            first = getattr(self.model, f"{ctype.name}_row").numpy()
            for k in range(rows):
                if marked[k]:
                    mask[first + k] = 1
        return wp.array(mask, dtype=int, device=self.model.device)

    @property
    def elastic_start_on(self):
        """Whether a substep tries the elastic warm start (``SolverSettings.uses_elastic_warm_start``) on a
        model that has rows it would carry."""
        return self._has_tried_rows and self.settings.uses_elastic_warm_start

    @property
    def keeps_least_merit(self):
        """Whether the Newton loop keeps its point of least merit and judges its last step
        (``SolverSettings.wander_limit`` > 0; the line search ends a substep its own way)."""
        return self.wander_limit > 0.0 and not self.line_search

    @property
    def balances_momentum(self):
        """Whether the Newton iteration balances momentum (``SolverSettings.uses_momentum_balance``)."""
        return self.settings.uses_momentum_balance

    @property
    def momentum_first_entity(self):
        """The first entity (particles first, then bodies) whose momentum the balanced iteration balances: 0, or
        the first body where ``SolverSettings.momentum_balance`` is "bodies"."""
        return self.model.particle_count if self.settings.balances_bodies_only else 0

    @property
    def momentum_first_dof(self):
        """The first degree of freedom whose momentum the balanced iteration balances (``momentum_first_entity``'s)."""
        return 3 * self.momentum_first_entity

    @property
    def settings(self):
        """The current settings, as a :class:`softsnake.SolverSettings`."""
        values = {name: getattr(self, name) for name in vars(SolverSettings())}
        return SolverSettings(**values)

    def zeros(self, n, dtype=float):
        """A zeroed solver array of n entries (at least one, so that empty models launch nothing odd)."""
        return wp.zeros(max(n, 1), dtype=dtype, device=self.model.device)

    def _allocate(self):
        m = self.model
        zeros = self.zeros
        self.entity_count = m.particle_count + m.body_count
        dofs = 3 * m.particle_count + 6 * m.body_count
        self.particle_q_prev, self.particle_q_pred = zeros(m.particle_count, wp.vec3), zeros(m.particle_count, wp.vec3)
        self.body_q_prev, self.body_q_pred = zeros(m.body_count, wp.transform), zeros(m.body_count, wp.transform)
        self.body_inv_inertia_world = zeros(m.body_count, wp.mat33)
        # Each world's substeps run in a frame of their own (kernels.world_frame): its shift (zero between
        # substeps) and the stored positions the substep began with.
        self.frame_shift = zeros(m.world_count, wp.vec3)
        self.world_lower = wp.full(max(m.world_count, 1), wp.vec3(np.inf), dtype=wp.vec3, device=m.device)
        self.world_upper = wp.full(max(m.world_count, 1), wp.vec3(-np.inf), dtype=wp.vec3, device=m.device)
        self.particle_q_stored, self.body_q_stored = zeros(m.particle_count, wp.vec3), zeros(m.body_count, wp.transform)
        # Per body: the share of its velocity correction it keeps (newton.finish_commands; 1 between substeps).
        self.body_correction_scale = wp.ones(m.body_count, dtype=float, device=m.device)
        for name in ("displacement", "offset", "offset_ref", "offset_full", "u", "u_lambda", "momentum_gap"):
            setattr(self, name, zeros(dofs))
        self.J_values = zeros(m.nnz)
        # The solver's J: J itself, or (planar models) its in-plane columns only.
        self.J_solve_values = zeros(m.solve_nnz) if m.solve_compact else self.J_values
        for name in ("row_c", "row_compliance", "row_coupling", "row_damping", "rhs", "residual", "compliance_eff",
                     "coupling_eff", "inv_diagonal", "dlam", "dlam_taken", "z", "p", "Az", "Ap", "row_floor"):
            setattr(self, name, zeros(m.row_count))
        self.row_residual_scale = wp.ones(max(m.row_count, 1), dtype=float, device=m.device)
        # Per-world solve scratch: live rows (flags and list) and where each column of J^T ends.
        self.row_live, self.live_rows, self.JT_live_ends = zeros(m.row_count, int), zeros(m.row_count, int), zeros(dofs, int)
        # Chunk sums: of z.Az (the linear solve) and of the others (A p . P A p, merits).
        self.partial, self.zAz_partial = zeros(m.chunk_count), zeros(m.chunk_count)
        for name in ("zAz", "zAz_next", "zAz_start", "merit", "merit_ref", "merit_first", "merit_floor", "step_scale",
                     "kinetic_energy", "energy_growth", "energy_streak"):
            setattr(self, name, zeros(m.world_count))
        self.retreat, self.world_flag = zeros(m.world_count, int), zeros(m.world_count, int)
        # 1 while some world's Newton iteration goes on (multipliers.flag_iterating_worlds; Solver._substep).
        self.newton_iterating, self.newton_count = zeros(1, int), zeros(1, int)
        # 1 where the last judgement left some world iterating, also after the budget ended the loop.
        self.newton_unfinished = zeros(1, int)
        # Per world, 1 where the last judgement held its point (retreat HOLD; multipliers.flag_iterating_worlds): the
        # Newton loop's later iterations skip that world's items (held_worlds), and a never written twin of zeros
        # for every launch outside the loop.
        self.world_held, self.no_world_held = zeros(m.world_count, int), zeros(m.world_count, int)
        self.energy_streak_steps, self.energy_peak = zeros(m.world_count, int), zeros(m.world_count)
        # How each world's Newton loops ended, counted on the device (Solver.newton_counts).
        self.world_substeps, self.world_newton_steps, self.world_budget_ends, self.world_unconverged_ends = (
            zeros(m.world_count, int) for _ in range(4))
        self.world_wander_returns = zeros(m.world_count, int)
        # The elastic warm start's second start (SolverSettings.elastic_warm_start): carried multipliers, the
        # first start kept, the merits of both.
        self.lam_carried, self.lam_start_first = zeros(m.row_count), zeros(m.row_count)
        self.particle_q_start_first = zeros(m.particle_count, wp.vec3)
        self.body_q_start_first = zeros(m.body_count, wp.transform)
        self.merit_start_first, self.merit_start_second = zeros(m.world_count), zeros(m.world_count)
        # SolverSettings.wander_limit: the point of least merit a substep's Newton loop has visited, per world.
        self.lam_least, self.merit_least = zeros(m.row_count), zeros(m.world_count)
        # Per world, 1 where a copy between points applies (newton.copy_where_commands: the elastic start's first
        # start put back, the wander limit's least point kept or gone back to); each use sets it first.
        self.world_taken = zeros(m.world_count, int)
        self.particle_q_least, self.body_q_least = zeros(m.particle_count, wp.vec3), zeros(m.body_count, wp.transform)
        # SolverSettings.compensated_positions (kernels.compensated): the remainders of x_n, x~, the elastic start's
        # first start and the least point, and per degree of freedom those of x and of x - x_n (the rows' shift).
        (self.particle_q_prev_low, self.particle_q_pred_low, self.particle_q_start_first_low,
         self.particle_q_least_low) = (zeros(m.particle_count, wp.vec3) for _ in range(4))
        self.body_q_prev_low, self.body_q_pred_low, self.body_q_start_first_low, self.body_q_least_low = (
            zeros(m.body_count, wp.spatial_vector) for _ in range(4))
        self.remainder, self.remainder_since_start = zeros(dofs), zeros(dofs)
        self.start_stale = zeros(m.world_count, int)

    # ------------------------------------------------------------------ public
    def step(self, state_in, state_out, control, dt):
        """Advance every world by ``dt`` [s] from ``state_in`` into ``state_out`` (may be the same object).

        ``control`` holds the chamber pressures [Pa], joint targets [rad] and extension rates [m/s];
        the external forces of ``state_in`` act during the step.
        """
        dt = time_step(dt, self.substeps)
        self._check_belongs(state_in, "state_in")
        self._check_belongs(state_out, "state_out")
        self._check_belongs(control, "control")
        if state_out is not state_in:
            state_out.assign(state_in)
            wp.copy(state_out.particle_f, state_in.particle_f)
            wp.copy(state_out.body_f, state_in.body_f)
        h = dt / self.substeps
        recording = self._recorded(state_out, control, h)
        if self._graphs_apply():
            self._replay_step(recording, state_out, h)
        else:
            self._run_step(recording, state_out, h)
        self.step_count += 1
        if self.check_finite and (self.step_count - self._checked_through) >= self.check_interval:
            self._raise_if_blown_up()

    def residual_norms(self, state, control, dt):
        """Per-world residual norms of the last step's Newton system at its end point, by kind.

        Call it after ``step(state_in, state, control, dt)`` with that step's ``state`` (its
        state_out), ``control`` and ``dt``, no setting changed in between (otherwise a ConfigError).
        It evaluates the equations of the step's last substep once more at the positions and
        multipliers of ``state``; ``step`` itself does none of this work.

        Returns a :class:`softsnake.residuals.ResidualNorms`: float64 arrays (world_count,) named
        ``momentum``, ``compliant``, ``normal`` and ``friction`` (and ``rows``, the root of the
        line search's merit), in sqrt(kg) m; ``softsnake.residuals`` defines each exactly.
        """
        h = time_step(dt, self.substeps) / self.substeps
        if self._recording_key is None or self._recording_key_of(state, control, h) != self._recording_key:
            raise ConfigError("residual_norms evaluates the last step's Newton system: call it after Solver.step with "
                              "that step's state_out, control and dt, and no solver setting changed in between")
        recording = self._recordings[self._recording_key]
        if "residuals" not in recording:
            self.compensating = self.settings.compensates_positions(h)
            recording["residuals"] = residuals.residual_commands(self, state, control, h)
        self._run(recording["residuals"])
        return residuals.residual_norms(self, h)

    def reset(self, state, world_mask=None):
        """Start the chosen worlds of ``state`` again: the model's initial positions and velocities, no
        external forces, no carried multipliers (their next substep starts cold) and no pressures they were computed
        under.

        world_mask: booleans, one per world (None: every world).
        """
        self._check_belongs(state, "state")
        m = self.model
        mask = np.ones(m.world_count, dtype=bool) if world_mask is None else np.asarray(world_mask, dtype=bool)
        if mask.shape != (m.world_count,):
            raise ConfigError(f"world_mask must hold {m.world_count} booleans (one per world), got shape {mask.shape}")
        initial = m.state()
        for kind, names in (("particle", ("particle_q", "particle_q_low", "particle_qd", "particle_qd_low", "particle_f")),
                            ("body", ("body_q", "body_q_low", "body_qd", "body_qd_low", "body_f")),
                            ("row", ("multipliers",)),
                            ("pressure_channel", ("multiplier_pressure",))):
            worlds = getattr(m, f"{kind}_world_start")
            keep = np.repeat(~mask, np.diff(worlds))
            for name in names:
                current, fresh = getattr(state, name).numpy(), getattr(initial, name).numpy()
                if len(keep):
                    getattr(state, name).assign(np.where(keep.reshape((-1,) + (1,) * (current.ndim - 1)), current, fresh))
        if mask.all():
            state.multiplier_step = 0.0
        self.kinetic_energy.zero_()
        self.energy_growth.zero_()
        self.energy_streak.zero_()
        self.energy_streak_steps.zero_()
        self.energy_peak.zero_()

    def newton_counts(self):
        """How each world's Newton loops ended since construction or ``reset_newton_counts``: a
        :class:`softsnake.newton_counts.NewtonCounts` (per world: substeps, Newton steps, substeps the budget
        ended, and those of them above float32's round-off floor: unconverged). One read from the device; the
        counting itself runs in every step."""
        return NewtonCounts(**{name: a.numpy()[:self.model.world_count].astype(np.int64)
                               for name, a in zip(NewtonCounts.COUNTS, self._newton_count_arrays)},
                            budget=self.newton_iterations, tolerance=self.newton_tolerance, floor=self.newton_floor,
                            balanced="bodies" if self.settings.balances_bodies_only else self.balances_momentum)

    @property
    def _newton_count_arrays(self):
        return (self.world_substeps, self.world_newton_steps, self.world_budget_ends, self.world_unconverged_ends,
                self.world_wander_returns)

    def reset_newton_counts(self):
        """Start ``newton_counts`` from zero."""
        for counts in self._newton_count_arrays:
            counts.zero_()

    def add_newton_counts(self, counts):
        """Add the per-world counts of an earlier run of the same worlds to this solver's: ``counts`` maps each of
        ``NewtonCounts.COUNTS`` to one count per world. A run that goes on from a saved state reports its whole
        length."""
        for name, target in zip(NewtonCounts.COUNTS, self._newton_count_arrays):
            if name == "wander_returns" and name not in counts:  # counts saved before the twenty-sixth session
                continue
            earlier = np.asarray(counts[name])
            if earlier.shape != (self.model.world_count,):
                raise ConfigError(f"newton counts {name} hold {earlier.shape} values, not one per world "
                                  f"({self.model.world_count})")
            total = target.numpy()
            total[:self.model.world_count] += earlier.astype(total.dtype)
            target.assign(total)

    def reset_profile(self):
        """Set every phase time of ``profile_seconds`` back to 0."""
        self.profile_seconds = dict.fromkeys(PROFILE_PHASES, 0.0)

    # ------------------------------------------------------------------ recording
    def record(self, kernel, dim, inputs, outputs=(), block_threads=None):
        """A replayable launch of ``kernel`` (called without arguments); inside ``launching_now`` the
        kernel runs at once instead (and a ``wp.Tape`` around it records it). ``block_threads``: launch
        ``dim`` thread blocks of that many threads (``wp.launch_tiled``) instead of ``dim`` threads."""
        launch = wp.launch if block_threads is None else functools.partial(wp.launch_tiled, block_dim=block_threads)
        if dim == 0:  # nothing to launch (Warp records no command for it)
            return _launched
        if self._launch_now:
            launch(kernel, dim=dim, inputs=inputs, outputs=outputs, device=self.model.device)
            return _launched
        return launch(kernel, dim=dim, inputs=inputs, outputs=outputs, device=self.model.device, record_cmd=True).launch

    @contextlib.contextmanager
    def launching_now(self):
        """Within this block, the methods that build recorded launches (``record``, and so every
        ``ConstraintType.row_command``) launch their kernels at once, so that a ``wp.Tape`` can
        record them (``softsnake.gradients``)."""
        self._launch_now = True
        try:
            yield
        finally:
            self._launch_now = False

    def remainder_inputs(self, state):
        """What a row kernel that reads the positions' remainders itself (``ConstraintType.reads_remainders``) takes:
        [compensating (0/1), the remainders of x and of x_n for particles, then for bodies]. Zeros where the
        substeps being recorded do not compensate, and in the gradients' launches (``launching_now``: they
        differentiate the float32 step)."""
        if self.compensating and not self._launch_now:
            return [1, state.particle_q_low, self.particle_q_prev_low, state.body_q_low, self.body_q_prev_low]
        particles, bodies = self.zero_remainders
        return [0, particles, particles, bodies, bodies]

    @functools.cached_property
    def zero_remainders(self):
        """(particles' vec3, bodies' spatial_vector) zero arrays: the remainders a kernel takes where it does not
        compensate, which it then neither reads nor writes, so one pair serves every such launch
        (``remainder_inputs``, the gradients)."""
        return self.zeros(self.model.particle_count, wp.vec3), self.zeros(self.model.body_count, wp.spatial_vector)

    def transpose(self):
        """How this solver applies J^T now (``SolverSettings.tetrahedron_operator``), laid out at its first use."""
        if self.tetrahedron_operator not in self._transposes:
            build = matrix_free_transpose if self.tetrahedron_operator == "matrix_free" else stored_transpose
            self._transposes[self.tetrahedron_operator] = build(self)
        return self._transposes[self.tetrahedron_operator]

    def held_worlds(self):
        """The per-world flags (int, 1: skip) a kernel of the Newton loop takes to skip the items of the worlds that
        hold their point: ``world_held`` while the loop's later iterations are recorded (``_skipping_held``), else zeros.

        A world that holds its point changes nothing in later iterations (``multipliers.judge_newton_steps``): its
        multipliers and positions stay, so every row, product and sum of it would come out bit for bit as it stands,
        and a batch whose loop goes on for its slowest world needs none of them (1024 vines of 15 links: 13 % of the
        worlds' iterations were their own, experiments/results/vine.md, "Runtime"). Skipped: the whole-solve kernels'
        worlds (their solution, unused, keeps the last one), the update's product, and the assembly's displacements,
        inertias, rows, momentum gaps, right-hand sides and merit sums. Skipped together, a kernel and the ones that add
        into its outputs (``add_remainders_to_rows``, ``compensated_displacements``, ``add_momentum_merit``) leave the
        world's arrays as they are; kernels that only copy or read them (``gather_values``, the judgement, the counts)
        run, and so do the batched solver's, over all rows. tests/test_solver.py
        (``test_newton_loop_ending_early_changes_no_bit``) and the golden states check that nothing moves."""
        return self.world_held if self._skipping_held else self.no_world_held

    def row_skip_inputs(self):
        """What a constraint type's row kernel takes before its ``row_outputs`` to skip the items of held worlds:
        each row's world and ``held_worlds``."""
        return [self.model.row_world, self.held_worlds()]

    @contextlib.contextmanager
    def skipping_held_worlds(self):
        """Within this block, the launches being recorded skip the items of held worlds (``held_worlds``): the Newton
        loop's later iterations (solve, update, assembly)."""
        self._skipping_held = True
        try:
            yield
        finally:
            self._skipping_held = False

    def row_outputs(self):
        """The row arrays every constraint kernel writes, in the order its arguments end with:
        J's offsets and values, the residual c, the compliance alpha and the damping ratio gamma."""
        return [self.model.J_offsets, self.J_values, self.row_c, self.row_compliance, self.row_damping]

    def _recorded(self, state, control, h):
        """The recorded launches of a substep of length h [s] on these state and control arrays."""
        key = self._recording_key_of(state, control, h)
        self._recording_key = key
        if key in self._recordings:
            self._recordings.move_to_end(key)
        else:
            self.compensating = self.settings.compensates_positions(h)
            has_rows = self.model.row_count > 0
            self._recordings[key] = {
                "predict": newton.predict_commands(self, state, h),
                "warm_start": newton.warm_start_commands(self, state, control, h) if has_rows else [],
                "elastic_start": newton.elastic_start_commands(self, state, control, h)
                if has_rows and self.elastic_start_on else [],
                "start": newton.start_line_search_commands(self) if has_rows else [],
                "newton": {"begin": [self.record(multipliers.start_newton_count, 1, [], outputs=[self.newton_count])],
                           "assemble_first": newton.assemble_commands(self, state, control, h),
                           **self._loop_commands(state, control, h),
                           "count": [self.record(multipliers.count_newton_iteration, 1, [
                               self.newton_count, self.newton_iterations], outputs=[self.newton_iterating]),
                                     self.record(multipliers.count_world_newton_steps, self.model.world_count,
                                                 [self.retreat], outputs=[self.world_newton_steps])],
                           "end": self._substep_end_commands(state)}
                if has_rows else {},
                "final_check": (newton.assemble_commands(self, state, control, h)
                                + newton.update_commands(self, state, take_step=False)) if has_rows else [],
                "least_end": newton.least_merit_end_commands(self, state, control, h)
                if has_rows and self.keeps_least_merit else [],
                "finish": newton.finish_commands(self, state, h),
                "check": self._check_commands(state) + self.input_check.commands(self, state, control),
                "arrays": self._keyed_arrays(state, control),  # keeps them alive, so that their ids stay theirs
            }
            if len(self._recordings) > RECORDINGS_KEPT:
                self._recordings.popitem(last=False)
        return self._recordings[key]

    def _loop_commands(self, state, control, h):
        """What the Newton loop repeats after its first assembly: solve, update and the next assembly, each skipping the
        worlds that hold their point (``held_worlds``)."""
        with self.skipping_held_worlds():
            return {"assemble": newton.assemble_commands(self, state, control, h, round_off=False),
                    "solve": solve_commands(self), "update": newton.update_commands(self, state)}

    def _substep_end_commands(self, state):
        """How the substep's Newton loop ended, per world, into the counts of ``newton_counts``: first the round-off
        floor of the merit at the end point, where the assemblies did not estimate it (``newton_floor`` 0)."""
        floor = newton.round_off_commands(self, state) if self.newton_floor == 0.0 else []
        return floor + [self.record(multipliers.count_substep_ends, self.model.world_count, [
            self.retreat, self.merit, self.merit_floor, ROUND_OFF_MARGIN * ROUND_OFF_MARGIN],
            outputs=[self.world_substeps, self.world_budget_ends, self.world_unconverged_ends])]

    @staticmethod
    def _keyed_arrays(state, control):
        return (state.particle_q, state.particle_qd, state.particle_f, state.body_q, state.body_qd, state.body_f,
                state.multipliers, state.multiplier_pressure, state.particle_q_low, state.body_q_low,
                state.particle_qd_low, state.body_qd_low, *(getattr(control, name) for name, _ in Control.ARRAYS))

    def _recording_key_of(self, state, control, h):
        """What the recorded launches depend on: the substep length, the settings, the gravity and the arrays."""
        return (h, self.settings, tuple(self.model.gravity), *(id(a) for a in self._keyed_arrays(state, control)))

    def _run(self, commands, phase=None):
        if self.profile and phase is not None:
            wp.synchronize_device(self.model.device)
            start = time.perf_counter()
        for command in commands:
            command()
        if self.profile and phase is not None:
            wp.synchronize_device(self.model.device)
            self.profile_seconds[phase] += time.perf_counter() - start

    # ------------------------------------------------------------------ step
    def _run_step(self, recording, state, h):
        """Launch one step's commands: the substeps, then the blow-up check (its flags stay on the device)."""
        for _ in range(self.substeps):
            self._substep(recording, state, h)
        if self.check_finite:
            self._run(recording["check"], "check")

    def _graphs_apply(self):
        """Whether this step runs as a graph (``SolverSettings.capture_graph``: a CUDA graph, or Warp's CPU graph).
        A graph ends the Newton loop by conditional branches (on a GPU conditional nodes, CUDA 12.4 and later,
        driver and toolkit); without them steps run launch by launch, the host taking the same branches."""
        return (self.capture_graph and not self.profile and not self._launch_now
                and (self.model.device.is_cpu or wp.is_conditional_graph_supported()))

    def _replay_step(self, recording, state, h):
        """Run one step as a graph (CUDA, or Warp's CPU graph): the first step of a kind runs eagerly (it loads
        the kernels' modules, which a capture cannot), the second is captured, and every later one replays it.

        A step's launches depend on the host only through the warm start (whether the multipliers
        carried in ``state`` are used, and their rescaling to this substep length), so one graph is kept
        per such start; everything else a graph bakes in is in the recording's key, and a new
        recording drops the graphs with it."""
        warm = bool(self.model.row_count and self.warm_start and state.multiplier_step > 0.0)
        key = (warm, h / state.multiplier_step if warm else 0.0)
        graphs = recording.setdefault("graphs", {})
        if key not in graphs:
            graphs[key] = None
            self._run_step(recording, state, h)
            return
        if graphs[key] is None:
            with wp.ScopedCapture(device=self.model.device, force_module_load=False) as capture:
                self._run_step(recording, state, h)
            graphs[key] = capture.graph
        elif self.model.row_count:
            state.multiplier_step = h if self.warm_start else 0.0  # what the captured substeps did on the host
        wp.capture_launch(graphs[key])

    # ------------------------------------------------------------------ substep
    def _substep(self, recording, state, h):
        m = self.model
        self._run(recording["predict"], "predict")
        if m.row_count:
            if self.warm_start and state.multiplier_step > 0.0:
                ratio = h / state.multiplier_step
                # The same forces at the new substep length (lambda = f h^2), on the rows that carry them.
                if recording["elastic_start"]:
                    # The second start's multipliers (contacts and soft rows) kept aside, rescaled; the
                    # first start keeps the contact rows' only (newton.elastic_start_commands).
                    wp.launch(multipliers.keep_carried_multipliers, m.row_count, device=m.device,
                              inputs=[state.multipliers, self.row_tried, ratio * ratio])
                    wp.copy(self.lam_carried, state.multipliers)
                    ratio = 1.0
                wp.launch(multipliers.keep_carried_multipliers, m.row_count, device=m.device,
                          inputs=[state.multipliers, self.row_carried, ratio * ratio])
                self._run(recording["warm_start"], "assemble")
                self._run(recording["elastic_start"], "assemble")
            else:
                state.multipliers.zero_()
            self._run(recording["start"], "assemble")
            # The iterations go on while some world still iterates (each assembly ends by flagging that) and
            # the budget lasts (a device counter), on every device the same way: a loop the host runs (a step
            # run launch by launch) or a conditional loop of the step's graph (on a GPU a conditional node),
            # whose body is recorded once. A world that holds its point changes nothing in later iterations
            # (``multipliers.judge_newton_steps``: neither its multipliers nor its positions move, so it would
            # re-assemble the same rows; the iterations skip its items, ``held_worlds``), so ending the loop once every
            # world holds leaves every state bit for bit as the whole budget would, and a converged batch pays only for
            # the iterations it used.
            iteration = recording["newton"]
            self._run(iteration["begin"])
            self._run(iteration["assemble_first"], "assemble")
            wp.capture_while(self.newton_iterating, while_body=self._newton_iteration, iteration=iteration)
            if self.line_search:  # its own end: a last step that raised the merit is halved
                self._run(recording["final_check"], "update")
            elif self.keeps_least_merit:
                # The last step judged too, and a wandering world goes back; where every world converged (held its
                # point, on which the last assembly ran) there is nothing to judge, and the assembly is skipped.
                wp.capture_if(self.newton_unfinished, on_true=self._run, commands=recording["least_end"],
                              phase="update")
            self._run(iteration["end"])
            state.multiplier_step = h if self.warm_start else 0.0
        self._run(recording["finish"], "finish")

    def _newton_iteration(self, iteration):
        """The rest of a Newton iteration whose assembly left some world iterating: solve and update, count it,
        then, unless that was the budget's last, assemble (and judge) the next iteration's system."""
        self._run(iteration["solve"], "solve")
        self._run(iteration["update"], "update")
        self._run(iteration["count"])
        wp.capture_if(self.newton_iterating, on_true=self._run, commands=iteration["assemble"], phase="assemble")

    # ------------------------------------------------------------------ checks
    def _check_belongs(self, obj, name):
        """A State or Control of this solver's model (sizes and device), checked once per object."""
        if id(obj) in self._checked:
            return
        m = self.model
        expected = {"particle_q": m.particle_count, "body_q": m.body_count, "multipliers": m.row_count,
                    **{name: getattr(m, f"{kind}_count") for name, kind in Control.ARRAYS}}
        if obj is None or not (hasattr(obj, "particle_q") or hasattr(obj, "pressure")):
            raise ConfigError(f"{name} must be a State or Control of this solver's model, got {type(obj).__name__}")
        for field, count in expected.items():
            array = getattr(obj, field, None)
            if array is None:
                continue
            if array.device != m.device or (count and array.shape[0] != count):
                raise ConfigError(f"{name} belongs to another model: its {field} holds {array.shape[0]} entries on "
                                  f"{array.device}, this model {count} on {m.device} (make it with model.state() or "
                                  f"model.control())")
        self._checked.add(id(obj))

    def _check_commands(self, state):
        m = self.model
        return [self.record(checks.check_worlds, m.world_count, [
            m.particle_world_start_device, m.body_world_start_device, state.particle_q, state.particle_qd,
            m.particle_inv_mass, state.body_q, state.body_qd, m.body_inv_mass, m.body_inertia, self.max_speed,
            self.max_angular_speed, self.energy_growth_limit, checks.two_step_growth_limit(self.energy_growth_limit),
            checks.STREAK_STEP_GROWTH, checks.streak_growth_limit(self.energy_growth_limit), checks.STREAK_STEADINESS,
            self.runaway_speed, checks.PEAK_DECAY, checks.TURNING_FRACTION, self.energy_floor],
            outputs=[self.kinetic_energy, self.energy_growth, self.energy_streak, self.energy_streak_steps,
                     self.energy_peak, self.world_flag])]

    def _raise_if_blown_up(self):
        """Read the blow-up check's flags of the steps since the last read (and clear them); raise
        SimulationError naming the worst world."""
        first = self._checked_through + 1
        self._checked_through = self.step_count
        self.input_check.raise_if_flagged(first, self.step_count)
        flags = self.world_flag.numpy().copy()  # on the CPU a view of the array cleared below
        bad = np.flatnonzero(flags)
        if len(bad):
            self.world_flag.zero_()
            w = int(bad[np.argmax(flags[bad])])
            what = FLAG_NAMES[int(flags[w])].format(
                energy_growth_two_steps=checks.two_step_growth_limit(self.energy_growth_limit),
                energy_growth_streak=checks.streak_growth_limit(self.energy_growth_limit),
                streak_step_growth=checks.STREAK_STEP_GROWTH, **vars(self.settings))
            raise SimulationError(
                f"world {w} blew up ({what}) in {step_span(first, self.step_count)} "
                f"({len(bad)} world(s) affected); reduce dt or check the model's parameters",
                world=w, step=self.step_count, reason=what)

