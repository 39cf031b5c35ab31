"""Contact with static obstacles: detection and the normal and friction rows.

Every collision point (a particle, or a point fixed on a body shape: sphere centre, capsule
end, box corner, or the lowest rim point of a cylinder cap) has one fixed slot per static
obstacle of its world, so the Jacobian's sparsity never changes; a slot is active when its
point comes within a margin of the obstacle at the predicted positions.

Normal row (Fischer-Burmeister): a = gap, b = r lambda_n with r = J M^-1 J^T of the row (so a
and b are both lengths), phi = a + b - sqrt(a^2 + b^2). Dividing the linearised phi by
d phi / d a gives a compliant row: compliance r (d phi/d b)/(d phi/d a) >= 0, right-hand side
-phi / (d phi / d a). The corner a = b = 0 is regularised by a tiny length inside the root.

Friction rows (two per contact, Coulomb, isotropic) act on the tangential displacement of the
contact point since the start of the substep, u = D^T (p(x) - p(x_n)). A sticking contact holds
u -> 0 through slightly compliant rows whose stiffness is proportional to the normal load, so
several contacts of one body share friction in proportion to their normal forces and leave the
cone together. When a Newton step's friction multiplier leaves the cone |lambda_f| <= mu lambda_n,
the contact switches to sliding and its world's step is rejected (check_friction_cone); a
sliding contact's rows then hold lambda_f on the cone along the direction of the stick force
that left it, inside the linear solve. It keeps sliding while it slips by more than friction
could stop in one substep (mu g h^2), checked at each substep's detection.

In a planar model a contact has its normal row and one friction row, along the first tangent
(in the plane for the in-plane normals of obstacles standing on the plane): friction out of the
plane would hold motion that the integrator removes anyway.
"""

import numpy as np
import warp as wp

from softsnake.kernels.entities import (
    body_generalized_inverse_mass,
    nonnegative,
    write_body_block,
    write_neutral_row,
    write_particle_block,
)

from .base import ConstraintType, Field
from .shapes import PointKind, collision_points, obstacle_distance

FRICTION_ROWS = wp.constant(2)
"""Friction rows of a contact (planar models: 1)."""


@wp.func
def entity_point(
    entity: int,
    local: wp.vec3,
    particle_count: int,
    particle_q: wp.array(dtype=wp.vec3),
    body_q: wp.array(dtype=wp.transform),
):
    if entity < particle_count:
        return particle_q[entity]
    return wp.transform_point(body_q[nonnegative(entity - particle_count)], local)


@wp.func
def tangent_basis(n: wp.vec3):
    t = wp.vec3(1.0, 0.0, 0.0)
    if wp.abs(n[0]) > 0.9:
        t = wp.vec3(0.0, 1.0, 0.0)
    t1 = wp.normalize(t - n * wp.dot(t, n))
    return wp.mat33(t1[0], t1[1], t1[2], wp.cross(n, t1)[0], wp.cross(n, t1)[1], wp.cross(n, t1)[2], n[0], n[1], n[2])


@wp.kernel
def detect_contacts(
    particle_q: wp.array(dtype=wp.vec3),
    particle_q_prev: wp.array(dtype=wp.vec3),
    body_q: wp.array(dtype=wp.transform),
    body_q_prev: wp.array(dtype=wp.transform),
    particle_count: int,
    contact_slot_entity: wp.array(dtype=int),
    contact_slot_kind: wp.array(dtype=int),
    contact_slot_local: wp.array(dtype=wp.vec3),
    contact_slot_axis: wp.array(dtype=wp.vec3),
    contact_slot_rim_radius: wp.array(dtype=float),
    contact_slot_radius: wp.array(dtype=float),
    contact_slot_obstacle: wp.array(dtype=int),
    obstacle_kind: wp.array(dtype=int),
    obstacle_transform: wp.array(dtype=wp.transform),
    obstacle_size: wp.array(dtype=wp.vec3),
    margin: float,
    contact_slot_mu: wp.array(dtype=float),
    stick_acceleration: float,
    h: float,
    contact_active: wp.array(dtype=int),
    contact_sliding: wp.array(dtype=int),
    contact_slide_direction: wp.array(dtype=wp.vec2),
    contact_anchor: wp.array(dtype=wp.vec3),
    contact_normal: wp.array(dtype=wp.vec3),
    contact_surface: wp.array(dtype=wp.vec3),
    contact_start: wp.array(dtype=wp.vec3),
):
    s = nonnegative(wp.tid())
    e = nonnegative(contact_slot_entity[s])
    o = nonnegative(contact_slot_obstacle[s])
    kind = obstacle_kind[o]
    tf = obstacle_transform[o]
    size = obstacle_size[o]
    anchor = contact_slot_local[s]
    if contact_slot_kind[s] == PointKind.CYLINDER_RIM:
        # The cap's rim point deepest toward the obstacle, chosen once per substep.
        body_tf = body_q[nonnegative(e - particle_count)]
        nd = obstacle_distance(kind, tf, size, wp.transform_point(body_tf, anchor))
        down = wp.quat_rotate_inv(wp.transform_get_rotation(body_tf), -wp.vec3(nd[0], nd[1], nd[2]))
        axis = contact_slot_axis[s]
        radial = down - axis * wp.dot(down, axis)
        rl = wp.length(radial)
        if rl > 1.0e-6:
            anchor = anchor + radial * (contact_slot_rim_radius[s] / rl)
    p = entity_point(e, anchor, particle_count, particle_q, body_q)
    nd = obstacle_distance(kind, tf, size, p)
    n = wp.vec3(nd[0], nd[1], nd[2])
    gap = nd[3] - contact_slot_radius[s]
    if e >= particle_count:
        # Friction acts on the material point of a rounded body shape that touches the obstacle,
        # so that a sphere or capsule rolls instead of sliding.
        body_rot = wp.transform_get_rotation(body_q[nonnegative(e - particle_count)])
        anchor = anchor - wp.quat_rotate_inv(body_rot, n) * contact_slot_radius[s]
    p0 = entity_point(e, anchor, particle_count, particle_q_prev, body_q_prev)
    contact_anchor[s] = anchor
    contact_normal[s] = n
    contact_surface[s] = p - n * nd[3]
    contact_start[s] = p0
    if gap < margin + wp.length(p - p0):
        contact_active[s] = 1
        # A sliding contact sticks again once its predicted slip over the substep is smaller than
        # what friction under a gravity-level load removes in one substep (mu g h^2); the same
        # test runs at every Newton iteration (eval_contact_rows).
        # It also sticks again when it slips along its friction (the friction would accelerate it).
        slip = (p - p0) - n * wp.dot(n, p - p0)
        basis = tangent_basis(n)
        along = contact_slide_direction[s][0] * wp.dot(slip, wp.vec3(basis[0, 0], basis[0, 1], basis[0, 2]))
        along += contact_slide_direction[s][1] * wp.dot(slip, wp.vec3(basis[1, 0], basis[1, 1], basis[1, 2]))
        if wp.length(slip) < contact_slot_mu[s] * stick_acceleration * h * h or along > 0.0:
            contact_sliding[s] = 0
    else:
        contact_active[s] = 0
        contact_sliding[s] = 0


@wp.func
def write_contact_jacobian(
    J_values: wp.array(dtype=float),
    nz: int,
    entity: int,
    particle_count: int,
    r: wp.vec3,
    direction: wp.vec3,
    particle_inv_mass: wp.array(dtype=float),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia_world: wp.array(dtype=wp.mat33),
):
    """Write the row's Jacobian block and return its J M^-1 J^T."""
    if entity < particle_count:
        write_particle_block(J_values, nz, direction)
        return particle_inv_mass[entity]
    b = nonnegative(entity - particle_count)
    ang = wp.cross(r, direction)
    write_body_block(J_values, nz, direction, ang)
    return body_generalized_inverse_mass(body_inv_mass[b], body_inv_inertia_world[b], direction, ang)


@wp.func
def zero_contact_jacobian(J_values: wp.array(dtype=float), nz: int, entity: int, particle_count: int):
    if entity < particle_count:
        write_particle_block(J_values, nz, wp.vec3(0.0))
    else:
        write_body_block(J_values, nz, wp.vec3(0.0), wp.vec3(0.0))


@wp.kernel
def eval_contact_rows(
    particle_q: wp.array(dtype=wp.vec3),
    body_q: wp.array(dtype=wp.transform),
    particle_inv_mass: wp.array(dtype=float),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia_world: wp.array(dtype=wp.mat33),
    particle_count: int,
    contact_slot_entity: wp.array(dtype=int),
    contact_slot_radius: wp.array(dtype=float),
    contact_slot_mu: wp.array(dtype=float),
    contact_slot_row: wp.array(dtype=int),
    contact_active: wp.array(dtype=int),
    contact_sliding: wp.array(dtype=int),
    contact_slide_direction: wp.array(dtype=wp.vec2),
    contact_anchor: wp.array(dtype=wp.vec3),
    contact_normal: wp.array(dtype=wp.vec3),
    contact_surface: wp.array(dtype=wp.vec3),
    contact_start: wp.array(dtype=wp.vec3),
    lam: wp.array(dtype=float),
    fb_epsilon: float,
    regularization: float,
    slip_length: float,
    slide_compliance_ratio: float,
    planar: int,
    J_offsets: wp.array(dtype=int),
    J_values: wp.array(dtype=float),
    row_c: wp.array(dtype=float),
    row_compliance: wp.array(dtype=float),
    row_damping: wp.array(dtype=float),
):
    s = nonnegative(wp.tid())
    e = nonnegative(contact_slot_entity[s])
    row = nonnegative(contact_slot_row[s])
    friction_rows = FRICTION_ROWS
    if planar != 0:
        friction_rows = 1
    if contact_active[s] == 0:
        for k in range(1 + friction_rows):
            zero_contact_jacobian(J_values, nonnegative(J_offsets[row + k]), e, particle_count)
            write_neutral_row(row + k, row_c, row_compliance, row_damping)
        return

    p = entity_point(e, contact_anchor[s], particle_count, particle_q, body_q)
    r = wp.vec3(0.0)
    if e >= particle_count:
        r = p - wp.transform_get_translation(body_q[nonnegative(e - particle_count)])
    basis = tangent_basis(contact_normal[s])

    # Normal row: Fischer-Burmeister.
    n = contact_normal[s]
    nz_n = nonnegative(J_offsets[row])
    w_n = write_contact_jacobian(
        J_values, nz_n, e, particle_count, r, n, particle_inv_mass, body_inv_mass, body_inv_inertia_world
    )
    lam_n = lam[row]
    a = wp.dot(n, p - contact_surface[s])
    if e < particle_count:
        a -= contact_slot_radius[s]
    b = w_n * lam_n
    root = wp.sqrt(a * a + b * b + fb_epsilon * fb_epsilon)
    phi = a + b - root
    phi_a = wp.max(1.0 - a / root, 1.0e-9)
    phi_b = 1.0 - b / root
    # A small floor on the compliance keeps the system regular when several contacts hold one
    # body (four corners of a box: more rows than degrees of freedom).
    alpha = w_n * (phi_b / phi_a + regularization)
    row_c[row] = phi / phi_a - alpha * lam_n
    row_compliance[row] = alpha
    row_damping[row] = 0.0

    # Friction rows. Sticking: (nearly) hard on the tangential displacement. Sliding (see
    # check_friction_cone): the rows hold the friction multiplier on the cone, along the direction
    # of the stick force that left it, inside the linear solve, so that every other row of that
    # solve sees the true friction.
    u = basis * (p - contact_start[s])
    limit = contact_slot_mu[s] * wp.max(lam_n, 0.0)
    for k in range(friction_rows):
        fr = row + 1 + k
        nz_t = nonnegative(J_offsets[fr])
        t = wp.vec3(basis[k, 0], basis[k, 1], basis[k, 2])
        w_t = write_contact_jacobian(
            J_values, nz_t, e, particle_count, r, t, particle_inv_mass, body_inv_mass, body_inv_inertia_world
        )
        row_damping[fr] = 0.0
        if limit <= 0.0 or w_t <= 0.0:
            # No friction yet (or none at all): the row must not touch the bodies.
            zero_contact_jacobian(J_values, nz_t, e, particle_count)
            write_neutral_row(fr, row_c, row_compliance, row_damping)
        elif contact_sliding[s] == 0:
            row_c[fr] = u[k]
            # Slightly compliant, stiffer in proportion to the normal load: several contacts on
            # one body then share friction in proportion to their normal forces and reach the
            # cone together (a box sticks until its total friction exceeds mu N).
            row_compliance[fr] = 0.1 * regularization * w_t + slip_length / wp.max(lam_n, 1.0e-20)
        else:
            target = limit * contact_slide_direction[s][k]
            big = slide_compliance_ratio * w_t
            row_c[fr] = -big * target
            row_compliance[fr] = big


@wp.kernel
def check_friction_cone(
    contact_slot_mu: wp.array(dtype=float),
    contact_slot_row: wp.array(dtype=int),
    row_world: wp.array(dtype=int),
    planar: int,
    contact_active: wp.array(dtype=int),
    lam: wp.array(dtype=float),
    dlam: wp.array(dtype=float),
    contact_sliding: wp.array(dtype=int),
    contact_slide_direction: wp.array(dtype=wp.vec2),
    world_reject: wp.array(dtype=int),
):
    """Switch a sticking contact whose new friction multiplier left the cone to sliding.

    Its sliding direction is that of the stick force (the implicit answer to "what would stop
    the slip", stable even on light bodies), and the whole Newton step of its world is rejected:
    clipping one contact's friction after the solve would leave every other row of that solve
    out of balance. The next iteration re-solves with the contact sliding. A contact switches
    at most once per substep (it sticks again only at the next substep's detection), so the
    rejections end.
    """
    s = nonnegative(wp.tid())
    if contact_active[s] == 0 or contact_sliding[s] != 0:
        return
    row = nonnegative(contact_slot_row[s])
    limit = contact_slot_mu[s] * wp.max(lam[row] + dlam[row], 0.0)
    f = wp.vec2(lam[row + 1] + dlam[row + 1], 0.0)
    if planar == 0:
        f[1] = lam[row + 2] + dlam[row + 2]
    norm = wp.length(f)
    if limit > 0.0 and norm > limit * (1.0 + 1.0e-6):
        contact_sliding[s] = 1
        contact_slide_direction[s] = f / norm
        wp.atomic_max(world_reject, nonnegative(row_world[row]), 1)


@wp.kernel
def reject_world_steps(row_world: wp.array(dtype=int), world_reject: wp.array(dtype=int), dlam: wp.array(dtype=float)):
    i = nonnegative(wp.tid())
    if world_reject[nonnegative(row_world[i])] != 0:
        dlam[i] = 0.0


class ContactSlot(ConstraintType):
    """One slot per (collision point, obstacle of its world or shared by all worlds): a normal row and
    the friction rows, active while the point is within the margin of the obstacle."""

    name = "contact_slot"
    label = "contact slot"
    built = False
    fields = (
        Field("entity", int, "", "the colliding particle i, or body b as particle_count + b"),
        Field("kind", int, "", "PointKind of the collision point"),
        Field("local", wp.vec3, "m", "collision point in the body frame (0 for particles)"),
        Field("axis", wp.vec3, "", "the shape's local z axis in the body frame (cylinder axis)"),
        Field("rim_radius", float, "m", "cylinder radius of a rim point, 0 otherwise"),
        Field("radius", float, "m", "contact radius of the point (sphere, capsule, particle radius)"),
        Field("mu", float, "", "friction coefficient: the smaller of the shape's and the obstacle's"),
        Field("obstacle", int, "", "the obstacle"),
    )

    def columns(self, builder):
        """Every collision point against every obstacle of its world or of all worlds."""
        columns = {name: [] for name in (*(f.name for f in self.fields), "world")}
        for entity, kind, local, axis, rim_radius, radius, mu, world in collision_points(builder):
            for o in range(builder.obstacle_count):
                if builder.obstacle_world[o] in (-1, world):
                    for name, value in (("entity", entity), ("kind", int(kind)), ("local", local), ("axis", axis),
                                        ("rim_radius", rim_radius), ("radius", radius),
                                        ("mu", min(mu, builder.obstacle_mu[o])), ("obstacle", o), ("world", world)):
                        columns[name].append(value)
        return columns

    def rows_per_item(self, planar):
        return 2 if planar else 1 + FRICTION_ROWS

    def item_entities(self, columns, particle_count):
        return np.asarray(columns["entity"], dtype=np.int64).reshape(-1, 1)

    def allocate(self, solver):
        n = solver.model.contact_slot_count
        solver.contact_active = solver.zeros(n, int)
        solver.contact_sliding = solver.zeros(n, int)
        solver.contact_slide_direction = solver.zeros(n, wp.vec2)
        for name in ("contact_anchor", "contact_normal", "contact_surface", "contact_start"):
            setattr(solver, name, solver.zeros(n, wp.vec3))
        solver.world_reject = wp.zeros(solver.model.world_count, dtype=int, device=solver.model.device)

    def predict_commands(self, solver, state, h):
        m = solver.model
        return [solver.record(detect_contacts, m.contact_slot_count, [
            state.particle_q, solver.particle_q_prev, state.body_q, solver.body_q_prev, m.particle_count,
            m.contact_slot_entity, m.contact_slot_kind, m.contact_slot_local, m.contact_slot_axis,
            m.contact_slot_rim_radius, m.contact_slot_radius, m.contact_slot_obstacle, m.obstacle_kind,
            m.obstacle_transform, m.obstacle_size, solver.contact_margin, m.contact_slot_mu, solver.stick_acceleration,
            h], outputs=[solver.contact_active, solver.contact_sliding, solver.contact_slide_direction,
                         solver.contact_anchor, solver.contact_normal, solver.contact_surface, solver.contact_start])]

    def row_command(self, solver, state, control, h):
        m = solver.model
        return solver.record(eval_contact_rows, m.contact_slot_count, [
            state.particle_q, state.body_q, m.particle_inv_mass, m.body_inv_mass, solver.body_inv_inertia_world,
            m.particle_count, m.contact_slot_entity, m.contact_slot_radius, m.contact_slot_mu, m.contact_slot_row,
            solver.contact_active, solver.contact_sliding, solver.contact_slide_direction, solver.contact_anchor,
            solver.contact_normal, solver.contact_surface, solver.contact_start, solver.lam, solver.fb_epsilon,
            solver.contact_regularization, solver.friction_slip_length, solver.slide_compliance_ratio, solver.planar,
            *solver.row_outputs()])

    def update_commands(self, solver):
        m = solver.model
        return [solver.world_reject.zero_,
                solver.record(check_friction_cone, m.contact_slot_count, [
                    m.contact_slot_mu, m.contact_slot_row, m.row_world, solver.planar, solver.contact_active, solver.lam,
                    solver.dlam, solver.contact_sliding, solver.contact_slide_direction, solver.world_reject]),
                solver.record(reject_world_steps, m.row_count, [m.row_world, solver.world_reject, solver.dlam])]


CONTACT_SLOT = ContactSlot()
