"""Time integration: prediction, position updates from multipliers, velocities from positions.

Positions are the unknowns of each substep (first-order implicit Euler): the prediction
x~ = x + h v + h^2 M^-1 f_ext is the Newton start, each Newton iteration moves positions by
dx = M^-1 J^T dlambda, and the substep's velocities are (x - x_n) / h.
"""

import warp as wp

from .entities import integrate_rotation, nonnegative, rotation_vector_between


@wp.kernel
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
):
    i = nonnegative(wp.tid())
    x = particle_q[i]
    v = particle_qd[i]
    particle_q_prev[i] = x
    w = particle_inv_mass[i]
    if w > 0.0:
        v = v + (gravity + particle_f[i] * w) * h
    if planar_axis >= 0:
        v[planar_axis] = 0.0
    particle_qd[i] = v
    particle_q[i] = x + v * h
    particle_q_pred[i] = x + v * h


@wp.kernel
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
):
    i = nonnegative(wp.tid())
    tf = body_q[i]
    body_q_prev[i] = tf
    p = wp.transform_get_translation(tf)
    q = wp.transform_get_rotation(tf)
    v = wp.spatial_top(body_qd[i])
    w = wp.spatial_bottom(body_qd[i])
    inv_m = body_inv_mass[i]
    if inv_m > 0.0:
        f = body_f[i]
        v = v + (gravity + wp.spatial_top(f) * inv_m) * h
        # Torque and the explicit gyroscopic term, both in the world frame.
        R = wp.quat_to_matrix(q)
        I_world = R * body_inertia[i] * wp.transpose(R)
        I_inv_world = R * body_inv_inertia[i] * wp.transpose(R)
        w = w + I_inv_world * (wp.spatial_bottom(f) - wp.cross(w, I_world * w)) * h
    if planar_axis >= 0:
        v[planar_axis] = 0.0
        # In-plane motion: only rotation about the plane normal survives.
        w_keep = w[planar_axis]
        w = wp.vec3(0.0)
        w[planar_axis] = w_keep
    p = p + v * h
    q = integrate_rotation(q, w, h)
    body_qd[i] = wp.spatial_vector(v, w)
    body_q[i] = wp.transform(p, q)
    body_q_pred[i] = wp.transform(p, q)


@wp.kernel
def update_world_inverse_inertia(
    body_q: wp.array(dtype=wp.transform),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    body_inv_inertia_world: wp.array(dtype=wp.mat33),
):
    i = nonnegative(wp.tid())
    R = wp.quat_to_matrix(wp.transform_get_rotation(body_q[i]))
    body_inv_inertia_world[i] = R * body_inv_inertia[i] * wp.transpose(R)


@wp.kernel
def substep_displacement(
    particle_q: wp.array(dtype=wp.vec3),
    particle_q_prev: wp.array(dtype=wp.vec3),
    body_q: wp.array(dtype=wp.transform),
    body_q_prev: wp.array(dtype=wp.transform),
    particle_count: int,
    displacement: wp.array(dtype=float),
):
    """Displacement of every degree of freedom since the start of the substep (for damping rows)."""
    e = nonnegative(wp.tid())
    if e < particle_count:
        d = particle_q[e] - particle_q_prev[e]
        for k in range(3):
            displacement[3 * e + k] = d[k]
    else:
        b = nonnegative(e - particle_count)
        base = nonnegative(3 * particle_count + 6 * b)
        d = wp.transform_get_translation(body_q[b]) - wp.transform_get_translation(body_q_prev[b])
        r = rotation_vector_between(wp.transform_get_rotation(body_q[b]), wp.transform_get_rotation(body_q_prev[b]))
        for k in range(3):
            displacement[base + k] = d[k]
            displacement[base + 3 + k] = r[k]


@wp.func
def gather_transpose_block(
    JT_offsets: wp.array(dtype=int),
    JT_ends: wp.array(dtype=int),
    JT_columns: wp.array(dtype=int),
    JT_values: wp.array(dtype=float),
    x: wp.array(dtype=float),
    c0: int,
    c1: int,
    c2: int,
):
    """(J^T x) at three columns of one entity, read from the explicit transpose (no atomics: deterministic).

    A row stores a full block for every entity it touches, so the columns of one entity list the
    same rows in the same order: one pass over c0's rows serves all three. Each column is still
    summed alone and in row order (the same bits as three separate gathers), but the three
    independent sums overlap instead of each waiting for its previous addition, and the row
    indices and x values are read once. The rows run from JT_offsets[c0] to JT_ends[c0] (the
    next column's start, or earlier where the column's remaining rows add exact zeros).
    """
    k0 = nonnegative(JT_offsets[c0])
    k1 = nonnegative(JT_offsets[c1])
    k2 = nonnegative(JT_offsets[c2])
    end = JT_ends[c0]
    s0 = float(0.0)
    s1 = float(0.0)
    s2 = float(0.0)
    # A while loop: tighter CPU code than a range loop in this innermost loop of the linear solve.
    while k0 < end:
        xr = x[nonnegative(JT_columns[k0])]
        s0 += JT_values[k0] * xr
        s1 += JT_values[k1] * xr
        s2 += JT_values[k2] * xr
        k0 += 1
        k1 += 1
        k2 += 1
    return wp.vec3(s0, s1, s2)


@wp.func
def gather_particle_transpose(
    e: int,
    planar: int,
    JT_offsets: wp.array(dtype=int),
    JT_ends: wp.array(dtype=int),
    JT_columns: wp.array(dtype=int),
    JT_values: wp.array(dtype=float),
    x: wp.array(dtype=float),
):
    """(J^T x) at the three degrees of freedom of particle e.

    Planar models have no entries in the z column: its sum is exactly 0 and is not walked.
    """
    if planar != 0:
        # Two columns to walk: the block's third sum repeats y and is dropped.
        g = gather_transpose_block(JT_offsets, JT_ends, JT_columns, JT_values, x, 3 * e, 3 * e + 1, 3 * e + 1)
        return wp.vec3(g[0], g[1], 0.0)
    return gather_transpose_block(JT_offsets, JT_ends, JT_columns, JT_values, x, 3 * e, 3 * e + 1, 3 * e + 2)


@wp.func
def write_inverse_mass_transpose(
    e: int,
    particle_count: int,
    planar: int,
    JT_offsets: wp.array(dtype=int),
    JT_ends: wp.array(dtype=int),
    JT_columns: wp.array(dtype=int),
    JT_values: wp.array(dtype=float),
    x: wp.array(dtype=float),
    particle_inv_mass: wp.array(dtype=float),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia_world: wp.array(dtype=wp.mat33),
    u: wp.array(dtype=float),
):
    """u = M^-1 J^T x for the degrees of freedom of entity e (a particle, or body e - particle_count).

    Planar models have no entries in a body's out-of-plane columns (z, rotation about x and y):
    their sums are exactly 0 and are not walked.
    """
    if e < particle_count:
        w = particle_inv_mass[e]
        g = gather_particle_transpose(e, planar, JT_offsets, JT_ends, JT_columns, JT_values, x)
        for k in range(3):
            u[3 * e + k] = w * g[k]
    else:
        b = e - particle_count
        base = 3 * particle_count + 6 * b
        lin = wp.vec3(0.0)
        ang = wp.vec3(0.0)
        if planar != 0:
            g = gather_transpose_block(JT_offsets, JT_ends, JT_columns, JT_values, x, base, base + 1, base + 5)
            lin = wp.vec3(g[0], g[1], 0.0)
            ang = wp.vec3(0.0, 0.0, g[2])
        else:
            lin = gather_transpose_block(JT_offsets, JT_ends, JT_columns, JT_values, x, base, base + 1, base + 2)
            ang = gather_transpose_block(JT_offsets, JT_ends, JT_columns, JT_values, x, base + 3, base + 4, base + 5)
        lin = lin * body_inv_mass[b]
        ang = body_inv_inertia_world[b] * ang
        for k in range(3):
            u[base + k] = lin[k]
            u[base + 3 + k] = ang[k]


@wp.kernel
def apply_inverse_mass_transpose(
    JT_offsets: wp.array(dtype=int),
    JT_ends: wp.array(dtype=int),
    JT_columns: wp.array(dtype=int),
    JT_values: wp.array(dtype=float),
    x: wp.array(dtype=float),
    particle_inv_mass: wp.array(dtype=float),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia_world: wp.array(dtype=wp.mat33),
    particle_count: int,
    planar: int,
    u: wp.array(dtype=float),
):
    """u = M^-1 J^T x, one thread per particle or body."""
    write_inverse_mass_transpose(wp.tid(), particle_count, planar, JT_offsets, JT_ends, JT_columns, JT_values, x,
                                 particle_inv_mass, body_inv_mass, body_inv_inertia_world, u)


@wp.kernel
def apply_position_update(
    dx: wp.array(dtype=float),
    particle_count: int,
    particle_q: wp.array(dtype=wp.vec3),
    body_q: wp.array(dtype=wp.transform),
):
    """Move particles and bodies by a generalized displacement (bodies: linear, then rotation vector)."""
    e = nonnegative(wp.tid())
    if e < particle_count:
        particle_q[e] = particle_q[e] + wp.vec3(dx[3 * e], dx[3 * e + 1], dx[3 * e + 2])
    else:
        b = nonnegative(e - particle_count)
        base = nonnegative(3 * particle_count + 6 * b)
        tf = body_q[b]
        p = wp.transform_get_translation(tf) + wp.vec3(dx[base], dx[base + 1], dx[base + 2])
        w = wp.vec3(dx[base + 3], dx[base + 4], dx[base + 5])
        q = wp.transform_get_rotation(tf)
        q = integrate_rotation(q, w, 1.0)
        body_q[b] = wp.transform(p, q)


@wp.kernel
def finish_particle_velocities(
    particle_q: wp.array(dtype=wp.vec3),
    particle_q_pred: wp.array(dtype=wp.vec3),
    inv_h: float,
    particle_qd: wp.array(dtype=wp.vec3),
):
    """v = (x - x_n) / h, written as v~ + (x - x~) / h: the same number, but float32 keeps it
    exact where no constraint acts (the difference of two nearby large positions would not)."""
    i = nonnegative(wp.tid())
    particle_qd[i] = particle_qd[i] + (particle_q[i] - particle_q_pred[i]) * inv_h


@wp.kernel
def finish_body_velocities(
    body_q: wp.array(dtype=wp.transform),
    body_q_pred: wp.array(dtype=wp.transform),
    inv_h: float,
    body_qd: wp.array(dtype=wp.spatial_vector),
):
    """Body counterpart of finish_particle_velocities (rotation: the rotation vector from q~ to q)."""
    i = nonnegative(wp.tid())
    tf = body_q[i]
    tf_pred = body_q_pred[i]
    v = wp.spatial_top(body_qd[i]) + (wp.transform_get_translation(tf) - wp.transform_get_translation(tf_pred)) * inv_h
    w = wp.spatial_bottom(body_qd[i]) + rotation_vector_between(
        wp.transform_get_rotation(tf), wp.transform_get_rotation(tf_pred)) * inv_h
    body_qd[i] = wp.spatial_vector(v, w)
