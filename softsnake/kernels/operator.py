"""The operator of every Newton step's linear system, A = J M^-1 J^T + E, matrix-free.

u = M^-1 J^T x runs one thread per particle or body, gathering from the explicit CSR of J^T (no
atomics, so the sums are deterministic; ``finalize`` lays out J^T once). y = J u + E x is a
row at a time (``row_product``; the solvers call it inside their own kernels); E is diagonal except for the 3x3 blocks that couple a tetrahedron's normal
strain rows. The same u = M^-1 J^T x moves the particles and bodies after each solve.
"""

import warp as wp

from .entities import nonnegative

# Never on a wp.Tape (softsnake.gradients): no backward code, less to compile; the functions keep their adjoints
# in kernels.adjoint, whose kernels have backward (tests/kernels/test_backward_options.py).
wp.set_module_options({"enable_backward": False})


@wp.func
def block_coupled(values: wp.array(dtype=float), row: int, block_start: int, diagonal: float, off_diagonal: float):
    """(alpha v)[row] for a row of a 3x3 block [[d, o, o], [o, d, o], [o, o, d]] starting at block_start."""
    s = diagonal * values[row]
    if off_diagonal != 0.0:
        s += off_diagonal * (values[block_start] + values[block_start + 1] + values[block_start + 2] - values[row])
    return s


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


@wp.func
def row_dot(J_values: wp.array(dtype=float), J_columns: wp.array(dtype=int), start: int, end: int,
            x: wp.array(dtype=float)):
    """J_i x over the CSR entries start..end of row i of J, in their stored order."""
    s = float(0.0)
    k = start
    while k < end:
        s += J_values[k] * x[nonnegative(J_columns[k])]
        k += 1
    return s


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
    s = row_dot(J_values, J_columns, nonnegative(J_offsets[i]), J_offsets[i + 1], u)
    return s + block_coupled(x, i, nonnegative(block_start[i]), compliance[i], coupling[i])
