"""The recorded launches of a Newton iteration's linear solve, [J M^-1 J^T + E] dlambda = rhs.

Jacobi-preconditioned conjugate residual, per world (seed 001, section IV-D): one thread per world
running the whole solve (``kernels.linear_solver.cr_solve_per_world``: many small worlds, and the
CPU, where every launch costs tens of microseconds); one thread block per world running the whole
solve (``cr_solve_block_per_world``: large worlds on a GPU, one launch); or kernels over all rows
of all worlds with per-world reductions and step sizes, 4 launches per iteration ("batched"). All
compute the same iterates, up to round-off: the block's inner products add in a tree, and so do the
batched solver's on a GPU (on the CPU, where a block is one thread, batched and per-world are
bit-identical). All stop a world once its residual has fallen by ``linear_tolerance``.
"""

import weakref
from dataclasses import dataclass

import numpy as np
import warp as wp

from .constraints.tetrahedron import TETRAHEDRON, TetrahedronOperator
from .kernels import linear_solver, operator


TRANSPOSE_THREADS = 32
"""Threads of the block that gathers one entity's u = M^-1 J^T x (``operator.apply_inverse_mass_transpose``):
one warp, so that a snake particle's ~70 entries (125 at most) take at most 4 steps per thread and a body's 178
at most 6, where one thread per entity walked them all; on the CPU a block is one thread."""


@dataclass
class Transpose:
    """How the solver applies J^T (``SolverSettings.tetrahedron_operator``): the CSR of J^T it stores (columns:
    each entry's row; source: the entry of J it copies) and the tetrahedra it applies matrix-free (``tets``,
    disabled where J^T stores them). A column's entries follow the row order either way."""

    offsets: wp.array
    columns: wp.array
    source: wp.array
    values: wp.array
    nnz: int
    tets: TetrahedronOperator


def stored_transpose(solver):
    """J^T stored whole (``tetrahedron_operator`` "stored"): the model's layout, the solver's values."""
    m = solver.model
    tets = TetrahedronOperator()
    tets.enabled = 0
    none = wp.zeros(1, dtype=int, device=m.device)
    tets.row_tet = tets.first_row = tets.corner_offsets = tets.corners = none
    tets.particles = wp.zeros(1, dtype=wp.vec4i, device=m.device)
    tets.inv_rest = tets.rotation = wp.zeros(1, dtype=wp.mat33, device=m.device)
    return Transpose(m.JT_offsets, m.JT_columns, m.JT_source, solver.zeros(m.solve_nnz), m.solve_nnz, tets)


_MATRIX_FREE_LAYOUTS = weakref.WeakKeyDictionary()
"""``matrix_free_layout`` of each model, for as long as the model lives."""


def matrix_free_layout(model):
    """The device arrays of J^T without the tetrahedra's rows, laid out once per model (every solver of a model shares
    them; at 1024 paper snakes the layout reads J^T's 335 million entries on the host): its offsets, columns (rows)
    and sources (entries of J), each row's tetrahedron (-1 for other rows), and each particle's corners (4 t + a, by
    tetrahedron) with their offsets. Each column keeps its other rows in their order."""
    if model in _MATRIX_FREE_LAYOUTS:
        return _MATRIX_FREE_LAYOUTS[model]
    first_row = model.tet_row.numpy().astype(np.int64)
    row_tet = np.full(model.row_count, -1, dtype=np.int32)
    rows = TETRAHEDRON.rows_per_item(model.planar_axis >= 0)
    row_tet[first_row[:, None] + np.arange(rows)] = np.arange(model.tet_count, dtype=np.int32)[:, None]
    offsets, columns, source = (a.numpy() for a in (model.JT_offsets, model.JT_columns, model.JT_source))
    kept = row_tet[columns] < 0
    kept_before = np.zeros(len(kept) + 1, dtype=np.int32)  # int32: J's entries were checked to fit (layout)
    np.cumsum(kept, dtype=np.int32, out=kept_before[1:])
    keep = np.flatnonzero(kept)
    corner_particle = model.tet_particles.numpy().astype(np.int64).ravel()  # corner 4 t + a
    corners = np.argsort(corner_particle, kind="stable").astype(np.int32)
    corner_offsets = np.concatenate([[0], np.cumsum(np.bincount(corner_particle, minlength=model.particle_count))])

    def device(values):
        return wp.array(np.ascontiguousarray(values) if len(values) else np.zeros(1), dtype=int, device=model.device)

    layout = {"offsets": device(kept_before[offsets]), "columns": device(columns[keep]),
              "source": device(source[keep]), "nnz": len(keep), "row_tet": device(row_tet),
              "corner_offsets": device(corner_offsets.astype(np.int32)), "corners": device(corners)}
    _MATRIX_FREE_LAYOUTS[model] = layout
    return layout


def matrix_free_transpose(solver):
    """J^T without the tetrahedra's rows, which the solve applies from each tetrahedron's R and B
    (``tetrahedron_operator`` "matrix_free"; a model without tetrahedra stores J^T whole, as "stored" does;
    ``matrix_free_layout``)."""
    m = solver.model
    if m.tet_count == 0:
        return stored_transpose(solver)
    layout = matrix_free_layout(m)
    tets = TetrahedronOperator()
    tets.enabled = 1
    tets.row_tet = layout["row_tet"]
    tets.particles = m.tet_particles
    tets.first_row = m.tet_row
    tets.inv_rest = m.tet_inv_rest
    tets.rotation = solver.tet_rotation
    tets.corner_offsets = layout["corner_offsets"]
    tets.corners = layout["corners"]
    return Transpose(layout["offsets"], layout["columns"], layout["source"], solver.zeros(layout["nnz"]), layout["nnz"],
                     tets)


def inverse_mass_transpose_command(solver, x, u, first_entity=0, skip_held=True):
    """u = M^-1 J^T x (the solver's current J) at the entities from ``first_entity`` on (particles first, then
    bodies); the entries of u before it keep what they held, and so do those of the worlds ``Solver.held_worlds``
    skips (``skip_held``: inside a batched solve, whose kernels run over every world, False)."""
    m, T = solver.model, solver.transpose()
    held = solver.held_worlds() if skip_held else solver.no_world_held
    return solver.record(operator.apply_inverse_mass_transpose, solver.entity_count - first_entity, [
        T.offsets, T.offsets[1:], T.columns, T.values, T.tets, x, m.particle_inv_mass, m.body_inv_mass,
        solver.body_inv_inertia_world, m.particle_count, solver.planar, first_entity, m.particle_world, m.body_world,
        held], outputs=[u], block_threads=TRANSPOSE_THREADS)


def record_per_chunk(solver, kernel, inputs, outputs):
    """A recorded launch of ``kernel`` with one thread block per reduction chunk, a thread per row of the
    largest chunk in whole warps (256 for a snake or a vine of 15 links, 240 rows; 160 for a vine of 10
    links, 160 rows, whose one chunk would leave 96 of 256 threads idle). On the CPU a block is one
    thread whatever its size."""
    m = solver.model
    largest_chunk = min(m.largest_world_rows, linear_solver.REDUCTION_CHUNK)
    return solver.record(kernel, m.chunk_count, inputs, outputs=outputs,
                         block_threads=max(32, 32 * -(-largest_chunk // 32)))


def record_per_world(solver, kernel, inputs, outputs):
    """A recorded launch of ``kernel`` with one thread block per world (sized for the largest world's chunks)."""
    m = solver.model
    largest_world_chunks = -(-m.largest_world_rows // linear_solver.REDUCTION_CHUNK)
    return solver.record(kernel, m.world_count, inputs, outputs=outputs,
                         block_threads=block_threads(largest_world_chunks))


def world_dot_commands(solver, a, b, result, weight=None):
    """result[w] = sum over world w's rows of a b (weight), in a fixed order: each chunk of rows by one
    thread block, then each world's chunk sums by one block (on the CPU, as the per-world solve adds); held worlds
    (``Solver.held_worlds``) keep their result."""
    m = solver.model
    held = solver.held_worlds()
    return [record_per_chunk(solver, linear_solver.reduce_chunks, [
                a, b, a if weight is None else weight, 0 if weight is None else 1, m.chunk_start, m.chunk_end,
                m.row_world, held], outputs=[solver.partial]),
            record_per_world(solver, linear_solver.reduce_worlds, [solver.partial, m.world_chunk_start, held],
                             outputs=[result])]


def multiply_commands(solver, x, y):
    """y = [J M^-1 J^T + E] x, and the chunk sums of x . y into solver.zAz_partial."""
    m, s = solver.model, solver
    return [inverse_mass_transpose_command(s, x, s.u, skip_held=False),
            record_per_chunk(s, linear_solver.cr_multiply_rows, [
                m.solve_offsets, m.solve_columns, s.J_solve_values, s.u, x, s.compliance_eff, s.coupling_eff,
                m.row_block_start, s.transpose().tets, m.chunk_start, m.chunk_end], outputs=[y, s.zAz_partial])]


def _warps_for(rows, rows_per_thread, most):
    """The fewest threads, a power of two from one warp (32) up to ``most``, that leave each at most
    ``rows_per_thread`` of ``rows`` items."""
    threads = 32
    while threads < most and threads * rows_per_thread < rows:
        threads *= 2
    return threads


def block_threads(rows):
    """Threads of a block that adds at most ``rows`` items (the chunk sums of a world): a few per thread, a
    whole number of warps, at most 256 (so that many blocks fill the GPU)."""
    return _warps_for(rows, 8, 256)


BLOCK_SOLVER_RESIDENT_THREADS = 1024
"""Threads of ``cr_solve_block_per_world`` that one multiprocessor holds at once, in blocks of 256 or 512: the
kernel takes 64 registers per thread on sm_90 (experiments/kernel_registers.py) of a multiprocessor's 65 536,
so 2 blocks of 512, 4 of 256, 8 of 128."""

WAVE_LEAST_THREADS = 128
"""``whole_solve_threads`` shrinks a block to fit every world at once down to this many threads, not below: at
4096 vines of 240 rows an H100 solved fastest at 128 threads per world (0.58 ms), not at the 32 that would hold
every vine at once (0.88; gpu.md, section 9.3)."""


def whole_solve_threads(rows, worlds=1, multiprocessors=0):
    """Threads of ``cr_solve_block_per_world``'s block for ``worlds`` worlds of at most ``rows`` rows on a GPU of
    ``multiprocessors`` multiprocessors (0: the CPU, where a block is one thread whatever its size).

    One world alone: the power of two nearest above half the rows, from 32 to 512. Measured on an H100
    (experiments/gpu_linear_solvers.py, 20 iterations; gpu.md, section 9), one solve of 4096 vines of 240 rows
    took 0.88 ms at 32 threads, 0.58 at 128, 1.73 at 512; one paper-mesh snake (28 332 rows) 70 ms at 32, 18.6
    at 128, 10.4 at 256, 7.0 at 512. Fewer threads walk more rows each in sequence; more leave threads idle in
    the block's sums and barriers (and fewer blocks fit a multiprocessor).

    Many worlds: halved (not below ``WAVE_LEAST_THREADS``) while the worlds need more than one wave of blocks
    (``BLOCK_SOLVER_RESIDENT_THREADS`` per multiprocessor). A block's solve is bound by the latency of its
    longest thread, so a wave takes about as long as one block alone, and halving the threads makes a block at
    most twice as slow (one paper snake: 1.5 times at 512 -> 256, 1.8 at 256 -> 128) while it halves the waves:
    1024 coarse snakes (the gait, 6068 rows) at 512 threads run in 4 waves of 264 on an H100, at 128 in one.
    (A prediction from the measurements above, to be measured on the gait's case: gpu.md, section 11.) On a GPU
    a world's round-off therefore depends on how many worlds share its batch, as the "auto" linear solver's
    choice does; on the CPU nothing changes."""
    threads = _warps_for(rows, 2, 512)
    if multiprocessors > 0:
        while threads > WAVE_LEAST_THREADS and worlds * threads > multiprocessors * BLOCK_SOLVER_RESIDENT_THREADS:
            threads //= 2
    return threads


def solve_commands(solver):
    """dlam ~= [J M^-1 J^T + E]^-1 rhs, per world."""
    m, T = solver.model, solver.transpose()
    tolerance_sq = solver.linear_tolerance * solver.linear_tolerance
    if solver.linear_solver in ("block", "per_world"):
        # The same system for both whole-solve kernels; the per-world one also compacts the live rows.
        inputs = [
            m.row_world_start_device, m.particle_world_start_device, m.body_world_start_device, m.particle_count,
            solver.planar, solver.linear_iterations, tolerance_sq, m.solve_offsets, m.solve_columns,
            solver.J_solve_values, T.offsets, T.columns, T.values, T.tets, m.particle_inv_mass, m.body_inv_mass,
            solver.body_inv_inertia_world, solver.compliance_eff, solver.coupling_eff, m.row_block_start, solver.rhs,
            solver.inv_diagonal, solver.row_live, solver.held_worlds()]
        outputs = [solver.u, solver.z, solver.p, solver.Az, solver.Ap, solver.dlam]
        if solver.linear_solver == "block":
            return [solver.record(linear_solver.cr_solve_block_per_world, m.world_count, inputs + [solver.JT_live_ends],
                                  outputs=outputs, block_threads=whole_solve_threads(m.largest_world_rows, m.world_count,
                                                                            m.device.sm_count))]
        return [solver.record(linear_solver.cr_solve_per_world, m.world_count,
                              inputs + [solver.live_rows, solver.JT_live_ends], outputs=outputs)]
    n, s = m.row_count, solver

    commands = [s.record(linear_solver.cr_start, n, [s.rhs, s.inv_diagonal], outputs=[s.dlam, s.z, s.p])]
    commands += multiply_commands(s, s.z, s.Az)
    chunks = [m.chunk_start, m.chunk_end, m.row_world, m.world_chunk_start]

    def update_direction(zAz, zAz_next, first):
        return record_per_chunk(s, linear_solver.cr_update_direction, chunks + [
            s.zAz_partial, zAz, int(first), tolerance_sq, s.z, s.Az, s.inv_diagonal],
            outputs=[s.zAz_start, zAz_next, s.p, s.Ap, s.partial])

    commands.append(update_direction(s.zAz_next, s.zAz, first=True))

    def iteration(zAz, zAz_next):
        """4 launches: the update of the solution and of the direction each finish the world sum they
        need; the product and the direction update write the chunk sums of the next ones. The world's
        z.Az goes from ``zAz`` to ``zAz_next``: the next iteration swaps them."""
        return [record_per_chunk(s, linear_solver.cr_update_solution, chunks + [
                    s.partial, zAz, s.zAz_start, tolerance_sq, s.p, s.Ap, s.inv_diagonal], outputs=[s.dlam, s.z]),
                *multiply_commands(s, s.z, s.Az),
                update_direction(zAz, zAz_next, first=False)]

    pair = iteration(s.zAz, s.zAz_next) + iteration(s.zAz_next, s.zAz)
    iterations = solver.linear_iterations
    return commands + pair * (iterations // 2) + pair[:len(pair) // 2] * (iterations % 2)
