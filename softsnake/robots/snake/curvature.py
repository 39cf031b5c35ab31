"""Steady link curvature against chamber over-pressure (seed 001, Fig. 5; ``softsnake curvature``).

One soft link lies between its two caps as on a test stand: the rear cap is held, the front cap
is free. The link rests on a frictionless table, so gravity is balanced and left out. Every
pressure runs in its own world of one batch (one world per pressure); a negative pressure inflates
the left chamber (chamber 0), a positive one the right chamber (chamber 1), as in the paper. The
curvature is the yaw difference of the two caps over the link length (positive: bent left).

Steady state. The stand is a quasi-static experiment, so its links get a damping time of
``STAND_DAMPING_TIME`` instead of the snake's: damping changes how fast the link settles, never
where (the equilibrium has zero velocity). The residual change of the curvature over the last
``SETTLE_WINDOW`` of the run is reported to show that the run reached steady state.

Reported numbers: a linear fit of curvature against pressure from 0 to 8 psi on each side (R^2 and
slope), the left/right symmetry of the slopes, and the curvature at zero pressure.
"""

import dataclasses
import math
from pathlib import Path

import numpy as np
from softsnake.builder import ModelBuilder
from softsnake.errors import ConfigError
from softsnake.finalize import is_cpu_device
from softsnake.output_files import write_csv
from softsnake.progress import progress as progress_notes
from softsnake.newton_counts import NewtonCounts
from softsnake.solver import Solver
from softsnake.units import pa_to_psi
from softsnake.validation import positive_number

from .config import load_snake_config
from .robot import add_link_stand, chamber_pressures, link_curvature
from .simulation import DT_DEFAULT, SNAKE_BUDGET

STAND_DAMPING_TIME = 0.2
"""Damping time of the stand's link [s]: about critical for its first bending mode (near 1 Hz
with the free cap), so a run of a couple of seconds reaches steady state."""

STAND_BUDGET = SNAKE_BUDGET
"""The stand's solver budget: the snake's own (8 x 40). The steady curvature is a static equilibrium;
with the engine's default start (the elastic warm start, on from 3 Newton iterations) it rests within
0.03 % of converged at every budget from 8 x 40 to 16 x 400 on both meshes: -7.447 / 7.502 1/m at
+-8 psi coarse, -7.450 / 7.451 paper (its 16 x 200 without that start: -7.448 / 7.450). Without it a
short linear solve biased the rest (the elastic rows restarted every substep from zero multipliers, so a
solve cut short left a residual the state at rest kept): 8 x 40 bent the coarse link 21 % more, and the
stand needed 8 x 200 (experiments/results/convergence.md, "The stand")."""

SECONDS_DEFAULT = 2.0
"""Simulated time per run [s]."""

SETTLE_WINDOW = 0.25
"""Trailing time over which the residual change of curvature is measured [s]."""

FIT_LIMIT_PSI = 8.0
"""Upper end of the linear fit on each side [psi]: the paper's safe, linear range (section VI-A)."""

PRESSURE_MAX_PSI = 10.0
"""Largest chamber over-pressure of a sweep [psi]: the valves' supply pressure
(``softsnake.robots.actuation.SUPPLY_PRESSURE_DEFAULT``) and the end of the paper's Fig. 5. The gait
is capped lower, at its 8 psi amplitude; far above either the link's elements invert."""

FIT_POINTS_MIN = 3
"""Pressures each side's linear fit needs in 0..FIT_LIMIT_PSI, zero included [-]."""

CPU_SECONDS_PER_LINK_FRAME = {"paper": 0.064, "coarse": 0.013}
"""Wall time of one frame of one stand link on one CPU core at ``STAND_BUDGET`` [s], for run estimates:
measured on a 2-core CPU (experiments/results/convergence_stand_*.md: 30.8 s and 6.4 s for two links and
240 frames)."""

MODEL_BYTES_PER_LINK = {"paper": 2.9e6, "coarse": 0.8e6}
"""Bytes of the Warp arrays of one stand link (model, state and solver) [B]: paper from Table II."""



@dataclasses.dataclass(frozen=True, eq=False)
class CurvatureSweep:
    """Curvature of one stand link per world over time.

    pressure: signed chamber over-pressure of each world [Pa], < 0 left chamber, > 0 right
    cap_torque: external torque about +z on the free cap of each world [N m]
    time: sample times (frame_count + 1,) [s]
    history: curvature (frame_count + 1, world_count) [1/m]
    newton: how the stand solver's substeps ended (``Solver.newton_counts``; one world per pressure), or None
    """

    pressure: np.ndarray
    cap_torque: np.ndarray
    time: np.ndarray
    history: np.ndarray
    newton: NewtonCounts | None = None

    @property
    def curvature(self):
        """Steady curvature of each world: the last sample [1/m]."""
        return self.history[-1]

    @property
    def residual(self):
        """Change of curvature over the last SETTLE_WINDOW of the run, per world [1/m]."""
        back = max(1, int(round(SETTLE_WINDOW / (self.time[1] - self.time[0]))))
        return self.history[-1] - self.history[max(0, len(self.time) - 1 - back)]


def build_stands(count, *, config=None, resolution="coarse", device=None, damping_time=STAND_DAMPING_TIME):
    """``count`` stand links in one model, one world each, gravity balanced (left out).

    config: ``SnakeConfig`` (None: the shipped snake.toml); resolution: link mesh resolution name
    device: Warp device (None: Warp's default); damping_time: damping time of the stand's link [s]
    Returns (the finalized Model, the ``SnakeHandle`` of the stand in one world, bodies per world).
    """
    config = load_snake_config(resolution=resolution) if config is None else config
    config = dataclasses.replace(config, damping_time=damping_time)
    world = ModelBuilder(gravity=(0.0, 0.0, 0.0))
    stand = add_link_stand(world, config, resolution, fixed="rear")
    scene = ModelBuilder(gravity=(0.0, 0.0, 0.0))
    scene.replicate(world, count, spacing=(0.0, 0.5, 0.0))
    return scene.finalize(device), stand, world.body_count


def simulate_curvature(pressures, *, cap_torques=None, config=None, resolution="coarse", device=None,
                       seconds=SECONDS_DEFAULT, dt=DT_DEFAULT, damping_time=STAND_DAMPING_TIME, progress=True,
                       solver_options=None):
    """Run one stand link per pressure, all in one batch, and record its curvature.

    pressures: signed chamber over-pressure per world [Pa] (< 0: left chamber 0, > 0: right chamber 1)
    cap_torques: external torque about +z on each world's free cap [N m] (None: none)
    config: ``SnakeConfig`` (None: the shipped snake.toml); resolution: link mesh resolution name
    device: Warp device (None: Warp's default); seconds: simulated time [s]; dt: frame step [s]
    damping_time: damping time of the stand's link [s]
    solver_options: ``SolverSettings`` fields for the stand's solver over the engine's ``SolverSettings()``
        (None: ``STAND_BUDGET``, the budget whose steady curvature is converged)
    Returns a ``CurvatureSweep``.
    """
    pressures = np.atleast_1d(np.asarray(pressures, dtype=np.float64))
    if pressures.ndim != 1 or pressures.size == 0 or not np.all(np.isfinite(pressures)):
        raise ConfigError("curvature pressures must be a non-empty list of finite values [Pa]")
    torques = np.zeros_like(pressures) if cap_torques is None else np.asarray(cap_torques, dtype=np.float64)
    if torques.shape != pressures.shape or not np.all(np.isfinite(torques)):
        raise ConfigError("cap_torques must hold one finite torque [N m] per pressure")
    positive_number("seconds", seconds, unit="s")
    positive_number("dt", dt, unit="s")
    model, stand, bodies_per_world = build_stands(pressures.size, config=config, resolution=resolution, device=device,
                                                  damping_time=damping_time)
    solver = Solver(model, **(STAND_BUDGET if solver_options is None else solver_options))
    state, control = model.state(), model.control()

    count = pressures.size
    control.pressure.assign(chamber_pressures(model, stand.link_channels, pressures[:, None]))
    free_cap = model.body_world_start[:-1] + stand.module_bodies[0]
    wrench = np.zeros((model.body_count, 6), dtype=np.float32)
    wrench[free_cap, 5] = torques
    state.body_f.assign(wrench)

    frames = int(round(seconds / dt))
    history = np.zeros((frames + 1, count))

    def observe():
        body_q = state.body_q.numpy().reshape(count, bodies_per_world, 7)
        return link_curvature(body_q, stand.cap_bodies, stand.link_lengths)[:, 0]

    history[0] = observe()
    for frame in progress_notes(range(1, frames + 1), desc="curvature", unit="frame", enabled=progress):
        solver.step(state, state, control, dt)
        history[frame] = observe()
    return CurvatureSweep(pressure=pressures, cap_torque=torques, time=np.arange(frames + 1) * dt, history=history,
                          newton=solver.newton_counts())


def _linear_fit(x, y):
    """(slope, intercept, R^2) of the least-squares line y = slope x + intercept."""
    slope, intercept = np.polyfit(x, y, 1)
    residual = y - (slope * x + intercept)
    total = np.sum((y - y.mean()) ** 2)
    r_squared = 1.0 - np.sum(residual**2) / total if total > 0 else math.nan
    return float(slope), float(intercept), float(r_squared)


def summarize_curvature(sweep, *, fit_limit_psi=FIT_LIMIT_PSI):
    """Linearity and symmetry of a sweep's steady curvature.

    Returns a dict: for side in ("left", "right"), ``{side}_slope`` [1/m per psi] (curvature per
    psi of over-pressure on that side, positive when the link bends away from the chamber),
    ``{side}_intercept`` [1/m] and ``{side}_r2`` [-] of the linear fit over 0..fit_limit_psi
    (zero included), in that side's sign convention; ``symmetry_percent``
    = 100 |right - left| / mean of the two slopes; ``zero_curvature`` [1/m] at 0 psi (NaN if
    not in the sweep); ``max_residual`` [1/m], the largest change over the settling window.
    """
    psi = pa_to_psi(sweep.pressure)
    curvature = sweep.curvature
    summary = {}
    for side, sign in (("left", -1.0), ("right", 1.0)):
        over = sign * psi
        chosen = (over >= -1e-9) & (over <= fit_limit_psi + 1e-9) & (sweep.cap_torque == 0.0)
        if np.count_nonzero(chosen) < 3:
            raise ConfigError(f"the {side} side needs at least 3 pressures in 0..{fit_limit_psi:g} psi for a fit")
        slope, intercept, r_squared = _linear_fit(over[chosen], sign * curvature[chosen])
        summary[f"{side}_slope"] = slope
        summary[f"{side}_intercept"] = intercept
        summary[f"{side}_r2"] = r_squared
    mean_slope = 0.5 * (summary["left_slope"] + summary["right_slope"])
    summary["symmetry_percent"] = 100.0 * abs(summary["right_slope"] - summary["left_slope"]) / abs(mean_slope)
    zero = np.flatnonzero((np.abs(psi) < 1e-9) & (sweep.cap_torque == 0.0))
    summary["zero_curvature"] = float(curvature[zero[0]]) if zero.size else math.nan
    summary["max_residual"] = float(np.max(np.abs(sweep.residual)))
    return summary


def write_curvature_csv(path, sweep):
    """Write pressure, steady curvature and settling residual per world to ``path`` (atomically)."""
    path = Path(path)
    write_csv(path, ["pressure_psi", "pressure_pa", "curvature_per_m", "settle_residual_per_m"],
              [[f"{pa_to_psi(p):.6g}", f"{p:.9g}", f"{k:.9g}", f"{r:.3g}"]
               for p, k, r in zip(sweep.pressure, sweep.curvature, sweep.residual)])


def check_sweep(psi, *, fit_limit_psi=FIT_LIMIT_PSI):
    """ConfigError unless the pressures ``psi`` [psi] lie within +-PRESSURE_MAX_PSI and give each
    side's fit its FIT_POINTS_MIN pressures in 0..fit_limit_psi (what ``summarize_curvature``
    needs), so that a sweep that cannot be summarised is refused before it runs."""
    psi = np.asarray(psi, dtype=np.float64)
    if psi.size == 0 or not np.all(np.isfinite(psi)):
        raise ConfigError("the sweep needs at least one finite pressure")
    if np.max(np.abs(psi)) > PRESSURE_MAX_PSI + 1e-9:
        raise ConfigError(f"chamber pressures must lie within -{PRESSURE_MAX_PSI:g}..{PRESSURE_MAX_PSI:g} psi (the supply "
                          f"pressure), got {psi.min():g}..{psi.max():g}")
    for side, sign in (("left", -1.0), ("right", 1.0)):
        over = sign * psi
        count = int(np.count_nonzero((over >= -1e-9) & (over <= fit_limit_psi + 1e-9)))
        if count < FIT_POINTS_MIN:
            span = f"-{fit_limit_psi:g}..0" if side == "left" else f"0..{fit_limit_psi:g}"
            raise ConfigError(f"the {side} chamber's linear fit needs at least {FIT_POINTS_MIN} pressures in {span} psi "
                              f"(0 included), the sweep has {count}")
    return psi


def estimate_sweep(pressure_count, seconds, *, resolution="coarse", dt=DT_DEFAULT, device=None):
    """What a sweep of ``pressure_count`` stand links for ``seconds`` [s] needs: (frames [-], bytes
    [B], estimated wall time [s] on the CPU, None on a GPU)."""
    frames = int(round(seconds / dt))
    model = MODEL_BYTES_PER_LINK.get(resolution, MODEL_BYTES_PER_LINK["paper"])
    memory = pressure_count * (model + 8 * (frames + 1))
    per_frame = CPU_SECONDS_PER_LINK_FRAME.get(resolution, CPU_SECONDS_PER_LINK_FRAME["paper"])
    wall = frames * pressure_count * per_frame if is_cpu_device(device) else None
    return frames, memory, wall


def pressure_grid(min_psi, max_psi, step_psi):
    """Pressures from min_psi to max_psi in step_psi steps, both ends included [psi]."""
    count = int(math.floor((max_psi - min_psi) / step_psi + 1e-9)) + 1
    return min_psi + step_psi * np.arange(count)
