"""Bending-moment models of the vine robot (softsnake.robots.vine.stiffness) against analytic values.

Reference values: the eps_crit cubic evaluated by hand at s = -1, 0, 1, 2; Comer-Levy eq. 1 at
gamma_0 = 0, pi/2, pi in closed form; its expansion near pi derived in the module docstring.
"""

import numpy as np
import pytest

from softsnake.errors import ConfigError
from softsnake.units import psi_to_pa
from softsnake.robots.vine import stiffness as st

RADIUS = 0.0075  # tube radius of the Jitosho cluttered scenes [m]
PRESSURES = [psi_to_pa(0.5), psi_to_pa(1.0), psi_to_pa(2.0)]  # [Pa]
EPS_VALUES = [1e-7, 1e-3, 0.0096, 0.05, 0.3]  # 1e-7 reaches the series branch near gamma_0 = pi


def test_eps_crit_matches_cubic_evaluated_by_hand():
    # s = (P - 6167) / 5836; sums of the coefficients with signs worked out by hand.
    cases = {
        6167.0: 0.007656015122415,  # s = 0: constant term
        12003.0: 0.033338206750516,  # s = 1: a + b + c + d
        331.0: 0.000156909720596,  # s = -1: -a + b - c + d
        17839.0: 0.089670665006957,  # s = 2: 8a + 4b + 2c + d
    }
    for pressure, expected in cases.items():
        assert st.eps_crit(pressure) == pytest.approx(expected, rel=1e-12, abs=0.0)


def test_eps_crit_vectorised_and_increasing():
    pressures = np.linspace(100.0, 30000.0, 300)
    values = st.eps_crit(pressures)
    assert values.shape == pressures.shape
    assert np.all(np.diff(values) > 0.0)


def test_eps_crit_pressure_limit_is_where_the_cubic_reaches_one():
    """``EPS_CRIT_PRESSURE_LIMIT`` solves cubic(s) = 1 (checked by evaluating the cubic there, to 1e-9), the cubic
    rises up to it from 10 Pa, and eps_crit refuses a pressure 1e-6 above it in one line."""
    limit = st.EPS_CRIT_PRESSURE_LIMIT
    s = (limit - 6167.0) / 5836.0
    a, b, c, d = st.EPS_CRIT_COEFFICIENTS
    assert a * s**3 + b * s**2 + c * s + d == pytest.approx(1.0, abs=1e-9)
    assert np.all(np.diff(st.eps_crit(np.linspace(10.0, limit * (1.0 - 1e-9), 2000))) > 0.0)
    with pytest.raises(ConfigError, match="beyond the eps_crit fit"):
        st.eps_crit(limit * (1.0 + 1e-6))


def test_eps_crit_pressure_inverts_the_cubic():
    """eps_crit(eps_crit_pressure(eps)) = eps to 1e-12 from the centre's 0.0077 up to 1; eps outside (0, 1] or below
    the centre's value is refused in one line."""
    for eps in (0.0096, 0.05, 0.3, 0.9, 0.997, 1.0 - 1e-9):
        assert st.eps_crit(st.eps_crit_pressure(eps)) == pytest.approx(eps, rel=1e-12)
    for bad in (0.0, 1.5, -0.1):
        with pytest.raises(ConfigError, match="eps must lie in"):
            st.eps_crit_pressure(bad)
    with pytest.raises(ConfigError, match="below the cubic's value at its centre"):
        st.eps_crit_pressure(0.001)


def test_comer_levy_closed_form_points():
    pressure, full = PRESSURES[1], st.fully_wrinkled_moment(PRESSURES[1], RADIUS)
    assert full == pytest.approx(np.pi * pressure * RADIUS**3, rel=1e-15)
    # gamma_0 = 0: (0 + 2 pi) / (4 pi) = 1/2 (wrinkling onset at half the collapse moment)
    assert st.comer_levy_moment(0.0, pressure, RADIUS) == pytest.approx(0.5 * full, rel=1e-14)
    # gamma_0 = pi/2: (sin pi + 2 pi - pi) / (4 [1 + 0]) = pi / 4
    assert st.comer_levy_moment(np.pi / 2, pressure, RADIUS) == pytest.approx(np.pi / 4 * full, rel=1e-14)
    # gamma_0 = pi: fully wrinkled
    assert st.comer_levy_moment(np.pi, pressure, RADIUS) == pytest.approx(full, rel=1e-14)


def test_comer_levy_matches_eq1_as_printed():
    pressure = PRESSURES[0]
    full = st.fully_wrinkled_moment(pressure, RADIUS)
    gamma = np.linspace(0.0, np.pi - 0.3, 200)  # away from pi, eq. 1 has no cancellation
    eq1 = full * (np.sin(2 * gamma) + 2 * np.pi - 2 * gamma) / (
        4 * (np.sin(gamma) + (np.pi - gamma) * np.cos(gamma)))
    np.testing.assert_allclose(st.comer_levy_moment(gamma, pressure, RADIUS), eq1, rtol=1e-12, atol=0.0)


def test_comer_levy_near_full_wrinkling_follows_expansion():
    # With u = pi - gamma_0: M / (pi P R^3) = 1 - u^2/10 + 23 u^4/4200 - 11 u^6/126000 + O(u^8).
    pressure = PRESSURES[2]
    full = st.fully_wrinkled_moment(pressure, RADIUS)
    for u in [1e-6, 1e-3, 0.05, 0.19999999, 0.2, 0.20000001, 0.25]:
        expected = 1 - u**2 / 10 + 23 * u**4 / 4200 - 11 * u**6 / 126000
        ratio = st.comer_levy_moment(np.pi - u, pressure, RADIUS) / full
        assert ratio == pytest.approx(expected, abs=1e-10 + 1e-5 * u**8)


@pytest.mark.parametrize("eps", EPS_VALUES)
def test_eq2_u_form_matches_arccos_form(eps):
    onset = 2 * np.arcsin(eps)
    theta = np.linspace(onset, np.pi, 500)
    direct = np.arccos(np.clip(2 * eps / np.sin(theta / 2) - 1, -1, 1))
    np.testing.assert_allclose(st.wrinkling_angle(theta, eps), direct, atol=1e-6)
    assert st.wrinkling_angle(onset, eps) == pytest.approx(0.0, abs=1e-6)
    assert st.wrinkling_angle(np.pi, eps) == pytest.approx(np.arccos(2 * eps - 1), abs=1e-12)


@pytest.mark.parametrize("pressure", PRESSURES)
@pytest.mark.parametrize("eps", [None] + EPS_VALUES)
def test_moment_continuous_at_onset(pressure, eps):
    onset = st.wrinkling_onset_angle(pressure, eps=eps)
    below = st.wrinkling_moment(onset * (1 - 1e-12), pressure, RADIUS, eps=eps)
    above = st.wrinkling_moment(onset * (1 + 1e-12), pressure, RADIUS, eps=eps)
    assert above == pytest.approx(below, rel=1e-9)
    # the value there is the Comer-Levy onset moment pi P R^3 / 2
    assert below == pytest.approx(0.5 * st.fully_wrinkled_moment(pressure, RADIUS), rel=1e-9)


@pytest.mark.parametrize("eps", [None] + EPS_VALUES)
def test_moment_odd_and_stiffness_even(eps):
    theta = np.linspace(0.0, 4.0, 401)
    pressure = PRESSURES[1]
    np.testing.assert_array_equal(st.wrinkling_moment(-theta, pressure, RADIUS, eps=eps),
                                  -st.wrinkling_moment(theta, pressure, RADIUS, eps=eps))
    np.testing.assert_array_equal(st.wrinkling_stiffness(-theta, pressure, RADIUS, eps=eps),
                                  st.wrinkling_stiffness(theta, pressure, RADIUS, eps=eps))
    assert st.wrinkling_moment(0.0, pressure, RADIUS, eps=eps) == 0.0


@pytest.mark.parametrize("pressure", PRESSURES)
@pytest.mark.parametrize("eps", [None] + EPS_VALUES)
def test_moment_increases_monotonically_up_to_pi(pressure, eps):
    onset = st.wrinkling_onset_angle(pressure, eps=eps)
    theta = np.unique(np.concatenate([np.linspace(0.0, np.pi, 4001), np.geomspace(onset / 10, onset * 10, 400)]))
    theta = theta[theta <= np.pi]
    moment = st.wrinkling_moment(theta, pressure, RADIUS, eps=eps)
    assert np.all(np.diff(moment) > 0.0)
    assert np.all(st.wrinkling_stiffness(theta[theta < np.pi], pressure, RADIUS, eps=eps) > 0.0)


@pytest.mark.parametrize("eps", EPS_VALUES)
def test_largest_moment_is_exact_theta_pi_limit(eps):
    # The formula's exact limit: M(pi) = eq. 1 at gamma_0 = arccos(2 eps - 1); ~ pi P R^3 (1 - 0.4 eps).
    pressure = PRESSURES[1]
    full = st.fully_wrinkled_moment(pressure, RADIUS)
    top = st.wrinkling_moment(np.pi, pressure, RADIUS, eps=eps)
    eq1_full = st.comer_levy_moment(np.arccos(2 * eps - 1), pressure, RADIUS)
    assert top == pytest.approx(eq1_full, rel=1e-12)
    if eps <= 1e-3:
        assert top / full == pytest.approx(1 - 0.4 * eps, abs=eps**2)
    # folded flat beyond pi: held, with zero slope
    assert st.wrinkling_moment(1.5 * np.pi, pressure, RADIUS, eps=eps) == top
    assert st.wrinkling_stiffness(1.5 * np.pi, pressure, RADIUS, eps=eps) == 0.0


def test_vanishing_eps_reaches_fully_wrinkled_moment():
    pressure = PRESSURES[0]
    full = st.fully_wrinkled_moment(pressure, RADIUS)
    assert st.wrinkling_moment(np.pi, pressure, RADIUS, eps=1e-9) == pytest.approx(full, rel=1e-8)


def test_smaller_eps_rises_faster_and_ends_closer_to_full_moment():
    # Seed 003 Fig. 2(b): ordering of the curves by eps_crit at every angle.
    pressure = PRESSURES[1]
    full = st.fully_wrinkled_moment(pressure, RADIUS)
    theta = np.linspace(1e-4, np.pi, 2000)
    curves = np.array([st.wrinkling_moment(theta, pressure, RADIUS, eps=e) for e in sorted(EPS_VALUES)])
    assert np.all(np.diff(curves, axis=0) < 0.0)
    finals = curves[:, -1] / full
    assert np.all(np.diff(finals) < 0.0) and np.all(finals < 1.0)


@pytest.mark.parametrize("pressure", PRESSURES)
@pytest.mark.parametrize("eps", [None] + EPS_VALUES[1:])
def test_stiffness_matches_finite_differences(pressure, eps):
    # eps = 1e-3 and 0.0096 use the series branch above theta ~ 0.2 and ~ 2.6 rad. eps = 1e-7 is
    # left out: there M varies by < 1e-7 of itself past the onset, below what differences resolve.
    onset = st.wrinkling_onset_angle(pressure, eps=eps)
    theta = np.concatenate([np.linspace(0.05, 0.95, 7) * onset,
                            onset + np.geomspace(1e-3, np.pi - onset - 0.05, 40)])
    theta = np.concatenate([theta, -theta])
    # step: a small fraction of the distance to the nearest kink (onset, pi)
    kink_distance = np.minimum(np.abs(np.abs(theta) - onset), np.pi - np.abs(theta))
    h = 1e-2 * kink_distance

    def central(step):
        return (st.wrinkling_moment(theta + step, pressure, RADIUS, eps=eps)
                - st.wrinkling_moment(theta - step, pressure, RADIUS, eps=eps)) / (2 * step)

    richardson = (4 * central(h / 2) - central(h)) / 3  # O(h^4)
    analytic = st.wrinkling_stiffness(theta, pressure, RADIUS, eps=eps)
    np.testing.assert_allclose(analytic, richardson, rtol=1e-6)


def test_elastic_part_is_linear_spring_with_continuity_slope():
    pressure = PRESSURES[2]
    stiffness = st.wrinkling_elastic_stiffness(pressure, RADIUS)
    eps = st.eps_crit(pressure)
    assert stiffness == pytest.approx(np.pi * pressure * RADIUS**3 / (4 * np.arcsin(eps)), rel=1e-14)
    theta = np.linspace(-1, 1, 21) * st.wrinkling_onset_angle(pressure) * 0.999
    np.testing.assert_allclose(st.wrinkling_moment(theta, pressure, RADIUS),
                               st.linear_moment(theta, stiffness), rtol=1e-13, atol=0)


def test_linear_spring_and_damper():
    theta = np.array([-0.3, 0.0, 0.2])
    np.testing.assert_allclose(st.linear_moment(theta, 0.03), [-0.009, 0.0, 0.006], rtol=1e-15, atol=0)
    assert st.damping_moment(2.0, 1e-5) == pytest.approx(2e-5, rel=1e-15)


@pytest.mark.parametrize("call", [
    lambda: st.eps_crit(0.0),
    lambda: st.eps_crit(-5.0),
    lambda: st.eps_crit(1e6),  # beyond the fit: eps_crit >= 1
    lambda: st.fully_wrinkled_moment(6894.757, 0.0),
    lambda: st.wrinkling_moment(0.1, 6894.757, -0.01),
    lambda: st.wrinkling_moment(np.nan, 6894.757, 0.01),
    lambda: st.wrinkling_moment(0.1, 6894.757, 0.01, eps=1.0),
    lambda: st.wrinkling_stiffness(0.1, 6894.757, 0.01, eps=0.0),
    lambda: st.wrinkling_angle(1e-4, 0.01),  # below the onset, eq. 2 does not hold
    lambda: st.comer_levy_moment(3.5, 6894.757, 0.01),
    lambda: st.linear_moment(0.1, -1.0),
    lambda: st.damping_moment(0.1, np.inf),
])
def test_bad_parameters_raise_value_error(call):
    with pytest.raises(ConfigError):
        call()
    assert issubclass(ConfigError, ValueError)


# ------------------------------------------------------------------------------------- MLP moment model
MLP_ANGLES = np.linspace(-np.pi, np.pi, 721)


@pytest.mark.parametrize("seed", range(5))
def test_mlp_moment_is_odd_finite_and_monotone_for_any_weights(seed):
    """Random weights of both signs (and large biases): M(-theta) = -M(theta) to the last bit, M(0) = 0, and
    M never decreases, its sampled differences agreeing with ``slope`` (>= 0); the module docstring
    derives both properties."""
    generator = np.random.default_rng(seed)
    model = st.MlpMoment(generator.normal(0, 3, 10), generator.normal(0, 3, 10), generator.normal(0, 1, 10),
                         moment_scale=0.5)
    moments = model(MLP_ANGLES)
    assert np.all(np.isfinite(moments))
    np.testing.assert_array_equal(moments, -model(-MLP_ANGLES))
    assert model(0.0) == 0.0
    assert np.all(np.diff(moments) >= 0.0)
    assert np.all(model.slope(MLP_ANGLES) >= 0.0)
    np.testing.assert_array_equal(model.slope(MLP_ANGLES), model.slope(-MLP_ANGLES))
    midpoints = 0.5 * (MLP_ANGLES[1:] + MLP_ANGLES[:-1])
    np.testing.assert_allclose(np.diff(moments) / np.diff(MLP_ANGLES), model.slope(midpoints), rtol=1e-3, atol=1e-9)
    assert np.all(np.abs(moments) < model.saturation_moment)


def test_mlp_moment_closed_forms():
    """One unit without bias is s |a| tanh(|w| theta); the signs of w and a do not matter; a unit with a
    bias b is the odd soft step s |a| [tanh(|w| theta + b) + tanh(|w| theta - b)] / 2 (hand-derived)."""
    theta = np.array([-1.0, -0.1, 0.0, 0.3, 2.0])
    plain = st.MlpMoment([-2.0], [0.0], [-0.5], moment_scale=0.2)
    np.testing.assert_allclose(plain(theta), 0.2 * 0.5 * np.tanh(2.0 * theta), rtol=1e-15, atol=1e-17)
    np.testing.assert_allclose(plain.slope(theta), 0.2 * 0.5 * 2.0 / np.cosh(2.0 * theta) ** 2, rtol=1e-14)
    step = st.MlpMoment([3.0], [1.5], [1.0])
    np.testing.assert_allclose(step(theta), 0.5 * (np.tanh(3 * theta + 1.5) + np.tanh(3 * theta - 1.5)), rtol=1e-15)
    assert step.slope(0.0) < 0.5 * step.slope(0.5)  # flat start, steepest at its knee |b| / |w| = 0.5 rad
    assert step.saturation_moment == 1.0 and plain.saturation_moment == pytest.approx(0.1, rel=1e-15)


def test_mlp_weight_vector_round_trip_and_default_size():
    """The seed 003 network: 10 hidden units, 30 weights plus the scale; as_vector/from_vector round-trip;
    random() is reproducible from its seed and has zero biases."""
    model = st.MlpMoment.random(seed=4, moment_scale=0.3)
    assert model.hidden_units == st.MLP_HIDDEN_UNITS == 10 and model.as_vector().shape == (30,)
    assert np.all(model.hidden_bias == 0.0)
    again = st.MlpMoment.from_vector(model.as_vector(), moment_scale=0.3)
    np.testing.assert_array_equal(again(MLP_ANGLES), model(MLP_ANGLES))
    np.testing.assert_array_equal(st.MlpMoment.random(seed=4).as_vector(), model.as_vector())
    assert st.MlpMoment.random(seed=5).as_vector().tolist() != model.as_vector().tolist()


@pytest.mark.parametrize("call", [
    lambda: st.MlpMoment([1.0, 2.0], [0.0], [1.0, 1.0]),  # sizes differ
    lambda: st.MlpMoment([], [], []),
    lambda: st.MlpMoment([np.nan], [0.0], [1.0]),
    lambda: st.MlpMoment([1.0], [0.0], [1.0], moment_scale=0.0),
    lambda: st.MlpMoment.from_vector(np.ones(4)),
    lambda: st.MlpMoment.random(hidden_units=0),
    lambda: st.MlpMoment([1.0], [0.0], [1.0])(np.inf),
])
def test_bad_mlp_weights_raise_config_error(call):
    with pytest.raises(ConfigError):
        call()
