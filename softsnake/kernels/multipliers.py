"""Updates of the constraint multipliers lambda: accumulation after each Newton step, and the warm
start (carrying a substep's multipliers into the next).
"""

import warp as wp

from .entities import nonnegative


@wp.kernel
def accumulate_multipliers(lam: wp.array(dtype=float), dlam: wp.array(dtype=float)):
    i = nonnegative(wp.tid())
    lam[i] = lam[i] + dlam[i]


@wp.kernel
def scale_multipliers(lam: wp.array(dtype=float), factor: float):
    i = nonnegative(wp.tid())
    lam[i] = lam[i] * factor


@wp.kernel
def flag_pressure_switches(
    pressure: wp.array(dtype=float),
    pressure_previous: wp.array(dtype=float),
    channel_world: wp.array(dtype=int),
    world_cold: wp.array(dtype=int),
):
    """Mark the worlds where a pressure channel switched its actuation rows on or off (p > 0 drives
    them) since the last step, and remember the pressures."""
    c = wp.tid()
    if (pressure[c] > 0.0) != (pressure_previous[c] > 0.0):
        wp.atomic_max(world_cold, channel_world[c], 1)
    pressure_previous[c] = pressure[c]


@wp.kernel
def drop_cold_multipliers(lam: wp.array(dtype=float), row_world: wp.array(dtype=int), world_cold: wp.array(dtype=int)):
    """lambda <- 0 in the worlds marked cold; the others keep theirs for the warm start."""
    i = nonnegative(wp.tid())
    if world_cold[nonnegative(row_world[i])] != 0:
        lam[i] = 0.0
