"""Angular spring rows: one row per joint, c = theta_rel - theta_target about the joint axis.

theta_rel is the twist of body b relative to body a (or the static world, a = -1) about a's
axis, measured from the rest relative orientation q0: q_rel = (q_a q0)^-1 q_b.

A linear spring of stiffness K [N m/rad] is the compliant row c + lambda / (K h^2) = 0. A
nonlinear moment curve M(theta) (piecewise linear through user samples) is linearised about
the current angle: with tangent stiffness k = M'(theta) the row c = M(theta) / k, compliance
1 / (k h^2) gives the moment M(theta) at convergence. Damping C [N m s/rad] enters as the ratio
gamma = C / (k h) of the common row machinery (rows.prepare_rows).
"""

import warp as wp

from .entities import nonnegative, write_body_block
from .hinge import body_frame


@wp.func
def twist_angle(q_rel: wp.quat, axis: wp.vec3):
    """Rotation angle of q_rel about a unit axis (swing-twist decomposition), in (-pi, pi]."""
    s = wp.dot(wp.vec3(q_rel[0], q_rel[1], q_rel[2]), axis)
    return 2.0 * wp.atan2(s, q_rel[3])


@wp.func
def wrap_angle(theta: float):
    pi = 3.14159265358979
    while theta > pi:
        theta -= 2.0 * pi
    while theta <= -pi:
        theta += 2.0 * pi
    return theta


@wp.func
def curve_moment_and_slope(
    theta: float, start: int, count: int, curve_angle: wp.array(dtype=float), curve_moment: wp.array(dtype=float)
):
    """Piecewise-linear moment M(theta) and slope dM/dtheta; linear extrapolation past the ends."""
    k = start
    last = start + count - 2
    while k < last and theta > curve_angle[k + 1]:
        k += 1
    slope = (curve_moment[k + 1] - curve_moment[k]) / (curve_angle[k + 1] - curve_angle[k])
    return wp.vec2(curve_moment[k] + slope * (theta - curve_angle[k]), slope)


@wp.kernel
def eval_angular_spring_rows(
    body_q: wp.array(dtype=wp.transform),
    spring_body_a: wp.array(dtype=int),
    spring_body_b: wp.array(dtype=int),
    spring_axis_a: wp.array(dtype=wp.vec3),
    spring_rest_rotation: wp.array(dtype=wp.quat),
    spring_stiffness: wp.array(dtype=float),
    spring_damping: wp.array(dtype=float),
    spring_curve_start: wp.array(dtype=int),
    spring_curve_count: wp.array(dtype=int),
    curve_angle: wp.array(dtype=float),
    curve_moment: wp.array(dtype=float),
    spring_target: wp.array(dtype=float),
    spring_row: wp.array(dtype=int),
    min_stiffness_ratio: float,
    inv_h: float,
    inv_h2: float,
    J_offsets: wp.array(dtype=int),
    J_values: wp.array(dtype=float),
    row_c: wp.array(dtype=float),
    row_compliance: wp.array(dtype=float),
    row_damping: wp.array(dtype=float),
):
    t = nonnegative(wp.tid())
    # a may be -1 (the static world): tested before it indexes anything (body_frame).
    a = spring_body_a[t]
    qa = wp.transform_get_rotation(body_frame(body_q, a))
    qb = wp.transform_get_rotation(body_q[nonnegative(spring_body_b[t])])
    q_rel = wp.quat_inverse(qa * spring_rest_rotation[t]) * qb
    axis_local = spring_axis_a[t]
    # The axis is fixed in a's frame; q_rel is expressed in the rest frame q_a q0, whose axis is q0^-1 axis.
    theta = wrap_angle(twist_angle(q_rel, wp.quat_rotate_inv(spring_rest_rotation[t], axis_local)))
    dtheta = wrap_angle(theta - spring_target[t])
    axis = wp.quat_rotate(qa, axis_local)

    k_lin = spring_stiffness[t]
    c = dtheta
    k_t = k_lin
    count = spring_curve_count[t]
    if count >= 2:
        ms = curve_moment_and_slope(dtheta, nonnegative(spring_curve_start[t]), count, curve_angle, curve_moment)
        # A vanishing tangent stiffness would make the row's compliance infinite; keep a floor.
        k_t = wp.max(ms[1], min_stiffness_ratio * k_lin)
        c = ms[0] / k_t

    row = nonnegative(spring_row[t])
    nz = nonnegative(J_offsets[row])
    if a >= 0:
        write_body_block(J_values, nz, wp.vec3(0.0), -axis)
        nz += 6
    write_body_block(J_values, nz, wp.vec3(0.0), axis)
    row_c[row] = c
    row_compliance[row] = inv_h2 / k_t
    row_damping[row] = spring_damping[t] * inv_h / k_t
