"""Hinge joint rows between body a (or the static world, a = -1) and body b: five rows (planar: two).

Rows 0-2 make the two anchors coincide: c = (x_a + R_a r_a) - (x_b + R_b r_b).
Rows 3-4 align the axes: with a = R_a axis_a, e_1, e_2 = R_b e_k the two unit vectors perpendicular to
b's hinge axis n = e_1 x e_2 and d = a . n = cos(theta) (theta the angle between the axes),
c = (a . e_k) / cos(theta / 2), the components of 2 sin(theta / 2) times the unit vector of the
misalignment (the vector part of the rotation taking n onto a, twice; the prismatic rows' form).
The plain projections a . e_k = sin(theta) (...) vanish at theta = pi as well: an axle turned end
for end satisfies them, and Newton's step on sin(theta) leads there from any theta > pi / 2. A
light body on a loaded hinge (a snake's 10 g wheel: 1.6e-6 kg m^2 about its diameter) is thrown
that far by one iteration at the snake's 1/120 s substep, and the step then converges with the
wheel turned end for end: it tumbled at pi per step (370 rad/s). 2 sin(theta / 2) has one root and
grows to pi. Near alignment both forms agree to second order. Derivatives, with q = cos(theta / 2) =
sqrt((1 + d) / 2): d(a . e) = dtheta_a . (a x e) + dtheta_b . (e x a), dd = (dtheta_a - dtheta_b) . (a x n),
dc = d(a . e) / q - (a . e) dd / (4 q^3); q = |a + n| / 2 in float32 (no cancellation near pi),
floored at 1e-3 (within 0.1 degree of end for end).
With a = -1 the anchor and axis of a are given in world coordinates and the rows touch only b.
In a planar model (hinge axis = plane normal z) only rows 0-1 exist: the others hold motion out
of the plane, which the integrator removes.
"""

import warp as wp

from softsnake.kernels.entities import body_frame, nonnegative, row_world_held, write_body_block
from softsnake.spatial import perpendicular_pair, quat_to_matrix
from softsnake.validation import non_negative_value, position, unit_axis

from .base import ConstraintType, Field, joint_entities, joint_fields

HINGE_ROWS = wp.constant(5)
HINGE_ROWS_PLANAR = wp.constant(2)


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
    body_world: wp.array(dtype=int),
    frame_shift: wp.array(dtype=wp.vec3),
    planar: int,
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
    if row_world_held(row_world, held, hinge_row[t]):
        return  # a held world's rows stand as they are
    # a may be -1 (the static world): tested before it indexes anything (body_frame).
    a = hinge_body_a[t]
    b = nonnegative(hinge_body_b[t])
    tf_a = body_frame(body_q, a, frame_shift[nonnegative(body_world[b])])
    tf_b = body_q[b]
    qa = wp.transform_get_rotation(tf_a)
    qb = wp.transform_get_rotation(tf_b)
    ra = wp.quat_rotate(qa, hinge_anchor_a[t])
    rb = wp.quat_rotate(qb, hinge_anchor_b[t])
    c = (wp.transform_get_translation(tf_a) + ra) - (wp.transform_get_translation(tf_b) + rb)
    axis = wp.quat_rotate(qa, hinge_axis_a[t])
    e1 = wp.quat_rotate(qb, hinge_normal_b1[t])
    e2 = wp.quat_rotate(qb, hinge_normal_b2[t])
    alpha = hinge_compliance[t] * inv_h2
    # b's hinge axis n, and cos(theta / 2) of the angle between the axes (module docstring) = |a + n| / 2,
    # which float32 keeps accurate near theta = pi where sqrt((1 + a . n) / 2) cancels; floored at 1e-3.
    n = wp.cross(e1, e2)
    halfway = axis + n
    cos_half = wp.sqrt(wp.max(0.25 * wp.dot(halfway, halfway), 1.0e-6))
    # d(a . n) = (dtheta_a - dtheta_b) . (a x n), for dc = d(a . e) / q - (a . e) d(a . n) / (4 q^3).
    axis_cross_n = wp.cross(axis, n)
    four_q_cubed = 4.0 * cos_half * cos_half * cos_half

    row_count = HINGE_ROWS
    if planar != 0:
        row_count = HINGE_ROWS_PLANAR
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
            projection = wp.dot(axis, e)
            turn = axis_cross_n * (projection / four_q_cubed)
            ang_a = wp.cross(axis, e) / cos_half - turn
            ang_b = wp.cross(e, axis) / cos_half + turn
            row_c[row] = projection / cos_half
        if a >= 0:
            write_body_block(J_values, nz, lin, ang_a)
            nz += 6
        if k < 3:
            write_body_block(J_values, nz, -lin, ang_b)
        else:
            write_body_block(J_values, nz, wp.vec3(0.0), ang_b)
        row_compliance[row] = alpha
        row_damping[row] = 0.0


class Hinge(ConstraintType):
    name = "hinge"
    label = "hinge"
    planar_axis = "normal"
    fields = (
        *joint_fields("unit hinge axis in a's frame"),
        Field("normal_b1", wp.vec3, "", "first unit vector perpendicular to the axis, in b's frame"),
        Field("normal_b2", wp.vec3, "", "second unit vector perpendicular to the axis, in b's frame"),
        Field("compliance", float, "m/N", "inverse stiffness of every row (0: rigid)"),
    )

    def rows_per_item(self, planar):
        return HINGE_ROWS_PLANAR if planar else HINGE_ROWS

    def item_entities(self, columns, particle_count):
        return joint_entities(columns, particle_count)

    def row_command(self, solver, state, control, h):
        m = solver.model
        return solver.record(eval_hinge_rows, m.hinge_count, [
            state.body_q, m.hinge_body_a, m.hinge_body_b, m.hinge_anchor_a, m.hinge_anchor_b, m.hinge_axis_a,
            m.hinge_normal_b1, m.hinge_normal_b2, m.hinge_compliance, m.hinge_row, m.body_world, solver.frame_shift,
            solver.planar, 1.0 / (h * h), *solver.row_skip_inputs(), *solver.row_outputs()])


HINGE = Hinge()


class HingeBuilder:
    """``ModelBuilder.add_hinge``."""

    @property
    def hinge_count(self):
        return self.item_count(HINGE)

    def add_hinge(self, body_a, body_b, anchor, axis, *, compliance=0.0):
        """Hinge (revolute) joint between body_a (-1: the static world) and body_b; five rows (planar model: two,
        and the axis must be the plane normal).

        Args:
            anchor: joint point in world coordinates at the current poses [m]
            axis: hinge axis in world coordinates at the current poses
            compliance: [m/N] for all its rows (0: rigid)
        """
        what = f"hinge {self.hinge_count}"
        body_a, body_b = self.check_joint_bodies(body_a, body_b, what)
        anchor = position(anchor, f"{what} anchor")
        axis = unit_axis(axis, what)
        pa, qa = self.body_pose(body_a)
        pb, qb = self.body_pose(body_b)
        Ra, Rb = quat_to_matrix(qa), quat_to_matrix(qb)
        e1, e2 = perpendicular_pair(Rb.T @ axis)
        return self.append_item(HINGE, {
            "body_a": body_a, "body_b": body_b, "anchor_a": Ra.T @ (anchor - pa), "anchor_b": Rb.T @ (anchor - pb),
            "axis_a": Ra.T @ axis, "normal_b1": e1, "normal_b2": e2,
            "compliance": non_negative_value(compliance, f"{what} compliance")})
