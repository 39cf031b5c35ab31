"""Device functions shared by all constraint kernels: degrees of freedom, rotations, row writing.

Degrees of freedom are numbered particles first (3 per particle), then bodies (6 per body:
linear then angular, world frame). Every Jacobian row stores one contiguous block per entity it
touches, in that order, so a row's nonzeros can be walked entity by entity.
"""

import warp as wp


@wp.func
def nonnegative(index: int):
    """An array index that is never negative, marked as such for the compiler.

    Warp reads a negative index from the end of the array, so every index it cannot prove
    non-negative costs a wrap-around (and registers for the array lengths). Indices that start
    from ``nonnegative`` and only grow skip it: the inner loops of the linear solve run about
    twice as fast on the CPU. The value is unchanged for the indices it is used on.
    """
    return wp.max(index, 0)


@wp.func
def row_world_held(row_world: wp.array(dtype=int), held: wp.array(dtype=int), row: int):
    """Whether the world of ``row`` holds its Newton point, so that a kernel of the Newton loop leaves the row's item
    as it stands (``Solver.held_worlds``; all zeros outside the loop, and on a wp.Tape, where an early return would
    upset Warp's adjoint)."""
    return held[nonnegative(row_world[nonnegative(row)])] != 0


@wp.func
def entity_dof_start(e: int, particle_count: int):
    """First degree of freedom of entity e in the solver's vectors: particles (3 each) first, then
    bodies (6 each: translation, rotation)."""
    if e < particle_count:
        return nonnegative(3 * e)
    return nonnegative(3 * particle_count + 6 * (e - particle_count))


@wp.func
def entity_dof_count(e: int, particle_count: int):
    """Degrees of freedom of entity e: 3 for a particle, 6 for a body."""
    if e < particle_count:
        return 3
    return 6


@wp.func
def dof_entity(k: int, particle_count: int):
    """The entity (a particle, or body e - particle_count) of degree of freedom k (``entity_dof_start``)."""
    if k < 3 * particle_count:
        return k // 3
    return particle_count + (k - 3 * particle_count) // 6


@wp.func
def entity_world(e: int, particle_count: int, particle_world: wp.array(dtype=int), body_world: wp.array(dtype=int)):
    """The world of entity e (a particle, or body e - particle_count)."""
    if e < particle_count:
        return nonnegative(particle_world[e])
    return nonnegative(body_world[nonnegative(e - particle_count)])


@wp.func
def entity_world_held(e: int, particle_count: int, particle_world: wp.array(dtype=int), body_world: wp.array(dtype=int),
                      held: wp.array(dtype=int)):
    """Whether the world of entity e holds its Newton point (``row_world_held`` for an entity)."""
    return held[entity_world(e, particle_count, particle_world, body_world)] != 0


@wp.func
def entity_point(
    entity: int,
    local: wp.vec3,
    particle_count: int,
    particle_q: wp.array(dtype=wp.vec3),
    body_q: wp.array(dtype=wp.transform),
):
    """A particle's position, or the point at ``local`` in a body's frame (its centre of mass at ``local`` 0) [m]."""
    if entity < particle_count:
        return particle_q[entity]
    return wp.transform_point(body_q[nonnegative(entity - particle_count)], local)


@wp.func
def write_particle_block(J: wp.array(dtype=float), nz: int, g: wp.vec3):
    J[nz + 0] = g[0]
    J[nz + 1] = g[1]
    J[nz + 2] = g[2]


@wp.func
def write_body_block(J: wp.array(dtype=float), nz: int, lin: wp.vec3, ang: wp.vec3):
    J[nz + 0] = lin[0]
    J[nz + 1] = lin[1]
    J[nz + 2] = lin[2]
    J[nz + 3] = ang[0]
    J[nz + 4] = ang[1]
    J[nz + 5] = ang[2]


@wp.func
def body_generalized_inverse_mass(inv_mass: float, inv_inertia: wp.mat33, lin: wp.vec3, ang: wp.vec3):
    """Jacobian row block times M^-1 times its transpose for one body."""
    return wp.dot(lin, lin) * inv_mass + wp.dot(ang, inv_inertia * ang)


@wp.func
def rotation_vector_between(q_new: wp.quat, q_old: wp.quat):
    """Rotation vector (axis times angle, world frame) taking q_old to q_new, the shorter way round.

    The exact logarithm, so that it inverts ``integrate_rotation`` for any angle.
    """
    dq = q_new * wp.quat_inverse(q_old)
    if dq[3] < 0.0:
        dq = -dq
    v = wp.vec3(dq[0], dq[1], dq[2])
    s = wp.length(v)
    if s < 1.0e-12:
        return v * 2.0
    return v * (2.0 * wp.atan2(s, dq[3]) / s)


@wp.func
def integrate_rotation(q: wp.quat, w: wp.vec3, h: float):
    """Rotate q by the angular velocity w [rad/s] (world frame) for a time h: the exact exponential."""
    angle = wp.length(w) * h
    if angle < 1.0e-12:
        return wp.normalize(q + wp.quat(w[0], w[1], w[2], 0.0) * q * (0.5 * h))
    return wp.normalize(wp.quat_from_axis_angle(w / wp.length(w), angle) * q)


@wp.func
def planar_body_inverse_mass(inv_mass: float, inv_inertia_zz: float, jx: float, jy: float, jrz: float):
    """``body_generalized_inverse_mass`` of an in-plane block (jx, jy, 0 | 0, 0, jrz), bit for bit.

    The dropped terms of the full products are exact zeros: adding them changes no bit of a
    nonzero sum, at most the sign of a zero one, which the diagonal's sum then absorbs.
    """
    return (jx * jx + jy * jy) * inv_mass + jrz * (inv_inertia_zz * jrz)


@wp.func
def body_frame(body_q: wp.array(dtype=wp.transform), body: int, frame_shift: wp.vec3):
    """The pose of ``body``, or for body -1 the static world's: at -frame_shift in the frame a world's substep runs
    in (``softsnake.kernels.world_frame``; zero outside a substep)."""
    if body < 0:
        return wp.transform(-frame_shift, wp.quat_identity())
    return body_q[nonnegative(body)]


@wp.func
def write_neutral_row(
    row: int, row_c: wp.array(dtype=float), row_compliance: wp.array(dtype=float), row_damping: wp.array(dtype=float)
):
    """A row that exerts nothing: its multiplier relaxes to zero (Jacobian entries must be zeroed by the caller)."""
    row_c[row] = 0.0
    row_compliance[row] = 1.0
    row_damping[row] = 0.0
