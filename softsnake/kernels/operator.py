"""The operator of every Newton step's linear system, A = J M^-1 J^T + E, matrix-free.

u = M^-1 J^T x gathers each particle's or body's sums from the explicit CSR of J^T (no atomics, so
the sums are deterministic; ``finalize`` lays out J^T once): one thread block per entity in the
batched launches (``apply_inverse_mass_transpose``), one thread per entity inside the whole-solve
kernels. y = J u + E x is a row at a time (``row_product``; the solvers call it inside their own
kernels); E is diagonal except for the 3x3 blocks that couple a tetrahedron's normal strain rows.
The same u = M^-1 J^T x moves the particles and bodies after each solve.
"""

import warp as wp

from softsnake.constraints.tetrahedron import TetrahedronOperator, particle_strain_transpose_sums, strain_row_times

from .entities import entity_world_held, nonnegative

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
    first: int,
    stride: int,
):
    """(J^T x) at three columns of one entity, read from the explicit transpose (no atomics: deterministic),
    over the column's entries first, first + stride, ... (one thread: 0 and 1, every entry in order).

    A row stores a full block for every entity it touches, so the columns of one entity list the
    same rows in the same order: one pass over c0's rows serves all three. Each column is still
    summed alone and in row order (the same bits as three separate gathers), but the three
    independent sums overlap instead of each waiting for its previous addition, and the row
    indices and x values are read once. The rows run from JT_offsets[c0] to JT_ends[c0] (the
    next column's start, or earlier where the column's remaining rows add exact zeros).
    """
    k0 = nonnegative(JT_offsets[c0] + first)
    k1 = nonnegative(JT_offsets[c1] + first)
    k2 = nonnegative(JT_offsets[c2] + first)
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
        k0 += stride
        k1 += stride
        k2 += stride
    return wp.vec3(s0, s1, s2)


@wp.func
def entity_transpose_sums(
    e: int,
    first: int,
    stride: int,
    particle_count: int,
    planar: int,
    JT_offsets: wp.array(dtype=int),
    JT_ends: wp.array(dtype=int),
    JT_columns: wp.array(dtype=int),
    JT_values: wp.array(dtype=float),
    tets: TetrahedronOperator,
    x: wp.array(dtype=float),
):
    """(J^T x) at the degrees of freedom of entity e over its entries first, first + stride, ...: a
    particle's three in the first half (the second half zero), a body's linear then angular ones. With
    ``tets.enabled`` the stored J^T holds no tetrahedron rows, and a particle adds its corners' sums after its
    entries' (its corners first, first + stride, ...: ``particle_strain_transpose_sums``).

    Planar models have no entries in the out-of-plane columns (a particle's z; a body's z and its
    rotations about x and y): their sums are exactly 0 and are not walked.
    """
    if e < particle_count:
        c = 3 * e
        g = wp.vec3(0.0)
        if planar != 0:
            # Two columns to walk: the block's third sum repeats y and is dropped.
            g = gather_transpose_block(JT_offsets, JT_ends, JT_columns, JT_values, x, c, c + 1, c + 1, first, stride)
        else:
            g = gather_transpose_block(JT_offsets, JT_ends, JT_columns, JT_values, x, c, c + 1, c + 2, first, stride)
        if tets.enabled != 0:
            g += particle_strain_transpose_sums(tets, e, first, stride, x)
        if planar != 0:
            g = wp.vec3(g[0], g[1], 0.0)
        return wp.spatial_vector(g, wp.vec3(0.0))
    base = 3 * particle_count + 6 * (e - particle_count)
    if planar != 0:
        g = gather_transpose_block(JT_offsets, JT_ends, JT_columns, JT_values, x, base, base + 1, base + 5, first,
                                   stride)
        return wp.spatial_vector(wp.vec3(g[0], g[1], 0.0), wp.vec3(0.0, 0.0, g[2]))
    lin = gather_transpose_block(JT_offsets, JT_ends, JT_columns, JT_values, x, base, base + 1, base + 2, first,
                                 stride)
    ang = gather_transpose_block(JT_offsets, JT_ends, JT_columns, JT_values, x, base + 3, base + 4, base + 5, first,
                                 stride)
    return wp.spatial_vector(lin, ang)


@wp.func
def write_inverse_mass(
    e: int,
    sums: wp.spatial_vector,
    particle_count: int,
    particle_inv_mass: wp.array(dtype=float),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia_world: wp.array(dtype=wp.mat33),
    u: wp.array(dtype=float),
):
    """u = M^-1 (J^T x) at entity e's degrees of freedom, from its ``entity_transpose_sums``."""
    if e < particle_count:
        w = particle_inv_mass[e]
        for k in range(3):
            u[3 * e + k] = w * sums[k]
    else:
        b = e - particle_count
        base = 3 * particle_count + 6 * b
        lin = wp.spatial_top(sums) * body_inv_mass[b]
        ang = body_inv_inertia_world[b] * wp.spatial_bottom(sums)
        for k in range(3):
            u[base + k] = lin[k]
            u[base + 3 + k] = ang[k]


@wp.func
def write_inverse_mass_transpose(
    e: int,
    particle_count: int,
    planar: int,
    JT_offsets: wp.array(dtype=int),
    JT_ends: wp.array(dtype=int),
    JT_columns: wp.array(dtype=int),
    JT_values: wp.array(dtype=float),
    tets: TetrahedronOperator,
    x: wp.array(dtype=float),
    particle_inv_mass: wp.array(dtype=float),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia_world: wp.array(dtype=wp.mat33),
    u: wp.array(dtype=float),
):
    """u = M^-1 J^T x for the degrees of freedom of entity e (a particle, or body e - particle_count), one
    thread walking all of its entries."""
    sums = entity_transpose_sums(e, 0, 1, particle_count, planar, JT_offsets, JT_ends, JT_columns, JT_values, tets,
                                 x)
    write_inverse_mass(e, sums, particle_count, particle_inv_mass, body_inv_mass, body_inv_inertia_world, u)


@wp.kernel
def apply_inverse_mass_transpose(
    JT_offsets: wp.array(dtype=int),
    JT_ends: wp.array(dtype=int),
    JT_columns: wp.array(dtype=int),
    JT_values: wp.array(dtype=float),
    tets: TetrahedronOperator,
    x: wp.array(dtype=float),
    particle_inv_mass: wp.array(dtype=float),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia_world: wp.array(dtype=wp.mat33),
    particle_count: int,
    planar: int,
    first_entity: int,
    particle_world: wp.array(dtype=int),
    body_world: wp.array(dtype=int),
    held: wp.array(dtype=int),
    u: wp.array(dtype=float),
):
    """u = M^-1 J^T x, one thread block per particle or body from ``first_entity`` on (``wp.launch_tiled``):
    thread t adds the entity's entries t, t + block_dim, ..., and the block adds the threads' sums in a fixed tree;
    the entities of held worlds (``Solver.held_worlds``) keep their u.

    A particle of a tetrahedral mesh lies in ~70 rows (125 at most in the snake's meshes), a body in up
    to 178 per column, both columns walked twice: one thread per entity walked them one dependent load
    after another, the longest path of a batched iteration on a GPU, with a few thousand threads for one
    snake. On the CPU a block is one thread: the entries in order, the same bits as the whole-solve
    kernels' one thread per entity.
    """
    block, lane = wp.tid()
    e = first_entity + block
    if entity_world_held(e, particle_count, particle_world, body_world, held):
        return  # every thread of the block alike
    sums = entity_transpose_sums(e, lane, wp.block_dim(), particle_count, planar, JT_offsets, JT_ends, JT_columns,
                                 JT_values, tets, x)
    total = sums
    if wp.block_dim() > 1:  # the same on every thread of a block; the CPU's block of one skips the tile
        total = wp.tile_sum(wp.tile(sums, preserve_type=True))[0]
    if lane == 0:
        write_inverse_mass(e, total, particle_count, particle_inv_mass, body_inv_mass, body_inv_inertia_world, u)


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
    tets: TetrahedronOperator,
):
    """(J u + E x)[i], with u = M^-1 J^T x already computed (a tetrahedron's row from its nodes where
    ``tets.enabled``: ``strain_row_times``)."""
    t = int(-1)
    if tets.enabled != 0:
        t = tets.row_tet[i]
    s = float(0.0)
    if t >= 0:
        s = strain_row_times(tets, t, i - tets.first_row[t], u)
    else:
        s = row_dot(J_values, J_columns, nonnegative(J_offsets[i]), J_offsets[i + 1], u)
    return s + block_coupled(x, i, nonnegative(block_start[i]), compliance[i], coupling[i])
