"""The sparse topology ``finalize`` lays out: J^T is J's transpose, entry for entry.

``layout.solve_layout`` transposes a few worlds at a time and puts each piece in place (a world's
rows touch only its own particles and bodies); the reference here is SciPy's transpose of the whole
model at once. Pieces of 20 entries make every world a piece, and the planar scene exercises
the compact solver J (out-of-plane columns left out).
"""

import numpy as np
import pytest
import scipy.sparse

import softsnake
from softsnake import layout

from test_worlds import planar_world_builder, world_builder


def mixed_batch(planar):
    """Five worlds: particles, a soft cube and hinged rods (or the planar scene's pairs, rods and balls), and one
    world with a lone particle and no rows between them."""
    batch = softsnake.ModelBuilder(gravity=(0.0, -9.81, 0.0), planar=True) if planar else softsnake.ModelBuilder()
    for k in range(5):
        if k == 2:
            world = softsnake.ModelBuilder(gravity=batch.gravity, planar=planar)
            world.add_particle((0.0, 0.5, 0.0), mass=1.0)
        else:
            world = planar_world_builder(k) if planar else world_builder(k)
        batch.add_world(world)
    return batch.finalize("cpu")


@pytest.mark.parametrize("planar", [False, True])
def test_transpose_of_J_is_J_transposed(planar, monkeypatch):
    """J^T's offsets, rows and value sources equal SciPy's whole-model transpose of the solver's J exactly (rows
    in order inside every column), with the transpose done world by world (pieces of at most 20 entries)."""
    monkeypatch.setattr(layout, "TRANSPOSE_PIECE_ENTRIES", 20)
    model = mixed_batch(planar)
    offsets, columns = model.solve_offsets.numpy(), model.solve_columns.numpy()
    source = model.solve_source.numpy() if model.solve_compact else np.arange(model.nnz)
    assert model.solve_compact == planar and model.row_count > 0
    dofs = 3 * model.particle_count + 6 * model.body_count
    reference = scipy.sparse.csr_matrix((source + 1, columns, offsets), shape=(model.row_count, dofs)).tocsc()
    pieces = layout.solve_layout(model.J_offsets.numpy(), model.J_columns.numpy(),
                                 layout.kept_columns(model.particle_count, model.body_count, planar),
                                 model.row_world_start, model.particle_world_start, model.body_world_start)
    for got, want in zip(pieces[3:], (reference.indptr, reference.indices, reference.data - 1)):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(model.JT_offsets.numpy(), reference.indptr)
    np.testing.assert_array_equal(model.JT_columns.numpy(), reference.indices)
    np.testing.assert_array_equal(model.JT_source.numpy(), reference.data - 1)


def test_rows_of_each_item_are_laid_out_world_by_world():
    """Every row lies in its item's world, worlds in order, and each world's rows are one range (world_row_start)."""
    model = mixed_batch(planar=False)
    row_world = model.row_world.numpy()
    assert np.all(np.diff(row_world) >= 0)
    starts = model.row_world_start
    for w in range(model.world_count):
        assert np.all(row_world[starts[w]:starts[w + 1]] == w)
    assert starts[3] == starts[2]  # the world with a lone particle has no rows
