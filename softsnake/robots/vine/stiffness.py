"""Bending-moment models at a pin joint of an inflated vine-robot tube.

Two restoring-moment curves ``M(theta)`` are provided; the torque a pin applies to the bodies it
joins is ``-M(theta) - C theta_dot`` (seed 000 eq. 7, seed 003 eq. 3).

Linear spring (seed 000, Jitosho et al.)
    ``M = K theta`` with ``K`` [N m/rad]; the damper ``C theta_dot`` is a separate term.

Wrinkling model (seed 003 section III-A, Comer & Levy)
    Eq. 1 gives the moment of a thin-walled tube of radius ``R`` [m] at pressure ``P`` [Pa] as a
    function of the half-angle ``gamma_0`` of the wrinkled part of the cross-section::

        M = pi P R^3 (sin 2g + 2 pi - 2g) / (4 [sin g + (pi - g) cos g]),   g = gamma_0

    Eq. 2 ties ``gamma_0`` to the joint bending angle through the wrinkling criterion
    ``eps_crit = dl_crit / 2R``::

        gamma_0 = arccos(2 eps_crit / sin(theta/2) - 1)

    What follows from these two equations (derived here, used below):

    * Onset. ``gamma_0 = 0`` when ``sin(theta/2) = eps_crit``, i.e. at
      ``theta_w = 2 asin(eps_crit)``, which is where seed 003 says eq. 2 stops being valid.
      Eq. 1 at ``gamma_0 = 0`` gives ``M = pi P R^3 / 2``: wrinkling starts at half the fully
      wrinkled moment (the classical Comer-Levy result), so the moment does not start from zero.
    * Below the onset seed 003 assumes linear-elastic bending. We choose the slope so that the
      curve is continuous at the onset: ``k_w = (pi P R^3 / 2) / theta_w = pi P R^3 / (4 asin
      eps_crit)``. The slope itself jumps there: from ``k_w`` to
      ``(pi P R^3 / 2) cos(theta_w/2) / eps_crit``, about twice ``k_w`` for small ``eps_crit``.
    * Growth. Eq. 1 increases monotonically from ``pi P R^3 / 2`` at ``gamma_0 = 0`` to
      ``pi P R^3`` as ``gamma_0 -> pi`` (with ``u = pi - gamma_0``, ``M / pi P R^3 = 1 - u^2/10 +
      O(u^4)``). Eq. 2 increases ``gamma_0`` with ``theta`` only up to ``theta = pi``, where
      ``gamma_0 = arccos(2 eps_crit - 1)``. So the exact largest moment is
      ``M(pi) = pi P R^3 r(2 asin(sqrt(eps_crit)))`` (``r`` below), slightly below the fully
      wrinkled ``pi P R^3`` and closer to it the smaller ``eps_crit`` is (about
      ``1 - 0.4 eps_crit``). A smaller ``eps_crit`` also makes the moment rise faster at every
      angle: this is the behaviour of seed 003 Fig. 2(b).
    * Beyond ``|theta| = pi`` the tube is folded flat on itself; the moment is held at ``M(pi)``.
      ``dM/dtheta`` is zero at ``theta = pi`` from below, so this is continuous in the slope.
    * The moment is odd in ``theta`` (bending the other way wrinkles the other side).

    Numerics. Writing ``u = pi - gamma_0`` turns eq. 2 into ``u = 2 asin(sqrt(eps_crit /
    sin(theta/2)))`` (exact, since ``cos u = 1 - 2 eps_crit / sin(theta/2)``) and eq. 1 into
    ``M = pi P R^3 r(u)`` with ``r(u) = (2u - sin 2u) / (4 (sin u - u cos u))``. Its derivative is
    ``dM/dtheta = pi P R^3 h(u) eps_crit cos(theta/2) / sin(theta/2)^2`` with
    ``h(u) = (2u^2 + u sin 2u - 4 sin^2 u) / (4 (sin u - u cos u)^2)``; the ``sin gamma_0``
    factors of the chain rule cancel, so there is no 0 * infinity at the onset (``h(pi) = 1/2``).
    Both ``r`` and ``h`` cancel catastrophically for small ``u`` (nearly fully wrinkled, reached
    only for tiny ``eps_crit``), so below ``u = 0.2`` their Taylor series to ``u^8`` are used
    (truncation below 2e-14 there; the direct forms are good to 2e-12 above).

    Notes for the Warp port: all of this is branch-light scalar code (``wp.func`` of theta,
    eps_crit, P, R); keep the ``u`` form and the series switch, but in float32 the direct forms
    lose digits already near ``u = 0.5``, so switch to the series there (truncation about 2e-10).

The wrinkling criterion depends on pressure through the cubic fit of seed 003's authors
(Fig. 3(b)), with ``s = (P - 6167) / 5836`` and P in Pa. The cubic increases monotonically in P
and is positive for all P > 0.

Small MLP (seed 003 sec. IV-C: "a two-layer network with 10 hidden units and a hyperbolic tangent
activation", the learned model it compares with the linear and the wrinkling models)
    :class:`MlpMoment` is that network, 1 input (the angle) - ``H`` tanh units (10 by default) - 1
    output, made odd and monotone by construction. With hidden weights ``w_j`` [1/rad], biases
    ``b_j``, output weights ``a_j`` and a moment scale ``s`` [N m]::

        f(theta) = sum_j |a_j| tanh(|w_j| theta + b_j)
        M(theta) = s (f(theta) - f(-theta)) / 2
                 = s sum_j |a_j| [tanh(|w_j| theta + b_j) + tanh(|w_j| theta - b_j)] / 2

    * Odd: ``M(-theta) = -M(theta)`` exactly (antisymmetrised; the output bias of a plain
      two-layer network cancels, so there is none), ``M(0) = 0``.
    * Monotone for every weight vector: ``dM/dtheta = s sum_j |a_j| |w_j| [sech^2(|w_j| theta +
      b_j) + sech^2(|w_j| theta - b_j)] / 2 >= 0``, strictly positive unless every ``|a_j w_j|``
      is 0. The absolute values keep the weights free for an optimiser (sign flips change
      nothing); a restoring moment that decreases with the angle would not be a spring, and the
      engine's sampled moment curves must increase strictly.
    * Shape: each unit is an odd soft step of height ``s |a_j|`` with its knee near
      ``|theta| = |b_j| / |w_j|`` (a plain ``tanh(|w_j| theta)`` for ``b_j = 0``), so the network
      can take the linear start, the onset and the plateau of the wrinkling model. It saturates at
      ``s sum_j |a_j|``.
    * Parameters: ``3 H`` weights (31 with the scale); :meth:`MlpMoment.as_vector` and
      :meth:`MlpMoment.from_vector` flatten them as ``[w, b, a]`` for an optimiser.

    ``robot.mlp_moment_curve`` samples it for the engine's angular springs, as the wrinkling model.
"""

from dataclasses import dataclass

import numpy as np

from softsnake.errors import ConfigError
from softsnake.validation import finite_array, non_negative_array, positive_array, positive_number

MLP_HIDDEN_UNITS = 10
"""Hidden tanh units of the MLP moment model (seed 003 sec. IV-C)."""

EPS_CRIT_PRESSURE_MEAN = 6167.0
"""Centring of the eps_crit cubic fit [Pa]."""

EPS_CRIT_PRESSURE_SCALE = 5836.0
"""Scaling of the eps_crit cubic fit [Pa]."""

EPS_CRIT_COEFFICIENTS = (0.002077863400343, 0.009091543113141, 0.014512785114617, 0.007656015122415)
"""Cubic coefficients of eps_crit(s), highest power first (dimensionless)."""


def eps_crit_pressure(eps):
    """The pressure [Pa] at which the eps_crit cubic reaches ``eps`` (in (0, 1]): its inverse on the branch that
    rises from the cubic's centre (``EPS_CRIT_PRESSURE_MEAN``, where eps_crit = 0.0077) to ``EPS_CRIT_PRESSURE_LIMIT``.
    """
    eps = float(eps)
    if not 0.0 < eps <= 1.0:
        raise ConfigError(f"eps must lie in (0, 1], got {eps!r}")
    roots = np.roots(np.array(EPS_CRIT_COEFFICIENTS) - np.array([0.0, 0.0, 0.0, eps]))
    rising = [r.real for r in roots if abs(r.imag) < 1e-9 and r.real >= 0.0]
    if not rising:
        raise ConfigError(f"eps {eps!r} lies below the cubic's value at its centre")
    return EPS_CRIT_PRESSURE_MEAN + EPS_CRIT_PRESSURE_SCALE * min(rising)


EPS_CRIT_PRESSURE_LIMIT = eps_crit_pressure(1.0)
"""Highest pressure of the wrinkling model [Pa] (about 43.2 kPa): there the cubic eps_crit reaches 1 and the tube
would wrinkle only when folded flat; above it ``eps_crit`` refuses the pressure."""

_SERIES_BELOW = 0.2
"""Below this u = pi - gamma_0 [rad] the Taylor series replace the cancelling direct forms."""

# Taylor coefficients in u^2 of r(u) and h(u) (exact rationals, from a series expansion).
_R_SERIES = (1.0, -1.0 / 10.0, 23.0 / 4200.0, -11.0 / 126000.0, 1097.0 / 388080000.0)
_H_SERIES = (1.0 / 5.0, 2.0 / 175.0, 2.0 / 2625.0, 148.0 / 3031875.0, 118.0 / 39414375.0)


def _require_eps(eps):
    eps = np.asarray(eps, dtype=float)
    if not np.all(np.isfinite(eps)) or np.any(eps <= 0.0) or np.any(eps >= 1.0):
        raise ConfigError(f"eps_crit must lie in (0, 1), got {eps.tolist()}")
    return eps


def _polynomial(coefficients, x):
    result = np.zeros_like(x)
    for c in coefficients:
        result = result * x + c
    return result


def _ratio_moment(u):
    """r(u) = M / (pi P R^3) at u = pi - gamma_0 [rad] (dimensionless)."""
    small = u < _SERIES_BELOW
    safe = np.where(small, 1.0, u)
    direct = (2.0 * safe - np.sin(2.0 * safe)) / (4.0 * (np.sin(safe) - safe * np.cos(safe)))
    return np.where(small, _polynomial(_R_SERIES[::-1], u * u), direct)


def _ratio_slope(u):
    """h(u), the factor of dM/dtheta in the module docstring (dimensionless)."""
    small = u < _SERIES_BELOW
    safe = np.where(small, 1.0, u)
    denominator = np.sin(safe) - safe * np.cos(safe)
    numerator = 2.0 * safe * safe + safe * np.sin(2.0 * safe) - 4.0 * np.sin(safe) ** 2
    direct = numerator / (4.0 * denominator * denominator)
    return np.where(small, _polynomial(_H_SERIES[::-1], u * u), direct)


def _result(value):
    """Return a numpy scalar for scalar inputs and an array otherwise."""
    return value[()] if np.ndim(value) == 0 else value


def linear_moment(theta, stiffness):
    """Restoring moment of the linear torsional spring, ``M = K theta`` [N m].

    theta: joint bending angle [rad] (scalar or array)
    stiffness: torsional stiffness K [N m/rad], >= 0
    """
    theta = finite_array("theta", theta)
    stiffness = non_negative_array("stiffness", stiffness)
    return _result(stiffness * theta)


def damping_moment(theta_rate, damping):
    """Moment of the linear torsional damper, ``C theta_dot`` [N m].

    theta_rate: joint bending rate [rad/s] (scalar or array)
    damping: torsional damping C [N m s/rad], >= 0
    """
    theta_rate = finite_array("theta_rate", theta_rate)
    damping = non_negative_array("damping", damping)
    return _result(damping * theta_rate)


def eps_crit(pressure):
    """Wrinkling criterion eps_crit = dl_crit / 2R from seed 003's cubic fit (dimensionless).

    pressure: internal pressure P [Pa], > 0
    """
    pressure = positive_array("pressure", pressure)
    s = (pressure - EPS_CRIT_PRESSURE_MEAN) / EPS_CRIT_PRESSURE_SCALE
    eps = _polynomial(EPS_CRIT_COEFFICIENTS, s)
    if np.any(eps >= 1.0):
        raise ConfigError(
            f"pressure {pressure.tolist()} Pa is beyond the eps_crit fit (eps_crit >= 1)")
    return _result(eps)


def fully_wrinkled_moment(pressure, radius):
    """Fully wrinkled (collapse) moment ``pi P R^3`` of the tube [N m].

    pressure: internal pressure P [Pa], > 0
    radius: tube radius R [m], > 0
    """
    pressure = positive_array("pressure", pressure)
    radius = positive_array("radius", radius)
    return _result(np.pi * pressure * radius**3)


def comer_levy_moment(gamma0, pressure, radius):
    """Seed 003 eq. 1: bending moment at wrinkling half-angle gamma_0 [N m].

    gamma0: half-angle of the wrinkled part of the cross-section [rad], in [0, pi]
    pressure: internal pressure P [Pa], > 0
    radius: tube radius R [m], > 0
    """
    gamma0 = finite_array("gamma0", gamma0)
    if np.any(gamma0 < 0.0) or np.any(gamma0 > np.pi):
        raise ConfigError(f"gamma0 must lie in [0, pi], got {gamma0.tolist()}")
    full = fully_wrinkled_moment(pressure, radius)
    return _result(full * _ratio_moment(np.pi - gamma0))


def wrinkling_angle(theta, eps):
    """Seed 003 eq. 2: wrinkling half-angle gamma_0 [rad] at bending angle theta.

    theta: joint bending angle [rad]; |theta| must be in [2 asin(eps), pi], where eq. 2 holds
    eps: wrinkling criterion eps_crit (dimensionless), in (0, 1)
    """
    theta = np.abs(finite_array("theta", theta))
    eps = _require_eps(eps)
    onset = 2.0 * np.arcsin(eps)
    if np.any(theta < onset) or np.any(theta > np.pi):
        raise ConfigError(
            f"eq. 2 needs 2 asin(eps_crit) <= |theta| <= pi, got theta {theta.tolist()} rad")
    u = 2.0 * np.arcsin(np.sqrt(np.minimum(eps / np.sin(0.5 * theta), 1.0)))
    return _result(np.pi - u)


def wrinkling_onset_angle(pressure, *, eps=None):
    """Bending angle where wrinkling starts, ``2 asin(eps_crit)`` [rad].

    pressure: internal pressure P [Pa], > 0 (sets eps_crit through the cubic fit)
    eps: wrinkling criterion to use instead of the fit (dimensionless), in (0, 1)
    """
    eps = _require_eps(eps_crit(pressure) if eps is None else eps)
    return _result(2.0 * np.arcsin(eps))


def wrinkling_elastic_stiffness(pressure, radius, *, eps=None):
    """Slope of the linear-elastic part below the onset, ``pi P R^3 / (4 asin eps)`` [N m/rad].

    Chosen so that the moment is continuous at the wrinkling onset.
    pressure: internal pressure P [Pa], > 0
    radius: tube radius R [m], > 0
    eps: wrinkling criterion to use instead of the fit (dimensionless), in (0, 1)
    """
    eps = _require_eps(eps_crit(pressure) if eps is None else eps)
    return _result(0.5 * fully_wrinkled_moment(pressure, radius) / (2.0 * np.arcsin(eps)))


def _wrinkling_terms(theta, pressure, radius, eps):
    """Shared set-up: |theta| clamped to pi, eps, onset, full moment, wrinkled mask, u."""
    theta = finite_array("theta", theta)
    eps = _require_eps(eps_crit(pressure) if eps is None else eps)
    full = np.asarray(fully_wrinkled_moment(pressure, radius))
    magnitude = np.minimum(np.abs(theta), np.pi)
    onset = 2.0 * np.arcsin(eps)
    wrinkled = magnitude >= onset
    half_sin = np.sin(0.5 * np.maximum(magnitude, onset))
    u = 2.0 * np.arcsin(np.sqrt(np.minimum(eps / half_sin, 1.0)))
    return theta, magnitude, eps, onset, full, wrinkled, half_sin, u


def wrinkling_moment(theta, pressure, radius, *, eps=None):
    """Restoring moment of the wrinkling model (seed 003 eqs. 1-2) [N m], odd in theta.

    Linear-elastic below the onset 2 asin(eps_crit), continuous there; held at its theta = pi
    value beyond |theta| = pi (see the module docstring).
    theta: joint bending angle [rad] (scalar or array)
    pressure: internal pressure P [Pa], > 0
    radius: tube radius R [m], > 0
    eps: wrinkling criterion to use instead of the cubic fit (dimensionless), in (0, 1)
    """
    theta, magnitude, eps, onset, full, wrinkled, _, u = _wrinkling_terms(theta, pressure, radius, eps)
    elastic = 0.5 * full * magnitude / onset
    moment = np.where(wrinkled, full * _ratio_moment(u), elastic)
    return _result(np.sign(theta) * moment)


def wrinkling_stiffness(theta, pressure, radius, *, eps=None):
    """Tangent stiffness dM/dtheta of :func:`wrinkling_moment` [N m/rad], even in theta.

    At the onset angle itself the wrinkled-side slope is returned; beyond |theta| = pi it is 0.
    theta: joint bending angle [rad] (scalar or array)
    pressure: internal pressure P [Pa], > 0
    radius: tube radius R [m], > 0
    eps: wrinkling criterion to use instead of the cubic fit (dimensionless), in (0, 1)
    """
    theta, magnitude, eps, onset, full, wrinkled, half_sin, u = _wrinkling_terms(
        theta, pressure, radius, eps)
    slope = full * _ratio_slope(u) * eps * np.cos(0.5 * magnitude) / half_sin**2
    slope = np.where(np.abs(theta) > np.pi, 0.0, slope)
    return _result(np.where(wrinkled, slope, 0.5 * full / onset))


@dataclass(frozen=True, eq=False)
class MlpMoment:
    """The small MLP restoring moment of seed 003 (module docstring), odd and monotone in the angle.

    Call it with an angle (scalar or array) [rad] to get the moment [N m]; ``slope`` gives dM/dtheta.
    hidden_weight: (H,) input weights w_j of the hidden tanh units [1/rad] (their signs are ignored)
    hidden_bias: (H,) biases b_j of the hidden units (dimensionless)
    output_weight: (H,) output weights a_j (dimensionless; their signs are ignored)
    moment_scale: s, the moment of a unit output [N m], > 0
    """

    hidden_weight: np.ndarray
    hidden_bias: np.ndarray
    output_weight: np.ndarray
    moment_scale: float = 1.0

    def __post_init__(self):
        arrays = {}
        for name in ("hidden_weight", "hidden_bias", "output_weight"):
            array = finite_array(name, getattr(self, name)).copy()
            if array.ndim != 1 or array.size == 0:
                raise ConfigError(f"{name} must be a non-empty 1-D array, got shape {array.shape}")
            array.flags.writeable = False
            arrays[name] = array
        sizes = {array.size for array in arrays.values()}
        if len(sizes) != 1:
            raise ConfigError(f"MLP weights need one size per hidden unit, got sizes "
                              f"{[array.size for array in arrays.values()]}")
        for name, array in arrays.items():
            object.__setattr__(self, name, array)
        object.__setattr__(self, "moment_scale", positive_number("moment_scale", self.moment_scale, unit="N m"))

    @property
    def hidden_units(self):
        """Number of hidden units H [-]."""
        return self.hidden_weight.size

    @property
    def saturation_moment(self):
        """The moment as theta -> infinity, ``s sum_j |a_j|`` [N m]."""
        return self.moment_scale * float(np.abs(self.output_weight).sum())

    def _units(self, theta):
        theta = finite_array("theta", theta)
        scaled = np.abs(self.hidden_weight) * theta[..., None]
        return theta, scaled + self.hidden_bias, scaled - self.hidden_bias

    def __call__(self, theta):
        """Restoring moment M(theta) [N m] at bending angle ``theta`` [rad] (scalar or array)."""
        _, plus, minus = self._units(theta)
        units = 0.5 * (np.tanh(plus) + np.tanh(minus))
        return _result(self.moment_scale * (units @ np.abs(self.output_weight)))

    def slope(self, theta):
        """Tangent stiffness dM/dtheta [N m/rad] at ``theta`` [rad], >= 0 and even in theta."""
        _, plus, minus = self._units(theta)
        units = 0.5 * (1.0 / np.cosh(plus) ** 2 + 1.0 / np.cosh(minus) ** 2)
        return _result(self.moment_scale * (units @ (np.abs(self.output_weight) * np.abs(self.hidden_weight))))

    def weight_jacobian(self, theta):
        """dM/d(weights) at angles ``theta`` (n,) [rad]: (n, 3 H) [N m per weight], in the order of
        ``as_vector`` (w, b, a). The weights enter through their magnitudes |w| and |a|, so these
        derivatives carry their signs."""
        theta, plus, minus = self._units(theta)
        theta = np.atleast_1d(theta)
        plus, minus = np.atleast_2d(plus), np.atleast_2d(minus)
        s, a, w = self.moment_scale, self.output_weight, self.hidden_weight
        sech_plus, sech_minus = 1.0 / np.cosh(plus) ** 2, 1.0 / np.cosh(minus) ** 2
        d_w = s * np.abs(a) * 0.5 * (sech_plus + sech_minus) * theta[:, None] * np.sign(w)
        d_b = s * np.abs(a) * 0.5 * (sech_plus - sech_minus)
        d_a = s * np.sign(a) * 0.5 * (np.tanh(plus) + np.tanh(minus))
        return np.concatenate([d_w, d_b, d_a], axis=1)

    def as_vector(self):
        """The weights as one (3 H,) vector ``[w, b, a]`` (the scale is not in it)."""
        return np.concatenate([self.hidden_weight, self.hidden_bias, self.output_weight])

    @classmethod
    def from_vector(cls, vector, moment_scale=1.0):
        """The model of a (3 H,) weight vector ``[w, b, a]`` (see ``as_vector``) and a scale [N m]."""
        vector = finite_array("MLP weight vector", vector)
        if vector.ndim != 1 or vector.size == 0 or vector.size % 3:
            raise ConfigError(f"an MLP weight vector has 3 entries per hidden unit, got shape {vector.shape}")
        hidden_weight, hidden_bias, output_weight = np.split(vector, 3)
        return cls(hidden_weight, hidden_bias, output_weight, moment_scale)

    @classmethod
    def random(cls, seed=0, *, hidden_units=MLP_HIDDEN_UNITS, moment_scale=1.0):
        """Initial weights for a fit: Xavier-normal weights of both layers (standard deviation
        sqrt(2 / (1 + H))), zero biases; reproducible from ``seed``."""
        hidden_units = int(hidden_units)
        if hidden_units < 1:
            raise ConfigError(f"an MLP needs at least one hidden unit, got {hidden_units}")
        generator = np.random.default_rng(seed)
        deviation = np.sqrt(2.0 / (1.0 + hidden_units))
        return cls(generator.normal(0.0, deviation, hidden_units), np.zeros(hidden_units),
                   generator.normal(0.0, deviation, hidden_units), moment_scale)
