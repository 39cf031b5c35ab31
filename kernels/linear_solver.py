"""Jacobi-preconditioned conjugate residual on [J M^-1 J^T + E] dlambda = b, many worlds at once.

The product with the system matrix is matrix-free: u = M^-1 J^T x (one thread per particle or
body, gathering from the explicit CSR of J^T: see ``integration.apply_inverse_mass_transpose``),
then y = J u + E x (one thread per row). Every inner product is reduced per world in two
deterministic passes: fixed chunks of rows that never straddle two worlds, then one thread per
world over its chunks. Chunk boundaries depend only on a row's position inside its world, so a
world computes bit for bit the same numbers whichever other worlds share the batch.
"""

import warp as wp

from .integration import write_inverse_mass_transpose
from .rows import block_coupled

REDUCTION_CHUNK = wp.constant(256)
"""Rows per partial sum of the per-world inner products (chunks never straddle worlds)."""


@wp.func
def row_product(
    i: int,
    J_offsets: wp.array(dtype=int),
    J_columns: wp.array(dtype=int),
    J_values: wp.array(dtype=float),
    u: wp.array(dtype=float),
    x: wp.array(dtype=float),
    compliance: wp.array(dtype=float),
    coupling: wp.array(dtype=float),
    block_start: wp.array(dtype=int),
):
    """(J u + E x)[i], with u = M^-1 J^T x already computed."""
    s = float(0.0)
    for k in range(J_offsets[i], J_offsets[i + 1]):
        s += J_values[k] * u[J_columns[k]]
    return s + block_coupled(x, i, block_start[i], compliance[i], coupling[i])


@wp.kernel
def multiply_rows(
    J_offsets: wp.array(dtype=int),
    J_columns: wp.array(dtype=int),
    J_values: wp.array(dtype=float),
    u: wp.array(dtype=float),
    x: wp.array(dtype=float),
    compliance: wp.array(dtype=float),
    coupling: wp.array(dtype=float),
    block_start: wp.array(dtype=int),
    y: wp.array(dtype=float),
):
    """y = J u + E x, one thread per row."""
    i = wp.tid()
    y[i] = row_product(i, J_offsets, J_columns, J_values, u, x, compliance, coupling, block_start)


@wp.func
def chunk_dot(a: wp.array(dtype=float), b: wp.array(dtype=float), weight: wp.array(dtype=float), use_weight: int,
              begin: int, end: int):
    """Sum over rows begin..end of a * b (* weight), in row order."""
    s = float(0.0)
    if use_weight != 0:
        for i in range(begin, end):
            s += a[i] * b[i] * weight[i]
    else:
        for i in range(begin, end):
            s += a[i] * b[i]
    return s


@wp.kernel
def reduce_chunks(
    a: wp.array(dtype=float),
    b: wp.array(dtype=float),
    weight: wp.array(dtype=float),
    use_weight: int,
    chunk_start: wp.array(dtype=int),
    chunk_end: wp.array(dtype=int),
    partial: wp.array(dtype=float),
):
    """partial[chunk] = sum over the chunk's rows of a * b (* weight)."""
    c = wp.tid()
    partial[c] = chunk_dot(a, b, weight, use_weight, chunk_start[c], chunk_end[c])


@wp.kernel
def reduce_worlds(
    partial: wp.array(dtype=float),
    world_chunk_start: wp.array(dtype=int),
    result: wp.array(dtype=float),
):
    w = wp.tid()
    s = float(0.0)
    for c in range(world_chunk_start[w], world_chunk_start[w + 1]):
        s += partial[c]
    result[w] = s


@wp.kernel
def cr_start(
    rhs: wp.array(dtype=float),
    inv_diagonal: wp.array(dtype=float),
    x: wp.array(dtype=float),
    z: wp.array(dtype=float),
    p: wp.array(dtype=float),
):
    """x0 = 0, z0 = P b, p0 = z0."""
    i = wp.tid()
    x[i] = 0.0
    zi = inv_diagonal[i] * rhs[i]
    z[i] = zi
    p[i] = zi


CONVERGED_RATIO = wp.constant(1.0e-12)
"""A world whose z.Az fell below this fraction of its start value has converged to round-off:
its iteration stops (step size and direction ratio 0), since further steps only amplify noise."""


@wp.func
def cr_converged(zAz: float, zAz_start: float):
    return not (zAz > CONVERGED_RATIO * zAz_start)


@wp.func
def cr_step(zAz: float, zAz_start: float, den: float):
    if cr_converged(zAz, zAz_start) or not (den > 0.0):
        return 0.0
    return zAz / den


@wp.func
def cr_ratio(zAz_new: float, zAz: float, zAz_start: float):
    if cr_converged(zAz_new, zAz_start) or not (zAz > 0.0):
        return 0.0
    return zAz_new / zAz


@wp.kernel
def cr_step_size(
    zAz: wp.array(dtype=float), zAz_start: wp.array(dtype=float), ApPAp: wp.array(dtype=float), alpha: wp.array(dtype=float)
):
    w = wp.tid()
    alpha[w] = cr_step(zAz[w], zAz_start[w], ApPAp[w])


@wp.kernel
def cr_update_solution(
    row_world: wp.array(dtype=int),
    alpha: wp.array(dtype=float),
    p: wp.array(dtype=float),
    Ap: wp.array(dtype=float),
    inv_diagonal: wp.array(dtype=float),
    x: wp.array(dtype=float),
    z: wp.array(dtype=float),
):
    """x += alpha p; z -= alpha P A p (z tracks the preconditioned residual)."""
    i = wp.tid()
    a = alpha[row_world[i]]
    x[i] = x[i] + a * p[i]
    z[i] = z[i] - a * inv_diagonal[i] * Ap[i]


@wp.kernel
def cr_direction_ratio(
    zAz_new: wp.array(dtype=float), zAz_start: wp.array(dtype=float), zAz: wp.array(dtype=float), beta: wp.array(dtype=float)
):
    w = wp.tid()
    beta[w] = cr_ratio(zAz_new[w], zAz[w], zAz_start[w])
    zAz[w] = zAz_new[w]


@wp.kernel
def cr_update_direction(
    row_world: wp.array(dtype=int),
    beta: wp.array(dtype=float),
    z: wp.array(dtype=float),
    Az: wp.array(dtype=float),
    p: wp.array(dtype=float),
    Ap: wp.array(dtype=float),
):
    """p = z + beta p; A p = A z + beta A p (no extra product)."""
    i = wp.tid()
    b = beta[row_world[i]]
    p[i] = z[i] + b * p[i]
    Ap[i] = Az[i] + b * Ap[i]


@wp.func
def world_dot(a: wp.array(dtype=float), b: wp.array(dtype=float), weight: wp.array(dtype=float), use_weight: int,
              row_begin: int, row_end: int):
    """One world's inner product, summed in the batched solver's order (chunk by chunk)."""
    total = float(0.0)
    c = row_begin
    while c < row_end:
        end = wp.min(c + REDUCTION_CHUNK, row_end)
        total += chunk_dot(a, b, weight, use_weight, c, end)
        c = end
    return total


@wp.func
def world_multiply(
    row_begin: int,
    row_end: int,
    particle_begin: int,
    particle_end: int,
    body_begin: int,
    body_end: int,
    particle_count: int,
    J_offsets: wp.array(dtype=int),
    J_columns: wp.array(dtype=int),
    J_values: wp.array(dtype=float),
    JT_offsets: wp.array(dtype=int),
    JT_columns: wp.array(dtype=int),
    JT_values: wp.array(dtype=float),
    particle_inv_mass: wp.array(dtype=float),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia_world: wp.array(dtype=wp.mat33),
    compliance: wp.array(dtype=float),
    coupling: wp.array(dtype=float),
    block_start: wp.array(dtype=int),
    x: wp.array(dtype=float),
    u: wp.array(dtype=float),
    y: wp.array(dtype=float),
):
    """y = [J M^-1 J^T + E] x over one world's rows, serially (u: scratch over the world's dofs)."""
    for e in range(particle_begin, particle_end):
        write_inverse_mass_transpose(e, particle_count, JT_offsets, JT_columns, JT_values, x, particle_inv_mass,
                                     body_inv_mass, body_inv_inertia_world, u)
    for b in range(body_begin, body_end):
        write_inverse_mass_transpose(particle_count + b, particle_count, JT_offsets, JT_columns, JT_values, x,
                                     particle_inv_mass, body_inv_mass, body_inv_inertia_world, u)
    for i in range(row_begin, row_end):
        y[i] = row_product(i, J_offsets, J_columns, J_values, u, x, compliance, coupling, block_start)


@wp.kernel
def cr_solve_per_world(
    row_world_start: wp.array(dtype=int),
    particle_world_start: wp.array(dtype=int),
    body_world_start: wp.array(dtype=int),
    particle_count: int,
    iterations: int,
    J_offsets: wp.array(dtype=int),
    J_columns: wp.array(dtype=int),
    J_values: wp.array(dtype=float),
    JT_offsets: wp.array(dtype=int),
    JT_columns: wp.array(dtype=int),
    JT_values: wp.array(dtype=float),
    particle_inv_mass: wp.array(dtype=float),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia_world: wp.array(dtype=wp.mat33),
    compliance: wp.array(dtype=float),
    coupling: wp.array(dtype=float),
    block_start: wp.array(dtype=int),
    rhs: wp.array(dtype=float),
    inv_diagonal: wp.array(dtype=float),
    u: wp.array(dtype=float),
    z: wp.array(dtype=float),
    p: wp.array(dtype=float),
    Az: wp.array(dtype=float),
    Ap: wp.array(dtype=float),
    x: wp.array(dtype=float),
):
    """The same preconditioned conjugate residual iteration, one thread per world, no launches inside.

    For many small worlds (vine robots) the batched version is bound by kernel launches; here a
    whole solve is one launch. The arithmetic, summation order included, is the batched solver's,
    so both give bit-identical iterates.
    """
    w = wp.tid()
    r0 = row_world_start[w]
    r1 = row_world_start[w + 1]
    p0 = particle_world_start[w]
    p1 = particle_world_start[w + 1]
    b0 = body_world_start[w]
    b1 = body_world_start[w + 1]
    for i in range(r0, r1):
        x[i] = 0.0
        z[i] = inv_diagonal[i] * rhs[i]
        p[i] = z[i]
    world_multiply(r0, r1, p0, p1, b0, b1, particle_count, J_offsets, J_columns, J_values, JT_offsets, JT_columns,
                   JT_values, particle_inv_mass, body_inv_mass, body_inv_inertia_world, compliance, coupling,
                   block_start, z, u, Az)
    for i in range(r0, r1):
        Ap[i] = Az[i]
    zAz = world_dot(z, Az, Az, 0, r0, r1)
    zAz_start = zAz
    for it in range(iterations):
        den = world_dot(Ap, Ap, inv_diagonal, 1, r0, r1)
        alpha = cr_step(zAz, zAz_start, den)
        for i in range(r0, r1):
            x[i] = x[i] + alpha * p[i]
            z[i] = z[i] - alpha * inv_diagonal[i] * Ap[i]
        world_multiply(r0, r1, p0, p1, b0, b1, particle_count, J_offsets, J_columns, J_values, JT_offsets, JT_columns,
                       JT_values, particle_inv_mass, body_inv_mass, body_inv_inertia_world, compliance, coupling,
                       block_start, z, u, Az)
        zAz_new = world_dot(z, Az, Az, 0, r0, r1)
        beta = cr_ratio(zAz_new, zAz, zAz_start)
        zAz = zAz_new
        for i in range(r0, r1):
            p[i] = z[i] + beta * p[i]
            Ap[i] = Az[i] + beta * Ap[i]
