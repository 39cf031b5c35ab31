"""Particle-to-body attachment rows (seed 001, eq. 6): c = x_b + R(q_b) r - x_p, three rows."""

import numpy as np
import warp as wp

from softsnake.kernels.entities import nonnegative, row_world_held, write_body_block, write_particle_block
from softsnake.spatial import quat_to_matrix
from softsnake.validation import non_negative_value, position

from .base import ConstraintType, Field


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
    row_world: wp.array(dtype=int),
    held: wp.array(dtype=int),
    J_offsets: wp.array(dtype=int),
    J_values: wp.array(dtype=float),
    row_c: wp.array(dtype=float),
    row_compliance: wp.array(dtype=float),
    row_damping: wp.array(dtype=float),
):
    t = nonnegative(wp.tid())
    if row_world_held(row_world, held, attachment_row[t]):
        return  # a held world's rows stand as they are
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


class Attachment(ConstraintType):
    name = "attachment"
    tries_carried_multipliers = True
    label = "attachment"
    fields = (
        Field("body", int, "", "the body", index="body"),
        Field("particle", int, "", "the attached particle", index="particle"),
        Field("local", wp.vec3, "m", "attachment point in the body frame"),
        Field("compliance", float, "m/N", "inverse stiffness of the three rows (0: rigid)"),
        Field("damping", float, "s", "stiffness-proportional damping time"),
    )

    def rows_per_item(self, planar):
        return 3

    def item_entities(self, columns, particle_count):
        body = np.asarray(columns["body"], dtype=np.int64)
        return np.stack([particle_count + body, np.asarray(columns["particle"], dtype=np.int64)], axis=1)

    def row_command(self, solver, state, control, h):
        m = solver.model
        return solver.record(eval_attachment_rows, m.attachment_count, [
            state.particle_q, state.body_q, m.attachment_body, m.attachment_particle, m.attachment_local,
            m.attachment_compliance, m.attachment_damping, m.attachment_row, 1.0 / h, 1.0 / (h * h),
            *solver.row_skip_inputs(), *solver.row_outputs()])


ATTACHMENT = Attachment()


class AttachmentBuilder:
    """``ModelBuilder.add_attachment``."""

    @property
    def attachment_count(self):
        return self.item_count(ATTACHMENT)

    def add_attachment(self, body, particle, *, local_position=None, compliance=0.0, damping=0.0):
        """Attach a particle to a point of a body (seed 001, eq. 6); three rows.

        Args:
            local_position: attachment point in the body frame [m]; default: the particle's current position
            compliance: [m/N]; damping: [s]
        """
        what = f"attachment {self.attachment_count}"
        body = self.check_body(body, what)
        particle = self.check_particle(particle, what)
        p, q = self.body_pose(body)
        if local_position is None:
            local_position = quat_to_matrix(q).T @ (self.particle_q[particle] - p)
        return self.append_item(ATTACHMENT, {
            "body": body, "particle": particle, "local": position(local_position, f"{what} local_position"),
            "compliance": non_negative_value(compliance, f"{what} compliance"),
            "damping": non_negative_value(damping, f"{what} damping")})
