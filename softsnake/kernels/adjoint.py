"""Kernels of a step's equations written for Warp's tape (``softsnake.gradients``).

Each substep solves, for the position offset u = x - x~ (bodies: translation and rotation vector,
x = x~ (+) u) and the multipliers lambda (``softsnake.kernels.rows``):

    G1 = u - M(x)^-1 J(x)^T lambda = 0                       (momentum, one entry per degree of freedom)
    G2 = c(x) + gamma J(x) (x - x_n) + alpha lambda = 0      (rows; contacts: their smoothed NCP forms)

and sets v = v~ + u / h. The solver's own kernels evaluate these with loops over the rows of J
that carry sums from one iteration to the next, which Warp's adjoint does not replay correctly;
these evaluate them as sums over J's entries with atomic adds, whose adjoints are exact. The
prediction uses the engine's own functions (``integration.predicted_*``), so both sides integrate
alike.
"""

import warp as wp

from .entities import entity_dof_start, nonnegative
from .integration import predicted_body_pose, predicted_body_velocity, predicted_particle_velocity
from .operator import block_coupled


@wp.kernel
def predict_particles_into(
    particle_q: wp.array(dtype=wp.vec3),
    particle_qd: wp.array(dtype=wp.vec3),
    particle_f: wp.array(dtype=wp.vec3),
    particle_inv_mass: wp.array(dtype=float),
    gravity: wp.vec3,
    planar_axis: int,
    h: float,
    particle_q_pred: wp.array(dtype=wp.vec3),
    particle_qd_pred: wp.array(dtype=wp.vec3),
):
    """x~ and v~ of every particle into separate arrays (the engine's prediction works in place)."""
    i = nonnegative(wp.tid())
    v = predicted_particle_velocity(particle_qd[i], particle_f[i], particle_inv_mass[i], gravity, planar_axis, h)
    particle_qd_pred[i] = v
    particle_q_pred[i] = particle_q[i] + v * h


@wp.kernel
def predict_bodies_into(
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    body_f: wp.array(dtype=wp.spatial_vector),
    body_inv_mass: wp.array(dtype=float),
    body_inertia: wp.array(dtype=wp.mat33),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    gravity: wp.vec3,
    planar_axis: int,
    h: float,
    body_q_pred: wp.array(dtype=wp.transform),
    body_qd_pred: wp.array(dtype=wp.spatial_vector),
):
    """Body counterpart of ``predict_particles_into``."""
    i = nonnegative(wp.tid())
    qd = predicted_body_velocity(body_q[i], body_qd[i], body_f[i], body_inv_mass[i], body_inertia[i],
                                 body_inv_inertia[i], gravity, planar_axis, h)
    body_qd_pred[i] = qd
    body_q_pred[i] = predicted_body_pose(body_q[i], qd, h)


@wp.kernel
def velocities_from_offsets(
    u: wp.array(dtype=float),
    particle_count: int,
    particle_qd_pred: wp.array(dtype=wp.vec3),
    body_qd_pred: wp.array(dtype=wp.spatial_vector),
    inv_h: float,
    particle_qd: wp.array(dtype=wp.vec3),
    body_qd: wp.array(dtype=wp.spatial_vector),
):
    """v = v~ + u / h for every entity (bodies: the rotation part of u is the rotation vector from q~ to q,
    so this is the engine's ``finish_body_velocities``)."""
    e = nonnegative(wp.tid())
    base = entity_dof_start(e, particle_count)
    if e < particle_count:
        particle_qd[e] = particle_qd_pred[e] + wp.vec3(u[base], u[base + 1], u[base + 2]) * inv_h
    else:
        b = nonnegative(e - particle_count)
        lin = wp.vec3(u[base], u[base + 1], u[base + 2]) * inv_h
        ang = wp.vec3(u[base + 3], u[base + 4], u[base + 5]) * inv_h
        body_qd[b] = body_qd_pred[b] + wp.spatial_vector(lin, ang)


@wp.kernel
def jacobian_products(
    J_values: wp.array(dtype=float),
    J_rows: wp.array(dtype=int),
    J_columns: wp.array(dtype=int),
    displacement: wp.array(dtype=float),
    lam: wp.array(dtype=float),
    J_displacement: wp.array(dtype=float),
    JT_lam: wp.array(dtype=float),
):
    """J d and J^T lambda, one entry of J per thread (atomic adds: their adjoints are exact)."""
    k = nonnegative(wp.tid())
    row = nonnegative(J_rows[k])
    col = nonnegative(J_columns[k])
    wp.atomic_add(J_displacement, row, J_values[k] * displacement[col])
    wp.atomic_add(JT_lam, col, J_values[k] * lam[row])


@wp.kernel
def row_equations(
    row_c: wp.array(dtype=float),
    row_compliance: wp.array(dtype=float),
    row_coupling: wp.array(dtype=float),
    row_block_start: wp.array(dtype=int),
    row_damping: wp.array(dtype=float),
    row_residual_scale: wp.array(dtype=float),
    row_is_contact: wp.array(dtype=int),
    J_displacement: wp.array(dtype=float),
    lam: wp.array(dtype=float),
    G2: wp.array(dtype=float),
):
    """Each row's equation r = c + gamma J (x - x_n) + alpha lambda = 0 (tetrahedra: alpha is the 3x3
    block of their normal rows), in the form whose derivatives are those of the physics:

    * compliant rows (alpha > 0): r / alpha, the force balance (c + gamma J d) / alpha + lambda. A
      spring on a sampled curve writes c = M / k and alpha = 1 / (k h^2) with its tangent stiffness k
      (floored at a fraction of its steepest slope), so r itself is the force balance divided by k; at
      the not quite exact point a solve ends on, the derivative of that 1 / k times what the solve
      left of r is not small where k is (a floored spring: 80x the true derivative, measured);
    * contact rows: s r, s the row's residual scale (d phi/d a), which makes it the complementarity
      function phi itself (c + alpha lambda is phi / (d phi/d a), not smooth where d phi/d a -> 0);
    * rigid rows (alpha = 0): r.
    Any of these forms has the same root; they differ in the derivatives away from it."""
    i = nonnegative(wp.tid())
    alpha = row_compliance[i]
    r = row_c[i] + row_damping[i] * J_displacement[i] + block_coupled(
        lam, i, nonnegative(row_block_start[i]), alpha, row_coupling[i])
    if row_is_contact[i] != 0:
        G2[i] = row_residual_scale[i] * r
    elif alpha > 0.0:
        G2[i] = r / alpha
    else:
        G2[i] = r


@wp.kernel
def momentum_equations(
    u: wp.array(dtype=float),
    JT_lam: wp.array(dtype=float),
    particle_count: int,
    particle_inv_mass: wp.array(dtype=float),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia_world: wp.array(dtype=wp.mat33),
    G1: wp.array(dtype=float),
):
    """G1 = u - M^-1 J^T lambda for every entity (M^-1 with the world inverse inertia at x)."""
    e = nonnegative(wp.tid())
    base = entity_dof_start(e, particle_count)
    if e < particle_count:
        w = particle_inv_mass[e]
        for k in range(3):
            G1[base + k] = u[base + k] - w * JT_lam[base + k]
    else:
        b = nonnegative(e - particle_count)
        inv_m = body_inv_mass[b]
        ang = body_inv_inertia_world[b] * wp.vec3(JT_lam[base + 3], JT_lam[base + 4], JT_lam[base + 5])
        for k in range(3):
            G1[base + k] = u[base + k] - inv_m * JT_lam[base + k]
            G1[base + 3 + k] = u[base + 3 + k] - ang[k]
