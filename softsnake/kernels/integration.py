"""Time integration: prediction, position updates from multipliers, velocities from positions.

Positions are the unknowns of each substep (first-order implicit Euler): the prediction
x~ = x + h v + h^2 M^-1 f_ext is the Newton start, each Newton iteration moves positions by
dx = M^-1 J^T dlambda, and the substep's velocities are (x - x_n) / h. With ``SolverSettings.compensated_positions``
each position is a float32 pair, and every addition here goes into the pair (``kernels.compensated``).
"""

import warp as wp

from .compensated import pair_add, rotated_pair, rotation_between_pairs
from .entities import (
    entity_dof_count,
    entity_dof_start,
    entity_world,
    entity_world_held,
    integrate_rotation,
    nonnegative,
    rotation_vector_between,
)


@wp.func
def velocity_increment(f: wp.vec3, inv_mass: float, gravity: wp.vec3, h: float):
    """h (g + f / m): what the prediction adds to a particle's or a body's linear velocity (kinematic: nothing)."""
    increment = wp.vec3(0.0)
    if inv_mass > 0.0:
        increment = (gravity + f * inv_mass) * h
    return increment


@wp.func
def in_plane(v: wp.vec3, planar_axis: int):
    """v without its component along a planar model's normal axis (``planar_axis`` < 0: v)."""
    if planar_axis >= 0:
        v[planar_axis] = 0.0
    return v


@wp.func
def predicted_particle_velocity(v: wp.vec3, f: wp.vec3, inv_mass: float, gravity: wp.vec3, planar_axis: int, h: float):
    """v~ = v + h (g + f / m) of a particle (kinematic: v), in-plane for planar models. Shared by the
    prediction and its differentiable counterpart (``kernels.adjoint``)."""
    if inv_mass > 0.0:
        v = v + velocity_increment(f, inv_mass, gravity, h)
    return in_plane(v, planar_axis)


@wp.func
def predicted_velocity_pair(v: wp.vec3, v_low: wp.vec3, increment: wp.vec3, planar_axis: int):
    """The compensated v~: (v, v_low) + h (g + f / m) as a pair (``kernels.compensated``), in-plane."""
    hi, lo = pair_add(v, v_low, increment)
    return in_plane(hi, planar_axis), in_plane(lo, planar_axis)


@wp.func
def predicted_position_pair(x: wp.vec3, x_low: wp.vec3, v: wp.vec3, v_low: wp.vec3, h: float):
    """The compensated x~ = x + h v~, both pairs: the velocity's remainder moves the position too."""
    hi, lo = pair_add(x, x_low, v * h)
    return pair_add(hi, lo, v_low * h)


GYROSCOPIC_ITERATIONS = wp.constant(4)
"""Newton iterations of the gyroscopic midpoint step (``torque_free_change``) from omega: with four, the
kinetic energy and |I omega| stay within 2e-4 at omega h = 2.5 and 10 (tests/test_free_rotation.py)."""


@wp.func
def torque_free_change(w: wp.vec3, inertia: wp.mat33, h: float):
    """omega' - omega of a free body over h [s], body frame: Euler's equations I omega_dot = -omega x I omega by
    the implicit midpoint rule, I d + h m x I m = 0 with d = omega' - omega and m = omega + d / 2.

    The rule keeps both quadratic invariants of the torque-free motion, the kinetic energy
    omega . I omega / 2 and |I omega|, at every step length (dot the equation with m, then with I m),
    where the explicit term omega' = omega - h I^-1 (omega x I omega) adds energy at every step (a body
    spinning near its least axis at omega h = 2.5 blew up in eleven steps). Solved by Newton's method
    from d = 0 with the Jacobian I + h/2 (skew(m) I - skew(I m)); a fixed count keeps it one branch-free
    function that the prediction and its adjoint (``kernels.adjoint``) share. The change, not omega', so that
    the caller adds it to the world-frame omega it has (``angular_velocity_increment``): omega' taken back
    through the body frame and out again rounds at omega's size every substep, a drift of a few times
    float32's spacing of omega per substep (a body spinning at 10 rad/s on a principal axis, torque 0.01 rad/s^2,
    gained 0.034 rad/s in 1 s at 1/9600 s instead of 0.01; tests/test_free_rotation.py)."""
    d = wp.vec3(0.0)
    for _ in range(GYROSCOPIC_ITERATIONS):
        m = w + 0.5 * d
        Im = inertia * m
        residual = inertia * d + h * wp.cross(m, Im)
        jacobian = inertia + (0.5 * h) * (wp.skew(m) * inertia - wp.skew(Im))
        d = d - wp.inverse(jacobian) * residual
    return d


@wp.func
def angular_velocity_increment(tf: wp.transform, w: wp.vec3, torque: wp.vec3, inertia: wp.mat33,
                               inv_inertia: wp.mat33, h: float):
    """omega~ - omega of a body with mass (world frame): the torque-free change by the implicit midpoint rule
    (``torque_free_change``, in the body frame where its inertia is fixed) and the torque's impulse, h I^-1 tau."""
    R = wp.quat_to_matrix(wp.transform_get_rotation(tf))
    return R * (torque_free_change(wp.transpose(R) * w, inertia, h) + inv_inertia * (wp.transpose(R) * torque) * h)


@wp.func
def about_normal(w: wp.vec3, planar_axis: int):
    """w's component about a planar model's normal axis alone, the only rotation in-plane motion has
    (``planar_axis`` < 0: w)."""
    if planar_axis >= 0:
        w_keep = w[planar_axis]
        w = wp.vec3(0.0)
        w[planar_axis] = w_keep
    return w


@wp.func
def predicted_body_velocity(
    tf: wp.transform,
    qd: wp.spatial_vector,
    f: wp.spatial_vector,
    inv_m: float,
    inertia: wp.mat33,
    inv_inertia: wp.mat33,
    gravity: wp.vec3,
    planar_axis: int,
    h: float,
):
    """(v~, w~) of a body: gravity, force and torque over h, and the torque-free rotation by the implicit
    midpoint rule (``angular_velocity_increment``; kinematic: unchanged); in-plane for planar models."""
    v = wp.spatial_top(qd)
    w = wp.spatial_bottom(qd)
    if inv_m > 0.0:
        v = v + (gravity + wp.spatial_top(f) * inv_m) * h
        w = w + angular_velocity_increment(tf, w, wp.spatial_bottom(f), inertia, inv_inertia, h)
    return wp.spatial_vector(in_plane(v, planar_axis), about_normal(w, planar_axis))


@wp.func
def predicted_body_pose(tf: wp.transform, qd: wp.spatial_vector, h: float):
    """x~ = x + h v~, q~ = exp(h w~) q."""
    return wp.transform(wp.transform_get_translation(tf) + wp.spatial_top(qd) * h,
                        integrate_rotation(wp.transform_get_rotation(tf), wp.spatial_bottom(qd), h))


@wp.kernel(enable_backward=False)  # never on a wp.Tape: the gradients use adjoint.predict_particles_into
def predict_particles(
    particle_q: wp.array(dtype=wp.vec3),
    particle_qd: wp.array(dtype=wp.vec3),
    particle_f: wp.array(dtype=wp.vec3),
    particle_inv_mass: wp.array(dtype=float),
    gravity: wp.vec3,
    planar_axis: int,
    h: float,
    particle_q_prev: wp.array(dtype=wp.vec3),
    particle_q_pred: wp.array(dtype=wp.vec3),
    compensated: int,
    particle_q_low: wp.array(dtype=wp.vec3),
    particle_q_prev_low: wp.array(dtype=wp.vec3),
    particle_q_pred_low: wp.array(dtype=wp.vec3),
    particle_qd_low: wp.array(dtype=wp.vec3),
):
    """x_n = x, v~ and x~ = x + h v~ (compensated: positions and velocities into their pairs, ``kernels.compensated``)."""
    i = nonnegative(wp.tid())
    x = particle_q[i]
    particle_q_prev[i] = x
    if compensated != 0:
        v, v_low = predicted_velocity_pair(particle_qd[i], particle_qd_low[i],
                                           velocity_increment(particle_f[i], particle_inv_mass[i], gravity, h),
                                           planar_axis)
        lo = particle_q_low[i]
        particle_q_prev_low[i] = lo
        x_pred, lo_pred = predicted_position_pair(x, lo, v, v_low, h)
        particle_qd[i] = v
        particle_qd_low[i] = v_low
        particle_q[i] = x_pred
        particle_q_pred[i] = x_pred
        particle_q_low[i] = lo_pred
        particle_q_pred_low[i] = lo_pred
    else:
        v = predicted_particle_velocity(particle_qd[i], particle_f[i], particle_inv_mass[i], gravity, planar_axis, h)
        particle_qd[i] = v
        particle_q[i] = x + v * h
        particle_q_pred[i] = x + v * h


@wp.kernel(enable_backward=False)  # never on a wp.Tape: the gradients use adjoint.predict_bodies_into
def predict_bodies(
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    body_f: wp.array(dtype=wp.spatial_vector),
    body_inv_mass: wp.array(dtype=float),
    body_inertia: wp.array(dtype=wp.mat33),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    gravity: wp.vec3,
    planar_axis: int,
    h: float,
    body_q_prev: wp.array(dtype=wp.transform),
    body_q_pred: wp.array(dtype=wp.transform),
    compensated: int,
    body_q_low: wp.array(dtype=wp.spatial_vector),
    body_q_prev_low: wp.array(dtype=wp.spatial_vector),
    body_q_pred_low: wp.array(dtype=wp.spatial_vector),
    body_qd_low: wp.array(dtype=wp.spatial_vector),
):
    """x_n = x, v~ and x~ = (x + h v~, exp(h w~) q) (compensated: the translation, the rotation and both velocities
    into their pairs, the rotation turned by both parts of w~)."""
    i = nonnegative(wp.tid())
    tf = body_q[i]
    body_q_prev[i] = tf
    qd = wp.spatial_vector()
    tf_pred = tf
    if compensated == 0:
        qd = predicted_body_velocity(tf, body_qd[i], body_f[i], body_inv_mass[i], body_inertia[i],
                                     body_inv_inertia[i], gravity, planar_axis, h)
        tf_pred = predicted_body_pose(tf, qd, h)
    else:
        qd_in = body_qd[i]
        qd_low = body_qd_low[i]
        v, v_low = predicted_velocity_pair(wp.spatial_top(qd_in), wp.spatial_top(qd_low),
                                           velocity_increment(wp.spatial_top(body_f[i]), body_inv_mass[i], gravity, h),
                                           planar_axis)
        w_increment = wp.vec3(0.0)
        if body_inv_mass[i] > 0.0:
            w_increment = angular_velocity_increment(tf, wp.spatial_bottom(qd_in), wp.spatial_bottom(body_f[i]),
                                                     body_inertia[i], body_inv_inertia[i], h)
        w, w_low = pair_add(wp.spatial_bottom(qd_in), wp.spatial_bottom(qd_low), w_increment)
        w = about_normal(w, planar_axis)
        w_low = about_normal(w_low, planar_axis)
        qd = wp.spatial_vector(v, w)
        body_qd_low[i] = wp.spatial_vector(v_low, w_low)
        lo = body_q_low[i]
        body_q_prev_low[i] = lo
        t_pred, lo_pred = predicted_position_pair(wp.transform_get_translation(tf), wp.spatial_top(lo), v, v_low, h)
        q_pred, delta_pred = rotated_pair(wp.transform_get_rotation(tf), wp.spatial_bottom(lo),
                                          (wp.vec3d(w) + wp.vec3d(w_low)) * wp.float64(h))
        tf_pred = wp.transform(t_pred, q_pred)
        body_q_low[i] = wp.spatial_vector(lo_pred, delta_pred)
        body_q_pred_low[i] = wp.spatial_vector(lo_pred, delta_pred)
    body_qd[i] = qd
    body_q[i] = tf_pred
    body_q_pred[i] = tf_pred


@wp.kernel
def update_world_inverse_inertia(
    body_q: wp.array(dtype=wp.transform),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    body_world: wp.array(dtype=int),
    held: wp.array(dtype=int),
    body_inv_inertia_world: wp.array(dtype=wp.mat33),
):
    """R I^-1 R^T of every body, except in held worlds (``Solver.held_worlds``)."""
    i = nonnegative(wp.tid())
    if held[nonnegative(body_world[i])] != 0:
        return
    R = wp.quat_to_matrix(wp.transform_get_rotation(body_q[i]))
    body_inv_inertia_world[i] = R * body_inv_inertia[i] * wp.transpose(R)


@wp.func
def entity_offset(
    e: int,
    particle_count: int,
    particle_q: wp.array(dtype=wp.vec3),
    particle_q_ref: wp.array(dtype=wp.vec3),
    body_q: wp.array(dtype=wp.transform),
    body_q_ref: wp.array(dtype=wp.transform),
    out: wp.array(dtype=float),
):
    """Write q - q_ref for the degrees of freedom of entity e (bodies: translation, then the rotation vector)."""
    base = entity_dof_start(e, particle_count)
    if e < particle_count:
        d = particle_q[e] - particle_q_ref[e]
        for k in range(3):
            out[base + k] = d[k]
    else:
        b = nonnegative(e - particle_count)
        d = wp.transform_get_translation(body_q[b]) - wp.transform_get_translation(body_q_ref[b])
        r = rotation_vector_between(wp.transform_get_rotation(body_q[b]), wp.transform_get_rotation(body_q_ref[b]))
        for k in range(3):
            out[base + k] = d[k]
            out[base + 3 + k] = r[k]


@wp.kernel
def substep_displacements(
    particle_q: wp.array(dtype=wp.vec3),
    particle_q_prev: wp.array(dtype=wp.vec3),
    particle_q_pred: wp.array(dtype=wp.vec3),
    body_q: wp.array(dtype=wp.transform),
    body_q_prev: wp.array(dtype=wp.transform),
    body_q_pred: wp.array(dtype=wp.transform),
    particle_count: int,
    particle_world: wp.array(dtype=int),
    body_world: wp.array(dtype=int),
    held: wp.array(dtype=int),
    displacement: wp.array(dtype=float),
    offset: wp.array(dtype=float),
):
    """Per degree of freedom: the displacement x - x_n since the substep's start (damping rows) and the
    offset x - x~ from the prediction (the momentum residual M (x - x~) - J^T lambda), except in held worlds
    (``Solver.held_worlds``)."""
    e = nonnegative(wp.tid())
    if entity_world_held(e, particle_count, particle_world, body_world, held):
        return
    entity_offset(e, particle_count, particle_q, particle_q_prev, body_q, body_q_prev, displacement)
    entity_offset(e, particle_count, particle_q, particle_q_pred, body_q, body_q_pred, offset)


@wp.func
def set_entity_position(
    e: int,
    base: int,
    u: wp.array(dtype=float),
    particle_count: int,
    particle_q_pred: wp.array(dtype=wp.vec3),
    body_q_pred: wp.array(dtype=wp.transform),
    particle_q: wp.array(dtype=wp.vec3),
    body_q: wp.array(dtype=wp.transform),
    compensated: int,
    particle_q_pred_low: wp.array(dtype=wp.vec3),
    body_q_pred_low: wp.array(dtype=wp.spatial_vector),
    particle_q_low: wp.array(dtype=wp.vec3),
    body_q_low: wp.array(dtype=wp.spatial_vector),
):
    """x = x~ + u for entity e, whose degrees of freedom start at ``base`` (bodies: translation, then
    rotation by the rotation vector u_angular: q = exp(u_angular) q~); compensated, into the pairs."""
    du = wp.vec3(u[base], u[base + 1], u[base + 2])
    if e < particle_count:
        if compensated != 0:
            x, lo = pair_add(particle_q_pred[e], particle_q_pred_low[e], du)
            particle_q[e] = x
            particle_q_low[e] = lo
        else:
            particle_q[e] = particle_q_pred[e] + du
    else:
        b = nonnegative(e - particle_count)
        tf = body_q_pred[b]
        turn = wp.vec3(u[base + 3], u[base + 4], u[base + 5])
        if compensated != 0:
            pred_low = body_q_pred_low[b]
            p, lo = pair_add(wp.transform_get_translation(tf), wp.spatial_top(pred_low), du)
            q, delta = rotated_pair(wp.transform_get_rotation(tf), wp.spatial_bottom(pred_low), wp.vec3d(turn))
            body_q_low[b] = wp.spatial_vector(lo, delta)
            body_q[b] = wp.transform(p, q)
        else:
            body_q[b] = wp.transform(wp.transform_get_translation(tf) + du,
                                     integrate_rotation(wp.transform_get_rotation(tf), turn, 1.0))


@wp.kernel
def positions_from_prediction(
    u: wp.array(dtype=float),
    particle_count: int,
    particle_q_pred: wp.array(dtype=wp.vec3),
    body_q_pred: wp.array(dtype=wp.transform),
    particle_q: wp.array(dtype=wp.vec3),
    body_q: wp.array(dtype=wp.transform),
    compensated: int,
    particle_q_pred_low: wp.array(dtype=wp.vec3),
    body_q_pred_low: wp.array(dtype=wp.spatial_vector),
    particle_q_low: wp.array(dtype=wp.vec3),
    body_q_low: wp.array(dtype=wp.spatial_vector),
):
    """x = x~ + u with u = M^-1 J^T lambda: the positions that balance momentum with the multipliers."""
    e = nonnegative(wp.tid())
    set_entity_position(e, entity_dof_start(e, particle_count), u, particle_count, particle_q_pred, body_q_pred,
                        particle_q, body_q, compensated, particle_q_pred_low, body_q_pred_low, particle_q_low,
                        body_q_low)


@wp.kernel(enable_backward=False)  # never on a wp.Tape: a Newton iteration's update, which the implicit gradient skips
def positions_after_update(
    u_step: wp.array(dtype=float),
    momentum_gap: wp.array(dtype=float),
    momentum_balance: int,
    take_step: int,
    particle_count: int,
    particle_world: wp.array(dtype=int),
    body_world: wp.array(dtype=int),
    retreat: wp.array(dtype=int),
    step_scale: wp.array(dtype=float),
    offset_ref: wp.array(dtype=float),
    particle_q_pred: wp.array(dtype=wp.vec3),
    body_q_pred: wp.array(dtype=wp.transform),
    offset_full: wp.array(dtype=float),
    particle_q: wp.array(dtype=wp.vec3),
    body_q: wp.array(dtype=wp.transform),
    compensated: int,
    particle_q_pred_low: wp.array(dtype=wp.vec3),
    body_q_pred_low: wp.array(dtype=wp.spatial_vector),
    particle_q_low: wp.array(dtype=wp.vec3),
    body_q_low: wp.array(dtype=wp.spatial_vector),
):
    """Positions after a Newton update, per world of the entity: a world that took a step moves from
    its accepted point (``offset_ref``: x - x~ there) by u_step = M^-1 J^T dlambda, and keeps where it
    went (``offset_full``); a world that retreats goes back along the straight line from its accepted
    point to the end of its last step, to the fraction ``step_scale`` of it (going back along J of the
    rejected point instead would carry that point's error, a Jacobian of inverted elements, into the
    retreat). With ``take_step`` 0 (the check after the last iteration) only retreats move."""
    e = nonnegative(wp.tid())
    base = entity_dof_start(e, particle_count)
    count = entity_dof_count(e, particle_count)
    w = entity_world(e, particle_count, particle_world, body_world)
    if retreat[w] == 1:
        t = step_scale[w]
        for k in range(count):
            d = base + k
            u_step[d] = offset_ref[d] + t * (offset_full[d] - offset_ref[d])
    elif retreat[w] == 0 and take_step != 0:
        for k in range(count):
            d = base + k
            u_step[d] = offset_ref[d] + u_step[d]
            if momentum_balance != 0:
                u_step[d] = u_step[d] - momentum_gap[d]
            offset_full[d] = u_step[d]
    else:
        return
    set_entity_position(e, base, u_step, particle_count, particle_q_pred, body_q_pred, particle_q, body_q, compensated,
                        particle_q_pred_low, body_q_pred_low, particle_q_low, body_q_low)


@wp.kernel(enable_backward=False)  # never on a wp.Tape: a Newton iteration's update, which the implicit gradient skips
def remember_accepted_points(
    offset: wp.array(dtype=float),
    particle_count: int,
    particle_world: wp.array(dtype=int),
    body_world: wp.array(dtype=int),
    retreat: wp.array(dtype=int),
    offset_ref: wp.array(dtype=float),
):
    """offset_ref = x - x~ of the entities whose world accepted its current point (the line search's
    reference, from which a later retreat starts)."""
    e = nonnegative(wp.tid())
    base = entity_dof_start(e, particle_count)
    if retreat[entity_world(e, particle_count, particle_world, body_world)] != 1:
        for k in range(entity_dof_count(e, particle_count)):
            offset_ref[base + k] = offset[base + k]


@wp.kernel(enable_backward=False)  # never on a wp.Tape: a choice between iterates, not a differentiable step
def copy_positions_where(particle_count: int, particle_world: wp.array(dtype=int), body_world: wp.array(dtype=int),
                         taken: wp.array(dtype=int), particle_q_source: wp.array(dtype=wp.vec3),
                         body_q_source: wp.array(dtype=wp.transform), particle_low_source: wp.array(dtype=wp.vec3),
                         body_low_source: wp.array(dtype=wp.spatial_vector), compensated: int,
                         particle_q: wp.array(dtype=wp.vec3), body_q: wp.array(dtype=wp.transform),
                         particle_low: wp.array(dtype=wp.vec3), body_low: wp.array(dtype=wp.spatial_vector)):
    """The source positions into ``particle_q`` and ``body_q`` (compensated: their remainders too) for the entities
    of the worlds with taken[w] = 1 (``SolverSettings.wander_limit``: kept aside at a point of least merit, or put
    back at the substep's end; the elastic warm start: its first start put back)."""
    e = nonnegative(wp.tid())
    if taken[entity_world(e, particle_count, particle_world, body_world)] == 1:
        if e < particle_count:
            particle_q[e] = particle_q_source[e]
            if compensated != 0:
                particle_low[e] = particle_low_source[e]
        else:
            b = nonnegative(e - particle_count)
            body_q[b] = body_q_source[b]
            if compensated != 0:
                body_low[b] = body_low_source[b]


@wp.kernel(enable_backward=False)  # never on a wp.Tape: the gradients use adjoint.velocities_from_offsets
def finish_particle_velocities(
    particle_q: wp.array(dtype=wp.vec3),
    particle_q_pred: wp.array(dtype=wp.vec3),
    inv_h: float,
    compensated: int,
    particle_q_low: wp.array(dtype=wp.vec3),
    particle_q_pred_low: wp.array(dtype=wp.vec3),
    particle_qd_low: wp.array(dtype=wp.vec3),
    particle_qd: wp.array(dtype=wp.vec3),
):
    """v = (x - x_n) / h, written as v~ + (x - x~) / h: the same number, but float32 keeps it
    exact where no constraint acts (the difference of two nearby large positions would not); compensated, x - x~
    with the remainders' difference, added into the velocity's pair."""
    i = nonnegative(wp.tid())
    d = particle_q[i] - particle_q_pred[i]
    if compensated != 0:
        d = d + (particle_q_low[i] - particle_q_pred_low[i])
        v, v_low = pair_add(particle_qd[i], particle_qd_low[i], d * inv_h)
        particle_qd[i] = v
        particle_qd_low[i] = v_low
    else:
        particle_qd[i] = particle_qd[i] + d * inv_h


@wp.kernel(enable_backward=False)  # never on a wp.Tape: a correction the converged step does not make
def add_particle_velocities(u: wp.array(dtype=float), particle_qd: wp.array(dtype=wp.vec3)):
    """v += u for every particle, u over the solver's degrees of freedom (particles' first)."""
    i = nonnegative(wp.tid())
    particle_qd[i] = particle_qd[i] + wp.vec3(u[3 * i], u[3 * i + 1], u[3 * i + 2])


@wp.kernel(enable_backward=False)  # never on a wp.Tape: a correction the converged step does not make
def add_body_velocities(
    u: wp.array(dtype=float),
    body_scale: wp.array(dtype=float),
    body_q: wp.array(dtype=wp.transform),
    body_inv_mass: wp.array(dtype=float),
    body_inertia: wp.array(dtype=wp.mat33),
    particle_count: int,
    body_qd: wp.array(dtype=wp.spatial_vector),
):
    """(v, omega) += a (u_v, u_omega) for every body, u over the solver's degrees of freedom (after the
    particles'), a its share (``body_scale``) and at most -(v . M u) / (u . M u), the step along u to the
    least kinetic energy: a correction only ever removes kinetic energy, whatever its share. The share is
    reset to 1 for the next substep's limits (one launch fewer than a fill)."""
    b = nonnegative(wp.tid())
    share = body_scale[b]
    body_scale[b] = 1.0
    base = 3 * particle_count + 6 * b
    du = wp.vec3(u[base], u[base + 1], u[base + 2])
    dw = wp.vec3(u[base + 3], u[base + 4], u[base + 5])
    inv_mass = body_inv_mass[b]
    if inv_mass > 0.0:
        rot = wp.transform_get_rotation(body_q[b])
        inertia = body_inertia[b]
        qd = body_qd[b]
        v = wp.spatial_top(qd)
        w = wp.spatial_bottom(qd)
        # M u: the mass, and the inertia turned to the world frame, R I R^T.
        m_du = du / inv_mass
        m_dw = wp.quat_rotate(rot, inertia * wp.quat_rotate_inv(rot, dw))
        u_m_u = wp.dot(du, m_du) + wp.dot(dw, m_dw)
        if u_m_u > 0.0:
            a = wp.clamp(-(wp.dot(v, m_du) + wp.dot(w, m_dw)) / u_m_u, 0.0, share)
            body_qd[b] = wp.spatial_vector(v + du * a, w + dw * a)


@wp.kernel(enable_backward=False)  # never on a wp.Tape: the gradients use adjoint.velocities_from_offsets
def finish_body_velocities(
    body_q: wp.array(dtype=wp.transform),
    body_q_pred: wp.array(dtype=wp.transform),
    inv_h: float,
    compensated: int,
    body_q_low: wp.array(dtype=wp.spatial_vector),
    body_q_pred_low: wp.array(dtype=wp.spatial_vector),
    body_qd_low: wp.array(dtype=wp.spatial_vector),
    body_qd: wp.array(dtype=wp.spatial_vector),
):
    """Body counterpart of finish_particle_velocities (rotation: the rotation vector from q~ to q; compensated,
    between the pairs, added into the angular velocity's pair)."""
    i = nonnegative(wp.tid())
    tf = body_q[i]
    tf_pred = body_q_pred[i]
    qd = body_qd[i]
    d = wp.transform_get_translation(tf) - wp.transform_get_translation(tf_pred)
    if compensated != 0:
        low = body_q_low[i]
        pred_low = body_q_pred_low[i]
        qd_low = body_qd_low[i]
        d = d + (wp.spatial_top(low) - wp.spatial_top(pred_low))
        turn = rotation_between_pairs(wp.transform_get_rotation(tf), wp.spatial_bottom(low),
                                      wp.transform_get_rotation(tf_pred), wp.spatial_bottom(pred_low))
        v, v_low = pair_add(wp.spatial_top(qd), wp.spatial_top(qd_low), d * inv_h)
        w, w_low = pair_add(wp.spatial_bottom(qd), wp.spatial_bottom(qd_low), turn * inv_h)
        body_qd_low[i] = wp.spatial_vector(v_low, w_low)
        body_qd[i] = wp.spatial_vector(v, w)
    else:
        turn = rotation_vector_between(wp.transform_get_rotation(tf), wp.transform_get_rotation(tf_pred))
        body_qd[i] = wp.spatial_vector(wp.spatial_top(qd) + d * inv_h, wp.spatial_bottom(qd) + turn * inv_h)
