"""Chamber pressure latency of pneumatic actuators (seed 001, section V-A, eqs. 10-12).

Shared by the robots: the soft snake's link chambers and the vine's steering muscles (antagonistic
chamber pairs both) go through this model.

The valves cannot deliver a commanded pressure at once. The paper updates each chamber once per
simulation step h0 = 1/120 s with the map

    inflating:  p += p_s * ((a - p) / p_s)**2 * k_i          (eqs. 11-12)
    deflating:  p -= min(p * k_d, T_p)                       (eq. 12)

with k_i = k_d = 0.23 and T_p = 0.68 fitted to step responses (Fig. 6).

Units of T_p. Eq. 12 subtracts T_p from a pressure, so T_p is a pressure per reference step, and
the paper's pressures are in psi. We read T_p = 0.68 psi per h0 step (4688 Pa). This is the only
reading under which the text holds: venting is flow-limited ("close to linear") above
T_p / k_d = 2.96 psi and proportional to the pressure below it, and an 8 psi chamber empties in
about 0.2 s, fast enough for the paper's 2 Hz gait. Read as 0.68 Pa, venting 8 psi would take
11 minutes; read as a fraction of the supply (6.8 psi at 10 psi supply), p * k_d would stay below
T_p for every pressure the link survives, so the linear regime would never occur.

Supply pressure p_s. The paper does not state it. We assume 10 psi: the highest pressure the
paper applies to a link (Figs. 4-5), above the 8 psi gait amplitude.

Independence from the time step. The map's constants hold at h0 only. We turn the map into an
ODE in the number of reference steps n = t / h0 and integrate that ODE exactly over any dt, so a
pressure curve is the same for any controller step (for a command held over each step). Exact
integration was chosen over fixed sub-steps of h0 because it needs no remainder handling when dt
is not a multiple of h0 and gives a smooth curve, not a staircase, when dt < h0.

- Deflation: in its proportional regime the map p_{n+1} = (1 - k_d) p_n is exactly the ODE
  dp/dn = -lam p with lam = -ln(1 - k_d) sampled at whole steps, and in its linear regime
  p_{n+1} = p_n - T_p is exactly dp/dn = -T_p. We integrate dp/dn = -min(lam p, T_p), whose rate
  is continuous at the switch p = T_p / lam (2.60 psi; the map switches at T_p / k_d = 2.96 psi).
- Inflation: with e = (a - p) / p_s the map is e_{n+1} = e_n - k e_n**2. The ODE with the
  per-step change as its rate, de/dn = -k e**2, matches it only to first order (one step from rest
  to full supply gives 0.187 p_s instead of 0.23 p_s). We integrate the modified equation
  de/dn = -k e**2 (1 + k e), whose one-step flow matches the map to second order in k e. With
  u = 1 / e it integrates to u - k ln(u + k) = u_0 - k ln(u_0 + k) + k n, solved by Newton's method.

tests/test_pressure.py compares the model at dt = h0 with the literal map and states the
difference.

Antagonism. Each link has chambers 0 and 1 driven by antagonistic valves: a signed link command a
[Pa] > 0 drives chamber 1 toward a and vents chamber 0 toward 0; a < 0 does the opposite. A
chamber above its target vents (deflation law) and stops at the target, so the gait's falling
half-waves lower an inflated chamber to the commanded pressure instead of emptying it.
"""

import numpy as np

from softsnake.errors import ConfigError
from softsnake.units import psi_to_pa
from softsnake.validation import positive_number

SUPPLY_PRESSURE_DEFAULT = psi_to_pa(10.0)
"""Assumed supply pressure p_s [Pa] (10 psi; not stated in the paper)."""

K_INFLATE_DEFAULT = 0.23
"""Inflation gain k_i of eq. 12 [-] (fitted in the paper, section VI-B)."""

K_DEFLATE_DEFAULT = 0.23
"""Deflation gain k_d of eq. 12 [-] (fitted in the paper, section VI-B)."""

DEFLATE_THRESHOLD_DEFAULT = psi_to_pa(0.68)
"""Deflation threshold T_p of eq. 12 [Pa per reference step] (0.68 psi per step)."""

REFERENCE_DT_DEFAULT = 1.0 / 120.0
"""Step h0 at which the paper's gains hold [s] (h = 0.0083 s, section VI)."""

_NEWTON_ITERATIONS = 4
"""Newton steps for the inflation solution; the slope u / (u + k) lies in [0.8, 1), so three
already reach round-off from the one-fixed-point-step start."""

_GAP_NEGLIGIBLE = 1e-15
"""Pressure gaps below this fraction of the supply are closed at once: they are below the
round-off of a pressure near the supply, and 1 / gap would overflow in the inflation solution."""


def chamber_targets(command):
    """Target pressures of the two chambers of each link.

    command: signed link command [Pa], any shape; > 0 inflates chamber 1, < 0 chamber 0.
    Returns an array of shape command.shape + (2,): (chamber 0, chamber 1) targets [Pa], the
    inactive chamber's target being 0.
    """
    command = np.asarray(command, dtype=float)
    return np.stack([np.maximum(-command, 0.0), np.maximum(command, 0.0)], axis=-1)


def _inflate(pressure, target, steps, supply_pressure, k_inflate):
    """Exact solution of the modified inflation ODE after `steps` reference steps [Pa]."""
    u_start = supply_pressure / (target - pressure)
    rhs = u_start - k_inflate * np.log(u_start + k_inflate) + k_inflate * steps
    u = rhs + k_inflate * np.log(rhs + k_inflate)
    for _ in range(_NEWTON_ITERATIONS):
        residual = u - k_inflate * np.log(u + k_inflate) - rhs
        u = u - residual * (u + k_inflate) / u
    return target - supply_pressure / u


def _deflate(pressure, target, steps, k_deflate, deflate_threshold):
    """Exact solution of dp/dn = -min(lam p, T_p) after `steps` reference steps, stopped at the
    target [Pa]; stopping is exact because the free solution decreases monotonically."""
    rate = -np.log1p(-k_deflate)
    switch_pressure = deflate_threshold / rate
    linear_steps = np.clip((pressure - switch_pressure) / deflate_threshold, 0.0, steps)
    free = (pressure - deflate_threshold * linear_steps) * np.exp(-rate * (steps - linear_steps))
    return np.maximum(free, target)


class PressureLatency:
    """Chamber pressures of a batch of snake links under the paper's latency model.

    shape: batch shape of the links, e.g. (snake_count, link_count).
    supply_pressure: supply pressure p_s [Pa]; commands may not exceed it.
    k_inflate: inflation gain k_i [-], in (0, 1].
    k_deflate: deflation gain k_d [-], in (0, 1) (k_d = 1 would vent to zero in one step, which has
        no exponential rate).
    deflate_threshold: deflation threshold T_p [Pa per reference step].
    reference_dt: step h0 at which the gains hold [s].
    enabled: False switches latency off: every step sets the pressures to their targets.
    """

    def __init__(
        self,
        shape,
        *,
        supply_pressure=SUPPLY_PRESSURE_DEFAULT,
        k_inflate=K_INFLATE_DEFAULT,
        k_deflate=K_DEFLATE_DEFAULT,
        deflate_threshold=DEFLATE_THRESHOLD_DEFAULT,
        reference_dt=REFERENCE_DT_DEFAULT,
        enabled=True,
    ):
        shape = (shape,) if np.isscalar(shape) else tuple(shape)
        if not all(isinstance(n, (int, np.integer)) and n > 0 for n in shape):
            raise ConfigError(f"shape must hold positive integers, got {shape}")
        self.shape = tuple(int(n) for n in shape)
        self.supply_pressure = positive_number("supply_pressure", supply_pressure)
        self.k_inflate = positive_number("k_inflate", k_inflate)
        if self.k_inflate > 1.0:
            raise ConfigError(f"k_inflate must lie in (0, 1], got {self.k_inflate}")
        self.k_deflate = positive_number("k_deflate", k_deflate)
        if self.k_deflate >= 1.0:
            raise ConfigError(f"k_deflate must lie in (0, 1), got {self.k_deflate}")
        self.deflate_threshold = positive_number("deflate_threshold", deflate_threshold)
        self.reference_dt = positive_number("reference_dt", reference_dt)
        self.enabled = bool(enabled)
        self._pressure = np.zeros(self.shape + (2,))

    @property
    def pressure(self):
        """Chamber pressures, shape shape + (2,), (chamber 0, chamber 1) [Pa] (a copy)."""
        return self._pressure.copy()

    @property
    def differential(self):
        """Chamber 1 minus chamber 0 pressure, shape `shape`, signed like the command [Pa]."""
        return self._pressure[..., 1] - self._pressure[..., 0]

    def reset(self, *, pressure=None):
        """Set all chambers to 0, or to `pressure` (shape shape + (2,), in [0, p_s]) [Pa]."""
        if pressure is None:
            self._pressure = np.zeros(self.shape + (2,))
            return
        pressure = np.asarray(pressure, dtype=float)
        if pressure.shape != self.shape + (2,):
            raise ConfigError(
                f"pressure shape {pressure.shape} does not match {self.shape + (2,)}"
            )
        if not np.all(np.isfinite(pressure)) or np.any(pressure < 0.0):
            raise ConfigError("pressure must be finite and non-negative")
        if np.any(pressure > self.supply_pressure):
            raise ConfigError("pressure exceeds the supply pressure")
        self._pressure = pressure.copy()

    def _targets(self, command):
        command = np.asarray(command, dtype=float)
        try:
            command = np.broadcast_to(command, self.shape)
        except ValueError:
            raise ConfigError(
                f"command shape {command.shape} does not match the model shape {self.shape}"
            ) from None
        if not np.all(np.isfinite(command)):
            raise ConfigError("command must be finite (got NaN or infinity)")
        if np.any(np.abs(command) > self.supply_pressure):
            raise ConfigError(
                f"command magnitude {np.abs(command).max():.6g} Pa exceeds the supply pressure "
                f"{self.supply_pressure:.6g} Pa"
            )
        return chamber_targets(command)

    def step(self, command, dt):
        """Advance the chambers by dt [s] under a signed link command [Pa] held over the step.

        command: broadcastable to `shape`, |command| <= supply pressure.
        Returns the new chamber pressures, shape shape + (2,) [Pa].
        """
        target = self._targets(command)
        steps = positive_number("dt", dt) / self.reference_dt
        if not self.enabled:
            self._pressure = target
            return self.pressure
        pressure = self._pressure
        gap = target - pressure
        rising = gap > _GAP_NEGLIGIBLE * self.supply_pressure
        falling = pressure > target
        closed = ~rising & ~falling
        new = pressure.copy()
        new[closed] = target[closed]
        new[rising] = _inflate(
            pressure[rising], target[rising], steps, self.supply_pressure, self.k_inflate
        )
        new[falling] = _deflate(
            pressure[falling], target[falling], steps, self.k_deflate, self.deflate_threshold
        )
        self._pressure = new
        return self.pressure

    def step_reference_map(self, command):
        """Advance by one reference step h0 with the paper's literal map (eqs. 11-12).

        Kept to compare the exact-ODE model against the published discrete update; venting stops
        at the target as in `step`. Returns the new chamber pressures [Pa].
        """
        target = self._targets(command)
        if not self.enabled:
            self._pressure = target
            return self.pressure
        pressure = self._pressure
        relative_gap = (target - pressure) / self.supply_pressure
        inflated = pressure + self.supply_pressure * relative_gap**2 * self.k_inflate
        vented = pressure - np.minimum(pressure * self.k_deflate, self.deflate_threshold)
        self._pressure = np.where(
            pressure < target, inflated, np.where(pressure > target, np.maximum(vented, target), pressure)
        )
        return self.pressure
