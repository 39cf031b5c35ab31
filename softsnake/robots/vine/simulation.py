"""Batched vine-robot rollouts on the engine (seed 003 sec. IV-A: many independent vines at once).

Every vine is its own world of one model, so vines never interact (seed 003 Fig. 1) and each may
have its own launch angle, growth rate, stiffness, damping and obstacle set; all vines of a batch
have the same number of links, so their states stack into arrays.

Growth. ``growth="uniform"`` drives every prismatic joint at growth_rate / link_count, all the
time (seed 000: the whole vine lengthens evenly). ``growth="tip"`` emulates eversion with the same
fixed-size state: the links open one after the other from the base, each up to
``link_extension_max``, so material that has grown stays where it is and only the links beyond the
growing one move outward (the material of seed 003's growing distal link). Either way the
commanded rates are control arrays (``Control.prismatic_rate``) set once per step.

Steering (seed 004: pneumatic artificial muscles set a constant curvature). Each pin has an
antagonistic pair of muscle chambers driven by a signed pressure command through the chamber
latency model of softsnake.robots.actuation (PressureLatency). The differential chamber pressure
sets the rest curvature linearly, kappa = kappa_max dp / p_supply, with kappa_max
``STEERING_CURVATURE_MAX`` (the curvature limit of seed 004's robot, reached at the supply
pressure: seed 004 gives no pressure-curvature map, so this linear map is an assumption). The
rest curvature becomes each pin spring's rest angle (``Control.joint_target``) through the arc
length the pin spans (robot.pin_rest_angles), so a steered vine takes a constant-curvature shape
in free space.
"""

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from softsnake.builder import ModelBuilder
from softsnake.errors import ConfigError
from softsnake.output_files import replaced_when_complete
from softsnake.solver import Solver
from softsnake.solver_settings import SolverSettings
from softsnake.units import psi_to_pa
from softsnake.validation import positive_integer, positive_number

from ..actuation import PressureLatency
from .reference import rollout_length
from .robot import pin_rest_angles, vine_world

GROWTH_MODES = ("uniform", "tip")
"""Names accepted by VineBatch(growth=...)."""

STEERING_CURVATURE_MAX = 2.0
"""Rest curvature at full supply differential pressure [1/m] (seed 004's curvature limit)."""

STEERING_SUPPLY_PRESSURE = psi_to_pa(10.0)
"""Supply pressure of the steering muscles [Pa] (the PressureLatency default)."""

CPU_SECONDS_PER_BODY_STEP = 8e-5
"""Wall time of one step per rigid body of a vine on one CPU core [s], for run estimates: at the vines'
budget (the engine's, since the sixteenth session) cluttered scene 2's 50-body vine steps in 3.2 ms on this
project's CPU (6.3e-5 s per body, the slowest of experiments/results/vine.md's vine scenes), the rest a margin
for slower machines."""

SOLVER_DEFAULTS = {"substeps": 1, "newton_floor_stall": 0.0, "energy_floor": 1e-3}
"""Solver settings of the vine rollouts over the engine's policy (``SolverSettings``: 16 Newton x 100
conjugate residual iterations at most, the balanced iteration, warm started):

- one substep per step of the papers' dt (1/90 s): it follows the reference rollouts of seed 000 more
  closely than two (experiments/results/vine.md);
- (the engine's stop at twice the round-off floor, ``newton_floor``, was the vines' own from the seventeenth
  session until the engine took it in the twenty-first: a vine's merit falls to float32's floor, 1-3e-5 of a
  moving vine's start (root), within 5-7 iterations and then only wanders, and a vine at rest starts its substep
  there (47 % of a 64-vine batch's substeps), so at the engine's tolerance (1e-5) alone most steps ran all 16
  iterations for nothing; experiments/results/vine.md, "Stopping at the round-off floor"); vines stop at the
  first iteration within the floor (``newton_floor_stall`` 0: the estimate meets a vine's floor, and waiting for
  the merit to stall cost 50 % more iterations and ended no closer to the converged step);
- a kinetic energy floor of the blow-up check of 1e-3 J (the engine's: 1e-6 J): a vine's kinetic energy while
  growing is 1e-5 to 5e-4 J, and a growth rate changed at once (a video's length schedule: 1.1e-6 J to
  4.9e-4 J in one step of 1/90 s, the same at 32 x 200) is physics the one-step rule would stop; the video
  fits raised it for the same reason (``video_fit.SOLVER_OPTIONS``).

Vines of more than 100 links get one linear iteration per link (``solver_settings``). Until the sixteenth
session vines ran seed 001's 4 x 20, plain: on cluttered scene 1 that ends 0.77 tube diameters (11.5 mm) from
the converged step and up to 0.065 diameters apart warm and cold, at about a quarter of the cost
(experiments/results/vine.md, "The vine's budget")."""


def seed_001_solver_options(link_count):
    """Solver options of the vines' budget through the fifteenth session, to compare with: seed 001's 4 Newton x 20
    conjugate residual iterations (at least one per link), the plain iteration, the engine's Newton tolerance
    (1e-5). Not converged: up to 0.8 tube diameters from the step (experiments/results/vine.md, "The vine's
    budget")."""
    return {"newton_iterations": 4, "linear_iterations": max(20, int(link_count)), "momentum_balance": False,
            "newton_tolerance": SolverSettings.newton_tolerance}


def solver_settings(link_count, solver_options=None):
    """Solver keyword arguments for vines of ``link_count`` links: ``SOLVER_DEFAULTS`` and the engine's
    policy, with at least one conjugate residual iteration per link, then ``solver_options`` over them;
    everything else is the engine's policy (``SolverSettings``: warm started, tolerances), obstacles with
    friction or not.

    A Jacobi-preconditioned Krylov iteration carries a correction one joint further along the chain
    per matrix product, so a fixed count stops reaching the tip from the base on long vines: with 20
    iterations the 45- and 50-link vines of the runtime study (one circle, 10 ms steps) blow up
    after touching the circle; with one iteration per link they grow past it.
    """
    settings = dict(SOLVER_DEFAULTS)
    settings["linear_iterations"] = max(SolverSettings.linear_iterations, int(link_count))
    return {**settings, **(solver_options or {})}


@dataclass(frozen=True)
class VineSpec:
    """One vine of a batch.

    vine: its VineParams (growth rate, stiffness, damping, ... all per vine)
    obstacles: its obstacles (ObstacleCircle / ObstacleRectangle / ObstacleWall)
    heading: launch angle [rad]; None: ``vine.heading``
    initial_poses: (B, 3) body centres and angles to start from [m, rad]; None: straight
    initial_velocities: (B, 3) body velocities [m/s] and angular rates [rad/s]; None: at rest
    moment_curve: (angles [rad], moments [N m]) of the pins' springs in place of the vine's stiffness
        model (robot.mlp_moment_curve); None: ``vine.stiffness_model``
    """

    vine: object
    obstacles: tuple = ()
    heading: float | None = None
    initial_poses: np.ndarray | None = None
    initial_velocities: np.ndarray | None = None
    moment_curve: tuple | None = None


@dataclass(frozen=True)
class VineRollout:
    """Recorded states of a batch.

    times: (F,) [s]; poses: (F, V, B, 3) body centre x, y [m] and angle [rad], base body first;
    tips: (F, V, 2) distal end of the last body [m]; lengths: (F, V) backbone length [m];
    half_length: (V,) body half-length of each vine [m]
    """

    times: np.ndarray
    poses: np.ndarray
    tips: np.ndarray
    lengths: np.ndarray
    half_length: np.ndarray


def specs_from_scene(scene, *, vine_count=1, heading_spread=0.0):
    """``vine_count`` VineSpecs of a scene with launch angles spread evenly over ``heading_spread`` [rad]
    centred on the scene's heading (one vine: the scene's heading)."""
    positive_integer("vine count", vine_count)
    if not (math.isfinite(heading_spread) and heading_spread >= 0.0):
        raise ConfigError(f"heading spread must be a non-negative angle [rad], got {heading_spread}")
    offsets = np.linspace(-0.5, 0.5, vine_count) * heading_spread if vine_count > 1 else np.zeros(1)
    return [VineSpec(scene.vine, tuple(scene.obstacles), scene.vine.heading + float(o)) for o in offsets]


def steering_curvature(differential_pressure):
    """Rest curvature [1/m] of a muscle pair at a differential pressure [Pa] (linear, module docstring)."""
    return STEERING_CURVATURE_MAX * np.asarray(differential_pressure, dtype=float) / STEERING_SUPPLY_PRESSURE


def steering_pressure(curvature):
    """Signed muscle command [Pa] whose steady differential pressure gives ``curvature`` [1/m]."""
    return np.asarray(curvature, dtype=float) * STEERING_SUPPLY_PRESSURE / STEERING_CURVATURE_MAX


def batch_link_count(specs):
    """The link count shared by every VineSpec of a batch (ConfigError if none or they differ)."""
    if not specs:
        raise ConfigError("a batch needs at least one vine")
    links = {spec.vine.link_count for spec in specs}
    if len(links) != 1:
        raise ConfigError(f"all vines of a batch need the same link count, got {sorted(links)}")
    return links.pop()


FITTED_PARAMETERS = ("body_mass", "body_inertia", "damping", "stiffness", "pressure")
"""The VineParams fields in which ``VineBatch.restart`` lets a vine differ from the one the batch was built with: the
parameters a video fit changes (``video_fit.VideoModel``)."""
FITTED_ARRAYS = ("body_inv_mass", "body_inertia", "body_inv_inertia", "spring_stiffness", "spring_damping",
                 "spring_curve_angle", "spring_curve_moment")
"""The model arrays those parameters (and a pin's moment curve) set: every other array of a vine's model is the same
for any values of them (tests/robots/vine/test_batch_restart.py)."""
START_CONTROL = ("prismatic_rate", "joint_target", "pressure")
"""The control arrays a batch sets as it steps, put back by ``VineBatch.restart``."""


def same_structure(a, b):
    """Whether two VineSpecs build the same vine in the same scene and start state, up to ``FITTED_PARAMETERS`` and
    the moment curve's moments (its angles and sample counts too are checked when the arrays are copied)."""
    fitted = {name: getattr(a.vine, name) for name in FITTED_PARAMETERS}
    if dataclasses.replace(b.vine, **fitted) != a.vine:
        return False
    if a.heading != b.heading or tuple(a.obstacles) != tuple(b.obstacles):
        return False
    if (a.moment_curve is None) != (b.moment_curve is None):
        return False
    for x, y in ((a.initial_poses, b.initial_poses), (a.initial_velocities, b.initial_velocities)):
        if (x is None) != (y is None) or (x is not None and not np.array_equal(x, y)):
            return False
    return True


class VineBatch:
    """Many vines, one world each, simulated together.

    specs: list of VineSpec (same link count)
    device: Warp device ("cpu", "cuda", ...; None: Warp's default device)
    growth: "uniform" or "tip" (module docstring)
    link_extension_max: largest opening of a prismatic joint in tip growth [m]
    friction: friction coefficient between the tube and the obstacles (seed 000: 0)
    stall_force: tip load that stops uniform growth [N] (robot.add_vine); None: growth at exactly the
        commanded rate (the only choice for tip growth, where grown links must not give way). The
        steering's rest angles follow the commanded growth.
    solver_options: Solver keyword arguments over ``solver_settings(link_count)``
    steering_latency: False sets the muscle pressures to their commands at once
    """

    def __init__(self, specs, *, device=None, growth="uniform", link_extension_max=None, friction=0.0,
                 stall_force=None, solver_options=None, steering_latency=True):
        specs = list(specs)
        link_count = batch_link_count(specs)
        if growth not in GROWTH_MODES:
            raise ConfigError(f"growth must be one of {', '.join(GROWTH_MODES)}, got {growth!r}")
        if growth == "tip" and not (link_extension_max is not None and math.isfinite(link_extension_max)
                                    and link_extension_max > 0.0):
            raise ConfigError(f"tip growth needs a positive link_extension_max [m], got {link_extension_max}")
        if growth == "tip" and stall_force is not None:
            raise ConfigError("a growth stall force needs uniform growth (grown links of tip growth must not give way)")
        self.specs = specs
        self.growth = growth
        self.link_extension_max = link_extension_max
        self._world_options = {"friction": friction, "stall_force": stall_force}
        top = ModelBuilder(gravity=(0.0, 0.0, 0.0), planar=True)
        self.handles = []
        for spec in specs:
            world, handle = self._vine_world(spec)
            top.add_world(world)
            self.handles.append(handle)
        self.model = top.finalize(device)
        self.link_count = link_count
        self.solver = Solver(self.model, **solver_settings(self.link_count, solver_options))
        self.state = self.model.state()
        self.control = self.model.control()
        self.vine_count = len(specs)
        self.body_count = 2 * self.link_count
        self.time = 0.0
        self.growth_rate = np.array([spec.vine.growth_rate for spec in specs])
        self.half_length = np.array([handle.half_length for handle in self.handles])
        self.extension = np.zeros((self.vine_count, self.link_count))
        self.muscles = PressureLatency((self.vine_count, self.link_count), supply_pressure=STEERING_SUPPLY_PRESSURE,
                                       enabled=steering_latency)
        self._spring_rows = np.concatenate([np.asarray(h.springs) + self.model.spring_world_start[w]
                                            for w, h in enumerate(self.handles)])
        self._joint_target = self.control.joint_target.numpy().copy()  # a copy on every device (a view on the CPU)
        self._rest_targets = np.concatenate([h.rest_targets for h in self.handles])
        self._start_control = {name: getattr(self.control, name).numpy().copy() for name in START_CONTROL}

    def _vine_world(self, spec):
        """(ModelBuilder, VineHandle) of one vine's world."""
        return vine_world(spec.vine, spec.obstacles, heading=spec.heading, initial_poses=spec.initial_poses,
                          initial_velocities=spec.initial_velocities, moment_curve=spec.moment_curve,
                          **self._world_options)

    def restart(self, specs):
        """Put the batch back at its start with the vines of ``specs``: the vines it was built with, in the same scenes
        and start states, differing at most in the parameters a fit changes (``FITTED_PARAMETERS``: body mass and
        inertia, the pins' damping, stiffness or pressure, and moment curve). Bit for bit a new
        ``VineBatch(specs, ...)`` with this batch's options (tests/robots/vine/test_batch_restart.py), for the cost of
        building one vine of each distinct VineParams where a new batch builds every vine (a video fit's one-step
        batch: 104 vines of three videos) and of recording the solver's steps again.

        Only the model's arrays that those parameters set change (``FITTED_ARRAYS``), copied from a one-vine model of
        each distinct vine; the state, control, time, growth and muscles go back to the start, and the solver replays
        the steps it recorded."""
        specs = list(specs)
        if len(specs) != self.vine_count:
            raise ConfigError(f"restart needs {self.vine_count} vines, as the batch was built with, got {len(specs)}")
        for k, (old, new) in enumerate(zip(self.specs, specs)):
            if not same_structure(old, new):
                raise ConfigError(f"restart: vine {k} differs from the batch's in more than its fitted parameters "
                                  f"({', '.join(FITTED_PARAMETERS)}) and moment curve")
        m = self.model
        values = {name: getattr(m, name).numpy().copy() for name in FITTED_ARRAYS}
        spring_start, curve_start = m.spring_world_start, m.spring_curve_start.numpy()
        curve_count = m.spring_curve_count.numpy()
        templates = {}
        for w, spec in enumerate(specs):
            key = (spec.vine, None if spec.moment_curve is None else id(spec.moment_curve))
            if key not in templates:
                builder = ModelBuilder(gravity=(0.0, 0.0, 0.0), planar=True)
                builder.add_world(self._vine_world(spec)[0])
                one = builder.finalize(m.device)
                templates[key] = {name: getattr(one, name).numpy() for name in FITTED_ARRAYS}
                templates[key]["curve_start"] = one.spring_curve_start.numpy()
                templates[key]["curve_count"] = one.spring_curve_count.numpy()
            t = templates[key]
            bodies = slice(m.body_world_start[w], m.body_world_start[w + 1])
            springs = np.arange(spring_start[w], spring_start[w + 1])
            for name in ("body_inv_mass", "body_inertia", "body_inv_inertia"):
                values[name][bodies] = t[name]
            for name in ("spring_stiffness", "spring_damping"):
                values[name][springs] = t[name]
            if not np.array_equal(curve_count[springs], t["curve_count"]):
                raise ConfigError(f"restart: vine {w}'s moment curve has other sample counts than the batch's")
            for local, spring in enumerate(springs):
                count = curve_count[spring]
                source = slice(t["curve_start"][local], t["curve_start"][local] + count)
                target = slice(curve_start[spring], curve_start[spring] + count)
                for name in ("spring_curve_angle", "spring_curve_moment"):
                    values[name][target] = t[name][source]
        for name in FITTED_ARRAYS:
            getattr(m, name).assign(values[name])
        self.specs = specs
        # The same solver: its recorded steps read the model's arrays, changed in place (a gradient leaves them without
        # gradient arrays, as they were recorded: softsnake.gradients.rollout_gradient), and it carries nothing from
        # one step to the next but the state it is given and the blow-up check's history, which reset clears.
        self.solver.reset(self.state)
        self.solver.reset_newton_counts()
        for name, start in self._start_control.items():
            getattr(self.control, name).assign(start)
        self._joint_target = self.control.joint_target.numpy().copy()
        self.time = 0.0
        self.growth_rate = np.array([spec.vine.growth_rate for spec in specs])
        self.extension = np.zeros((self.vine_count, self.link_count))
        self.muscles.reset()

    def set_growth_rate(self, growth_rate):
        """Change the total growth rate of every vine [m/s] (scalar or (V,)), from the next step on."""
        rate = np.broadcast_to(np.asarray(growth_rate, dtype=float), (self.vine_count,))
        if not np.all(np.isfinite(rate)):
            raise ConfigError(f"growth rates must be finite [m/s], got {rate.tolist()}")
        if self.growth == "tip" and np.any(rate < 0.0):
            raise ConfigError("tip growth cannot retract: growth rates must be >= 0")
        self.growth_rate = rate.copy()
        if self.growth == "uniform":
            per_link = np.repeat((self.growth_rate / self.link_count)[:, None], self.link_count, axis=1)
            self.control.prismatic_rate.assign(per_link.ravel().astype(np.float32))

    def _rates(self, dt):
        """Commanded extension rate of every link over the next step [m/s], (V, links)."""
        if self.growth == "uniform":
            return np.repeat((self.growth_rate / self.link_count)[:, None], self.link_count, axis=1)
        e_max = self.link_extension_max
        total = self.extension.sum(axis=1) + self.growth_rate * dt
        opened = np.clip(total[:, None] - e_max * np.arange(self.link_count)[None, :], 0.0, e_max)
        return (opened - self.extension) / dt

    def step(self, dt, steering=None):
        """Advance every vine by ``dt`` [s].

        steering: signed muscle pressure command [Pa], broadcastable to (vines, pins), held over
            the step; None keeps the previous command's pressures relaxing toward zero.
        """
        positive_number("dt", dt, unit="s")
        rates = self._rates(dt)
        if self.growth == "tip":
            self.control.prismatic_rate.assign(rates.ravel().astype(np.float32))
        if steering is not None or np.any(self.muscles.pressure != 0.0):
            self.muscles.step(0.0 if steering is None else steering, dt)
            curvature = steering_curvature(self.muscles.differential)
            angles = np.stack([pin_rest_angles(h, curvature[v], self.extension[v] + rates[v] * dt)
                               for v, h in enumerate(self.handles)])
            self._joint_target[self._spring_rows] = self._rest_targets + angles.ravel()
            self.control.joint_target.assign(self._joint_target.astype(np.float32))
        self.solver.step(self.state, self.state, self.control, dt)
        self.extension += rates * dt
        self.time += dt

    def newton_counts(self):
        """How every vine's Newton loops ended so far (``Solver.newton_counts``: one world per vine)."""
        return self.solver.newton_counts()

    def poses(self):
        """Body centre x, y [m] and angle in (-pi, pi] [rad] of every vine, (V, B, 3)."""
        return poses_of(self.model.scene_body_q(self.state).reshape(self.vine_count, self.body_count, 7))


def poses_of(body_q):
    """Body centre x, y [m] and angle in (-pi, pi] [rad], (..., 3), from body poses (..., 7) of the plane."""
    angle = np.angle(np.exp(2j * np.arctan2(body_q[..., 5], body_q[..., 6])))
    return np.concatenate([body_q[..., :2], angle[..., None]], axis=-1)


def tips_of(poses, half_length):
    """Distal end of the last body [m], (..., V, 2), from poses (..., V, B, 3) and half-lengths (V,)."""
    last = poses[..., -1, :]
    return last[..., :2] + np.asarray(half_length)[:, None] * np.stack([np.cos(last[..., 2]), np.sin(last[..., 2])],
                                                                       axis=-1)


def lengths_of(poses, half_length):
    """Backbone length of every vine [m], (..., V), from poses (..., V, B, 3) and half-lengths (V,)."""
    return np.stack([rollout_length(poses[..., v, :, :], half_length=d) for v, d in enumerate(half_length)], axis=-1)


def _pin_ends(body_count):
    """The bodies whose ends are the backbone's points (every link's proximal body, then the last body)
    and the side of each body they lie on (-1: its proximal end, +1: the tip)."""
    ends = [*range(0, body_count, 2), body_count - 1]
    sign = np.ones(len(ends))
    sign[:-1] = -1.0
    return ends, sign


def pin_points(poses, half_length):
    """Backbone polyline through the base, every pin and the tip [m], (..., links + 1, 2).

    poses: (..., B, 3) body centres and angles [m, rad]; half_length: body half-length [m],
    broadcastable to poses.shape[:-2]
    """
    d = np.asarray(half_length, dtype=float)[..., None, None]
    indices, sign = _pin_ends(poses.shape[-2])
    ends = poses[..., indices, :]
    direction = np.stack([np.cos(ends[..., 2]), np.sin(ends[..., 2])], axis=-1)
    return ends[..., :2] + d * sign[:, None] * direction


def pin_points_adjoint(points_adjoint, poses, half_length):
    """dL/d(poses) (B, 3) of one vine from dL/d(its ``pin_points``) (links + 1, 2), at poses (B, 3)
    [m, rad] and body half-length [m]: each backbone point is an end body's centre plus or minus
    ``half_length`` along its axis, so it moves with that body's centre and turns with its angle."""
    poses = np.asarray(poses, dtype=float)
    points_adjoint = np.asarray(points_adjoint, dtype=float)
    ends, sign = _pin_ends(poses.shape[0])
    angles = poses[ends, 2]
    turn = half_length * sign[:, None] * np.stack([-np.sin(angles), np.cos(angles)], axis=-1)
    adjoint = np.zeros_like(poses)
    np.add.at(adjoint[:, :2], ends, points_adjoint)
    np.add.at(adjoint[:, 2], ends, np.sum(points_adjoint * turn, axis=1))
    return adjoint


def write_tips_csv(path, times, headings, tips, lengths):
    """Tip paths as CSV (one row per recorded time and vine), written atomically."""
    frames, vines = tips.shape[:2]
    table = np.column_stack([
        np.repeat(times, vines), np.tile(np.arange(vines), frames), np.tile(headings, frames),
        tips.reshape(-1, 2), lengths.reshape(-1)])
    with replaced_when_complete(path) as temporary:
        np.savetxt(temporary, table, delimiter=",", fmt=["%.6f", "%d", "%.6f", "%.6f", "%.6f", "%.6f"],
                   header="time_s,vine,heading_rad,tip_x_m,tip_y_m,length_m", comments="")


def rollout(batch, steps, dt, *, steering=None, record_every=1):
    """Run a batch for ``steps`` steps of ``dt`` [s] and record its states.

    steering: None, a fixed command, or a function of (time [s], batch) returning the signed
        muscle command [Pa] (broadcastable to (vines, pins)) for the step starting at that time
    record_every: record every this many steps (and the initial state)
    Returns a VineRollout.
    """
    positive_integer("steps", steps)
    positive_integer("record_every", record_every)
    times, poses = [batch.time], [batch.poses()]
    for k in range(1, steps + 1):
        command = steering(batch.time, batch) if callable(steering) else steering
        batch.step(dt, command)
        if k % record_every == 0 or k == steps:
            times.append(batch.time)
            poses.append(batch.poses())
    poses = np.stack(poses)
    return VineRollout(times=np.asarray(times), poses=poses, tips=tips_of(poses, batch.half_length),
                       lengths=lengths_of(poses, batch.half_length), half_length=batch.half_length.copy())
