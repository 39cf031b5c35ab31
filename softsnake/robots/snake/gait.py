"""Open-loop undulation gait of the soft snake (seed 001, section V-A, eq. 9).

Link i of a snake receives the signed pressure command

    a_i(t) = clamp(sin(2 pi f t + alpha i) + phi, -1, 1) * A

with f the oscillation frequency [Hz] (the paper writes omega but measures it in Hz), alpha the
phase shift between links [rad], phi the offset [-] that makes the snake turn, and A the amplitude
[Pa]. Eq. 9 counts links from 0 at the tail (the paper's snake moves head first under
alpha = +pi/2); ``head_first_command`` maps this index onto a snake's head-first link order. Every parameter is
a scalar or one value per snake, so a single batched run can sweep a parameter across snakes.
"""

import dataclasses
import math

import numpy as np

from softsnake.errors import ConfigError
from softsnake.units import psi_to_pa
from softsnake.validation import finite_array, positive_integer

AMPLITUDE_MAX = psi_to_pa(8.0)
"""Largest allowed amplitude [Pa]: above 8 psi the real links bulge and leave the linear
pressure-curvature range, risking damage (paper, section VI-A)."""

GAIT_FIELDS = ("frequency", "phase_shift", "offset", "amplitude")
"""Names of the per-snake gait parameters, in eq. 9 order."""


def _as_per_snake(name, value):
    array = np.atleast_1d(np.asarray(value, dtype=float))
    if array.ndim != 1 or array.size == 0:
        raise ConfigError(f"{name} must be a scalar or a non-empty 1-D array")
    return finite_array(name, array)


@dataclasses.dataclass(frozen=True, eq=False)
class GaitParams:
    """Parameters of eq. 9, each a scalar or one value per snake; defaults are the paper's
    Fig. 7 gait (f = 2 Hz, alpha = pi/2, phi = 0, A = 8 psi).

    frequency: oscillation frequency f [Hz], >= 0.
    phase_shift: phase shift alpha between neighbouring links [rad].
    offset: offset phi [-], in [-1, 1].
    amplitude: amplitude A [Pa], in [0, AMPLITUDE_MAX] (8 psi).
    snake_count: number of snakes; None takes it from the per-snake arrays (1 if all are scalars).

    After construction every parameter is a float array of shape (snake_count,).
    """

    frequency: object = 2.0
    phase_shift: object = math.pi / 2.0
    offset: object = 0.0
    amplitude: object = AMPLITUDE_MAX
    snake_count: int | None = None

    def __post_init__(self):
        arrays = {name: _as_per_snake(name, getattr(self, name)) for name in GAIT_FIELDS}
        lengths = {a.size for a in arrays.values() if a.size != 1}
        if len(lengths) > 1:
            raise ConfigError(f"per-snake parameters have different lengths {sorted(lengths)}")
        count = lengths.pop() if lengths else 1
        if self.snake_count is not None:
            positive_integer("snake_count", self.snake_count)
            if count != 1 and count != self.snake_count:
                raise ConfigError(
                    f"snake_count {self.snake_count} does not match per-snake parameters of length {count}"
                )
            count = int(self.snake_count)
        if np.any(arrays["frequency"] < 0.0):
            raise ConfigError("frequency must be >= 0 Hz (reverse the wave with phase_shift)")
        if np.any(np.abs(arrays["offset"]) > 1.0):
            raise ConfigError("offset must lie in [-1, 1]")
        if np.any(arrays["amplitude"] < 0.0) or np.any(arrays["amplitude"] > AMPLITUDE_MAX):
            raise ConfigError(
                f"amplitude must lie in [0, {AMPLITUDE_MAX:.1f}] Pa (8 psi, the links' safe limit)"
            )
        for name, array in arrays.items():
            object.__setattr__(self, name, np.broadcast_to(array, (count,)).copy())
        object.__setattr__(self, "snake_count", count)


def gait_command(params, t, link_count):
    """Signed link commands of eq. 9 at time t.

    params: GaitParams for snake_count snakes.
    t: time [s].
    link_count: links per snake.
    Returns an array (snake_count, link_count) of commands [Pa]; > 0 inflates chamber 1.
    """
    t = float(t)
    if not np.isfinite(t):
        raise ConfigError(f"time must be finite, got {t}")
    positive_integer("link_count", link_count)
    link_index = np.arange(link_count)
    phase = 2.0 * np.pi * params.frequency[:, None] * t + params.phase_shift[:, None] * link_index
    wave = np.clip(np.sin(phase) + params.offset[:, None], -1.0, 1.0)
    return wave * params.amplitude[:, None]


def head_first_command(params, t, link_count):
    """``gait_command`` in a snake's own link order, head first (``SnakeHandle.link_channels``), [Pa].

    Eq. 9's index i counts from the tail (i = 0: the rear link). With alpha = +pi/2 link i then
    lags link i + 1, so the bending wave runs from head to tail, and a snake on wheels that roll
    forward and grip sideways moves against its wave: head first, as in the paper's Fig. 7.
    Counted from the head, the same gait sends the wave from tail to head and the snake backs
    away tail first (measured: 2.7 cm tail-first in 5 s, coarse mesh).
    """
    return gait_command(params, t, link_count)[:, ::-1]


def sweep(param_name, values, **fixed):
    """GaitParams with one snake per value of `param_name`.

    param_name: one of GAIT_FIELDS.
    values: 1-D sequence of values for that parameter (units as in GaitParams).
    fixed: scalar values for other parameters; the rest keep their defaults.
    """
    if param_name not in GAIT_FIELDS:
        raise ConfigError(f"unknown gait parameter {param_name!r}; choose from {GAIT_FIELDS}")
    if param_name in fixed:
        raise ConfigError(f"{param_name} is swept; do not also fix it")
    unknown = set(fixed) - set(GAIT_FIELDS)
    if unknown:
        raise ConfigError(f"unknown gait parameters {sorted(unknown)}")
    values = np.asarray(values, dtype=float)
    if values.ndim != 1 or values.size == 0:
        raise ConfigError(f"sweep values for {param_name} must be a non-empty 1-D sequence")
    for name, value in fixed.items():
        if np.ndim(value) != 0:
            raise ConfigError(f"fixed parameter {name} must be a scalar")
    return GaitParams(**fixed, **{param_name: values}, snake_count=values.size)
