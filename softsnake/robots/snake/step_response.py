"""Chamber pressure step response (seed 001, Fig. 6; ``softsnake step-response``).

One chamber is inflated from rest to 60, 70, 80, 90 and 100 % of the supply pressure, and vented
from those levels to 0, under the latency model of softsnake.robots.actuation. The paper's literal
per-step map (eqs. 11-12, at its step h0) runs beside it for comparison; the summary gives the
rise and fall times and the model-to-map difference.
"""

import csv
import dataclasses
import math
from pathlib import Path

import numpy as np

from softsnake.errors import ConfigError
from softsnake.output_files import replaced_when_complete
from softsnake.progress import progress as progress_notes
from softsnake.units import pa_to_psi

from ..actuation import REFERENCE_DT_DEFAULT, SUPPLY_PRESSURE_DEFAULT, PressureLatency

STEP_LEVELS = (0.6, 0.7, 0.8, 0.9, 1.0)
"""Step targets as fractions of the supply pressure [-] (Fig. 6: 60-100 % in 10 % steps)."""

DURATION_DEFAULT = 1.0
"""Length of each step response [s]."""

PHASES = ("inflate", "deflate")

BYTES_PER_STEP = 2 * len(STEP_LEVELS) * 8 * 4
"""Memory a response holds per controller step: both phases, every level, the model and the
paper's map, with the CSV rows [B] (an estimate for run-size checks)."""


@dataclasses.dataclass(frozen=True, eq=False)
class StepResponse:
    """Active-chamber pressures of the step experiments.

    levels: step levels as fractions of the supply pressure [-], shape (level_count,).
    supply_pressure: supply pressure [Pa].
    time: sample times of the model [s], shape (sample_count,).
    pressure: model pressures [Pa], shape (2, sample_count, level_count), phase order PHASES.
    reference_time: sample times of the paper's map, multiples of h0 [s].
    reference_pressure: the paper's map [Pa], shape (2, reference_count, level_count).
    """

    levels: np.ndarray
    supply_pressure: float
    time: np.ndarray
    pressure: np.ndarray
    reference_time: np.ndarray
    reference_pressure: np.ndarray


def _run_steps(model, command, step_count, advance, progress):
    """Pressures of chamber 1 after 0..step_count calls of advance(command), shape
    (2, step_count + 1, level_count) [Pa]."""
    history = [model.pressure[..., 1]]
    for _ in progress_notes(range(step_count), desc="step response", unit="step", enabled=progress):
        history.append(advance(command)[..., 1])
    return np.stack(history, axis=1)


def simulate_step_response(
    *,
    supply_pressure=SUPPLY_PRESSURE_DEFAULT,
    dt=REFERENCE_DT_DEFAULT,
    duration=DURATION_DEFAULT,
    levels=STEP_LEVELS,
    progress=False,
):
    """Inflate chamber 1 from 0 to each level and vent it from each level to 0.

    supply_pressure: supply pressure p_s [Pa].
    dt: controller time step [s].
    duration: simulated time per response [s]; rounded up to whole steps.
    levels: step levels as fractions of p_s [-].
    progress: report progress on standard error (``softsnake.progress``).
    Both phases and all levels run as one batch of shape (2, level_count).
    """
    if not (0.0 < dt <= duration < math.inf):
        raise ConfigError(f"need 0 < dt <= duration, got dt {dt} s and duration {duration} s")
    levels = np.asarray(levels, dtype=float)
    if levels.ndim != 1 or levels.size == 0 or not np.all((levels > 0.0) & (levels <= 1.0)):
        raise ConfigError("step levels must be a non-empty list of fractions in (0, 1]")
    level_pressure = levels * supply_pressure
    # Row 0 inflates from rest toward the level; row 1 starts at the level and vents toward 0.
    command = np.stack([level_pressure, np.zeros_like(level_pressure)])
    start = np.zeros(command.shape + (2,))
    start[1, :, 1] = level_pressure

    model = PressureLatency(command.shape, supply_pressure=supply_pressure)
    model.reset(pressure=start)
    step_count = math.ceil(duration / dt - 1e-9)
    pressure = _run_steps(model, command, step_count, lambda c: model.step(c, dt), progress)

    reference = PressureLatency(command.shape, supply_pressure=supply_pressure)
    reference.reset(pressure=start)
    reference_count = math.ceil(duration / reference.reference_dt - 1e-9)
    reference_pressure = _run_steps(
        reference, command, reference_count, reference.step_reference_map, progress
    )
    return StepResponse(
        levels=levels,
        supply_pressure=float(supply_pressure),
        time=np.arange(step_count + 1) * dt,
        pressure=pressure,
        reference_time=np.arange(reference_count + 1) * reference.reference_dt,
        reference_pressure=reference_pressure,
    )


def _crossing_time(time, curve, value, *, rising):
    """First time a monotone curve (rising or falling) reaches `value` [s], linearly
    interpolated; NaN if it never does."""
    reached = np.nonzero(curve >= value if rising else curve <= value)[0]
    if reached.size == 0:
        return math.nan
    i = reached[0]
    if i == 0:
        return float(time[0])
    fraction = (value - curve[i - 1]) / (curve[i] - curve[i - 1])
    return float(time[i - 1] + fraction * (time[i] - time[i - 1]))


def _common_samples(time, reference_time):
    """Indices (model, map) of the sample times the two grids share; interpolating the model
    instead would mix interpolation error into the model-to-map difference."""
    ratio = reference_time / (time[1] - time[0])
    model_index = np.rint(ratio).astype(int)
    shared = (np.abs(ratio - model_index) < 1e-6) & (model_index < time.size)
    return model_index[shared], np.nonzero(shared)[0]


def summarize_step_response(response):
    """Per level: inflation time to 90 % of the level [s], venting time to 10 % of the level [s],
    and the largest |model - paper map| at the sample times both share [Pa] (only t = 0 when dt
    and h0 have no common multiple within the run). Returns a list of dicts, one per level."""
    model_index, map_index = _common_samples(response.time, response.reference_time)
    rows = []
    for j, level in enumerate(response.levels):
        level_pressure = level * response.supply_pressure
        inflate, deflate = response.pressure[0, :, j], response.pressure[1, :, j]
        difference = np.max(np.abs(response.pressure[:, model_index, j]
                                   - response.reference_pressure[:, map_index, j]))
        rows.append({
            "level_percent": 100.0 * level,
            "inflate_t90_s": _crossing_time(response.time, inflate, 0.9 * level_pressure, rising=True),
            "deflate_t10_s": _crossing_time(response.time, deflate, 0.1 * level_pressure, rising=False),
            "map_difference_pa": float(difference),
            "map_sample_count": int(map_index.size),
        })
    return rows


def write_step_response_csv(path, response):
    """Write the model's step responses as CSV (phase, level, time, command, pressure) to path,
    through a temporary file so the result is complete or absent."""
    path = Path(path)
    with replaced_when_complete(path) as partial, open(partial, "w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["phase", "level_percent", "time_s", "command_pa", "pressure_pa", "pressure_psi"])
        for phase_index, phase in enumerate(PHASES):
            for j, level in enumerate(response.levels):
                command = level * response.supply_pressure if phase == "inflate" else 0.0
                for t, p in zip(response.time, response.pressure[phase_index, :, j]):
                    writer.writerow([phase, f"{100.0 * level:g}", f"{t:.9g}", f"{command:.9g}",
                                     f"{p:.9g}", f"{pa_to_psi(p):.9g}"])
