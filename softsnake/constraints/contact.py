"""Contact with static obstacles: detection and the normal and friction rows.

Every collision point (a particle, or a point fixed on a body shape: sphere centre, capsule
end, box corner, or the lowest rim point of a cylinder cap) has one fixed slot per static
obstacle its world sees (its own, and its copy of each shared one, in the world's frame:
``shapes.world_obstacles``), so the Jacobian's sparsity never changes; a slot is active when its
point comes within a margin of the obstacle at the predicted positions.

Normal row (Fischer-Burmeister): a = gap, b = r lambda_n with r = J M^-1 J^T of the row (so a
and b are both lengths), phi = a + b - sqrt(a^2 + b^2). Dividing the linearised phi by
d phi / d a gives a compliant row: compliance r (d phi/d b)/(d phi/d a) >= 0, right-hand side
-phi / (d phi / d a). The corner a = b = 0 is regularised by a tiny length inside the root, and
a proximal floor (``contact_regularization`` r) on the compliance of the matrix only keeps the
system regular with redundant contacts without moving the solution (phi = 0). The gap is that of the
point's centre (a particle's; a body shape's centre of rounding, ``body_contact_centre``) from
``contact_touch``, the obstacle's surface moved out by the slot's radius, which detection finds at the
prediction (``shapes.obstacle_gap``): for the ground exactly, where distance - radius rounded a 5 cm
ball's gap to 3.7e-9 m afresh each substep and the normal force jittered by that over g h^2.

Friction rows (two per contact, Coulomb, isotropic) act on the tangential slip of the contact point
over the substep, u = D^T s (h times the slip velocity), with the friction multipliers lambda_f (the
force is lambda_f / h^2, as for every row): a particle's s = x - x_n; on a body, the contact point's
rigid motion s = (c - c_n) + phi x r, c the body's centre, phi the rotation vector of its turn since
the substep's start and r the lever from c to the contact point, which the rows (normal and friction)
take at the shape's surface point deepest along the normal at the current pose. Rolling is then no
slip at any angle per substep; a point fixed on the body (the material point, before the fourteenth
session) reads the chord, a slip of R (omega h - sin(omega h)) for a ball rolling at omega, and its
sticking friction traded the ball's speed for spin (tests/constraints/test_rolling.py). Coulomb's law with maximal dissipation is the complementarity problem

    |lambda_f| <= mu lambda_n,   0 <= |u|  perp  mu lambda_n - |lambda_f| >= 0,   lambda_f || -u,

(stick: u = 0 inside the cone; slip: on the cone, against the slip). Derivation of the rows
(after Macklin et al. 2019, "Non-Smooth Newton Methods for Deformable Multi-Body Dynamics",
smooth isotropic friction): take a unit direction e, the direction the friction force points,
from the current iterate as e = normalize(lambda_f - u / r) (at a solution lambda_f = t e and
u = -s e with t, s >= 0, so this is exact there; sticking, it is the force's direction, sliding
the slip's), and write the magnitude complementarity on s_e = -e . u and g = mu lambda_n - e . lambda_f
with the Fischer-Burmeister function phi(a, b) = a + b - sqrt(a^2 + b^2 + eps^2), a = s_e,
b = r g, r the row's J M^-1 J^T (so that both are lengths). Newton's linearisation with e and
mu lambda_n held for the iteration, ds_e = -e . du and dg = -e . dlambda_f, gives

    phi_a ds_e + r phi_b dg = -phi   =>   e . du + W e . dlambda_f = phi / phi_a,   W = r phi_b / phi_a,

a compliant row along e with compliance W >= 0 that depends on the slip and on mu lambda_n. Across e
the force must vanish while sliding and the slip while sticking: e_perp . (u + W lambda_f) = 0, the
same compliance. One isotropic W serves both directions, so the two rows keep the fixed tangent
basis (t1, t2) and take the right-hand side R = e phi / phi_a - e_perp e_perp . (u + W lambda_f):
du + W dlambda_f = R. Sticking (a = 0 < b) gives W = 0, a hard row holding u = 0; sliding
(b = 0 < a) gives phi_a = 0, W -> infinity, and the row sets lambda_f on the cone, e . dlambda_f =
phi / (r phi_b); the same formula covers both and every state between, and no contact changes
state by a rule outside the iteration. phi_a is floored at 1e-3 (W at most 1000 r phi_b), which
changes the path of the iteration but not its solution (there R = 0, i.e. phi = 0): Newton's
ratio R / W stays the exact one while float32 keeps the row's c + W lambda_f accurate. A small
proximal floor (``friction_regularization`` r) on the matrix only, not the residual, keeps the
system regular where several contacts hold one body (a box's four corners: eight friction rows
for two tangential degrees of freedom); it also leaves the solution unchanged. A contact with
mu = 0 has neutral friction rows.

In a planar model a contact has its normal row and one friction row, along the first tangent
(in the plane for the in-plane normals of obstacles standing on the plane): friction out of the
plane would hold motion that the integrator removes anyway.

Warm start: contact rows carry their multipliers into the next substep (``carries_multipliers``), first
fitted to the prediction (``fit_carried_contact_multipliers``), so that the carried force moves a particle,
or a body's contact point, at most back to the surface and to its start.

Velocities: what a contact moved a particle, or a body, out of a penetration it began the substep with is
taken back out of its velocity (``depenetration_multipliers``, ``limit_body_depenetration``): a short
solve's leftover penetration, or a model placed inside an obstacle, is corrected in position without
becoming kinetic energy.
"""

import numpy as np
import warp as wp

from softsnake.kernels.compensated import body_point_remainder, rotation_between_pairs
from softsnake.kernels.entities import (
    body_generalized_inverse_mass,
    entity_point,
    entity_world,
    nonnegative,
    rotation_vector_between,
    row_world_held,
    write_body_block,
    write_neutral_row,
    write_particle_block,
)
from softsnake.kernels.operator import row_dot
from softsnake.kernels.world_frame import to_model_frame, unshifted

from .base import ConstraintType, Field
from .shapes import (PointKind, collision_points, obstacle_distance, obstacle_gap, obstacle_in_world_frame,
                     world_obstacles)

FRICTION_ROWS = wp.constant(2)
"""Friction rows of a contact (planar models: 1)."""


@wp.func
def friction_row_count(planar: int):
    """Friction rows a contact uses: ``FRICTION_ROWS``, one in a planar model."""
    if planar != 0:
        return 1
    return FRICTION_ROWS


@wp.func
def tangent_basis(n: wp.vec3):
    t = wp.vec3(1.0, 0.0, 0.0)
    if wp.abs(n[0]) > 0.9:
        t = wp.vec3(0.0, 1.0, 0.0)
    t1 = wp.normalize(t - n * wp.dot(t, n))
    return wp.mat33(t1[0], t1[1], t1[2], wp.cross(n, t1)[0], wp.cross(n, t1)[1], wp.cross(n, t1)[2], n[0], n[1], n[2])


@wp.func
def rim_point(centre: wp.vec3, axis: wp.vec3, rim_radius: float, rot: wp.quat, n: wp.vec3, fallback: wp.vec3):
    """The point of a cylinder cap's rim (centre, axis and radius in the body frame) deepest along -n
    (world frame) at the body orientation ``rot``, in the body frame; ``fallback`` where the axis is
    along n (every rim point equally deep)."""
    down = wp.quat_rotate_inv(rot, -n)
    radial = down - axis * wp.dot(down, axis)
    rl = wp.length(radial)
    point = fallback
    if rl > 1.0e-6:
        point = centre + radial * (rim_radius / rl)
    return point


@wp.func
def body_contact_point(body_tf: wp.transform, kind: int, local: wp.vec3, axis: wp.vec3, rim_radius: float,
                       fallback: wp.vec3, radius: float, n: wp.vec3):
    """A body's contact point at the pose ``body_tf``: the shape's surface point deepest along -n (a cylinder
    cap's rim point found again at this pose, ``fallback`` where its axis stands along n), so that a rounded
    shape turning within the substep keeps its gap and its normal force passes its axis [m]."""
    if kind == PointKind.CYLINDER_RIM:
        local = rim_point(local, axis, rim_radius, wp.transform_get_rotation(body_tf), n, fallback)
    return wp.transform_point(body_tf, local) - n * radius


@wp.func
def body_contact_centre(body_tf: wp.transform, kind: int, local: wp.vec3, axis: wp.vec3, rim_radius: float,
                        fallback: wp.vec3, n: wp.vec3):
    """The centre of the rounding of a body's contact point at the pose ``body_tf`` (``body_contact_point`` of
    radius 0): what ``contact_touch`` is a position of [m]."""
    return body_contact_point(body_tf, kind, local, axis, rim_radius, fallback, 0.0, n)


@wp.func
def body_point_motion(body_tf: wp.transform, start_tf: wp.transform, turn: wp.vec3, p_n: wp.vec3):
    """The rigid motion of the body point p_n since the substep's start (``start_tf``): (c - c_n) + phi x r,
    phi = ``turn`` the rotation vector of the body's turn and r the lever from its centre c [m] (module docstring)."""
    centre = wp.transform_get_translation(body_tf)
    return centre - wp.transform_get_translation(start_tf) + wp.cross(turn, p_n - centre)


@wp.func
def body_point_slip(body_tf: wp.transform, start_tf: wp.transform, p_n: wp.vec3):
    """``body_point_motion`` with the turn between the float32 rotations."""
    turn = rotation_vector_between(wp.transform_get_rotation(body_tf), wp.transform_get_rotation(start_tf))
    return body_point_motion(body_tf, start_tf, turn, p_n)


@wp.kernel(enable_backward=False)  # never on a wp.Tape: a change of frame, not a differentiable step
def contact_points_to_model_frame(contact_slot_entity: wp.array(dtype=int), particle_count: int,
                                  particle_world: wp.array(dtype=int), body_world: wp.array(dtype=int),
                                  frame_shift: wp.array(dtype=wp.vec3), contact_touch: wp.array(dtype=wp.vec3),
                                  contact_start: wp.array(dtype=wp.vec3)):
    """The contacts' surface and start points from their substep's frame into the model's
    (``ConstraintType.leave_frame_commands``)."""
    s = nonnegative(wp.tid())
    shift = frame_shift[entity_world(nonnegative(contact_slot_entity[s]), particle_count, particle_world, body_world)]
    if not unshifted(shift):
        contact_touch[s] = to_model_frame(contact_touch[s], shift)
        contact_start[s] = to_model_frame(contact_start[s], shift)


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
    particle_world: wp.array(dtype=int),
    body_world: wp.array(dtype=int),
    frame_shift: wp.array(dtype=wp.vec3),
    margin: float,
    contact_active: wp.array(dtype=int),
    contact_anchor: wp.array(dtype=wp.vec3),
    contact_normal: wp.array(dtype=wp.vec3),
    contact_touch: wp.array(dtype=wp.vec3),
    contact_start: wp.array(dtype=wp.vec3),
    contact_start_depth: wp.array(dtype=float),
):
    s = nonnegative(wp.tid())
    e = nonnegative(contact_slot_entity[s])
    o = nonnegative(contact_slot_obstacle[s])
    kind = obstacle_kind[o]
    tf = obstacle_in_world_frame(kind, obstacle_transform[o],
                                 frame_shift[entity_world(e, particle_count, particle_world, body_world)])
    size = obstacle_size[o]
    anchor = contact_slot_local[s]
    if contact_slot_kind[s] == PointKind.CYLINDER_RIM:
        # The cap's rim point deepest toward the obstacle at the prediction (the rows find it again at
        # every iterate; this one is their fallback where the axis stands along the normal).
        body_tf = body_q[nonnegative(e - particle_count)]
        nd = obstacle_distance(kind, tf, size, wp.transform_point(body_tf, anchor))
        anchor = rim_point(anchor, contact_slot_axis[s], contact_slot_rim_radius[s], wp.transform_get_rotation(body_tf),
                           wp.vec3(nd[0], nd[1], nd[2]), anchor)
    p = entity_point(e, anchor, particle_count, particle_q, body_q)
    nd = obstacle_distance(kind, tf, size, p)
    n = wp.vec3(nd[0], nd[1], nd[2])
    gap = obstacle_gap(kind, tf, size, p, contact_slot_radius[s], nd[3])
    p0 = entity_point(e, anchor, particle_count, particle_q_prev, body_q_prev)
    contact_anchor[s] = anchor
    contact_normal[s] = n
    # Where the point's centre touches: the obstacle's surface moved out by the slot's radius, along n from p by
    # the gap (module docstring).
    contact_touch[s] = p - n * gap
    contact_start[s] = p0
    # The point's true depth at the substep's start, not along this substep's normal: sliding round an
    # obstacle's corner, the start lies below the plane the prediction sees without being inside.
    contact_start_depth[s] = -obstacle_gap(kind, tf, size, p0, contact_slot_radius[s],
                                           obstacle_distance(kind, tf, size, p0)[3])
    if gap < margin + wp.length(p - p0):
        contact_active[s] = 1
    else:
        contact_active[s] = 0


@wp.func
def contact_inverse_mass(
    entity: int,
    particle_count: int,
    r: wp.vec3,
    direction: wp.vec3,
    particle_inv_mass: wp.array(dtype=float),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia_world: wp.array(dtype=wp.mat33),
):
    """J M^-1 J^T of a contact row along ``direction`` at offset r from the body's centre."""
    if entity < particle_count:
        return particle_inv_mass[entity]
    b = nonnegative(entity - particle_count)
    return body_generalized_inverse_mass(body_inv_mass[b], body_inv_inertia_world[b], direction, wp.cross(r, direction))


@wp.func
def write_contact_jacobian(J_values: wp.array(dtype=float), nz: int, entity: int, particle_count: int, r: wp.vec3,
                           direction: wp.vec3):
    """Write the row's Jacobian block. Each entry of J is written once per kernel: Warp's adjoint
    replays the stores of a kernel, and an entry written twice (a value, then zero) is left holding
    the first value after a backward pass."""
    if entity < particle_count:
        write_particle_block(J_values, nz, direction)
    else:
        write_body_block(J_values, nz, direction, wp.cross(r, direction))


@wp.func
def zero_contact_jacobian(J_values: wp.array(dtype=float), nz: int, entity: int, particle_count: int):
    if entity < particle_count:
        write_particle_block(J_values, nz, wp.vec3(0.0))
    else:
        write_body_block(J_values, nz, wp.vec3(0.0), wp.vec3(0.0))


@wp.func
def friction_rows(u: wp.vec2, lam_f: wp.vec2, limit: float, r: float, fb_epsilon: float, planar: int):
    """(compliance W, right-hand side R, d phi / d a) of a contact's friction rows: du + W dlambda_f = R
    (module docstring); R d phi/d a is the rows' own residual (phi along e).

    u: slip since the substep's start in the tangent basis [m]; lam_f: friction multipliers; limit:
    mu lambda_n; r: the rows' J M^-1 J^T. Planar contacts use the first component only.
    """
    trial = lam_f - u / r
    e = wp.vec2(1.0, 0.0)
    if planar != 0:
        trial = wp.vec2(trial[0], 0.0)
        u = wp.vec2(u[0], 0.0)
        lam_f = wp.vec2(lam_f[0], 0.0)
    length = wp.length(trial)
    if length > 0.0:
        e = trial / length
    e_perp = wp.vec2(-e[1], e[0])
    a = -wp.dot(e, u)
    b = r * (limit - wp.dot(e, lam_f))
    root = wp.sqrt(a * a + b * b + fb_epsilon * fb_epsilon)
    # Sliding (a > b >= 0), a + b - root keeps b, the friction's distance from the cone, only to float32's spacing
    # of the slip a: a fast slip over a short substep (v / (mu g h) spacings of the force: 6e-4 of it at 2 m/s and
    # h = 1/7680 s) left a cold start anywhere in that band. There the rationalised form, (a + b)^2 - root^2 =
    # 2 a b - eps^2, keeps b whole, and 1 - a / root = (b^2 + eps^2) / (root (root + a)). Sticking (b >= a) keeps the
    # form as it reads: evaluated exactly there, the smoothing's slip eps^2 / (2 b) along a rolling contact's
    # direction, which is round-off when it carries no force, put a rolling sphere's gradient 2 % off
    # (convergence.md, "Contacts at small steps").
    sliding = a > b and b >= 0.0
    phi = wp.where(sliding, (2.0 * a * b - fb_epsilon * fb_epsilon) / (wp.max(a, 0.0) + wp.max(b, 0.0) + root),
                   a + b - root)
    phi_a = wp.max(wp.where(sliding, (b * b + fb_epsilon * fb_epsilon) / (root * (root + wp.max(a, 0.0))),
                            1.0 - a / root), 1.0e-3)
    W = r * (1.0 - b / root) / phi_a
    R = e * (phi / phi_a) - e_perp * wp.dot(e_perp, u + lam_f * W)
    return wp.vec4(W, R[0], R[1], phi_a)


@wp.kernel
def eval_contact_rows(
    particle_q: wp.array(dtype=wp.vec3),
    body_q: wp.array(dtype=wp.transform),
    particle_inv_mass: wp.array(dtype=float),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia_world: wp.array(dtype=wp.mat33),
    particle_count: int,
    contact_slot_entity: wp.array(dtype=int),
    contact_slot_kind: wp.array(dtype=int),
    contact_slot_local: wp.array(dtype=wp.vec3),
    contact_slot_axis: wp.array(dtype=wp.vec3),
    contact_slot_rim_radius: wp.array(dtype=float),
    contact_slot_radius: wp.array(dtype=float),
    contact_slot_mu: wp.array(dtype=float),
    contact_slot_row: wp.array(dtype=int),
    contact_active: wp.array(dtype=int),
    contact_anchor: wp.array(dtype=wp.vec3),
    contact_normal: wp.array(dtype=wp.vec3),
    contact_touch: wp.array(dtype=wp.vec3),
    contact_start: wp.array(dtype=wp.vec3),
    body_q_prev: wp.array(dtype=wp.transform),
    lam: wp.array(dtype=float),
    compensated: int,
    particle_q_low: wp.array(dtype=wp.vec3),
    particle_q_prev_low: wp.array(dtype=wp.vec3),
    body_q_low: wp.array(dtype=wp.spatial_vector),
    body_q_prev_low: wp.array(dtype=wp.spatial_vector),
    fb_epsilon: float,
    contact_regularization: float,
    friction_regularization: float,
    planar: int,
    row_world: wp.array(dtype=int),
    held: wp.array(dtype=int),
    J_offsets: wp.array(dtype=int),
    J_values: wp.array(dtype=float),
    row_c: wp.array(dtype=float),
    row_compliance: wp.array(dtype=float),
    row_damping: wp.array(dtype=float),
    row_residual_scale: wp.array(dtype=float),
):
    s = nonnegative(wp.tid())
    if row_world_held(row_world, held, contact_slot_row[s]):
        return  # a held world's rows stand as they are
    e = nonnegative(contact_slot_entity[s])
    row = nonnegative(contact_slot_row[s])
    friction_count = friction_row_count(planar)
    for k in range(1 + friction_count):
        row_residual_scale[row + k] = 1.0
    # Branches, not early returns: Warp's adjoint ran the code after a return inside a branch, which
    # gave inactive and frictionless rows gradients they do not have.
    if contact_active[s] == 0:
        for k in range(1 + friction_count):
            zero_contact_jacobian(J_values, nonnegative(J_offsets[row + k]), e, particle_count)
            write_neutral_row(row + k, row_c, row_compliance, row_damping)
    else:
        n = contact_normal[s]
        # The point's centre p (a particle's; on a body, its rounding's: body_contact_centre) gives the gap; the
        # contact point p - n radius the lever r_n.
        p = wp.vec3(0.0)
        r_n = wp.vec3(0.0)
        slip_world = wp.vec3(0.0)
        # Compensated positions: the gap and the slip read the remainders of the point's position here (a body's: its
        # centre's and its rotation's) (``reads_remainders``), not as J r added to the rows afterwards.
        low = wp.vec3(0.0)
        low_since_start = wp.vec3(0.0)
        if e < particle_count:
            p = particle_q[e]
            slip_world = p - contact_start[s]
            if compensated != 0:
                low = particle_q_low[e]
                low_since_start = low - particle_q_prev_low[e]
        else:
            body = nonnegative(e - particle_count)
            body_tf = body_q[body]
            p = body_contact_centre(body_tf, contact_slot_kind[s], contact_slot_local[s], contact_slot_axis[s],
                                    contact_slot_rim_radius[s], contact_anchor[s], n)
            p_n = p - n * contact_slot_radius[s]
            r_n = p_n - wp.transform_get_translation(body_tf)
            start_tf = body_q_prev[body]
            turn = wp.vec3(0.0)
            if compensated == 0:
                turn = rotation_vector_between(wp.transform_get_rotation(body_tf), wp.transform_get_rotation(start_tf))
            else:
                # The contact point's remainder: the centre's, and the rotation's delta turning the lever; the turn
                # since the start between the rotation pairs (a float32 q q_n^-1 carries its product's rounding).
                body_low = body_q_low[body]
                start_low = body_q_prev_low[body]
                low = body_point_remainder(body_low, r_n)
                low_since_start = wp.spatial_top(body_low) - wp.spatial_top(start_low)
                turn = rotation_between_pairs(wp.transform_get_rotation(body_tf), wp.spatial_bottom(body_low),
                                              wp.transform_get_rotation(start_tf), wp.spatial_bottom(start_low))
            slip_world = body_point_motion(body_tf, start_tf, turn, p_n)
        slip_world = slip_world + low_since_start
        basis = tangent_basis(n)

        # Normal row: Fischer-Burmeister.
        write_contact_jacobian(J_values, nonnegative(J_offsets[row]), e, particle_count, r_n, n)
        w_n = contact_inverse_mass(e, particle_count, r_n, n, particle_inv_mass, body_inv_mass, body_inv_inertia_world)
        lam_n = lam[row]
        a = wp.dot(n, p - contact_touch[s]) + wp.dot(n, low)
        b = w_n * lam_n
        root = wp.sqrt(a * a + b * b + fb_epsilon * fb_epsilon)
        phi = a + b - root
        phi_a = wp.max(1.0 - a / root, 1.0e-9)
        phi_b = 1.0 - b / root
        alpha = w_n * (phi_b / phi_a + contact_regularization)
        row_c[row] = phi / phi_a - alpha * lam_n
        row_compliance[row] = alpha
        row_damping[row] = 0.0
        row_residual_scale[row] = phi_a

        # Friction rows (module docstring): one compliance W for both, the right-hand side R.
        mu = contact_slot_mu[s]
        w_t = float(0.0)
        # A loop of constant length (unrolled): Warp's adjoint of a loop of run-time length loses the
        # values a sum carried from one iteration to the next took.
        for k in range(FRICTION_ROWS):
            if k < friction_count:
                t = wp.vec3(basis[k, 0], basis[k, 1], basis[k, 2])
                w_t += contact_inverse_mass(e, particle_count, r_n, t, particle_inv_mass, body_inv_mass,
                                            body_inv_inertia_world)
        w_t = w_t / float(friction_count)
        if mu <= 0.0 or w_t <= 0.0:
            # Frictionless: the rows must not touch the bodies.
            for k in range(friction_count):
                zero_contact_jacobian(J_values, nonnegative(J_offsets[row + 1 + k]), e, particle_count)
                write_neutral_row(row + 1 + k, row_c, row_compliance, row_damping)
        else:
            for k in range(friction_count):
                t = wp.vec3(basis[k, 0], basis[k, 1], basis[k, 2])
                write_contact_jacobian(J_values, nonnegative(J_offsets[row + 1 + k]), e, particle_count, r_n, t)
            slip = basis * slip_world
            lam_f = wp.vec2(lam[row + 1], 0.0)
            if planar == 0:
                lam_f = wp.vec2(lam[row + 1], lam[row + 2])
            rows = friction_rows(wp.vec2(slip[0], slip[1]), lam_f, mu * wp.max(lam_n, 0.0), w_t, fb_epsilon, planar)
            W = rows[0] + friction_regularization * w_t
            for k in range(friction_count):
                row_c[row + 1 + k] = -rows[1 + k] - W * lam_f[k]
                row_compliance[row + 1 + k] = W
                row_damping[row + 1 + k] = 0.0
                row_residual_scale[row + 1 + k] = rows[3]


@wp.kernel(enable_backward=False)  # the warm start is not on a wp.Tape: the implicit gradient does not see the start
def fit_carried_contact_multipliers(
    particle_q: wp.array(dtype=wp.vec3),
    body_q: wp.array(dtype=wp.transform),
    body_q_prev: wp.array(dtype=wp.transform),
    particle_count: int,
    contact_slot_entity: wp.array(dtype=int),
    contact_slot_kind: wp.array(dtype=int),
    contact_slot_local: wp.array(dtype=wp.vec3),
    contact_slot_axis: wp.array(dtype=wp.vec3),
    contact_slot_rim_radius: wp.array(dtype=float),
    contact_anchor: wp.array(dtype=wp.vec3),
    contact_slot_radius: wp.array(dtype=float),
    contact_slot_row: wp.array(dtype=int),
    contact_active: wp.array(dtype=int),
    contact_normal: wp.array(dtype=wp.vec3),
    contact_touch: wp.array(dtype=wp.vec3),
    contact_start: wp.array(dtype=wp.vec3),
    J_offsets: wp.array(dtype=int),
    J_columns: wp.array(dtype=int),
    J_values: wp.array(dtype=float),
    u: wp.array(dtype=float),
    planar: int,
    lam: wp.array(dtype=float),
):
    """Fit a contact's carried multipliers to the prediction: scale them so that the move they make,
    x = x~ + u with u = M^-1 J^T lambda, takes the contact point (a particle, or a body's point at its
    predicted pose: ``body_contact_point``) at most back to the surface (normal row) and at most back to
    where it stood at the substep's start (friction rows; a body's slip is its point's rigid motion,
    ``body_point_slip``).

    At x~ a resting particle sits g h^2 deep and a sticking one has slipped by what the forces the
    prediction knows (gravity, its velocity) did in h. The carried normal force of a bottom node of a
    soft body holds more than that node's weight: the weight above it, passed down by the elements,
    whose rows start every substep from zero. Carried whole it lifts the node far above the surface,
    a deformation the elastic rows have not balanced and that an iteration stopped early keeps (a
    1 MPa block on the ground ran away at 2 x 40 Newton x linear iterations: convergence.md). Scaled
    by s_n = clamp(depth / lift, 0, 1), lift = J_n u the row's own move, the node lands on the surface
    at most; a point above the surface at x~, or pulled by its carried force, starts cold. The
    friction rows take s_f = clamp(-slip . back / |back|^2, 0, s_n), back = J_f u: they slide the point
    back at most to its start, and stay inside the cone of the scaled normal force.

    Bodies likewise (since the eighteenth session): a wheel's contacts carry the weight of the chassis
    its hinge holds, and the hinge's rows start from zero; carried whole, they lifted a 10 g wheel by 6.5
    times its own g h^2, and a cart at rest on two such wheels ran away at 1/30 s under the plain iteration
    at every budget to 16 x 100, and at 1/120 s at one Newton iteration (experiments/energy_audit_bodies.py;
    convergence.md, "Bodies' carried contacts fitted"). Left whole before because a vine tip its joints press
    against an obstacle then started every other step with almost none of its normal force at seed 001's
    4 x 20, which the vines no longer run."""
    s = nonnegative(wp.tid())
    e = nonnegative(contact_slot_entity[s])
    if contact_active[s] != 0:
        row = nonnegative(contact_slot_row[s])
        friction_count = friction_row_count(planar)
        n = contact_normal[s]
        depth = float(0.0)
        slip_world = wp.vec3(0.0)
        if e < particle_count:
            p = particle_q[e]
            depth = -wp.dot(n, p - contact_touch[s])
            slip_world = p - contact_start[s]
        else:
            body = nonnegative(e - particle_count)
            p = body_contact_centre(body_q[body], contact_slot_kind[s], contact_slot_local[s], contact_slot_axis[s],
                                    contact_slot_rim_radius[s], contact_anchor[s], n)
            depth = -wp.dot(n, p - contact_touch[s])
            slip_world = body_point_slip(body_q[body], body_q_prev[body], p - n * contact_slot_radius[s])
        lift = row_dot(J_values, J_columns, nonnegative(J_offsets[row]), J_offsets[row + 1], u)
        scale_n = float(0.0)
        if lift > 0.0 and depth > 0.0:
            scale_n = wp.min(1.0, depth / lift)
        lam[row] = lam[row] * scale_n
        slip = tangent_basis(n) * slip_world
        back = wp.vec2(0.0)
        # A loop of constant length (unrolled), as in eval_contact_rows.
        for k in range(FRICTION_ROWS):
            if k < friction_count:
                back[k] = row_dot(J_values, J_columns, nonnegative(J_offsets[row + 1 + k]), J_offsets[row + 2 + k], u)
        scale_f = float(0.0)
        back_sq = wp.dot(back, back)
        if back_sq > 0.0:
            scale_f = wp.clamp(-(slip[0] * back[0] + slip[1] * back[1]) / back_sq, 0.0, scale_n)
        for k in range(FRICTION_ROWS):
            if k < friction_count:
                lam[row + 1 + k] = lam[row + 1 + k] * scale_f


@wp.kernel(enable_backward=False)  # after the velocities: the gradients' step is the converged one, which has no such term
def depenetration_multipliers(
    particle_q: wp.array(dtype=wp.vec3),
    body_q: wp.array(dtype=wp.transform),
    body_q_prev: wp.array(dtype=wp.transform),
    particle_inv_mass: wp.array(dtype=float),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia_world: wp.array(dtype=wp.mat33),
    particle_count: int,
    contact_slot_entity: wp.array(dtype=int),
    contact_slot_kind: wp.array(dtype=int),
    contact_slot_local: wp.array(dtype=wp.vec3),
    contact_slot_axis: wp.array(dtype=wp.vec3),
    contact_slot_rim_radius: wp.array(dtype=float),
    contact_anchor: wp.array(dtype=wp.vec3),
    contact_slot_radius: wp.array(dtype=float),
    contact_slot_row: wp.array(dtype=int),
    contact_active: wp.array(dtype=int),
    contact_normal: wp.array(dtype=wp.vec3),
    contact_start: wp.array(dtype=wp.vec3),
    contact_start_depth: wp.array(dtype=float),
    lam: wp.array(dtype=float),
    inv_h: float,
    planar: int,
    dlam: wp.array(dtype=float),
    taken_speed: wp.array(dtype=float),
):
    """The multipliers of a velocity change that takes back what a contact moved its point out of a
    penetration it began the substep with: c = min(depth at the start, the contact's own push, the point's
    outward move n . (x - x_n)), an outward speed c / h (``taken_speed``) never more than the point's own
    (c is at most its outward move; a point that leaves a penetration by its own velocity, its contact
    idle, keeps it). A particle: dlambda_n = -c / (h w), w = J M^-1 J^T of the row, so that M^-1 J^T dlambda
    lowers its outward velocity by exactly c / h; its push is w lambda_n. A body (its point the contact
    point, ``body_contact_point``, its move that point's rigid motion, ``body_point_slip``, as in the
    rows): dlambda = -lambda / h on the contact's normal and friction rows, the direction of the velocity
    its contacts gave it, which ``limit_body_depenetration`` and ``integration.add_body_velocities`` scale
    to the share c / h its points were pushed; its push is its depth wherever lambda_n > 0 (several
    contacts share a body's load in any proportion, so one contact's share says nothing of how far the
    body was pushed). The friction rows are in the direction because a body pushed out turns, its
    contact point slides, and the friction that resists the slide is as much energy from nowhere: a box
    tilted 0.2 rad on an edge 5 mm deep (mu 0.5, 1/240 s) came out with 0.093 J against the 0.069 J of
    the same box placed on the ground, 0.062 J with them (0.061 J without friction).

    Why: v = (x - x_n) / h turns every position change into velocity, and a contact that pushes a
    point out of the obstacle pushes it out of a penetration an earlier substep left, which a converged
    substep never leaves (its gap ends >= 0). An unconverged one does, and the next substep's push out of
    it was kinetic energy from nowhere: a stiff column (100 MPa) standing on rough ground at 2 Newton
    iterations per 1/30 s step, its corners ending up to 1.5 mm deep, kept rocking at 0.15 m/s on it
    (tests/test_energy.py). The position is corrected, the velocity is not: the energy of the correction
    is dropped, never added. Where every substep converges, no point starts one inside an obstacle (to
    rounding) and nothing changes, unless the model itself starts inside one: a particle or a body placed
    in the ground is moved out onto it, no longer launched from it (before the nineteenth session bodies
    were left out, and a box 5 mm deep jumped 0.29 m at steps of 1/240 s)."""
    s = nonnegative(wp.tid())
    e = nonnegative(contact_slot_entity[s])
    taken_speed[s] = 0.0
    if contact_active[s] != 0:
        n = contact_normal[s]
        row = nonnegative(contact_slot_row[s])
        move = float(0.0)
        w = float(0.0)
        depth = contact_start_depth[s]
        if e < particle_count:
            move = wp.dot(n, particle_q[e] - contact_start[s])
            w = particle_inv_mass[e]
        else:
            body = nonnegative(e - particle_count)
            tf = body_q[body]
            p_end = body_contact_point(tf, contact_slot_kind[s], contact_slot_local[s], contact_slot_axis[s],
                                       contact_slot_rim_radius[s], contact_anchor[s], contact_slot_radius[s], n)
            move = wp.dot(n, body_point_slip(tf, body_q_prev[body], p_end))
            w = contact_inverse_mass(e, particle_count, p_end - wp.transform_get_translation(tf), n, particle_inv_mass,
                                     body_inv_mass, body_inv_inertia_world)
        push = w * lam[row]
        if e >= particle_count and push > 0.0:
            push = depth
        if w > 0.0:
            taken = wp.min(wp.min(depth, push), move)
            if taken > 0.0:
                taken_speed[s] = taken * inv_h
                if e < particle_count:
                    dlam[row] = -taken * inv_h / w
                else:
                    friction_count = friction_row_count(planar)
                    for k in range(1 + FRICTION_ROWS):
                        if k < 1 + friction_count:
                            dlam[row + k] = -lam[row + k] * inv_h


@wp.kernel(enable_backward=False)  # after the velocities, as depenetration_multipliers
def limit_body_depenetration(
    particle_count: int,
    contact_slot_entity: wp.array(dtype=int),
    contact_slot_row: wp.array(dtype=int),
    taken_speed: wp.array(dtype=float),
    J_offsets: wp.array(dtype=int),
    J_columns: wp.array(dtype=int),
    J_values: wp.array(dtype=float),
    u: wp.array(dtype=float),
    body_scale: wp.array(dtype=float),
):
    """Lower a body's share of its velocity change u = M^-1 J^T dlambda (its contacts' velocity, taken back
    whole: ``depenetration_multipliers``) so that none of its correcting contact points loses more outward
    velocity than its own c / h: the smallest ratio over them, taken with an atomic minimum
    (order-independent). A sphere 5 mm deep gives back (c / h) / (c / h + g h) of its contact's velocity, all
    but what holds its weight; a flat box on four corners the same, exactly c / h at every corner."""
    s = nonnegative(wp.tid())
    e = contact_slot_entity[s]
    if e >= particle_count and taken_speed[s] > 0.0:
        row = nonnegative(contact_slot_row[s])
        change = row_dot(J_values, J_columns, nonnegative(J_offsets[row]), J_offsets[row + 1], u)
        if change < 0.0:
            wp.atomic_min(body_scale, nonnegative(e - particle_count), taken_speed[s] / -change)


class ContactSlot(ConstraintType):
    """One slot per (collision point, obstacle its world sees: its own or its copy of a shared one): a
    normal row and the friction rows, active while the point is within the margin of the obstacle."""

    name = "contact_slot"
    label = "contact slot"
    built = False
    carries_multipliers = True
    reads_remainders = True  # Fischer-Burmeister rows: not J x at unit slope (ConstraintType.reads_remainders)
    detected_arrays = ("contact_active", "contact_anchor", "contact_normal", "contact_touch", "contact_start")
    fields = (
        Field("entity", int, "", "the colliding particle i, or body b as particle_count + b"),
        Field("kind", int, "", "PointKind of the collision point"),
        Field("local", wp.vec3, "m", "collision point in the body frame (0 for particles)"),
        Field("axis", wp.vec3, "", "the shape's local z axis in the body frame (cylinder axis)"),
        Field("rim_radius", float, "m", "cylinder radius of a rim point, 0 otherwise"),
        Field("radius", float, "m", "contact radius of the point (sphere, capsule, particle radius)"),
        Field("mu", float, "", "friction coefficient: the smaller of the shape's and the obstacle's"),
        Field("obstacle", int, "", "the obstacle: an entry of the model's obstacle table, in the slot's world"),
    )

    def columns(self, builder):
        """Every collision point against every obstacle its world sees: the world's own and its copy of
        each shared one, entries of the model's obstacle table (``world_obstacles``)."""
        columns = {name: [] for name in (*(f.name for f in self.fields), "world")}
        table = world_obstacles(builder)
        entries = {}
        for entity, kind, local, axis, rim_radius, radius, mu, world in collision_points(builder):
            if world not in entries:
                entries[world] = table.of_world(world)
            for o in entries[world]:
                for name, value in (("entity", entity), ("kind", int(kind)), ("local", local), ("axis", axis),
                                    ("rim_radius", rim_radius), ("radius", radius),
                                    ("mu", min(mu, builder.obstacle_mu[table.source[o]])), ("obstacle", int(o)),
                                    ("world", world)):
                    columns[name].append(value)
        return columns

    def rows_per_item(self, planar):
        return 2 if planar else 1 + FRICTION_ROWS

    def item_entities(self, columns, particle_count):
        return np.asarray(columns["entity"], dtype=np.int64).reshape(-1, 1)

    def allocate(self, solver):
        n = solver.model.contact_slot_count
        solver.contact_active = solver.zeros(n, int)
        for name in self.detected_arrays[1:]:  # the points and the normal; the first, whether the slot touches
            setattr(solver, name, solver.zeros(n, wp.vec3))
        solver.contact_start_depth = solver.zeros(n, float)
        """How deep each contact's point lay inside its obstacle at the substep's start [m] (negative: the gap)."""
        solver.contact_taken_speed = solver.zeros(n, float)
        """Outward speed each contact's velocity correction takes back from its point [m/s]."""

    def predict_commands(self, solver, state, h):
        m = solver.model
        return [solver.record(detect_contacts, m.contact_slot_count, [
            state.particle_q, solver.particle_q_prev, state.body_q, solver.body_q_prev, m.particle_count,
            m.contact_slot_entity, m.contact_slot_kind, m.contact_slot_local, m.contact_slot_axis,
            m.contact_slot_rim_radius, m.contact_slot_radius, m.contact_slot_obstacle, m.obstacle_kind,
            m.obstacle_transform, m.obstacle_size, m.particle_world, m.body_world, solver.frame_shift,
            solver.contact_margin],
            outputs=[solver.contact_active, solver.contact_anchor, solver.contact_normal, solver.contact_touch,
                     solver.contact_start, solver.contact_start_depth])]

    def leave_frame_commands(self, solver):
        m = solver.model
        return [solver.record(contact_points_to_model_frame, m.contact_slot_count, [
            m.contact_slot_entity, m.particle_count, m.particle_world, m.body_world, solver.frame_shift],
            outputs=[solver.contact_touch, solver.contact_start])]

    def warm_start_commands(self, solver, state):
        m = solver.model
        return [solver.record(fit_carried_contact_multipliers, m.contact_slot_count, [
            state.particle_q, state.body_q, solver.body_q_prev, m.particle_count, m.contact_slot_entity,
            m.contact_slot_kind, m.contact_slot_local, m.contact_slot_axis, m.contact_slot_rim_radius,
            solver.contact_anchor, m.contact_slot_radius, m.contact_slot_row,
            solver.contact_active, solver.contact_normal, solver.contact_touch, solver.contact_start, m.J_offsets,
            m.J_columns, solver.J_values, solver.u_lambda, solver.planar], outputs=[state.multipliers])]

    def velocity_correction_commands(self, solver, state, h):
        m = solver.model
        return [solver.record(depenetration_multipliers, m.contact_slot_count, [
            state.particle_q, state.body_q, solver.body_q_prev, m.particle_inv_mass, m.body_inv_mass,
            solver.body_inv_inertia_world, m.particle_count, m.contact_slot_entity, m.contact_slot_kind,
            m.contact_slot_local, m.contact_slot_axis, m.contact_slot_rim_radius, solver.contact_anchor,
            m.contact_slot_radius, m.contact_slot_row, solver.contact_active, solver.contact_normal,
            solver.contact_start, solver.contact_start_depth, state.multipliers, 1.0 / h, solver.planar],
            outputs=[solver.dlam, solver.contact_taken_speed])]

    def body_velocity_limit_commands(self, solver, state, h):
        m = solver.model
        return [solver.record(limit_body_depenetration, m.contact_slot_count, [
            m.particle_count, m.contact_slot_entity, m.contact_slot_row, solver.contact_taken_speed, m.J_offsets,
            m.J_columns, solver.J_values, solver.u_lambda], outputs=[solver.body_correction_scale])]

    def row_command(self, solver, state, control, h):
        m = solver.model
        return solver.record(eval_contact_rows, m.contact_slot_count, [
            state.particle_q, state.body_q, m.particle_inv_mass, m.body_inv_mass, solver.body_inv_inertia_world,
            m.particle_count, m.contact_slot_entity, m.contact_slot_kind, m.contact_slot_local, m.contact_slot_axis,
            m.contact_slot_rim_radius, m.contact_slot_radius, m.contact_slot_mu, m.contact_slot_row,
            solver.contact_active, solver.contact_anchor, solver.contact_normal, solver.contact_touch,
            solver.contact_start, solver.body_q_prev, state.multipliers, *solver.remainder_inputs(state),
            solver.fb_epsilon, solver.contact_regularization,
            solver.friction_regularization, solver.planar, *solver.row_skip_inputs(), *solver.row_outputs(),
            solver.row_residual_scale])


CONTACT_SLOT = ContactSlot()
