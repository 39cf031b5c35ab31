"""Derivatives of a gait's outcome with respect to its parameters (``softsnake.robots.snake.gait_gradient``): the
engine's per-frame pressure adjoint chained with the host latency model's derivative, against differences of whole
rollouts; the full-length check is experiments/snake_gait_gradient.py."""

import pytest

from softsnake.errors import ConfigError
from softsnake.robots.snake.gait import AMPLITUDE_MAX, GaitParams
from softsnake.robots.snake.gait_gradient import LOSSES, gait_displacement, gait_gradient

SECONDS = 3.0 / 120.0
"""Three frames: the chambers begin to fill, and the snake begins to turn."""
OFFSET = 0.2


def lateral(**gait):
    """The centre of mass' sideways displacement [m] of the turning gait with ``gait``'s changes."""
    values = {"offset": OFFSET, **gait}
    return gait_displacement(SECONDS, gait=GaitParams(**values))[LOSSES["lateral"]]


def test_a_turning_gait_differentiated_by_offset_and_amplitude():
    """The sideways displacement of a turning gait (offset 0.2, the paper's 8 psi) over three frames, differentiated
    with respect to the offset (central differences of the host schedule) and the amplitude (on its bound: one-sided,
    inwards), against Richardson-extrapolated differences of whole rollouts (central, steps 0.01 and 0.02 of the
    offset; backward, 2 % and 4 % of the amplitude). Tolerance 2 % (measured on the CPU: offset 0.40 %, amplitude
    0.15 %). Smaller steps scatter: the loss, 12 um, moves by 5e-8 m at 0.25 % of the amplitude, about a float32
    position's spacing near 0.3 m (3e-8 m) (its backward quotients at 0.25 / 0.5 / 1 / 2 / 4 %: 3.89 / 3.83 / 3.81 / 3.75
    / 3.72e-10 m/Pa, the adjoint 3.79e-10). The snake turns, and less with a larger offset over these first frames:
    the loss and its derivatives are far from zero."""
    result = gait_gradient(SECONDS, gait=GaitParams(offset=OFFSET), loss="lateral", parameters=("offset", "amplitude"))
    assert result.pressure_gradient.shape[0] == 3 and set(result.gradient) == {"offset", "amplitude"}
    central = [(lateral(offset=OFFSET + h) - lateral(offset=OFFSET - h)) / (2.0 * h) for h in (0.01, 0.02)]
    offset = (4.0 * central[0] - central[1]) / 3.0
    base = lateral()
    backward = [(base - lateral(amplitude=AMPLITUDE_MAX * (1.0 - r))) / (r * AMPLITUDE_MAX) for r in (0.02, 0.04)]
    amplitude = 2.0 * backward[0] - backward[1]
    assert abs(result.loss - base) <= 1e-12  # the recorded rollout is the plain one
    assert abs(result.gradient["offset"]) > 1e-6 and abs(result.gradient["amplitude"]) > 1e-11
    for name, difference in (("offset", offset), ("amplitude", amplitude)):
        assert abs(result.gradient[name] - difference) <= 0.02 * abs(difference), (name, result.gradient[name],
                                                                                  difference)


def test_bad_gait_gradient_requests_fail_before_any_work():
    with pytest.raises(ConfigError, match="loss must be one of travel, lateral"):
        gait_gradient(SECONDS, loss="heading")
    with pytest.raises(ConfigError, match="gait parameters are frequency"):
        gait_gradient(SECONDS, parameters=("frequency", "speed"))
