"""Batched gait simulation: many soft snakes, one world each, driven by the open-loop gait.

Every frame (time step dt) the runner

1. evaluates the gait (eq. 9) for every snake and link at the end of the frame, t + dt (eq. 11
   uses a_i(t + h)), eq. 9's link index i counted from the tail (``gait.head_first_command``),
2. advances the chamber pressures through the latency model (eqs. 10-12, ``PressureLatency``,
   vectorised over snakes x links) or sets them at once with ``latency=False``,
3. hands the links' differential pressure to the engine: the active chamber's channel gets it and
   the other chamber's channel 0, so only the active chamber's actuation rows are driven (the
   valves work in antagonism, paper section III),
4. steps the solver, and records every snake's centre of mass (mass-weighted over its particles
   and bodies), its heading (the mean direction of its modules) and every link's curvature (yaw
   difference of its caps / link length).

An interrupted run (Ctrl-C or SIGTERM) or one that blew up keeps what it recorded up to its last good frame
in ``SnakeSimulation.trajectories``. An interrupt lets the frame in progress finish (``softsnake.interrupts``; a
second one stops at once; worker processes first finish and hand back the frames they were sent ahead), and the
run keeps where it stopped in ``SnakeSimulation.stop_point`` (``RunPoint``): ``run(start=...)`` goes on from
there, bit for bit as if never stopped, in one process or in worker processes whichever the stopped run used.

``run`` steps the open-loop gait from t = 0 through all frames. Frame by frame, ``step(command)`` takes the links'
commands of one frame from the caller (a controller that closes the loop on ``observe()``) and runs steps 2-4
above for it; stepped with ``gait_command``'s commands it is ``run`` bit for bit.

Snakes stand side by side along y, ``spacing`` apart, all heading +x; worlds never interact. The
engine simulates every snake in its own frame (the same trajectory wherever it stands); the
recorded observations, USD and animations are in scene coordinates.

On the CPU, ``SnakeSimulationWorkers`` (softsnake.robots.snake.workers) runs the same simulation with
its snakes split over worker processes, each holding a share of the row (``first_snake``), bit for bit.
"""

import contextlib
import copy
import dataclasses
import math

import numpy as np

from softsnake.builder import ModelBuilder
from softsnake.errors import ConfigError, SimulationError
from softsnake.finalize import is_cpu_device
from softsnake.interrupts import FrameInterrupts
from softsnake.newton_counts import NewtonCounts
from softsnake.progress import progress as progress_notes
from softsnake.solver import Solver
from softsnake.solver_settings import MOMENTUM_BALANCE_MIN_NEWTON
from softsnake.validation import positive_integer, positive_number

from ..actuation import SUPPLY_PRESSURE_DEFAULT, PressureLatency
from .config import load_snake_config
from .gait import GAIT_FIELDS, GaitParams, head_first_command
from .robot import add_snake, body_yaw, chamber_pressures, link_curvature, snake_length
from .trajectories import SnakeTrajectories

DT_DEFAULT = 1.0 / 120.0
"""Frame time step [s]: the paper's h = 0.0083 s."""

SPACING_DEFAULT = 1.0
"""Distance between neighbouring snakes along y [m]; worlds are independent, this only keeps the
USD scene readable."""

HEADING = 0.0
"""Initial heading of every snake: the head points along +x [rad]."""

USD_FPS_DEFAULT = 60.0
"""Frames per second written to USD [1/s]."""

CPU_SECONDS_PER_SNAKE_FRAME = {"paper": 0.25, "coarse": 0.053}
"""Wall time of one frame of one snake on one CPU core [s] at the snake's budget (``SNAKE_BUDGET``), by
resolution, for run estimates, measured on an idle 2-core machine (2026-11-24, commit 55402b6): paper
0.249 s (one snake, 0.5 s of the gait), coarse 0.052 s (one snake, 2 s) and 0.053 s per snake-frame
over the main job (3 snakes, 10 s, one process). A run of S snakes takes about S times as long; a
machine busy with another job about twice as long (the coarse snake took 0.134 s so)."""

MODEL_BYTES_PER_SNAKE = {"paper": 9.9e6, "coarse": 2.1e6}
"""Bytes of the Warp arrays of one snake (model, state, control and solver) [B], measured with
softsnake.memory.array_bytes (3 snakes less 1, halved: 9.87 MB paper, 2.10 MB coarse)."""

RECORD_BYTES_PER_LINK = 5 * 8
"""Bytes a run records per frame, snake and link: curvature, command, pressure, two chambers [B]."""

RECORD_BYTES_PER_SNAKE = 4 * 8
"""Bytes a run records per frame and snake besides its links: centre of mass and heading [B]."""

LINK_COLORS = ((0.85, 0.45, 0.2), (0.9, 0.6, 0.25))
MODULE_COLOR = (0.2, 0.2, 0.25)
WHEEL_COLOR = (0.05, 0.05, 0.05)


PAPER_BUDGET = {"substeps": 2, "newton_iterations": 4, "linear_iterations": 20, "newton_tolerance": 0.0,
                "linear_tolerance": 0.0, "momentum_balance": False}
"""Seed 001's fixed solver budget: 2 substeps x 4 Newton x 20 conjugate residual iterations, every
iteration run (no tolerances), with its plain iteration. The bench times it, to compare with the paper's Table II; results run
the engine's converged default (experiments/results/convergence.md)."""


SNAKE_BUDGET = {"newton_iterations": 8, "linear_iterations": 40}
"""The snake's solver budget: the cheapest of the convergence study within 5 % of the converged travel in every
run of it, at about half the cost of 8 x 100 (the engine default until the fourteenth session). It ends every
substep unconverged (the linear solve is the limit: experiments/results/newton_counts_snake_budgets.md), and its
travel is the budget's to about 1 %: over 10 s of the gait, coarse mesh, 837.2 mm, +0.6 % from the converged travel
(the balanced step at 16 x 160: 832.1 mm); paper mesh, one snake: 957.0 mm, +0.7 % from the converged ~950 mm
(balanced 16 x 160: 945.0; 16 x 320: 949.3, known to about 0.5 %); the paper's 4 x 20 travelled 25 % short on the
paper mesh. README, "Known limitations"; experiments/results/convergence.md and gait_sensitivity.md. Everything
else is the engine's policy (``SolverSettings``) and ``SNAKE_START``."""

SNAKE_START = {"elastic_warm_start": False, "momentum_balance": "bodies"}
"""The gait's start and iteration.

The engine's plain warm start (contacts carried, the soft rows from zero every substep), not its default elastic
warm start, which also carries the soft rows' multipliers: a link under the gait never rests, where the elastic
start matters most (the stand runs it). On the coarse mesh at 8 x 40 the plain start is the quieter: a micrometre
moves its 10 s travel 0.07 % (nineteenth session), the elastic start's 0.9 % (fifteenth session, before the fitted
body contacts); on the paper mesh, before the slip's change, plain -0.6 % and elastic -2.1 %:
experiments/results/gait_sensitivity.md.

The rigid bodies' momentum balanced, the particles' left to the plain iteration (``SolverSettings.momentum_balance``
"bodies"): under the plain iteration the snake standing still crept 0.74 mm in 10 s, its wheels turned a little by
each step's lag, and gained energy (12 nJ); with its bodies balanced it rests, and its 10 s gait lies +0.61 % from
the converged travel (plain +0.85 %, everything balanced +1.65 %; paper mesh +0.7 %, plain +0.8 %):
experiments/results/convergence.md, "A snake at rest"."""


def snake_solver(model, *, profile=False, **overrides):
    """The Solver every snake run uses (gait, bench): the engine's policy (``SolverSettings()``: warm
    started, tolerances) with the snake's budget (``SNAKE_BUDGET``) and start (``SNAKE_START``) and
    ``overrides`` over them (any ``SolverSettings`` field, e.g. ``PAPER_BUDGET``); ``profile`` times its
    phases (``Solver.profile_seconds``, for the bench). From ``MOMENTUM_BALANCE_MIN_NEWTON`` Newton iterations on
    (the converged reference, ``softsnake gait --budget 16x160``) every entity's momentum is balanced, as the
    engine's "auto" balances it, unless ``overrides`` name ``momentum_balance``: a converged step is then the
    implicit-Euler step."""
    settings = {**SNAKE_BUDGET, **SNAKE_START, **overrides}
    if "momentum_balance" not in overrides and settings["newton_iterations"] >= MOMENTUM_BALANCE_MIN_NEWTON:
        settings["momentum_balance"] = True
    return Solver(model, profile=profile, **settings)


def step_gait(model, solver, state, control, snake, gait, frames, *, dt=DT_DEFAULT):
    """Step snakes built by hand (``add_snake``, one per world of ``model``: turned, placed or mixed with other
    worlds as ``SnakeSimulation``'s row is not) under the open-loop gait ``gait`` (``GaitParams``, one snake per
    world) without the latency model, for frames 1 .. ``frames`` of ``dt`` [s]: per frame the commands at its end
    (``head_first_command``, as ``SnakeSimulation.run`` takes them) drive every snake's chambers
    (``chamber_pressures``; ``snake``: one world's ``SnakeHandle``) and ``solver`` steps ``state`` in place."""
    for frame in range(1, frames + 1):
        command = head_first_command(gait, frame * dt, snake.link_count)
        control.pressure.assign(chamber_pressures(model, snake.link_channels, command))
        solver.step(state, state, control, dt)


def estimate_run(snake_count, seconds, *, resolution="coarse", dt=DT_DEFAULT, link_count=4, device=None):
    """What a gait run of ``snake_count`` snakes for ``seconds`` [s] will need, before building it:
    (frames [-], bytes it holds (model and records) [B], estimated wall time [s] on the CPU, None
    on a GPU)."""
    frames = int(round(seconds / dt))
    record = (frames + 1) * snake_count * (RECORD_BYTES_PER_SNAKE + RECORD_BYTES_PER_LINK * link_count)
    record += snake_count * MODEL_BYTES_PER_SNAKE.get(resolution, MODEL_BYTES_PER_SNAKE["paper"])
    per_frame = CPU_SECONDS_PER_SNAKE_FRAME.get(resolution, CPU_SECONDS_PER_SNAKE_FRAME["paper"])
    wall = frames * snake_count * per_frame if is_cpu_device(device) else None
    return frames, record, wall


@dataclasses.dataclass
class RunPoint:
    """Where a run stopped at the end of a frame: what ``SnakeSimulation.run(start=...)`` needs to go on from there
    bit for bit (the gait is open loop: its inputs of every frame come again from ``pressure_schedule``)."""

    frame: int
    """Frames done [-]."""
    state: dict
    """The engine's state at the end of that frame (``State.numpy()``)."""
    com: np.ndarray
    """Recorded centres of mass of frames 0 .. ``frame`` (frame + 1, snakes, 3) [m] (as ``SnakeTrajectories``)."""
    curvature: np.ndarray
    """Recorded link curvatures (frame + 1, snakes, links) [1/m]."""
    yaw: np.ndarray
    """Recorded continuous headings (frame + 1, snakes) [rad]."""
    newton_counts: dict
    """The solver's per-world counts so far (``NewtonCounts.COUNTS``: name -> (snakes,) ints)."""

    def arrays(self):
        """Flat name -> array dictionary (for ``numpy.savez``); ``from_arrays`` reads it back."""
        out = {"frame": np.int64(self.frame), "com": self.com, "curvature": self.curvature, "yaw": self.yaw}
        out.update({f"state.{name}": value for name, value in self.state.items()})
        out.update({f"newton.{name}": value for name, value in self.newton_counts.items()})
        return out

    @classmethod
    def from_arrays(cls, arrays):
        """The point ``arrays()`` wrote; ConfigError naming a missing entry."""
        def pick(prefix):
            return {name[len(prefix):]: np.asarray(arrays[name]) for name in arrays if name.startswith(prefix)}

        try:
            return cls(int(arrays["frame"]), pick("state."), np.asarray(arrays["com"]), np.asarray(arrays["curvature"]),
                       np.asarray(arrays["yaw"]), pick("newton."))
        except KeyError as exc:
            raise ConfigError(f"a saved run point lacks its {exc.args[0]}") from None


@dataclasses.dataclass(frozen=True)
class SnakeObservation:
    """What ``SnakeSimulation.observe`` sees, every array per snake, positions in scene coordinates."""

    time: float
    """Simulated time [s]."""
    com: np.ndarray
    """Centre of mass (snake_count, 3) [m]."""
    heading: np.ndarray
    """Heading, the mean direction of the modules, in (-pi, pi] (snake_count,) [rad]; 0 along +x."""
    curvature: np.ndarray
    """Curvature of every link, head first (snake_count, link_count) [1/m]."""
    chambers: np.ndarray
    """Pressures of every link's (left, right) chambers (snake_count, link_count, 2) [Pa]."""


def _per_snake_gait(gait, snake_count):
    """``gait`` broadcast to ``snake_count`` snakes."""
    if gait is None:
        gait = GaitParams()
    if not isinstance(gait, GaitParams):
        raise ConfigError(f"gait must be a GaitParams, got {type(gait).__name__}")
    if gait.snake_count == snake_count:
        return gait
    if gait.snake_count != 1:
        raise ConfigError(f"gait holds {gait.snake_count} snakes, the simulation {snake_count}")
    return GaitParams(**{name: getattr(gait, name)[0] for name in GAIT_FIELDS}, snake_count=snake_count)


class SnakeSimulation:
    """Simulate ``snake_count`` snakes under the open-loop gait, one world per snake.

    snake_count: number of snakes [-]
    resolution: link mesh resolution, a name in the config ("paper" or "coarse")
    device: Warp device ("cpu", "cuda", "cuda:0", ...; None: Warp's default device)
    gait: ``GaitParams`` for one snake (shared) or for every snake; None: the paper's gait
    latency: True to pass commands through the valve latency model, False to apply them at once
    supply_pressure: supply pressure p_s of the latency model [Pa]
    dt: frame time step [s]
    seconds: simulated time [s]
    config: a ``SnakeConfig``; None loads the shipped ``snake.toml``
    spacing: distance between neighbouring snakes along y [m]
    substeps, newton_iterations, linear_iterations: solver budget; None: the snake's (``SNAKE_BUDGET``
        over ``SolverSettings``; the paper ran 2, 4, 20)
    compensated_positions: ``SolverSettings.compensated_positions`` (True, False or "auto"; None: the engine's
        "auto", which keeps positions as float32 pairs from 5 substeps per 1/120 s frame on: 1/600 s)
    first_snake: place of the first of these snakes in a longer row [-]: snake k stands at
        (first_snake + k) * spacing (a worker's share of a row, softsnake.robots.snake.workers)

    ``model``, ``solver``, ``state`` and ``control`` are the engine's objects of the run (a test may
    swap the solver before ``run``). ``close`` (or leaving a ``with`` block) frees what the simulation
    holds besides its arrays (the worker processes of a ``SnakeSimulationWorkers``).
    """

    def __init__(self, snake_count, *, resolution="coarse", device=None, gait=None, latency=True,
                 supply_pressure=SUPPLY_PRESSURE_DEFAULT, dt=DT_DEFAULT, seconds=5.0, config=None,
                 spacing=SPACING_DEFAULT, substeps=None, newton_iterations=None, linear_iterations=None,
                 compensated_positions=None, first_snake=0):
        positive_integer("snake_count", snake_count)
        for name, value in (("dt", dt), ("seconds", seconds), ("spacing", spacing)):
            positive_number(name, value)
        if dt > seconds:
            raise ConfigError(f"dt {dt} s is longer than the run, {seconds} s")
        self.snake_count = int(snake_count)
        self.config = load_snake_config(resolution=resolution) if config is None else config
        self.spacing = float(spacing)
        self.gait = _per_snake_gait(gait, self.snake_count)
        self.dt = float(dt)
        self.frame_count = int(round(seconds / dt))
        self.latency = PressureLatency((self.snake_count, self.config.link_count), supply_pressure=supply_pressure,
                                       enabled=latency)
        if np.any(self.gait.amplitude > self.latency.supply_pressure):
            raise ConfigError(
                f"gait amplitude {self.gait.amplitude.max():.6g} Pa exceeds the supply pressure "
                f"{self.latency.supply_pressure:.6g} Pa")

        self.trajectories = None
        """What the last ``run`` recorded (``SnakeTrajectories``), up to its last good frame if it blew up."""
        self.stop_point = None
        """Where the last ``run`` stopped when an interrupt ended it at a frame's end (``RunPoint``), else None."""
        self.frames_done = 0
        """Frames stepped so far, by ``run`` or ``step`` [-]: the simulated time is ``frames_done * dt``."""
        budget = {"substeps": substeps, "newton_iterations": newton_iterations, "linear_iterations": linear_iterations,
                  "compensated_positions": compensated_positions}
        self._build_worlds(resolution, device, {k: v for k, v in budget.items() if v is not None}, int(first_snake))
        self._total_mass = self._particle_mass.sum(axis=1) + self._body_mass.sum(axis=1)

    def _build_worlds(self, resolution, device, budget, first_snake):
        """Build the snakes' model, solver, state and control; set ``snake`` (the ``SnakeHandle`` of one
        world) and the masses of every snake's particles and bodies (snake_count, -1) [kg]."""
        world = ModelBuilder()
        self.snake = add_snake(world, self.config, resolution, heading=HEADING)
        scene = ModelBuilder()
        scene.add_ground(mu=self.config.friction)
        scene.replicate(world, self.snake_count, spacing=(0.0, self.spacing, 0.0), first=first_snake)
        self.model = scene.finalize(device)
        self.solver = snake_solver(self.model, **budget)
        self.state = self.model.state()
        self.control = self.model.control()
        self._particles_per_snake = world.particle_count
        self._bodies_per_snake = world.body_count
        self._particle_mass = self.model.particle_mass_numpy().reshape(self.snake_count, -1)
        self._body_mass = self.model.body_mass_numpy.reshape(self.snake_count, -1)

    def close(self):
        """Free what the simulation holds besides its arrays: nothing here, the worker processes of a
        ``SnakeSimulationWorkers``."""

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    # ------------------------------------------------------------------ per-frame observations
    def _positions(self):
        """(particles (snakes, particles, 3) [m], body poses (snakes, bodies, 7)) in scene coordinates:
        every snake at its place in the row, as observations, USD and animations show them."""
        particles = self.model.scene_particle_q(self.state).reshape(self.snake_count, self._particles_per_snake, 3)
        bodies = self.model.scene_body_q(self.state).reshape(self.snake_count, self._bodies_per_snake, 7)
        return particles, bodies

    def newton_counts(self):
        """How every snake's Newton loops ended so far (``Solver.newton_counts``: one world per snake)."""
        return self.solver.newton_counts()

    def centers_of_mass(self, particles, bodies, snakes=slice(None)):
        """Centres of mass (snakes, 3) [m] of the chosen ``snakes`` (a slice of this run's snakes) from
        every snake's ``particles`` (snake_count, particles, 3) [m] and body poses ``bodies``
        (snake_count, bodies, 7)."""
        moment = np.einsum("sp,spk->sk", self._particle_mass[snakes], particles[snakes])
        moment += np.einsum("sb,sbk->sk", self._body_mass[snakes], bodies[snakes, :, :3])
        return moment / self._total_mass[snakes, None]

    def mass_fractions(self):
        """Each snake's particles' and bodies' shares of its mass: ((snake_count, particles), (snake_count,
        bodies)) [-], the derivative of its centre of mass with respect to their positions (a gradient's seed)."""
        return self._particle_mass / self._total_mass[:, None], self._body_mass / self._total_mass[:, None]

    def _observe(self, particles, bodies):
        """(centre of mass (snake_count, 3) [m], curvature (snake_count, link_count) [1/m], heading
        (snake_count,) [rad] in (-pi, pi]: the mean direction of the modules)."""
        com = self.centers_of_mass(particles, bodies)
        yaw = body_yaw(bodies[:, list(self.snake.module_bodies)])
        heading = np.arctan2(np.sin(yaw).mean(axis=1), np.cos(yaw).mean(axis=1))
        return com, link_curvature(bodies, self.snake.cap_bodies, self.snake.link_lengths), heading

    # ------------------------------------------------------------------ frame by frame (closed loop)
    def observe(self):
        """What the snakes look like now (``SnakeObservation``): the time, and per snake its centre of mass, heading
        and link curvatures in scene coordinates, and its chambers' pressures."""
        com, curvature, heading = self._observe(*self._positions())
        return SnakeObservation(self.frames_done * self.dt, com, heading, curvature, self.latency.pressure)

    def gait_command(self, time, **changes):
        """The gait's link commands (eq. 9) at ``time`` [s], shape (snake_count, link_count) [Pa], links head first
        (``head_first_command``): this simulation's gait, or with some of its parameters (``GAIT_FIELDS``: frequency
        [Hz], phase_shift [rad], offset [-], amplitude [Pa]) changed, each a scalar or one value per snake."""
        return head_first_command(self._gait_with(changes), time, self.config.link_count)

    def _gait_with(self, changes):
        """This simulation's gait with the parameters ``changes`` changes (``gait_command``'s)."""
        unknown = set(changes) - set(GAIT_FIELDS)
        if unknown:
            raise ConfigError(f"gait_command takes the gait parameters {', '.join(GAIT_FIELDS)}, not "
                              f"{', '.join(sorted(unknown))}")
        if not changes:
            return self.gait
        values = {name: changes.get(name, getattr(self.gait, name)) for name in GAIT_FIELDS}
        return GaitParams(**values, snake_count=self.snake_count)

    def step(self, command):
        """Advance every snake by one frame (``dt``) under the link commands ``command`` (snake_count, link_count)
        [Pa], links head first, signed as the gait's (``gait_command``; > 0 inflates the right chamber), through
        the latency model when it is on: closed-loop control from Python, with ``observe``. A loop of
        ``step(gait_command((frames_done + 1) * dt))`` is ``run`` bit for bit (tests/robots/snake/test_step.py).
        Returns the chambers' pressures after the frame (snake_count, link_count, 2) [Pa]; ConfigError for a
        command of another shape, not finite or above the supply pressure, before anything moves."""
        chambers = self.latency.step(command, self.dt)
        self._advance_frame(self.frames_done + 1, self.latency.differential)
        self.frames_done += 1
        return chambers

    _frames_ahead = 0
    """Frames whose pressures ``run`` hands ``_advance`` ahead (worker processes start them early)."""

    def _frames_in_flight(self):
        """Frames handed to the engine ahead of the one recorded last (worker processes run ahead), [-]."""
        return 0

    def _state_numpy(self):
        """The engine's whole state (``State.numpy()``), every snake's."""
        return self.state.numpy()

    def _load(self, state, newton_counts):
        """Set the engine's state (``State.numpy()``'s dictionary) and add earlier per-snake Newton counts."""
        self.state.assign_numpy(state)
        self.solver.add_newton_counts(newton_counts)

    def _stop_point(self, frame, com, curvature, yaw):
        counts = self.newton_counts()
        return RunPoint(frame, self._state_numpy(), com[:frame + 1].copy(), curvature[:frame + 1].copy(),
                        yaw[:frame + 1].copy(), {name: getattr(counts, name) for name in NewtonCounts.COUNTS})

    def _start_from(self, start, com, curvature, yaw):
        """Set the state, the counts and the records of frames 0 .. ``start.frame`` from a ``RunPoint``."""
        if not 0 <= start.frame < self.frame_count:
            raise ConfigError(f"the run point's frame {start.frame} is not one of this run's 0 .. {self.frame_count - 1}")
        for name, records in (("com", com), ("curvature", curvature), ("yaw", yaw)):
            value = getattr(start, name)
            if value.shape != records[:start.frame + 1].shape:
                raise ConfigError(f"the run point's {name} has shape {value.shape}, not {records[:start.frame + 1].shape} "
                                  f"({self.snake_count} snakes, frames 0 .. {start.frame})")
            records[:start.frame + 1] = value
        self._load(start.state, start.newton_counts)

    def _advance_frame(self, frame, differential, upcoming=()):
        """``_advance`` to the end of frame ``frame``; a snake that blew up is named with the frame's end time."""
        try:
            self._advance(differential, upcoming)
        except SimulationError as exc:
            raise SimulationError(
                f"snake {exc.world} blew up ({exc.reason or 'a non-finite input'}) at t = {frame * self.dt:.4f} s; "
                "reduce dt or check the snake's parameters", world=exc.world, step=frame, reason=exc.reason) from None

    def _advance(self, differential, upcoming=()):
        """One frame of the engine: drive the active chamber of every link with the differential pressure
        (snake_count, link_count) [Pa] and step the solver by ``dt``; a SimulationError of the solver
        names the snake that blew up (its ``world``). ``upcoming``: the differential pressures of the
        next frames (``_frames_ahead`` of them, fewer at the end), which later calls will pass."""
        self.control.pressure.assign(chamber_pressures(self.model, self.snake.link_channels, differential))
        self.solver.step(self.state, self.state, self.control, self.dt)

    # ------------------------------------------------------------------ USD
    def _usd_scene(self, recorder, particles, snakes):
        config = self.config
        recorder.add_ground(size=max(4.0, 2.0 * snakes * self.spacing))
        cap, wheel = config.cap, config.wheel
        meshes, bodies = [], []
        for s in range(snakes):
            group = recorder.add_group(f"snake_{s:03d}")
            for i, link in enumerate(self.snake.links):
                meshes.append((recorder.add_mesh(f"link_{i}", link.surface_triangles, particles[s, link.particles],
                                                 color=LINK_COLORS[i % 2], parent=group), s, link.particles))
            for k, module in enumerate(self.snake.module_bodies):
                handle = recorder.add_body(f"module_{k}", "box",
                                           half_extents=(0.5 * cap.length, 0.5 * cap.width, 0.5 * cap.height),
                                           color=MODULE_COLOR, parent=group)
                bodies.append((handle, s, module))
                for side, wheel_body in zip(("left", "right"), self.snake.wheel_bodies[k]):
                    handle = recorder.add_body(f"wheel_{k}_{side}", "cylinder", radius=wheel.radius,
                                               height=wheel.width, axis="Z", color=WHEEL_COLOR, parent=group)
                    bodies.append((handle, s, int(wheel_body)))
        return meshes, bodies

    @staticmethod
    def _usd_frame(recorder, time, meshes, bodies, particles, body_q):
        recorder.write_frame(
            time=time,
            mesh_points={handle: particles[s, sl] for handle, s, sl in meshes},
            body_transforms={handle: (body_q[s, b, :3], body_q[s, b, 3:7]) for handle, s, b in bodies})

    # ------------------------------------------------------------------ run
    def pressure_schedule(self, **changes):
        """The open-loop inputs of every frame 0 .. ``frame_count`` (zero at frame 0, the start): the gait's link
        commands (frames + 1, snake_count, link_count) [Pa] at each frame's end time, the chambers' pressures
        through the latency model (..., 2) [Pa], and the differential pressure the engine is handed
        (frames + 1, snake_count, link_count) [Pa]. Steps a copy of ``self.latency`` from empty chambers through
        all frames: the gait is open loop, nothing here depends on the snakes' state (``run`` takes its inputs
        from here, and a gradient through the gait, ``gait_gradient``, sets them step by step). ``changes``: gait
        parameters to change, as ``gait_command`` takes them."""
        frames, links = self.frame_count, self.config.link_count
        gait = self._gait_with(changes)
        latency = copy.deepcopy(self.latency)
        latency.reset()
        command = np.zeros((frames + 1, self.snake_count, links))
        chambers = np.zeros(command.shape + (2,))
        pressure = np.zeros_like(command)
        for frame in range(1, frames + 1):
            command[frame] = head_first_command(gait, frame * self.dt, links)
            chambers[frame] = latency.step(command[frame], self.dt)
            pressure[frame] = latency.differential
        return command, chambers, pressure

    def channel_pressure_schedule(self, dtype=np.float32, **changes):
        """What the engine is handed in every frame 1 .. ``frame_count``: every channel's pressure (frames, channels)
        [Pa] (``chamber_pressures`` of ``pressure_schedule``'s differential pressures; ``changes`` as there), of
        ``dtype`` (float64 for a derivative by differences, ``gait_gradient``)."""
        differential = self.pressure_schedule(**changes)[2]
        return np.stack([chamber_pressures(self.model, self.snake.link_channels, differential[frame], dtype=dtype)
                         for frame in range(1, self.frame_count + 1)])

    def run(self, *, usd_path=None, usd_fps=USD_FPS_DEFAULT, usd_snakes=None, progress=True, on_frame=None,
            on_frame_every=1, start=None):
        """Simulate all frames and return ``SnakeTrajectories``.

        usd_path: write the scene to this .usda/.usdc/.usd file (None: no USD)
        usd_fps: frames per second written to USD [1/s] (rounded to a whole number of frames)
        usd_snakes: the first this many snakes go into the USD scene (None: all; a scene of 1024 snakes
            takes about 1.6 s per written frame and gigabytes)
        progress: report progress on standard error (``softsnake.progress``)
        on_frame: None, or a function of (time [s], particles (snakes, particles, 3) [m], body_q
            (snakes, bodies, 7)) called at t = 0 and every ``on_frame_every`` frames (an animation's
            ``record``)
        start: None, or a ``RunPoint`` of an interrupted run of the same snakes and options (its ``stop_point``):
            go on from there. The USD file then goes on in the partial file the interrupted run left, and
            ``on_frame`` is called for the frames after the point only.
        Raises ``SimulationError`` naming the snake whose state became non-finite (its ``world``)
        and the frame (its ``step``); ``self.trajectories`` then holds what was recorded up to the
        last good frame, and a USD file is left as ``<stem>.partial<ext>`` with every frame written.
        An interrupt (KeyboardInterrupt) leaves the same and is raised again; in one process it lets the frame
        in progress finish first and sets ``stop_point``.
        """
        usd_stride = max(1, int(round(1.0 / (self.dt * usd_fps)))) if usd_path is not None else 0
        on_frame_every = max(1, int(on_frame_every))
        frames = self.frame_count
        shape = (frames + 1, self.snake_count)
        links = self.config.link_count
        time = np.arange(frames + 1) * self.dt
        com = np.zeros(shape + (3,))
        yaw = np.zeros(shape)
        curvature = np.zeros(shape + (links,))
        if start is None and self.frames_done:
            raise ConfigError(f"run simulates the gait from t = 0, and this simulation has stepped {self.frames_done} "
                              "frames already: make a new one")
        command, chambers, pressure = self.pressure_schedule()
        self.stop_point = None
        if start is None:
            particles, body_q = self._positions()
            com[0], curvature[0], yaw[0] = self._observe(particles, body_q)
            if on_frame is not None:
                on_frame(0.0, particles, body_q)
            done = 0
        else:
            self._start_from(start, com, curvature, yaw)
            particles, body_q = self._positions()
            done = start.frame

        def record(count):
            return SnakeTrajectories(time, com, curvature, command, pressure, HEADING, snake_length(self.config),
                                     yaw, chambers).truncated(count)

        recorder = None
        if usd_path is not None:
            # usd-core is imported only when a USD file is written.
            from softsnake.usd_writer import UsdRecorder

            last_usd_frame = done - done % usd_stride
            recorder = UsdRecorder(usd_path, fps=1.0 / (usd_stride * self.dt),
                                   reopen_after=None if start is None else time[last_usd_frame])
        interrupts = FrameInterrupts()
        try:
            with recorder or contextlib.nullcontext(), interrupts:
                if recorder is not None:
                    pictured = self.snake_count if usd_snakes is None else min(int(usd_snakes), self.snake_count)
                    usd_meshes, usd_bodies = self._usd_scene(recorder, particles, pictured)
                    if start is None:
                        self._usd_frame(recorder, 0.0, usd_meshes, usd_bodies, particles, body_q)
                self.frames_done = done
                for frame in progress_notes(range(done + 1, frames + 1), desc="gait", unit="frame", enabled=progress):
                    # Once a stop is asked for, nothing more is sent ahead: the frames in flight finish and are recorded.
                    ahead = 0 if interrupts.requested is not None else self._frames_ahead
                    self._advance_frame(frame, pressure[frame], pressure[frame + 1:frame + 1 + ahead])
                    particles, body_q = self._positions()
                    com[frame], curvature[frame], heading = self._observe(particles, body_q)
                    # Continuous heading: add the wrapped change since the last frame.
                    yaw[frame] = yaw[frame - 1] + (heading - yaw[frame - 1] + math.pi) % (2.0 * math.pi) - math.pi
                    done = self.frames_done = frame
                    if recorder is not None and frame % usd_stride == 0:
                        self._usd_frame(recorder, time[frame], usd_meshes, usd_bodies, particles, body_q)
                    if on_frame is not None and frame % on_frame_every == 0:
                        on_frame(time[frame], particles, body_q)
                    if frame < frames and not self._frames_in_flight():  # asked for in the last frame: it is done
                        interrupts.check()
        except KeyboardInterrupt:
            self.trajectories = record(done)
            self.latency.reset(pressure=chambers[done])
            if interrupts.at_frame_end and not self._frames_in_flight():
                self.stop_point = self._stop_point(done, com, curvature, yaw)
            raise
        except SimulationError:
            self.trajectories = record(done)
            self.latency.reset(pressure=chambers[done])
            raise
        self.trajectories = record(frames)
        self.latency.reset(pressure=chambers[frames])
        return self.trajectories
