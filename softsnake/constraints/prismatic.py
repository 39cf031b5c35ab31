"""Prismatic joint rows between body a (or the static world, a = -1) and body b: six rows (planar: three).

The joint lets b slide relative to a along an axis fixed in a's frame and nothing else.

Rows 0-2 lock the relative rotation: c = 2 vec(q_err), q_err = q_b (q_a q0)^-1 (the world-frame
rotation from b's rest orientation relative to a to its current one, taken with w >= 0; q0 is
the relative rotation at build time). Perturbing q_b by a small world rotation dtheta_b gives
d(2 vec q_err) = w dtheta_b + dtheta_b x v, and perturbing q_a gives -(w dtheta_a + v x dtheta_a),
with q_err = (v, w); so row k has angular blocks w e_k + v x e_k (b) and -w e_k + v x e_k (a).

Rows 3-4 keep the anchors on the axis: c = n_k . d with d = (x_b + R_b r_b) - (x_a + R_a r_a) and
n_k = R_a n_k_local the two unit vectors perpendicular to the axis, fixed in a's frame. Since n_k
turns with a, d(n . d) = n . (dx_b + dtheta_b x r_b - dx_a - dtheta_a x r_a) + dtheta_a . (n x d),
i.e. blocks (n, r_b x n) for b and (-n, -(r_a + d) x n) for a, r_a + d being the offset of b's
anchor from a's centre of mass.

Row 5 is the drive along the axis (seed 000 sec. II-E, the growth constraint g(q, v) = u): with
the extension e = (R_a axis) . d, a driven joint's row is c = e(x) - e(x_n) - u h, i.e. the
target extension is advanced by the commanded rate u [m/s] (``Control.prismatic_rate``) every
substep from the extension at the substep's start; its Jacobian is row 3's with n = axis. A drive
mobility b [m/(N s)] makes the drive a controller of finite gain, as the growth controllers of
real vines (seed 000 sec. II-E): the extension rate drops by b F under an axial load F (row
compliance b / h: the row then reads e - e_n - u h = -b F h, with F = lambda / h^2). An undriven
joint's row 5 exerts nothing, so b slides freely along the axis.

In a planar model (axis in the plane z = const) the joint has three rows: the rotation row about
z, the anchor row along the in-plane normal z x axis, and the drive; the others hold motion out of
the plane, which the integrator removes.
"""

import warp as wp

from softsnake.kernels.entities import body_frame, nonnegative, row_world_held, write_body_block, write_neutral_row
from softsnake.spatial import perpendicular_pair, quat_inverse, quat_multiply, quat_to_matrix
from softsnake.validation import finite_value, non_negative_value, position, unit_axis

from .base import ConstraintType, Field, joint_entities, joint_fields

ROTATION_ROWS = wp.constant(3)
"""Rows that lock the relative rotation (planar: 1, about z)."""
NORMAL_ROWS = wp.constant(2)
"""Rows that keep b's anchor on a's axis (planar: 1, along the in-plane normal)."""


@wp.func
def anchor_offset(tf_a: wp.transform, tf_b: wp.transform, anchor_a: wp.vec3, anchor_b: wp.vec3):
    """d = (x_b + R_b r_b) - (x_a + R_a r_a) [m]."""
    return wp.transform_point(tf_b, anchor_b) - wp.transform_point(tf_a, anchor_a)


@wp.func
def write_joint_rows(
    J_values: wp.array(dtype=float),
    nz: int,
    has_a: int,
    lin: wp.vec3,
    ang_a: wp.vec3,
    ang_b: wp.vec3,
):
    """One row's blocks: (-lin, ang_a) on a (if a is a body), (lin, ang_b) on b."""
    if has_a != 0:
        write_body_block(J_values, nz, -lin, ang_a)
        nz += 6
    write_body_block(J_values, nz, lin, ang_b)


@wp.kernel
def eval_prismatic_rows(
    body_q: wp.array(dtype=wp.transform),
    body_q_prev: wp.array(dtype=wp.transform),
    prismatic_body_a: wp.array(dtype=int),
    prismatic_body_b: wp.array(dtype=int),
    prismatic_anchor_a: wp.array(dtype=wp.vec3),
    prismatic_anchor_b: wp.array(dtype=wp.vec3),
    prismatic_axis_a: wp.array(dtype=wp.vec3),
    prismatic_normal_a1: wp.array(dtype=wp.vec3),
    prismatic_normal_a2: wp.array(dtype=wp.vec3),
    prismatic_rest_rotation: wp.array(dtype=wp.quat),
    prismatic_compliance: wp.array(dtype=float),
    prismatic_driven: wp.array(dtype=int),
    prismatic_drive_mobility: wp.array(dtype=float),
    prismatic_rate: wp.array(dtype=float),
    prismatic_row: wp.array(dtype=int),
    body_world: wp.array(dtype=int),
    frame_shift: wp.array(dtype=wp.vec3),
    planar: int,
    h: float,
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
    if row_world_held(row_world, held, prismatic_row[t]):
        return  # a held world's rows stand as they are
    # a may be -1 (the static world): tested before it indexes anything (body_frame).
    a = prismatic_body_a[t]
    has_a = int(0)
    if a >= 0:
        has_a = 1
    b = nonnegative(prismatic_body_b[t])
    shift = frame_shift[nonnegative(body_world[b])]
    tf_a = body_frame(body_q, a, shift)
    tf_b = body_q[b]
    qa = wp.transform_get_rotation(tf_a)
    qb = wp.transform_get_rotation(tf_b)
    row0 = nonnegative(prismatic_row[t])
    alpha = prismatic_compliance[t] * inv_h2
    # Planar: only the rotation about z (axis 2) and the in-plane normal.
    first_rotation = int(3 - ROTATION_ROWS)
    normal_count = int(NORMAL_ROWS)
    if planar != 0:
        first_rotation = 2
        normal_count = 1

    # Relative rotation rows.
    q_err = qb * wp.quat_inverse(qa * prismatic_rest_rotation[t])
    if q_err[3] < 0.0:
        q_err = wp.quat(-q_err[0], -q_err[1], -q_err[2], -q_err[3])
    v = wp.vec3(q_err[0], q_err[1], q_err[2])
    w = q_err[3]
    # Row indices are computed afresh in every iteration, never carried from one to the next: Warp's
    # adjoint replays a loop without the values a loop-carried variable took, so a counter such as
    # row += 1 would send the gradients to the wrong rows.
    for k in range(first_rotation, 3):
        row = row0 + k - first_rotation
        e = wp.vec3(0.0)
        e[k] = 1.0
        write_joint_rows(J_values, nonnegative(J_offsets[row]), has_a, wp.vec3(0.0), -w * e + wp.cross(v, e),
                         w * e + wp.cross(v, e))
        row_c[row] = 2.0 * v[k]
        row_compliance[row] = alpha
        row_damping[row] = 0.0

    # Anchors on the axis, then the drive along it.
    d = anchor_offset(tf_a, tf_b, prismatic_anchor_a[t], prismatic_anchor_b[t])
    r_b = wp.quat_rotate(qb, prismatic_anchor_b[t])
    r_ab = d + wp.quat_rotate(qa, prismatic_anchor_a[t])
    axis_local = prismatic_axis_a[t]
    for k in range(normal_count):
        row = row0 + 3 - first_rotation + k
        local = prismatic_normal_a1[t]
        if planar != 0:
            local = wp.cross(wp.vec3(0.0, 0.0, 1.0), axis_local)
        elif k == 1:
            local = prismatic_normal_a2[t]
        n = wp.quat_rotate(qa, local)
        write_joint_rows(J_values, nonnegative(J_offsets[row]), has_a, n, -wp.cross(r_ab, n), wp.cross(r_b, n))
        row_c[row] = wp.dot(n, d)
        row_compliance[row] = alpha
        row_damping[row] = 0.0
    row = row0 + 3 - first_rotation + normal_count
    nz = nonnegative(J_offsets[row])
    if prismatic_driven[t] != 0:
        n = wp.quat_rotate(qa, axis_local)
        tf_a_prev = body_frame(body_q_prev, a, shift)
        tf_b_prev = body_q_prev[b]
        d_prev = anchor_offset(tf_a_prev, tf_b_prev, prismatic_anchor_a[t], prismatic_anchor_b[t])
        extension_prev = wp.dot(wp.quat_rotate(wp.transform_get_rotation(tf_a_prev), axis_local), d_prev)
        write_joint_rows(J_values, nz, has_a, n, -wp.cross(r_ab, n), wp.cross(r_b, n))
        row_c[row] = wp.dot(n, d) - extension_prev - prismatic_rate[t] * h
        row_compliance[row] = prismatic_drive_mobility[t] / h
        row_damping[row] = 0.0
    else:
        write_joint_rows(J_values, nz, has_a, wp.vec3(0.0), wp.vec3(0.0), wp.vec3(0.0))
        write_neutral_row(row, row_c, row_compliance, row_damping)


class Prismatic(ConstraintType):
    name = "prismatic"
    label = "prismatic"
    planar_axis = "in_plane"
    fields = (
        *joint_fields("unit sliding axis in a's frame"),
        Field("normal_a1", wp.vec3, "", "first unit vector perpendicular to the axis, in a's frame"),
        Field("normal_a2", wp.vec3, "", "second unit vector perpendicular to the axis, in a's frame"),
        Field("rest_rotation", wp.quat, "", "rotation of b relative to a, locked: q0 = q_a^-1 q_b at build time"),
        Field("compliance", float, "m/N", "inverse stiffness of the locking rows (0: rigid)"),
        Field("driven", int, "", "1 for a joint driven along its axis at Control.prismatic_rate"),
        Field("drive_mobility", float, "m/(N s)", "drop of the extension rate per newton of axial load"),
        Field("rate", float, "m/s", "initial commanded extension rate (Control.prismatic_rate starts from it)"),
    )

    def rows_per_item(self, planar):
        return 3 if planar else ROTATION_ROWS + NORMAL_ROWS + 1

    def rows_from_start(self, planar):
        # The drive, last, holds the extension over the substep; the others the current pose.
        return [False] * (self.rows_per_item(planar) - 1) + [True]

    def item_entities(self, columns, particle_count):
        return joint_entities(columns, particle_count)

    def row_command(self, solver, state, control, h):
        m = solver.model
        return solver.record(eval_prismatic_rows, m.prismatic_count, [
            state.body_q, solver.body_q_prev, m.prismatic_body_a, m.prismatic_body_b, m.prismatic_anchor_a,
            m.prismatic_anchor_b, m.prismatic_axis_a, m.prismatic_normal_a1, m.prismatic_normal_a2,
            m.prismatic_rest_rotation, m.prismatic_compliance, m.prismatic_driven, m.prismatic_drive_mobility,
            control.prismatic_rate, m.prismatic_row, m.body_world, solver.frame_shift, solver.planar, h, 1.0 / (h * h),
            *solver.row_skip_inputs(), *solver.row_outputs()])


PRISMATIC = Prismatic()


class PrismaticBuilder:
    """``ModelBuilder.add_prismatic``."""

    @property
    def prismatic_count(self):
        return self.item_count(PRISMATIC)

    def add_prismatic(self, body_a, body_b, anchor, axis, *, compliance=0.0, drive=False, rate=0.0, drive_mobility=0.0):
        """Prismatic (slider) joint between body_a (-1: the static world) and body_b; six rows (planar model:
        three, and the axis must lie in the plane).

        The relative rotation is locked and b's anchor stays on the line through a's anchor along
        ``axis`` (fixed in a's frame); b slides freely along it unless the joint is driven. A driven
        joint extends at the commanded rate ``Control.prismatic_rate`` (the growth constraint of
        seed 000 sec. II-E). The extension is measured from the build pose.

        Args:
            anchor: joint point in world coordinates at the current poses [m] (both bodies' anchors)
            axis: sliding axis in world coordinates at the current poses
            compliance: [m/N] of the five locking rows (0: rigid)
            drive: whether the joint is driven along its axis
            rate: initial commanded extension rate [m/s] (``Control.prismatic_rate``)
            drive_mobility: [m/(N s)] drop of the extension rate per newton of axial load (0: the rate
                is met exactly; u / mobility is the load that stalls the drive)
        """
        what = f"prismatic {self.prismatic_count}"
        body_a, body_b = self.check_joint_bodies(body_a, body_b, what)
        anchor = position(anchor, f"{what} anchor")
        axis = unit_axis(axis, what)
        rate = finite_value(rate, f"{what} rate")
        pa, qa = self.body_pose(body_a)
        pb, qb = self.body_pose(body_b)
        Ra, Rb = quat_to_matrix(qa), quat_to_matrix(qb)
        axis_local = Ra.T @ axis
        e1, e2 = perpendicular_pair(axis_local)
        return self.append_item(PRISMATIC, {
            "body_a": body_a, "body_b": body_b, "anchor_a": Ra.T @ (anchor - pa), "anchor_b": Rb.T @ (anchor - pb),
            "axis_a": axis_local, "normal_a1": e1, "normal_a2": e2, "rest_rotation": quat_multiply(quat_inverse(qa), qb),
            "compliance": non_negative_value(compliance, f"{what} compliance"), "driven": int(bool(drive)),
            "drive_mobility": non_negative_value(drive_mobility, f"{what} drive_mobility"), "rate": rate})
