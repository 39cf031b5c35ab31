"""Jacobi-preconditioned conjugate residual on [J M^-1 J^T + E] dlambda = b, many worlds at once.

The product with the system matrix is matrix-free: u = M^-1 J^T x (a thread block per particle or
body in the batched launches, gathering from the explicit CSR of J^T: see
``operator.apply_inverse_mass_transpose``),
then y = J u + E x (``operator.row_product``). Every inner product is reduced per world in two
deterministic passes: fixed chunks of rows that never straddle two worlds, each summed by one
thread block, then each world's chunk sums by one block. A block adds in a fixed tree (thread t
takes items t, t + block_dim, ...; then ``block_sum``), so the order depends only on the block size;
on the CPU a block is one thread, and the order is the rows' own, as in ``cr_solve_per_world``.
Chunk boundaries depend only on a row's position inside its world, so a world computes bit for bit
the same numbers whichever other worlds share the batch.

The batched iteration is 4 launches, two for the product (``operator.apply_inverse_mass_transpose``,
``cr_multiply_rows``) and two updates (``cr_update_solution``, ``cr_update_direction``): the kernels
that write a vector also write its chunk sums (A z and z . A z; A p and A p . P A p), and the kernels
that need a world's sum finish it themselves, every thread block of the world alike, so no launch
computes a per-world scalar on its own.

Loops over index ranges are written as while loops: on the CPU they compile to tighter code
than ``for k in range(begin, end)``, which matters in the innermost loops; for the same reason
indices read from arrays pass through ``nonnegative`` (no wrap-around of negative indices).
"""

import warp as wp

from softsnake.constraints.tetrahedron import TetrahedronOperator

from .entities import nonnegative
from .operator import gather_transpose_block, row_product, write_inverse_mass_transpose

# Never on a wp.Tape (softsnake.gradients): no backward code, less to compile (tests/kernels/test_backward_options.py).
wp.set_module_options({"enable_backward": False})

REDUCTION_CHUNK = wp.constant(256)
"""Rows per partial sum of the per-world inner products (chunks never straddle worlds)."""


@wp.func
def chunk_world(chunk_start: wp.array(dtype=int), row_world: wp.array(dtype=int), c: int):
    """The world of chunk c (a chunk is never empty and never straddles two worlds)."""
    return nonnegative(row_world[nonnegative(chunk_start[c])])


@wp.func
def block_sum(value: float):
    """The sum of ``value`` over the threads of the block (every thread gets it): a tree reduction in
    shared memory, in a fixed order; also a barrier (the block's earlier writes are visible after it)."""
    return wp.tile_sum(wp.tile(value))[0]


@wp.func
def strided_dot(a: wp.array(dtype=float), b: wp.array(dtype=float), weight: wp.array(dtype=float), use_weight: int,
                begin: int, end: int, stride: int):
    """Sum over rows begin, begin + stride, ... (< end) of a * b (* weight), in that order."""
    s = float(0.0)
    i = begin
    if use_weight != 0:
        while i < end:
            s += a[i] * b[i] * weight[i]
            i += stride
    else:
        while i < end:
            s += a[i] * b[i]
            i += stride
    return s


@wp.kernel
def reduce_chunks(
    a: wp.array(dtype=float),
    b: wp.array(dtype=float),
    weight: wp.array(dtype=float),
    use_weight: int,
    chunk_start: wp.array(dtype=int),
    chunk_end: wp.array(dtype=int),
    row_world: wp.array(dtype=int),
    held: wp.array(dtype=int),
    partial: wp.array(dtype=float),
):
    """partial[chunk] = sum over the chunk's rows of a * b (* weight): one thread block per chunk
    (``wp.launch_tiled``), thread t summing rows t, t + block_dim, ..., then a ``block_sum``. On the
    CPU a block is one thread: the chunk's rows in order, as ``cr_solve_per_world`` adds them. The chunks of held
    worlds (``Solver.held_worlds``) are skipped, their sums unused."""
    c, lane = wp.tid()
    if held[chunk_world(chunk_start, row_world, c)] != 0:
        return  # every thread of the block alike
    s = strided_dot(a, b, weight, use_weight, chunk_start[c] + lane, chunk_end[c], wp.block_dim())
    total = block_sum(s)
    if lane == 0:
        partial[c] = total


@wp.func
def world_block_sum(partial: wp.array(dtype=float), world_chunk_start: wp.array(dtype=int), w: int, lane: int):
    """The sum of world w's chunk sums, by the world's thread block (every thread gets it): thread t
    adds chunks t, t + block_dim, ..., then ``block_sum`` (on the CPU the chunks in order)."""
    s = float(0.0)
    c = world_chunk_start[w] + lane
    while c < world_chunk_start[w + 1]:
        s += partial[c]
        c += wp.block_dim()
    return block_sum(s)


@wp.kernel
def reduce_worlds(
    partial: wp.array(dtype=float),
    world_chunk_start: wp.array(dtype=int),
    held: wp.array(dtype=int),
    result: wp.array(dtype=float),
):
    """result[world] = sum of the world's chunk sums: one thread block per world; a held world
    (``Solver.held_worlds``) keeps its result."""
    w, lane = wp.tid()
    if held[w] != 0:
        return
    total = world_block_sum(partial, world_chunk_start, w, lane)
    if lane == 0:
        result[w] = total


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


ROUND_OFF_RATIO = wp.constant(1.0e-12)
"""z.Az below this fraction of its start value is round-off in float32 whatever the tolerance:
further steps would only amplify noise."""


@wp.func
def cr_converged(zAz: float, zAz_start: float, tolerance_sq: float):
    """Whether a world's solve has converged: z.Az (the squared preconditioned residual in the A-norm)
    has fallen by tolerance^2, or to round-off."""
    return not (zAz > wp.max(tolerance_sq, ROUND_OFF_RATIO) * zAz_start)


@wp.func
def cr_step(zAz: float, zAz_start: float, den: float, tolerance_sq: float):
    if cr_converged(zAz, zAz_start, tolerance_sq) or not (den > 0.0):
        return 0.0
    return zAz / den


@wp.func
def cr_ratio(zAz_new: float, zAz: float, zAz_start: float, tolerance_sq: float):
    if cr_converged(zAz_new, zAz_start, tolerance_sq) or not (zAz > 0.0):
        return 0.0
    return zAz_new / zAz


@wp.kernel
def cr_update_solution(
    chunk_start: wp.array(dtype=int),
    chunk_end: wp.array(dtype=int),
    row_world: wp.array(dtype=int),
    world_chunk_start: wp.array(dtype=int),
    den_partial: wp.array(dtype=float),
    zAz: wp.array(dtype=float),
    zAz_start: wp.array(dtype=float),
    tolerance_sq: float,
    p: wp.array(dtype=float),
    Ap: wp.array(dtype=float),
    inv_diagonal: wp.array(dtype=float),
    x: wp.array(dtype=float),
    z: wp.array(dtype=float),
):
    """alpha = z.Az / (A p . P A p); x += alpha p; z -= alpha P A p (z tracks the preconditioned residual).

    One thread block per chunk: each block finishes its world's sum of the chunk sums of A p . P A p
    itself (``world_block_sum``, the same tree in every block of the world, so every block gets the same
    alpha; 0 once the world has converged), which saves the launch that would compute alpha once."""
    c, lane = wp.tid()
    w = chunk_world(chunk_start, row_world, c)
    den = world_block_sum(den_partial, world_chunk_start, w, lane)
    alpha = cr_step(zAz[w], zAz_start[w], den, tolerance_sq)
    i = chunk_start[c] + lane
    while i < chunk_end[c]:
        x[i] = x[i] + alpha * p[i]
        z[i] = z[i] - alpha * inv_diagonal[i] * Ap[i]
        i += wp.block_dim()


@wp.kernel
def cr_multiply_rows(
    J_offsets: wp.array(dtype=int),
    J_columns: wp.array(dtype=int),
    J_values: wp.array(dtype=float),
    u: wp.array(dtype=float),
    x: wp.array(dtype=float),
    compliance: wp.array(dtype=float),
    coupling: wp.array(dtype=float),
    block_start: wp.array(dtype=int),
    tets: TetrahedronOperator,
    chunk_start: wp.array(dtype=int),
    chunk_end: wp.array(dtype=int),
    y: wp.array(dtype=float),
    partial: wp.array(dtype=float),
):
    """y = J u + E x over a chunk's rows (u = M^-1 J^T x), and partial[chunk] = x . y over them: one
    thread block per chunk, summing as ``reduce_chunks`` does (one launch fewer per iteration)."""
    c, lane = wp.tid()
    s = float(0.0)
    i = chunk_start[c] + lane
    while i < chunk_end[c]:
        yi = row_product(i, J_offsets, J_columns, J_values, u, x, compliance, coupling, block_start, tets)
        y[i] = yi
        s += x[i] * yi
        i += wp.block_dim()
    total = block_sum(s)
    if lane == 0:
        partial[c] = total


@wp.kernel
def cr_update_direction(
    chunk_start: wp.array(dtype=int),
    chunk_end: wp.array(dtype=int),
    row_world: wp.array(dtype=int),
    world_chunk_start: wp.array(dtype=int),
    zAz_partial: wp.array(dtype=float),
    zAz: wp.array(dtype=float),
    first: int,
    tolerance_sq: float,
    z: wp.array(dtype=float),
    Az: wp.array(dtype=float),
    inv_diagonal: wp.array(dtype=float),
    zAz_start: wp.array(dtype=float),
    zAz_next: wp.array(dtype=float),
    p: wp.array(dtype=float),
    Ap: wp.array(dtype=float),
    den_partial: wp.array(dtype=float),
):
    """beta = z.Az (new) / z.Az (old); p = z + beta p; A p = A z + beta A p (no extra product); and
    den_partial[chunk] = A p . P A p over the chunk's rows, for the next step size. With ``first``
    (after the solve's first product, p = z already): A p = A z, and the new z.Az is also ``zAz_start``.

    One thread block per chunk, finishing its world's new z.Az from the chunk sums as
    ``cr_update_solution`` finishes its denominator (beta 0 once the world has converged). The world's
    first chunk stores the new z.Az in ``zAz_next``, not in ``zAz``, which the other blocks of the
    launch are still reading: the iterations alternate the two arrays."""
    c, lane = wp.tid()
    w = chunk_world(chunk_start, row_world, c)
    zAz_new = world_block_sum(zAz_partial, world_chunk_start, w, lane)
    beta = float(0.0)
    if first == 0:
        beta = cr_ratio(zAz_new, zAz[w], zAz_start[w], tolerance_sq)
    if lane == 0 and c == world_chunk_start[w]:
        zAz_next[w] = zAz_new
        if first != 0:
            zAz_start[w] = zAz_new
    s = float(0.0)
    i = chunk_start[c] + lane
    while i < chunk_end[c]:
        Api = Az[i]
        if first == 0:
            p[i] = z[i] + beta * p[i]
            Api += beta * Ap[i]
        Ap[i] = Api
        s += Api * Api * inv_diagonal[i]
        i += wp.block_dim()
    total = block_sum(s)
    if lane == 0:
        den_partial[c] = total


@wp.func
def row_is_live(
    i: int,
    J_offsets: wp.array(dtype=int),
    J_values: wp.array(dtype=float),
    rhs: wp.array(dtype=float),
    coupling: wp.array(dtype=float),
):
    """Whether row i takes part in its world's solve.

    A row without Jacobian entries, block coupling or right-hand side (an inactive contact slot,
    an undriven joint's drive) keeps z = p = dlambda = 0 through every iteration and adds exact
    zeros to every product and inner product: leaving it out changes no bit of the result.
    """
    live = rhs[i] != 0.0 or coupling[i] != 0.0
    k = nonnegative(J_offsets[i])
    end = J_offsets[i + 1]
    while k < end and not live:
        live = J_values[k] != 0.0
        k += 1
    return live


@wp.func
def trim_columns(
    dof_begin: int,
    dof_end: int,
    first: int,
    stride: int,
    JT_offsets: wp.array(dtype=int),
    JT_columns: wp.array(dtype=int),
    row_live: wp.array(dtype=int),
    JT_live_ends: wp.array(dtype=int),
):
    """JT_live_ends[d]: the end of column d of J^T without its trailing rows that are not live, for the
    columns dof_begin + first, + stride, ... (one thread: first 0, stride 1)."""
    d = nonnegative(dof_begin + first)
    while d < dof_end:
        begin = nonnegative(JT_offsets[d])
        end = JT_offsets[d + 1]
        while end > begin and row_live[nonnegative(JT_columns[end - 1])] == 0:
            end -= 1
        JT_live_ends[d] = end
        d += stride


@wp.func
def world_inverse_mass_transpose(
    particle_begin: int,
    particle_end: int,
    body_begin: int,
    body_end: int,
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
    particle_inv_mass: wp.array(dtype=float),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia_world: wp.array(dtype=wp.mat33),
    u: wp.array(dtype=float),
):
    """u = M^-1 J^T x over one world's particles and bodies, where the solver's J reads it, dealt to the
    block's threads in turn (thread ``first`` of ``stride`` takes items first, first + stride, ...; one thread:
    first 0, stride 1): the particles, then the bodies' linear columns, then their angular ones (in a planar
    model a body's three in-plane columns are one item). The bodies continue the deal where the particles end,
    and a body's two column blocks are two items: dealt from thread 0 again as one item, a body added its two
    walks of up to ~180 rows each to a thread that also held a particle, the longest walk of the block (the
    coarse snake at 512 threads: 263 rows; now 125, a particle's largest column). Each column is still summed
    by one thread in row order: the same bits whatever the block size.

    In a planar model the solver's J has only the in-plane columns, so a body's u is written at
    x, y and the rotation about z alone: u_rz = (I^-1)_zz g_z, the same number as the z entry of
    I^-1 (0, 0, g_z) (the two other terms of that product are exact zeros).
    """
    e = particle_begin + first
    while e < particle_end:
        write_inverse_mass_transpose(e, particle_count, planar, JT_offsets, JT_ends, JT_columns, JT_values, tets, x,
                                     particle_inv_mass, body_inv_mass, body_inv_inertia_world, u)
        e += stride
    # This thread's first body item: item (particle_end - particle_begin) + k of the deal, where that lands on it.
    k = (first - (particle_end - particle_begin) % stride + stride) % stride
    bodies = body_end - body_begin
    if planar != 0:
        while k < bodies:
            b = body_begin + k
            base = nonnegative(3 * particle_count + 6 * b)
            g = gather_transpose_block(JT_offsets, JT_ends, JT_columns, JT_values, x, base, base + 1, base + 5, 0, 1)
            inv_mass = body_inv_mass[b]
            u[base] = g[0] * inv_mass
            u[base + 1] = g[1] * inv_mass
            u[base + 5] = body_inv_inertia_world[b][2, 2] * g[2]
            k += stride
    else:
        while k < 2 * bodies:
            half = k // bodies  # 0: the body's linear columns, u = g / m; 1: its angular ones, u = I^-1 g
            b = body_begin + k - half * bodies
            c = nonnegative(3 * particle_count + 6 * b + 3 * half)
            g = gather_transpose_block(JT_offsets, JT_ends, JT_columns, JT_values, x, c, c + 1, c + 2, 0, 1)
            v = g * body_inv_mass[b]
            if half != 0:
                v = body_inv_inertia_world[b] * g
            for i in range(3):
                u[c + i] = v[i]
            k += stride


@wp.kernel
def cr_solve_per_world(
    row_world_start: wp.array(dtype=int),
    particle_world_start: wp.array(dtype=int),
    body_world_start: wp.array(dtype=int),
    particle_count: int,
    planar: int,
    iterations: int,
    tolerance_sq: float,
    J_offsets: wp.array(dtype=int),
    J_columns: wp.array(dtype=int),
    J_values: wp.array(dtype=float),
    JT_offsets: wp.array(dtype=int),
    JT_columns: wp.array(dtype=int),
    JT_values: wp.array(dtype=float),
    tets: TetrahedronOperator,
    particle_inv_mass: wp.array(dtype=float),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia_world: wp.array(dtype=wp.mat33),
    compliance: wp.array(dtype=float),
    coupling: wp.array(dtype=float),
    block_start: wp.array(dtype=int),
    rhs: wp.array(dtype=float),
    inv_diagonal: wp.array(dtype=float),
    row_live: wp.array(dtype=int),
    held: wp.array(dtype=int),
    live_rows: wp.array(dtype=int),
    JT_live_ends: wp.array(dtype=int),
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
    so both give bit-identical iterates. Rows that take no part in the solve (row_is_live) are
    skipped, also at the end of each column of J^T (inactive contacts: their rows come last in a
    world), and each inner product is accumulated in the loop that computes its terms, chunk by
    chunk as the batched reduction sums them. In planar models (planar != 0) the product with
    M^-1 touches the in-plane degrees of freedom only (world_inverse_mass_transpose).
    """
    w = wp.tid()
    if held[w] != 0:
        return  # a world that holds its point: its right-hand side is 0 and its last solution is unused
    r0 = nonnegative(row_world_start[w])
    r1 = row_world_start[w + 1]
    p0 = nonnegative(particle_world_start[w])
    p1 = particle_world_start[w + 1]
    b0 = nonnegative(body_world_start[w])
    b1 = body_world_start[w + 1]

    # x0 = 0, z0 = P b, p0 = z0; the world's live rows, in row order, into live_rows[r0:live_end].
    live_end = r0
    i = r0
    while i < r1:
        x[i] = 0.0
        zi = inv_diagonal[i] * rhs[i]
        z[i] = zi
        p[i] = zi
        live = row_is_live(i, J_offsets, J_values, rhs, coupling)
        row_live[i] = int(live)
        if live:
            live_rows[live_end] = i
            live_end += 1
        i += 1
    # Each column of J^T ends at its last live row.
    trim_columns(3 * p0, 3 * p1, 0, 1, JT_offsets, JT_columns, row_live, JT_live_ends)
    trim_columns(3 * particle_count + 6 * b0, 3 * particle_count + 6 * b1, 0, 1, JT_offsets, JT_columns, row_live,
                 JT_live_ends)

    zAz = float(0.0)
    den = float(0.0)
    zAz_start = float(0.0)
    alpha = float(0.0)
    it = int(-1)
    while it < iterations:
        if it >= 0:
            alpha = cr_step(zAz, zAz_start, den, tolerance_sq)
            if alpha == 0.0:
                break  # converged: the remaining iterations would change nothing
            j = r0
            while j < live_end:
                i = nonnegative(live_rows[j])
                x[i] = x[i] + alpha * p[i]
                z[i] = z[i] - alpha * inv_diagonal[i] * Ap[i]
                j += 1
        # Az = [J M^-1 J^T + E] z and z . Az.
        world_inverse_mass_transpose(p0, p1, b0, b1, 0, 1, particle_count, planar, JT_offsets, JT_live_ends, JT_columns,
                                     JT_values, tets, z, particle_inv_mass, body_inv_mass, body_inv_inertia_world, u)
        zAz_new = float(0.0)
        j = r0
        chunk_begin = r0
        while chunk_begin < r1:
            chunk_end = wp.min(chunk_begin + REDUCTION_CHUNK, r1)
            part = float(0.0)
            while j < live_end and live_rows[j] < chunk_end:
                i = nonnegative(live_rows[j])
                Azi = row_product(i, J_offsets, J_columns, J_values, u, z, compliance, coupling, block_start, tets)
                Az[i] = Azi
                part += z[i] * Azi
                j += 1
            zAz_new += part
            chunk_begin = chunk_end
        # p = z + beta p, A p = A z + beta A p (no extra product; at the start p = z, A p = A z),
        # and A p . P A p for the next step.
        beta = float(0.0)
        if it < 0:
            zAz_start = zAz_new
        else:
            beta = cr_ratio(zAz_new, zAz, zAz_start, tolerance_sq)
        zAz = zAz_new
        den = float(0.0)
        j = r0
        chunk_begin = r0
        while chunk_begin < r1:
            chunk_end = wp.min(chunk_begin + REDUCTION_CHUNK, r1)
            part = float(0.0)
            while j < live_end and live_rows[j] < chunk_end:
                i = nonnegative(live_rows[j])
                Api = Az[i]
                if it >= 0:
                    p[i] = z[i] + beta * p[i]
                    Api += beta * Ap[i]
                Ap[i] = Api
                part += Api * Api * inv_diagonal[i]
                j += 1
            den += part
            chunk_begin = chunk_end
        it += 1


@wp.kernel
def cr_solve_block_per_world(
    row_world_start: wp.array(dtype=int),
    particle_world_start: wp.array(dtype=int),
    body_world_start: wp.array(dtype=int),
    particle_count: int,
    planar: int,
    iterations: int,
    tolerance_sq: float,
    J_offsets: wp.array(dtype=int),
    J_columns: wp.array(dtype=int),
    J_values: wp.array(dtype=float),
    JT_offsets: wp.array(dtype=int),
    JT_columns: wp.array(dtype=int),
    JT_values: wp.array(dtype=float),
    tets: TetrahedronOperator,
    particle_inv_mass: wp.array(dtype=float),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia_world: wp.array(dtype=wp.mat33),
    compliance: wp.array(dtype=float),
    coupling: wp.array(dtype=float),
    block_start: wp.array(dtype=int),
    rhs: wp.array(dtype=float),
    inv_diagonal: wp.array(dtype=float),
    row_live: wp.array(dtype=int),
    held: wp.array(dtype=int),
    JT_live_ends: wp.array(dtype=int),
    u: wp.array(dtype=float),
    z: wp.array(dtype=float),
    p: wp.array(dtype=float),
    Az: wp.array(dtype=float),
    Ap: wp.array(dtype=float),
    x: wp.array(dtype=float),
):
    """The same preconditioned conjugate residual iteration, one thread block per world
    (``wp.launch_tiled``): the block's threads share the world's rows and entities (thread t takes
    t, t + block_dim, ...), and each inner product is a ``block_sum`` of the threads' partial sums.

    A whole solve is one launch, as in ``cr_solve_per_world``, with a block's parallelism inside a
    world: for large worlds (a soft snake's ~28 000 rows) where one thread per world leaves the GPU
    idle and the batched solver pays 4 launches per iteration. The iterates are those of the other
    two solvers up to float round-off (the inner products add in a tree, not in row chunks) and are
    deterministic for a given block size; a world's numbers still depend on no other world. Between
    a phase that writes an array and one that reads other threads' entries of it, a ``block_sum``
    (of a product the iteration needs, or of 0) is the barrier. On the CPU a block is one thread.
    """
    w, lane = wp.tid()
    if held[w] != 0:
        return  # the whole block: a world that holds its point (see cr_solve_per_world)
    threads = wp.block_dim()
    r0 = nonnegative(row_world_start[w])
    r1 = row_world_start[w + 1]
    p0 = nonnegative(particle_world_start[w])
    p1 = particle_world_start[w + 1]
    b0 = nonnegative(body_world_start[w])
    b1 = body_world_start[w + 1]

    # x0 = 0, z0 = P b, p0 = z0, and which rows are live; then each column of J^T ends at its last live row.
    i = r0 + lane
    while i < r1:
        x[i] = 0.0
        zi = inv_diagonal[i] * rhs[i]
        z[i] = zi
        p[i] = zi
        row_live[i] = int(row_is_live(i, J_offsets, J_values, rhs, coupling))
        i += threads
    block_sum(0.0)
    trim_columns(3 * p0, 3 * p1, lane, threads, JT_offsets, JT_columns, row_live, JT_live_ends)
    trim_columns(3 * particle_count + 6 * b0, 3 * particle_count + 6 * b1, lane, threads, JT_offsets, JT_columns,
                 row_live, JT_live_ends)
    block_sum(0.0)

    zAz = float(0.0)
    den = float(0.0)
    zAz_start = float(0.0)
    it = int(-1)
    while it < iterations:
        if it >= 0:
            # The same value in every thread of the block (from block sums): the block stops together.
            alpha = cr_step(zAz, zAz_start, den, tolerance_sq)
            if alpha == 0.0:
                break
            i = r0 + lane
            while i < r1:
                if row_live[i] != 0:
                    x[i] = x[i] + alpha * p[i]
                    z[i] = z[i] - alpha * inv_diagonal[i] * Ap[i]
                i += threads
            block_sum(0.0)
        # Az = [J M^-1 J^T + E] z and z . Az.
        world_inverse_mass_transpose(p0, p1, b0, b1, lane, threads, particle_count, planar, JT_offsets, JT_live_ends,
                                     JT_columns, JT_values, tets, z, particle_inv_mass, body_inv_mass,
                                     body_inv_inertia_world, u)
        block_sum(0.0)
        part = float(0.0)
        i = r0 + lane
        while i < r1:
            if row_live[i] != 0:
                Azi = row_product(i, J_offsets, J_columns, J_values, u, z, compliance, coupling, block_start, tets)
                Az[i] = Azi
                part += z[i] * Azi
            i += threads
        zAz_new = block_sum(part)
        # p = z + beta p, A p = A z + beta A p, and A p . P A p for the next step.
        beta = float(0.0)
        if it < 0:
            zAz_start = zAz_new
        else:
            beta = cr_ratio(zAz_new, zAz, zAz_start, tolerance_sq)
        zAz = zAz_new
        part = float(0.0)
        i = r0 + lane
        while i < r1:
            if row_live[i] != 0:
                Api = Az[i]
                if it >= 0:
                    p[i] = z[i] + beta * p[i]
                    Api += beta * Ap[i]
                Ap[i] = Api
                part += Api * Api * inv_diagonal[i]
            i += threads
        den = block_sum(part)
        it += 1
