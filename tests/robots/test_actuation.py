"""Pressure latency model (seed 001, eqs. 10-12) and the Fig. 6 step-response command."""

import csv
import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from softsnake import cli
from softsnake.robots.snake.step_response import simulate_step_response, summarize_step_response
from softsnake.errors import ConfigError
from softsnake.robots.actuation import PressureLatency, chamber_targets
from softsnake.units import psi_to_pa

H0 = 1.0 / 120.0
K = 0.23
T_P = psi_to_pa(0.68)
P_S = psi_to_pa(10.0)
LAMBDA = -math.log(1.0 - K)  # exponential venting rate per reference step
LEVELS = np.linspace(0.05, 1.0, 20)


def step_responses(dt, duration, *, levels=LEVELS):
    """Chamber-1 pressures [Pa] inflating 0 -> level and venting level -> 0, sampled every dt;
    shape (2, sample_count, level_count)."""
    levels = np.asarray(levels)
    command = np.stack([levels * P_S, np.zeros_like(levels)])
    start = np.zeros(command.shape + (2,))
    start[1, :, 1] = levels * P_S
    model = PressureLatency(command.shape)
    model.reset(pressure=start)
    history = [model.pressure[..., 1]]
    for _ in range(round(duration / dt)):
        history.append(model.step(command, dt)[..., 1])
    return np.stack(history, axis=1)


def paper_map(start, target, step_count):
    """Eqs. 11-12 applied literally, one scalar chamber, one step per h0 [Pa]."""
    p = start
    out = [p]
    for _ in range(step_count):
        if p < target:
            delta = (target - p) / P_S
            p = p + P_S * delta**2 * K
        else:
            p = p - min(p * K, T_P)
        out.append(p)
    return np.array(out)


def test_step_size_independence():
    # Brief: one step of h and two of h/2 agree within 2 % over a whole step response. The ODE is
    # integrated exactly, so the measured difference is round-off (about 1e-15 of the level).
    coarse = step_responses(H0, 1.0)
    for divisor in (2, 4):
        fine = step_responses(H0 / divisor, 1.0)[:, ::divisor]
        difference = np.abs(fine - coarse) / (LEVELS * P_S)
        assert difference.max() < 0.02
        assert difference.max() < 1e-9
    single = step_responses(1.0, 1.0)
    np.testing.assert_allclose(single[:, -1], coarse[:, -1], rtol=0, atol=1e-9 * P_S)


def test_latency_off_pressure_equals_command():
    rng = np.random.default_rng(1)
    model = PressureLatency((3, 4), enabled=False)
    for _ in range(5):
        command = rng.uniform(-P_S, P_S, size=(3, 4))
        pressure = model.step(command, rng.uniform(1e-4, 0.1))
        np.testing.assert_array_equal(pressure, chamber_targets(command))
        np.testing.assert_array_equal(model.differential, command)


def test_model_matches_paper_map_at_reference_step():
    # The ODE route cannot reproduce the discrete map exactly. Measured over 0 -> level and
    # level -> 0 for levels 5-100 % of a 10 psi supply, 2 s: inflation differs by at most 1.39 % of
    # the supply (largest in the first steps of the 100 % step), venting by at most 0.19 %.
    # Tolerances: 1.5 % and 0.25 % of the supply.
    steps = 240
    model = step_responses(H0, steps * H0)
    for j, level in enumerate(LEVELS):
        inflate = paper_map(0.0, level * P_S, steps)
        deflate = paper_map(level * P_S, 0.0, steps)
        assert np.abs(model[0, :, j] - inflate).max() < 0.015 * P_S
        assert np.abs(model[1, :, j] - deflate).max() < 0.0025 * P_S


def test_reference_map_is_the_literal_paper_map():
    model = PressureLatency(2)
    model.reset(pressure=[[0.0, 0.0], [0.0, 0.9 * P_S]])
    inflate = paper_map(0.0, 0.7 * P_S, 50)
    deflate = paper_map(0.9 * P_S, 0.0, 50)
    for n in range(1, 51):
        pressure = model.step_reference_map([-0.7 * P_S, 0.0])
        assert pressure[0, 0] == pytest.approx(inflate[n], rel=1e-12, abs=1e-9)
        assert pressure[1, 1] == pytest.approx(deflate[n], rel=1e-12, abs=1e-9)


def modified_inflation_rhs(_, p, target):
    e = (target - p) / P_S
    return P_S * K * e**2 * (1.0 + K * e) / H0


def venting_rhs(_, p):
    return -np.minimum(LAMBDA * p, T_P) / H0


def test_exact_integration_of_the_stated_odes():
    # The model claims the exact flow of its ODEs for any dt: compare one large step with an
    # adaptive integrator at rtol 1e-11; tolerance 1e-7 of the supply.
    for level in (0.3, 1.0):
        for duration in (0.05, 0.4):
            model = PressureLatency(1)
            pressure = model.step(level * P_S, duration)[0, 1]
            ivp = solve_ivp(modified_inflation_rhs, (0, duration), [0.0], args=(level * P_S,),
                            rtol=1e-11, atol=1e-6)
            assert abs(pressure - ivp.y[0, -1]) < 1e-7 * P_S
            model.reset(pressure=[[0.0, level * P_S]])
            pressure = model.step(0.0, duration)[0, 1]
            ivp = solve_ivp(venting_rhs, (0, duration), [level * P_S], rtol=1e-11, atol=1e-6,
                            max_step=H0 / 4)
            assert abs(pressure - ivp.y[0, -1]) < 1e-7 * P_S


def test_monotone_approach_within_analytic_bounds():
    # With e = (a - p) / p_s the inflation rate k e^2 (1 + k e) per h0 lies between k e^2 and
    # k (1 + k) e^2 (e <= 1), so e is sandwiched by the two hyperbolas e0 / (1 + c e0 n).
    dt = H0 / 3
    responses = step_responses(dt, 3.0)
    n = np.arange(responses.shape[1])[:, None] * dt / H0
    e0 = LEVELS[None, :]
    e = LEVELS[None, :] - responses[0] / P_S
    assert np.all(np.diff(responses[0], axis=0) > 0) and np.all(e > 0)
    assert np.all(e <= e0 / (1 + K * e0 * n) * (1 + 1e-12))
    assert np.all(e >= e0 / (1 + K * (1 + K) * e0 * n) * (1 - 1e-12))
    assert np.all(np.diff(responses[1], axis=0) < 0) and np.all(responses[1] > 0)


def test_venting_linear_above_threshold_exponential_below():
    # Linear regime: eq. 12 removes T_p per h0, i.e. a slope of T_p / h0 = 81.6 psi/s.
    # Proportional regime: eq. 12 multiplies by (1 - k_d) per h0, i.e. p = p_sw exp(-lam t / h0),
    # lam = -ln(1 - k_d), and the rates meet at p_sw = T_p / lam (2.60 psi).
    dt = H0 / 8
    start = P_S
    vented = step_responses(dt, 0.5, levels=[1.0])[1, :, 0]
    t = np.arange(vented.size) * dt
    switch = T_P / LAMBDA
    t_switch = (start - switch) / T_P * H0
    linear = t <= t_switch
    np.testing.assert_allclose(vented[linear], start - T_P / H0 * t[linear], rtol=1e-12)
    exponential = ~linear
    np.testing.assert_allclose(vented[exponential],
                               switch * np.exp(-LAMBDA * (t[exponential] - t_switch) / H0), rtol=1e-10)
    # The published per-step ratios, sampled every h0 inside each regime.
    per_h0 = vented[::8]
    ratios = per_h0[1:] / per_h0[:-1]
    drops = per_h0[:-1] - per_h0[1:]
    both_linear = per_h0[1:] >= switch
    both_exponential = per_h0[:-1] <= switch
    np.testing.assert_allclose(drops[both_linear], T_P, rtol=1e-10)
    np.testing.assert_allclose(ratios[both_exponential], 1.0 - K, rtol=1e-10)
    assert both_linear.sum() >= 10 and both_exponential.sum() >= 20


def test_venting_stops_at_a_lower_target():
    model = PressureLatency(1)
    model.reset(pressure=[[0.0, psi_to_pa(8.0)]])
    for _ in range(120):
        pressure = model.step(psi_to_pa(4.0), H0)
        assert pressure[0, 1] >= psi_to_pa(4.0)
    assert pressure[0, 1] == psi_to_pa(4.0)


def test_antagonistic_chambers():
    command = np.array([[0.8, -0.5, 0.0], [-1.0, 0.3, 0.6]]) * P_S
    plus, minus = PressureLatency(command.shape), PressureLatency(command.shape)
    for _ in range(30):
        p_plus = plus.step(command, H0)
        p_minus = minus.step(-command, H0)
    # Mirrored commands give mirrored chambers, exactly.
    np.testing.assert_array_equal(p_plus, p_minus[..., ::-1])
    # Only the chamber on the command's side is pressurised.
    np.testing.assert_array_equal(p_plus[..., 0] > 0, command < 0)
    np.testing.assert_array_equal(p_plus[..., 1] > 0, command > 0)
    assert np.all(np.sign(plus.differential) == np.sign(command))
    # Reversing the command vents the inflated chamber while the other fills.
    before = plus.pressure
    after = plus.step(-command, H0)
    active = command > 0
    assert np.all(after[..., 1][active] < before[..., 1][active])
    assert np.all(after[..., 0][active] > before[..., 0][active])


def test_batch_equals_separate_runs():
    rng = np.random.default_rng(7)
    commands = rng.uniform(-P_S, P_S, size=(6, 2, 3))
    batch = PressureLatency((2, 3))
    for command in commands:
        batch.step(command, H0 / 2)
    assert batch.pressure.shape == (2, 3, 2)
    for i in range(2):
        for j in range(3):
            single = PressureLatency(1)
            for command in commands:
                single.step(command[i, j], H0 / 2)
            np.testing.assert_array_equal(single.pressure[0], batch.pressure[i, j])


@pytest.mark.parametrize("kwargs", [
    {"supply_pressure": -1.0}, {"supply_pressure": math.nan}, {"k_inflate": 0.0},
    {"k_inflate": 1.5}, {"k_deflate": 1.0}, {"deflate_threshold": 0.0}, {"reference_dt": -H0},
])
def test_bad_parameters_rejected(kwargs):
    with pytest.raises(ConfigError):
        PressureLatency((2, 4), **kwargs)


def test_bad_shape_and_inputs_rejected():
    with pytest.raises(ConfigError, match="shape"):
        PressureLatency((2, 0))
    model = PressureLatency((2, 4))
    with pytest.raises(ConfigError, match="shape"):
        model.step(np.zeros(3), H0)
    with pytest.raises(ConfigError, match="finite"):
        model.step(np.full((2, 4), math.nan), H0)
    with pytest.raises(ConfigError, match="supply"):
        model.step(np.full((2, 4), 1.01 * P_S), H0)
    for dt in (0.0, -H0, math.nan):
        with pytest.raises(ConfigError, match="dt"):
            model.step(np.zeros((2, 4)), dt)
    with pytest.raises(ConfigError, match="shape"):
        model.reset(pressure=np.zeros((2, 4)))
    with pytest.raises(ConfigError, match="non-negative"):
        model.reset(pressure=np.full((2, 4, 2), -1.0))


def analytic_t90(level):
    """Time for the modified inflation ODE to reach 90 % of a step from rest [s]."""
    u0, u = 1.0 / level, 10.0 / level
    return ((u - K * math.log(u + K)) - (u0 - K * math.log(u0 + K))) / K * H0


def analytic_t10(level):
    """Time to vent from the level to 10 % of it: linear to p_sw, then exponential [s]."""
    start, end, switch = level * P_S, 0.1 * level * P_S, T_P / LAMBDA
    return ((start - switch) / T_P + math.log(switch / end) / LAMBDA) * H0


def test_step_response_summary_against_closed_forms():
    response = simulate_step_response(dt=H0 / 4, duration=1.0)
    for level, row in zip(response.levels, summarize_step_response(response)):
        assert row["inflate_t90_s"] == pytest.approx(analytic_t90(level), abs=H0 / 4)
        assert row["deflate_t10_s"] == pytest.approx(analytic_t10(level), abs=H0 / 4)
        assert row["map_difference_pa"] < 0.015 * P_S


@pytest.mark.parametrize("kwargs", [{"dt": 0.0}, {"dt": 2.0, "duration": 1.0}, {"duration": math.nan},
                                    {"levels": [0.5, 1.2]}, {"levels": []}])
def test_step_response_bad_arguments_rejected(kwargs):
    with pytest.raises(ConfigError):
        simulate_step_response(**kwargs)


def test_step_response_command_writes_files(tmp_path, capsys):
    assert cli.main(["step-response", "--out", str(tmp_path), "--duration", "0.25", "--dt", "0.01"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_response.csv", "step_response.png"]
    with open(tmp_path / "step_response.csv", newline="") as stream:
        rows = list(csv.DictReader(stream))
    assert len(rows) == 2 * 5 * 26
    assert {row["phase"] for row in rows} == {"inflate", "deflate"}
    for row in rows:
        assert float(row["pressure_psi"]) == pytest.approx(float(row["pressure_pa"]) / 6894.757, rel=1e-8)
    assert (tmp_path / "step_response.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "inflate t90" in capsys.readouterr().out


@pytest.mark.parametrize("options", [["--dt", "0"], ["--supply-psi", "-3"], ["--duration", "nan"],
                                     ["--dt", "2", "--duration", "1"]])
def test_step_response_command_rejects_bad_options(tmp_path, capsys, options):
    assert cli.main(["step-response", "--out", str(tmp_path), *options]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("softsnake step-response: error:") and "\n" not in error
    assert list(tmp_path.iterdir()) == []


def test_step_response_command_rejects_file_as_out(tmp_path, capsys):
    target = tmp_path / "file.txt"
    target.write_text("x")
    assert cli.main(["step-response", "--out", str(target)]) == 2
    assert "is a file" in capsys.readouterr().err
