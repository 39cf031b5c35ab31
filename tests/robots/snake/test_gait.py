"""Open-loop gait controller (seed 001, eq. 9)."""

import math

import numpy as np
import pytest

from softsnake.errors import ConfigError
from softsnake.robots.snake.gait import AMPLITUDE_MAX, GaitParams, gait_command, sweep
from softsnake.units import psi_to_pa

A8 = psi_to_pa(8.0)


def test_paper_gait_against_hand_computed_values():
    # f = 2 Hz, alpha = pi/2, phi = 0, A = 8 psi at t = 0.1 s: phase 0.4 pi + i pi/2 = 72, 162,
    # 252, 342 degrees; sines from tables: 0.9510565, 0.3090170, -0.9510565, -0.3090170.
    # Tolerance 1e-7 relative (the table values carry 7 digits).
    command = gait_command(GaitParams(), 0.1, 4)
    expected = np.array([[0.9510565, 0.3090170, -0.9510565, -0.3090170]]) * 8.0 * 6894.757
    np.testing.assert_allclose(command, expected, rtol=1e-7)


def test_offset_and_clamp():
    # phi = 0.5 at t = 0 with alpha = pi/2: sin = 0, 1, 0, -1 -> 0.5, 1.5 -> 1, 0.5, -0.5.
    params = GaitParams(frequency=1.0, phase_shift=math.pi / 2, offset=0.5, amplitude=A8)
    np.testing.assert_allclose(gait_command(params, 0.0, 4)[0], np.array([0.5, 1.0, 0.5, -0.5]) * A8,
                               atol=1e-9 * A8)
    # Over a period the command stays within [-A, A] and with phi = 1 never drops below 0.
    for offset, low in ((1.0, 0.0), (-1.0, -A8), (0.3, -0.7 * A8)):
        params = GaitParams(frequency=2.0, offset=offset, amplitude=A8)
        commands = np.array([gait_command(params, t, 4) for t in np.linspace(0, 0.5, 201)])
        assert commands.max() == pytest.approx(A8 if offset > -1.0 else 0.0, abs=1e-6 * A8)
        assert commands.min() == pytest.approx(low, abs=2e-3 * A8)
        assert np.all(np.abs(commands) <= A8)


def test_frequency_sets_the_period():
    params = GaitParams(frequency=1.5)
    np.testing.assert_allclose(gait_command(params, 0.3 + 1 / 1.5, 5), gait_command(params, 0.3, 5),
                               atol=1e-9 * A8)


def test_sweep_builds_one_snake_per_value():
    frequencies = [0.5, 1.0, 2.0]
    params = sweep("frequency", frequencies, offset=0.2, amplitude=psi_to_pa(6.0))
    assert params.snake_count == 3
    commands = gait_command(params, 0.37, 4)
    assert commands.shape == (3, 4)
    for i, frequency in enumerate(frequencies):
        single = GaitParams(frequency=frequency, offset=0.2, amplitude=psi_to_pa(6.0))
        np.testing.assert_array_equal(commands[i], gait_command(single, 0.37, 4)[0])
    np.testing.assert_array_equal(params.phase_shift, np.full(3, math.pi / 2))


def test_scalar_params_broadcast_to_snake_count():
    params = GaitParams(offset=[0.0, 0.5], snake_count=2)
    assert params.frequency.shape == (2,)
    commands = gait_command(GaitParams(snake_count=5), 0.2, 3)
    assert commands.shape == (5, 3)
    np.testing.assert_array_equal(commands, np.broadcast_to(commands[0], (5, 3)))


def test_amplitude_limit():
    assert GaitParams(amplitude=AMPLITUDE_MAX).amplitude[0] == A8
    with pytest.raises(ConfigError, match="amplitude"):
        GaitParams(amplitude=psi_to_pa(8.01))
    with pytest.raises(ConfigError, match="amplitude"):
        sweep("amplitude", [psi_to_pa(4.0), psi_to_pa(9.0)])
    with pytest.raises(ConfigError, match="amplitude"):
        GaitParams(amplitude=-1.0)


@pytest.mark.parametrize("field", ["frequency", "phase_shift", "offset", "amplitude"])
def test_nan_rejected(field):
    with pytest.raises(ConfigError, match=f"{field} must be finite"):
        GaitParams(**{field: [0.1, math.nan]})


@pytest.mark.parametrize("kwargs", [
    {"offset": 1.5}, {"frequency": -1.0}, {"frequency": [1.0, 2.0], "offset": [0.0, 0.1, 0.2]},
    {"frequency": [1.0, 2.0], "snake_count": 3}, {"snake_count": 0}, {"frequency": [[1.0]]},
    {"frequency": []},
])
def test_bad_params_rejected(kwargs):
    with pytest.raises(ConfigError):
        GaitParams(**kwargs)


def test_bad_command_inputs_rejected():
    with pytest.raises(ConfigError, match="time"):
        gait_command(GaitParams(), math.nan, 4)
    with pytest.raises(ConfigError, match="link_count"):
        gait_command(GaitParams(), 0.0, 0)


@pytest.mark.parametrize("args, kwargs", [
    (("speed", [1.0]), {}), (("frequency", [1.0]), {"frequency": 2.0}), (("offset", []), {}),
    (("offset", [0.1]), {"colour": 1.0}), (("offset", [0.1]), {"frequency": [1.0, 2.0]}),
])
def test_bad_sweeps_rejected(args, kwargs):
    with pytest.raises(ConfigError):
        sweep(*args, **kwargs)
