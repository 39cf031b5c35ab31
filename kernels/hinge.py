"""Hinge joint rows between body a (or the static world, a = -1) and body b: five rows (planar: two).

Rows 0-2 make the two anchors coincide: c = (x_a + R_a r_a) - (x_b + R_b r_b).
Rows 3-4 align the axes: c = (R_a axis_a) . (R_b e_k) for the two unit vectors e_1, e_2 that are
perpendicular to b's hinge axis; d(a . e) = dtheta_a . (a x e) + dtheta_b . (e x a).
With a = -1 the anchor and axis of a are given in world coordinates and the rows touch only b.
In a planar model (hinge axis = plane normal z) only rows 0-1 exist: the others hold motion out
of the plane, which the integrator removes.
"""

import warp as wp

from .entities import nonnegative, write_body_block


@wp.func
def body_frame(body_q: wp.array(dtype=wp.transform), body: int):
    if body < 0:
        return wp.transform_identity()
    return body_q[nonnegative(body)]


@wp.kernel
def eval_hinge_rows(
    body_q: wp.array(dtype=wp.transform),
    hinge_body_a: wp.array(dtype=int),
    hinge_body_b: wp.array(dtype=int),
    hinge_anchor_a: wp.array(dtype=wp.vec3),
    hinge_anchor_b: wp.array(dtype=wp.vec3),
    hinge_axis_a: wp.array(dtype=wp.vec3),
    hinge_normal_b1: wp.array(dtype=wp.vec3),
    hinge_normal_b2: wp.array(dtype=wp.vec3),
    hinge_compliance: wp.array(dtype=float),
    hinge_row: wp.array(dtype=int),
    planar: int,
    inv_h2: float,
    J_offsets: wp.array(dtype=int),
    J_values: wp.array(dtype=float),
    row_c: wp.array(dtype=float),
    row_compliance: wp.array(dtype=float),
    row_damping: wp.array(dtype=float),
):
    t = nonnegative(wp.tid())
    # a may be -1 (the static world): tested before it indexes anything (body_frame).
    a = hinge_body_a[t]
    tf_a = body_frame(body_q, a)
    tf_b = body_q[nonnegative(hinge_body_b[t])]
    qa = wp.transform_get_rotation(tf_a)
    qb = wp.transform_get_rotation(tf_b)
    ra = wp.quat_rotate(qa, hinge_anchor_a[t])
    rb = wp.quat_rotate(qb, hinge_anchor_b[t])
    c = (wp.transform_get_translation(tf_a) + ra) - (wp.transform_get_translation(tf_b) + rb)
    axis = wp.quat_rotate(qa, hinge_axis_a[t])
    e1 = wp.quat_rotate(qb, hinge_normal_b1[t])
    e2 = wp.quat_rotate(qb, hinge_normal_b2[t])
    alpha = hinge_compliance[t] * inv_h2

    row_count = 5
    if planar != 0:
        row_count = 2
    row0 = nonnegative(hinge_row[t])
    for k in range(row_count):
        row = row0 + k
        nz = nonnegative(J_offsets[row])
        lin = wp.vec3(0.0)
        ang_a = wp.vec3(0.0)
        ang_b = wp.vec3(0.0)
        if k < 3:
            lin[k] = 1.0
            ang_a = wp.cross(ra, lin)
            ang_b = -wp.cross(rb, lin)
            row_c[row] = c[k]
        else:
            e = e1
            if k == 4:
                e = e2
            ang_a = wp.cross(axis, e)
            ang_b = wp.cross(e, axis)
            row_c[row] = wp.dot(axis, e)
        if a >= 0:
            write_body_block(J_values, nz, lin, ang_a)
            nz += 6
        if k < 3:
            write_body_block(J_values, nz, -lin, ang_b)
        else:
            write_body_block(J_values, nz, wp.vec3(0.0), ang_b)
        row_compliance[row] = alpha
        row_damping[row] = 0.0
