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

from softsnake.kernels.linear_solver import REDUCTION_CHUNK


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
    see ``ConstraintType.block_rows``)."""
    row_type, row_item, row_k, row_world, row_entities, block_of_row = [], [], [], [], [], []
    width = max([1] + [entities.shape[1] for _, _, entities, _, _ in groups])
    for t, (_, worlds, entities, rows_per_item, block_rows) in enumerate(groups):
        n = len(worlds)
        items = np.repeat(np.arange(n), rows_per_item)
        row_type.append(np.full(len(items), t))
        row_item.append(items)
        row_k.append(np.tile(np.arange(rows_per_item), n))
        row_world.append(np.asarray(worlds, dtype=np.int64)[items])
        padded = np.full((n, width), -1, dtype=np.int64)
        padded[:, :entities.shape[1]] = entities
        row_entities.append(padded[items])
        blocks = np.array([-1 if b is None else b for b in block_rows], dtype=np.int64)
        block_of_row.append(np.tile(blocks, n))
    row_type, row_item, row_k, row_world = (np.concatenate(a) for a in (row_type, row_item, row_k, row_world))
    row_entities, block_of_row = np.concatenate(row_entities), np.concatenate(block_of_row)
    order = np.lexsort((row_k, row_item, row_type, row_world))
    row_type, row_item, row_k, row_world = row_type[order], row_item[order], row_k[order], row_world[order]
    row_entities, block_of_row = row_entities[order], block_of_row[order]
    rows = np.arange(len(order))

    first_row = {}
    for t, (name, worlds, _, _, _) in enumerate(groups):
        first = np.zeros(len(worlds), dtype=np.int64)
        starts = (row_type == t) & (row_k == 0)
        first[row_item[starts]] = rows[starts]
        first_row[name] = first
    block_start = rows.copy()
    coupled = block_of_row >= 0
    item_first = np.zeros(len(rows), dtype=np.int64)
    for t, (name, _, _, _, _) in enumerate(groups):
        of_type = row_type == t
        item_first[of_type] = first_row[name][row_item[of_type]]
    block_start[coupled] = item_first[coupled] + block_of_row[coupled]

    # CSR of J: each row's entities in order, each expanded into its 3 or 6 columns.
    row_of_entry, entity = np.nonzero(row_entities >= 0)  # row-major: rows in order, entities in order
    entity = row_entities[row_of_entry, entity]
    start, widths = entity_columns(entity, particle_count)
    nnz_per_row = np.bincount(row_of_entry, weights=widths, minlength=len(rows)).astype(np.int64)
    J_offsets = np.concatenate([[0], np.cumsum(nnz_per_row)]).astype(np.int64)
    J_columns = np.repeat(start, widths) + (np.arange(int(widths.sum())) - np.repeat(np.cumsum(widths) - widths, widths))
    world_row_start = np.searchsorted(row_world, np.arange(world_count + 1)).astype(np.int64)
    return RowLayout(row_world=row_world, row_block_start=block_start, world_row_start=world_row_start,
                     J_offsets=J_offsets, J_columns=J_columns.astype(np.int64), first_row=first_row)


def kept_columns(particle_count, body_count, planar):
    """Which degrees of freedom the solve works on: all, or for a planar model the in-plane ones."""
    keep = np.ones(3 * particle_count + 6 * body_count, dtype=bool)
    if planar:
        keep[2:3 * particle_count:3] = False
        for k in (2, 3, 4):
            keep[3 * particle_count + k::6] = False
    return keep


def solve_layout(J_offsets, J_columns, keep):
    """The solver's J (the kept columns of J, as indices into J's values) and its transpose.

    Returns offsets, columns and source of J's kept entries, and offsets, columns and source of
    J^T: a gather of J's values fills both (no atomics). Inside a column of J^T, entries follow
    the row order.
    """
    row_count, dof_count = len(J_offsets) - 1, len(keep)
    nnz_rows = np.repeat(np.arange(row_count), np.diff(J_offsets))
    source = np.flatnonzero(keep[J_columns])
    offsets = np.zeros(row_count + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(np.bincount(nnz_rows[source], minlength=row_count))
    columns = J_columns[source]
    order = np.lexsort((nnz_rows[source], columns))
    transpose_offsets = np.zeros(dof_count + 1, dtype=np.int64)
    transpose_offsets[1:] = np.cumsum(np.bincount(columns, minlength=dof_count))
    return offsets, columns, source, transpose_offsets, nnz_rows[source][order], source[order]


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
