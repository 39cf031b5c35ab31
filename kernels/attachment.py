"""Particle-to-body attachment rows (seed 001, eq. 6): c = x_b + R(q_b) r - x_p, three rows."""

import warp as wp

from .entities import nonnegative, write_body_block, write_particle_block


@wp.kernel
def eval_attachment_rows(
    particle_q: wp.array(dtype=wp.vec3),
    body_q: wp.array(dtype=wp.transform),
    attachment_body: wp.array(dtype=int),
    attachment_particle: wp.array(dtype=int),
    attachment_local: wp.array(dtype=wp.vec3),
    attachment_compliance: wp.array(dtype=float),
    attachment_damping: wp.array(dtype=float),
    attachment_row: wp.array(dtype=int),
    inv_h: float,
    inv_h2: float,
    J_offsets: wp.array(dtype=int),
    J_values: wp.array(dtype=float),
    row_c: wp.array(dtype=float),
    row_compliance: wp.array(dtype=float),
    row_damping: wp.array(dtype=float),
):
    t = nonnegative(wp.tid())
    tf = body_q[nonnegative(attachment_body[t])]
    r = wp.quat_rotate(wp.transform_get_rotation(tf), attachment_local[t])
    c = wp.transform_get_translation(tf) + r - particle_q[nonnegative(attachment_particle[t])]
    row0 = nonnegative(attachment_row[t])
    for k in range(3):
        row = row0 + k
        nz = nonnegative(J_offsets[row])
        e = wp.vec3(0.0)
        e[k] = 1.0
        write_body_block(J_values, nz, e, wp.cross(r, e))
        write_particle_block(J_values, nz + 6, -e)
        row_c[row] = c[k]
        row_compliance[row] = attachment_compliance[t] * inv_h2
        row_damping[row] = attachment_damping[t] * inv_h
