"""The elastic warm start's choice between its two starts, per world (``softsnake.kernels.multipliers``): a
world keeps the second start (the soft rows' carried multipliers) where its merit begins below
``SECOND_START_MARGIN`` (4) times the first start's, and only below the first start's own where a chamber
pressure of the world changed since the multipliers were carried (``stale_second_starts``)."""

import numpy as np
import warp as wp

from softsnake.kernels import multipliers


def test_a_world_is_stale_where_one_of_its_pressures_changed(device):
    """Three worlds with channels (0, 1), none and (2): a changed second channel makes the first world stale,
    a world without channels never is."""
    starts = wp.array([0, 2, 2, 3], dtype=int, device=device)
    pressure = wp.array([1.0e4, 2.0e4, 3.0e4], dtype=float, device=device)
    carried = wp.array([1.0e4, 2.5e4, 3.0e4], dtype=float, device=device)
    stale = wp.full(3, 7, dtype=int, device=device)
    wp.launch(multipliers.stale_second_starts, dim=3, inputs=[starts, pressure, carried], outputs=[stale],
              device=device)
    assert stale.numpy().tolist() == [1, 0, 0]


def test_second_start_is_kept_within_its_margin_unless_stale(device):
    """One row per world, first start's merit 1: second starts of merit 0.5 and 2 are both kept where the
    world is not stale (margin 4), only the 0.5 one where it is."""
    row_world = wp.array([0, 1, 2, 3], dtype=int, device=device)
    merit_first = wp.array([1.0, 1.0, 1.0, 1.0], dtype=float, device=device)
    merit_second = wp.array([0.5, 2.0, 0.5, 2.0], dtype=float, device=device)
    stale = wp.array([0, 0, 1, 1], dtype=int, device=device)
    lam_first = wp.array([1.0, 1.0, 1.0, 1.0], dtype=float, device=device)
    lam = wp.array([10.0, 10.0, 10.0, 10.0], dtype=float, device=device)
    taken = wp.full(4, 7, dtype=int, device=device)
    wp.launch(multipliers.choose_first_start, dim=4, inputs=[merit_first, merit_second, stale], outputs=[taken],
              device=device)
    assert taken.numpy().tolist() == [0, 0, 0, 1]
    wp.launch(multipliers.copy_rows_where, dim=4, inputs=[row_world, taken, lam_first], outputs=[lam], device=device)
    np.testing.assert_array_equal(lam.numpy(), [10.0, 10.0, 10.0, 1.0])
