"""Angular spring rows: one row per joint, c = theta_rel - theta_target about the joint axis.

theta_rel is the twist of body b relative to body a (or the static world, a = -1) about a's
axis, measured from the rest relative orientation q0: q_rel = (q_a q0)^-1 q_b.

A linear spring of stiffness K [N m/rad] is the compliant row c + lambda / (K h^2) = 0. A
nonlinear moment curve M(theta) (piecewise linear through user samples) is linearised about
the current angle: with tangent stiffness k = M'(theta) the row c = M(theta) / k, compliance
1 / (k h^2) gives the moment M(theta) at convergence. Damping C [N m s/rad] enters as the ratio
gamma = C / (k h) of the common row machinery (rows.prepare_rows).

The row's Jacobian is +-(a's axis) on the two bodies' angular velocities: the exact derivative of the twist while
the bodies do not swing off the axis, as on a hinge about the same axis (every spring of the robots). A spring
between bodies free to swing is stiff in the twist to first order only (a 0.15 rad swing put the Jacobian about 0.1
off the twist's derivative): pair it with a hinge.
"""

import numpy as np
import warp as wp

from softsnake.errors import ModelError
from softsnake.kernels.entities import body_frame, nonnegative, row_world_held, write_body_block
from softsnake.spatial import quat_inverse, quat_multiply, quat_to_matrix
from softsnake.validation import finite_value, non_negative_value, positive_value, unit_axis, vector

from .base import ConstraintType, Field, joint_entities, joint_fields, upload_array


@wp.func
def twist_angle(q_rel: wp.quat, axis: wp.vec3):
    """Rotation angle of q_rel about a unit axis (swing-twist decomposition), in (-pi, pi]."""
    s = wp.dot(wp.vec3(q_rel[0], q_rel[1], q_rel[2]), axis)
    return 2.0 * wp.atan2(s, q_rel[3])


@wp.func
def wrap_angle(theta: float):
    """theta wrapped into (-pi, pi] in a bounded number of operations, whatever the angle.

    An angle that wraps once or twice (every joint angle minus a target in practice) is moved by
    2 pi at a time, the same roundings as ever; one further out (a target of 1e30) is reduced by
    fmod, exact but for float32's coarse spacing there. NaN and Inf give NaN.
    """
    pi = 3.14159265358979
    for _ in range(2):
        if theta > pi:
            theta -= 2.0 * pi
        elif theta <= -pi:
            theta += 2.0 * pi
    if theta > pi or theta <= -pi:
        theta = wp.mod(theta, 2.0 * pi)
        if theta > pi:
            theta -= 2.0 * pi
        elif theta <= -pi:
            theta += 2.0 * pi
    return theta


@wp.func
def curve_segment(theta: float, start: int, count: int, curve_angle: wp.array(dtype=float)):
    """First sample of the segment of a sampled curve that holds theta (the first or last segment
    past the ends). A function of its own: Warp's adjoint replays a loop inside a differentiated
    function without the values its counter took, but calls a function's forward to get its result."""
    k = start
    last = start + count - 2
    while k < last and theta > curve_angle[k + 1]:
        k += 1
    return k


@wp.func
def curve_moment_and_slope(
    theta: float, start: int, count: int, curve_angle: wp.array(dtype=float), curve_moment: wp.array(dtype=float)
):
    """Piecewise-linear moment M(theta) and slope dM/dtheta; linear extrapolation past the ends."""
    k = curve_segment(theta, start, count, curve_angle)
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
    spring_curve_angle: wp.array(dtype=float),
    spring_curve_moment: wp.array(dtype=float),
    joint_target: wp.array(dtype=float),
    spring_row: wp.array(dtype=int),
    min_stiffness_ratio: float,
    inv_h: float,
    inv_h2: float,
    row_world: wp.array(dtype=int),
    held: wp.array(dtype=int),
    J_offsets: wp.array(dtype=int),
    J_values: wp.array(dtype=float),
    row_c: wp.array(dtype=float),
    row_compliance: wp.array(dtype=float),
    row_damping: wp.array(dtype=float),
):
    t = nonnegative(wp.tid())
    if row_world_held(row_world, held, spring_row[t]):
        return  # a held world's rows stand as they are
    # a may be -1 (the static world): tested before it indexes anything (body_frame).
    a = spring_body_a[t]
    # The rotation alone: a world frame's shift moves no rotation (softsnake.kernels.world_frame).
    qa = wp.transform_get_rotation(body_frame(body_q, a, wp.vec3(0.0)))
    qb = wp.transform_get_rotation(body_q[nonnegative(spring_body_b[t])])
    q_rel = wp.quat_inverse(qa * spring_rest_rotation[t]) * qb
    axis_local = spring_axis_a[t]
    # The axis is fixed in a's frame; q_rel is expressed in the rest frame q_a q0, whose axis is q0^-1 axis.
    theta = wrap_angle(twist_angle(q_rel, wp.quat_rotate_inv(spring_rest_rotation[t], axis_local)))
    dtheta = wrap_angle(theta - joint_target[t])
    axis = wp.quat_rotate(qa, axis_local)

    k_lin = spring_stiffness[t]
    c = dtheta
    k_t = k_lin
    count = spring_curve_count[t]
    if count >= 2:
        ms = curve_moment_and_slope(dtheta, nonnegative(spring_curve_start[t]), count, spring_curve_angle,
                                    spring_curve_moment)
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


class AngularSpring(ConstraintType):
    name = "spring"
    label = "angular spring"
    planar_axis = "normal"
    fields = (
        *joint_fields("unit spring axis in a's frame", anchors=False),
        Field("rest_rotation", wp.quat, "", "rotation of b relative to a at rest, q0 = q_a^-1 q_b at build time"),
        Field("stiffness", float, "N m/rad", "linear stiffness K (a moment curve's steepest slope)"),
        Field("damping", float, "N m s/rad", "damping C"),
        Field("target", float, "rad", "initial rest angle (Control.joint_target starts from it)"),
        Field("curve", object, "", "sampled moment curve (angles [rad], moments [N m]) or None", upload=False),
    )

    def rows_per_item(self, planar):
        return 1

    def item_entities(self, columns, particle_count):
        return joint_entities(columns, particle_count)

    def upload(self, columns, model, device):
        """The fields, and the moment curves as one array of samples with each spring's start and count."""
        super().upload(columns, model, device)
        start, count, angle, moment = [], [], [], []
        for curve in columns["curve"]:
            start.append(len(angle))
            count.append(0 if curve is None else len(curve[0]))
            if curve is not None:
                angle.extend(curve[0])
                moment.extend(curve[1])
        model.spring_curve_start = upload_array(start, int, device)
        model.spring_curve_count = upload_array(count, int, device)
        model.spring_curve_angle = upload_array(angle, float, device, 1)
        model.spring_curve_moment = upload_array(moment, float, device, 1)

    def row_command(self, solver, state, control, h):
        m = solver.model
        return solver.record(eval_angular_spring_rows, m.spring_count, [
            state.body_q, m.spring_body_a, m.spring_body_b, m.spring_axis_a, m.spring_rest_rotation, m.spring_stiffness,
            m.spring_damping, m.spring_curve_start, m.spring_curve_count, m.spring_curve_angle, m.spring_curve_moment,
            control.joint_target, m.spring_row, solver.min_stiffness_ratio, 1.0 / h, 1.0 / (h * h),
            *solver.row_skip_inputs(), *solver.row_outputs()])


ANGULAR_SPRING = AngularSpring()


class AngularSpringBuilder:
    """``ModelBuilder.add_angular_spring``."""

    @property
    def spring_count(self):
        return self.item_count(ANGULAR_SPRING)

    def add_angular_spring(self, body_a, body_b, axis, *, stiffness=None, damping=0.0, target=0.0, moment_curve=None):
        """Torsional spring-damper about ``axis`` between body_a (-1: world) and body_b; one row.

        The angle is measured from the current relative orientation. Either a linear
        ``stiffness`` K [N m/rad], or a ``moment_curve`` (angles [rad], moments [N m]): sorted
        samples of a nonlinear restoring moment M(theta), interpolated linearly. ``damping`` C
        [N m s/rad]; ``target`` [rad] the initial rest angle (``Control.joint_target``). Meant for bodies a hinge
        joins about the same axis (see the module's docstring).
        """
        what = f"angular spring {self.spring_count}"
        body_a, body_b = self.check_joint_bodies(body_a, body_b, what)
        axis = unit_axis(axis, what)
        curve = None
        if moment_curve is not None:
            try:
                angles, moments = (np.asarray(c, dtype=np.float64) for c in moment_curve)
            except (TypeError, ValueError, OverflowError):
                angles = moments = np.zeros(0)
            if angles.ndim != 1 or angles.shape != moments.shape or len(angles) < 2:
                raise ModelError(f"{what} moment_curve needs two equal-length 1-D arrays of at least 2 samples")
            vector(angles, len(angles), f"{what} moment_curve angles")
            vector(moments, len(moments), f"{what} moment_curve moments")
            # The kernel interpolates the float32 samples: they must increase in float32 too.
            if np.any(np.diff(angles) <= 0) or np.any(np.diff(angles.astype(np.float32)) <= 0):
                raise ModelError(f"{what} moment_curve angles must be strictly increasing (in float32)")
            slopes = np.diff(moments) / np.diff(angles)
            if np.any(slopes <= 0):
                raise ModelError(f"{what} moment_curve must be strictly increasing (positive stiffness)")
            curve = (angles, moments)
            stiffness = float(np.max(slopes)) if stiffness is None else stiffness
        if stiffness is None:
            raise ModelError(f"{what} needs a stiffness or a moment_curve")
        qa, qb = self.body_pose(body_a)[1], self.body_pose(body_b)[1]
        return self.append_item(ANGULAR_SPRING, {
            "body_a": body_a, "body_b": body_b, "axis_a": quat_to_matrix(qa).T @ axis,
            "rest_rotation": quat_multiply(quat_inverse(qa), qb), "stiffness": positive_value(stiffness, f"{what} stiffness"),
            "damping": non_negative_value(damping, f"{what} damping"), "target": finite_value(target, f"{what} target"),
            "curve": curve})
