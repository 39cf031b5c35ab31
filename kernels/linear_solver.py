"""Jacobi-preconditioned conjugate residual on [J M^-1 J^T + E] dlambda = b, many worlds at once.

The product with the system matrix is matrix-free: u = M^-1 J^T x (one thread per particle or
body, gathering from the explicit CSR of J^T: see ``integration.apply_inverse_mass_transpose``),
then y = J u + E x (one thread per row). Every inner product is reduced per world in two
deterministic passes: fixed chunks of rows that never straddle two worlds, then one thread per
world over its chunks. Chunk boundaries depend only on a row's position inside its world, so a
world computes bit for bit the same numbers whichever other worlds share the batch.
"""

import warp as wp

from .rows import block_coupled


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
    """y = J u + E x, with u = M^-1 J^T x already computed."""
    i = wp.tid()
    s = float(0.0)
    for k in range(J_offsets[i], J_offsets[i + 1]):
        s += J_values[k] * u[J_columns[k]]
    y[i] = s + block_coupled(x, i, block_start[i], compliance[i], coupling[i])


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
    s = float(0.0)
    if use_weight != 0:
        for i in range(chunk_start[c], chunk_end[c]):
            s += a[i] * b[i] * weight[i]
    else:
        for i in range(chunk_start[c], chunk_end[c]):
            s += a[i] * b[i]
    partial[c] = s


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


@wp.kernel
def cr_step_size(zAz: wp.array(dtype=float), ApPAp: wp.array(dtype=float), alpha: wp.array(dtype=float)):
    w = wp.tid()
    den = ApPAp[w]
    if den > 0.0:
        alpha[w] = zAz[w] / den
    else:
        alpha[w] = 0.0


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
def cr_direction_ratio(zAz_new: wp.array(dtype=float), zAz: wp.array(dtype=float), beta: wp.array(dtype=float)):
    w = wp.tid()
    old = zAz[w]
    if old > 0.0:
        beta[w] = zAz_new[w] / old
    else:
        beta[w] = 0.0
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
