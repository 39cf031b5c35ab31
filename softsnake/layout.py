"""Row layout and sparse topology: where every constraint row lives and which columns it touches.

Rows are laid out world after world, so that each world's linear system is one diagonal block;
inside a world by constraint type (the order of ``softsnake.constraints.CONSTRAINT_TYPES``), and
inside a type item by item in the order they were added, each item's rows consecutive. A row
stores one block of nonzeros per entity it touches (3 columns for a particle, 6 for a body:
linear then angular), in the order its kernel writes them. The sparsity of J and of J^T is fixed
here, once.

Planar models solve for the in-plane degrees of freedom only (particle x, y; body x, y and the
rotation about z): the solver's copy of J (``solve_*``) leaves out the out-of-plane columns,
which planar rows leave zero.
"""

from dataclasses import dataclass

import numpy as np
import scipy.sparse

from softsnake.errors import ModelError
from softsnake.kernels.linear_solver import REDUCTION_CHUNK


INDEX_LIMIT = 2**31 - 1
"""Largest index Warp's ``int`` (int32) holds: the sparse arrays index J's nonzeros with it."""


def check_index_range(count, what):
    """ModelError if ``count`` items cannot be indexed by Warp's int32 (they would wrap around)."""
    if count > INDEX_LIMIT:
        raise ModelError(f"the model has {count} {what}, more than Warp's int32 indices reach ({INDEX_LIMIT}); "
                         "split its worlds over several models")


LAYOUT_PIECE_ITEMS = 4096
"""Items whose columns ``lay_out_rows`` writes at once: temporaries of about a megabyte, not gigabytes."""


@dataclass
class RowLayout:
    """Every row's world and compliance block, J's CSR topology, and each type's first row per item."""

    row_world: np.ndarray
    row_block_start: np.ndarray
    world_row_start: np.ndarray
    J_offsets: np.ndarray
    J_columns: np.ndarray
    first_row: dict

    @property
    def row_count(self):
        return len(self.row_world)


def entity_columns(entities, particle_count):
    """(first column, width) of each entity: particle i at 3 i (3 wide), body b at 3 P + 6 b (6 wide)."""
    entities = np.asarray(entities, dtype=np.int64)
    is_particle = entities < particle_count
    start = np.where(is_particle, 3 * entities, 3 * particle_count + 6 * (entities - particle_count))
    return start, np.where(is_particle, 3, 6)


def lay_out_rows(groups, world_count, particle_count):
    """The row layout of ``groups``: one per constraint type, in row order within a world, each a tuple
    (name, item worlds (n,), item entities (n, k) with -1 padding, rows per item, block rows per item:
    see ``ConstraintType.block_rows``).

    Computed item by item, never by sorting rows: an item's first row is its world's first row, plus
    the rows of the earlier types in that world, plus its rank among its type's items of that world
    times the rows per item; all rows of an item touch the same columns, so J's columns are each
    item's column pattern written once per row."""
    W, T = world_count, len(groups)
    worlds = [np.asarray(w, dtype=np.int64) for _, w, _, _, _ in groups]
    rows_per_type = np.zeros((W, T), dtype=np.int64)
    for t, (_, _, _, rows_per_item, _) in enumerate(groups):
        rows_per_type[:, t] = np.bincount(worlds[t], minlength=W) * rows_per_item
    world_row_start = np.concatenate([[0], np.cumsum(rows_per_type.sum(axis=1))]).astype(np.int64)
    type_row_start = world_row_start[:-1, None] + np.cumsum(rows_per_type, axis=1) - rows_per_type
    row_count = int(world_row_start[-1])

    first_row, patterns = {}, []
    nnz_per_row = np.zeros(row_count, dtype=np.int64)
    block_start = np.arange(row_count, dtype=np.int64)
    for t, (name, _, entities, rows_per_item, block_rows) in enumerate(groups):
        w = worlds[t]
        by_world = np.argsort(w, kind="stable")
        rank = np.empty(len(w), dtype=np.int64)
        rank[by_world] = np.arange(len(w)) - np.searchsorted(w[by_world], w[by_world])
        first = type_row_start[w, t] + rows_per_item * rank
        first_row[name] = first
        rows = first[:, None] + np.arange(rows_per_item)  # (items, rows per item)
        for k, b in enumerate(block_rows):
            if b is not None:
                block_start[rows[:, k]] = first + b
        # Each item's columns: its entities in order, each expanded into its 3 or 6 columns.
        entities = np.asarray(entities, dtype=np.int64)
        start, width = entity_columns(np.maximum(entities, 0), particle_count)
        width = np.where(entities >= 0, width, 0)
        nnz_per_row[rows] = width.sum(axis=1)[:, None]
        patterns.append((first, rows_per_item, start, width))
    J_offsets = np.concatenate([[0], np.cumsum(nnz_per_row)]).astype(np.int64)
    check_index_range(int(J_offsets[-1]), "nonzeros of J")
    # int32 from here on, as Warp's int arrays hold them: half the memory of the largest arrays.
    J_offsets = J_offsets.astype(np.int32)
    J_columns = np.empty(int(J_offsets[-1]), dtype=np.int32)
    for first, rows_per_item, start, width in patterns:
        # Items whose entities have the same widths share a pattern shape: one gather per shape (a
        # type has one or two: particles only, or particles and bodies).
        shape_code = (width // 3) @ (3 ** np.arange(width.shape[1]))  # widths 0, 3, 6: base-3 digits
        for code in np.unique(shape_code):
            items = np.flatnonzero(shape_code == code)
            widths = width[items[0]]
            slot = np.repeat(np.arange(len(widths)), widths)  # the entity of each entry of the row
            within = np.arange(len(slot)) - np.repeat(np.cumsum(widths) - widths, widths)  # its column in it
            entries = np.arange(rows_per_item * len(slot))  # an item's rows are consecutive: one block of entries
            for piece in range(0, len(items), LAYOUT_PIECE_ITEMS):  # small temporaries: cache, no page faults
                some = items[piece:piece + LAYOUT_PIECE_ITEMS]
                pattern = start[some][:, slot] + within  # (items, entries per row)
                J_columns[J_offsets[first[some]][:, None] + entries] = np.tile(pattern, (1, rows_per_item))
    row_world = np.repeat(np.arange(W, dtype=np.int64), np.diff(world_row_start))
    return RowLayout(row_world=row_world, row_block_start=block_start, world_row_start=world_row_start,
                     J_offsets=J_offsets, J_columns=J_columns, first_row=first_row)


def kept_columns(particle_count, body_count, planar):
    """Which degrees of freedom the solve works on: all, or for a planar model the in-plane ones."""
    keep = np.ones(3 * particle_count + 6 * body_count, dtype=bool)
    if planar:
        keep[2:3 * particle_count:3] = False
        for k in (2, 3, 4):
            keep[3 * particle_count + k::6] = False
    return keep


TRANSPOSE_PIECE_ENTRIES = 1 << 19
"""Nonzeros of J that ``solve_layout`` transposes at once (whole worlds): a few megabytes, in cache."""


def solve_layout(J_offsets, J_columns, keep, world_row_start, particle_world_start, body_world_start):
    """The solver's J (the kept columns of J, as indices into J's values) and its transpose.

    Returns offsets, columns and source of J's kept entries, and offsets, columns and source of
    J^T: a gather of J's values fills both (no atomics). Inside a column of J^T, entries follow
    the row order. The worlds' blocks are transposed a few at a time (SciPy's one-pass CSR to CSC
    conversion, which keeps the row order) and put in place: a world's rows touch only its own
    particles and bodies, two ranges of columns, so its block of J^T is two ranges of entries.
    """
    dof_count = len(keep)
    if keep.all():
        offsets, columns, source = J_offsets, J_columns, np.arange(len(J_columns), dtype=np.int32)
    else:
        kept = keep[J_columns]
        source = np.flatnonzero(kept).astype(np.int32)
        offsets = np.concatenate([[0], np.cumsum(kept, dtype=np.int32)])[J_offsets]  # kept entries before each row
        columns = J_columns[source]
    # int32 throughout, as Warp's int arrays (lay_out_rows checked the count).
    transpose_offsets = np.concatenate([[0], np.cumsum(np.bincount(columns, minlength=dof_count))]).astype(np.int32)
    transpose_rows = np.empty(len(columns), dtype=np.int32)
    transpose_source = np.empty(len(columns), dtype=np.int32)
    body_column = len(keep) - 6 * int(body_world_start[-1])  # 3 P: the first body column
    world_count = len(world_row_start) - 1
    w = 0
    while w < world_count:
        w1 = w + 1  # the worlds w..w1-1: up to TRANSPOSE_PIECE_ENTRIES entries (at least one world)
        piece_start = offsets[world_row_start[w]]
        while w1 < world_count and offsets[world_row_start[w1 + 1]] - piece_start <= TRANSPOSE_PIECE_ENTRIES:
            w1 += 1
        r0, r1 = int(world_row_start[w]), int(world_row_start[w1])
        e0, e1 = int(offsets[r0]), int(offsets[r1])
        particle_columns = (3 * int(particle_world_start[w]), 3 * int(particle_world_start[w1]))
        body_columns = (body_column + 6 * int(body_world_start[w]), body_column + 6 * int(body_world_start[w1]))
        width = particle_columns[1] - particle_columns[0]
        c = columns[e0:e1]
        local = np.where(c < body_column, c - particle_columns[0], width + c - body_columns[0])
        local_count = width + body_columns[1] - body_columns[0]
        if len(local) and (local.min() < 0 or local.max() >= local_count):
            raise RuntimeError("row layout: a world's rows touch another world's columns (the builder's checks refuse "
                               "such models)")
        block = scipy.sparse.csr_matrix((source[e0:e1] + 1, local, offsets[r0:r1 + 1] - e0),
                                        shape=(r1 - r0, local_count)).tocsc()  # + 1: no stored 0 to drop
        split = block.indptr[width]
        for (begin, end), part in ((particle_columns, slice(0, split)), (body_columns, slice(split, None))):
            a, b = transpose_offsets[begin], transpose_offsets[end]
            transpose_rows[a:b] = block.indices[part] + r0
            transpose_source[a:b] = block.data[part] - 1
        w = w1
    return offsets, columns, source, transpose_offsets, transpose_rows, transpose_source


def reduction_chunks(world_row_start):
    """Fixed-size pieces of each world's rows for the per-world inner products (never straddling two
    worlds): chunk starts, chunk ends, and each world's first chunk (one more entry: the chunk count)."""
    chunk_start, chunk_end, world_chunk_start = [], [], [0]
    for w in range(len(world_row_start) - 1):
        for s in range(int(world_row_start[w]), int(world_row_start[w + 1]), REDUCTION_CHUNK):
            chunk_start.append(s)
            chunk_end.append(min(s + REDUCTION_CHUNK, int(world_row_start[w + 1])))
        world_chunk_start.append(len(chunk_start))
    return chunk_start, chunk_end, world_chunk_start
