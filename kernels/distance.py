"""Distance rows between two particles: c = |x_i - x_j| - r s.

s = 1 for structural rows. For actuation rows (a pressure channel is set) s = eps(p) = 1 + p / Y
(seed 001, eqs. 3-4) with p the channel's pressure; an actuation row whose chamber is not
pressurised (p <= 0) is not driven at all, so the passive side of a bending link is free.
"""

import warp as wp

from .entities import nonnegative, write_particle_block
from .rows import write_neutral_row


@wp.kernel
def eval_distance_rows(
    particle_q: wp.array(dtype=wp.vec3),
    distance_particles: wp.array(dtype=wp.vec2i),
    distance_rest_length: wp.array(dtype=float),
    distance_compliance: wp.array(dtype=float),
    distance_damping: wp.array(dtype=float),
    distance_pressure_channel: wp.array(dtype=int),
    distance_youngs_modulus: wp.array(dtype=float),
    distance_row: wp.array(dtype=int),
    pressure: wp.array(dtype=float),
    inv_h: float,
    inv_h2: float,
    J_offsets: wp.array(dtype=int),
    J_values: wp.array(dtype=float),
    row_c: wp.array(dtype=float),
    row_compliance: wp.array(dtype=float),
    row_damping: wp.array(dtype=float),
):
    tid = nonnegative(wp.tid())
    row = nonnegative(distance_row[tid])
    nz = nonnegative(J_offsets[row])
    ij = distance_particles[tid]
    d = particle_q[nonnegative(ij[0])] - particle_q[nonnegative(ij[1])]
    length = wp.length(d)

    scale = float(1.0)
    # channel is -1 for a structural row: tested before it indexes the pressures.
    channel = distance_pressure_channel[tid]
    if channel >= 0:
        p = pressure[nonnegative(channel)]
        if p <= 0.0:
            write_particle_block(J_values, nz, wp.vec3(0.0))
            write_particle_block(J_values, nz + 3, wp.vec3(0.0))
            write_neutral_row(row, row_c, row_compliance, row_damping)
            return
        scale = 1.0 + p / distance_youngs_modulus[tid]

    n = wp.vec3(0.0)
    if length > 0.0:
        n = d / length
    write_particle_block(J_values, nz, n)
    write_particle_block(J_values, nz + 3, -n)
    row_c[row] = length - distance_rest_length[tid] * scale
    row_compliance[row] = distance_compliance[tid] * inv_h2
    row_damping[row] = distance_damping[tid] * inv_h
