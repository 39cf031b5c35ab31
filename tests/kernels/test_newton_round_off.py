"""The Newton iteration's stop at the round-off floor (``SolverSettings.newton_floor``): the floor a row's
residual has from float32's rounding of the positions it reads (``multipliers.row_round_off``), and the
judgement that holds a world whose merit has come within the floor and stopped falling
(``multipliers.judge_newton_steps``)."""

import numpy as np
import pytest
import warp as wp

from softsnake import ConfigError, SolverSettings
from softsnake.kernels import multipliers

AT_THE_FLOOR = [3.093e-09, 2.443e-09, 1.375e-09, 2.344e-09, 2.328e-09, 1.535e-09, 1.365e-09, 1.801e-09, 2.070e-09,
                1.986e-09, 1.461e-09, 1.979e-09, 2.025e-09, 1.522e-09, 1.700e-09, 1.656e-09]
"""Roots of the merits of one vine's warm-started substep (a 64-vine batch in cluttered scene 1, every
iteration run): it starts at float32's floor and wanders between 1.4e-9 and 3.1e-9, far from its tolerance."""


def test_row_round_off_is_the_rounding_of_the_coordinates_a_row_reads(device):
    """Two particles at (1, 0, 0.5) m and (-3, 0, 0.5) m, one body at (2, 0, 0) m; a row reading x of the first
    (J 1) and x of the second (J -1), each counted at its size plus their difference (4 m); another reading the
    body's x (J 0.5) and a rotation (J 0.2 m); a third reading z of both particles (J 1 each), whose difference is 0;
    residual scales 1, 4 and 1: floors ROUND_OFF sqrt(5^2 + 7^2), 4 ROUND_OFF sqrt((0.5 x 2)^2 + 0.2^2) and
    ROUND_OFF sqrt(0.5^2 + 0.5^2)."""
    offsets = wp.array([0, 2, 4, 6], dtype=int, device=device)
    columns = wp.array([0, 3, 6, 10, 2, 5], dtype=int, device=device)  # particles' x; body x, rot y; particles' z
    values = wp.array([1.0, -1.0, 0.5, 0.2, 1.0, 1.0], dtype=float, device=device)
    particle_q = wp.array([[1.0, 0.0, 0.5], [-3.0, 0.0, 0.5]], dtype=wp.vec3, device=device)
    body_q = wp.array([[2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]], dtype=wp.transform, device=device)
    scale = wp.array([1.0, 4.0, 1.0], dtype=float, device=device)
    floor = wp.zeros(3, dtype=float, device=device)
    wp.launch(multipliers.row_round_off, dim=3, inputs=[offsets, columns, values, particle_q, body_q, 2, 0, scale],
              outputs=[floor], device=device)
    expected = 3.44e-8 * np.array([np.sqrt(74.0), 4.0 * np.sqrt(1.0 + 0.04), np.sqrt(0.5)])
    np.testing.assert_allclose(floor.numpy(), expected, rtol=1e-6)


def held_at(roots, tolerance, floor_root, floor_factor, device, stall=0.5):
    """The iteration (0: the start) at which a world with these merit roots first holds its point, or None."""
    merit_ref, merit_first, step_scale = (wp.zeros(1, dtype=float, device=device) for _ in range(3))
    retreat = wp.zeros(1, dtype=int, device=device)
    merit_floor = wp.array([floor_root * floor_root], dtype=float, device=device)
    for k, root in enumerate(roots):
        merit = wp.array([root * root], dtype=float, device=device)
        wp.launch(multipliers.judge_newton_steps, dim=1, device=device,
                  inputs=[merit, 0, 0.125, tolerance * tolerance, floor_factor * floor_factor, stall, merit_floor],
                  outputs=[merit_ref, merit_first, step_scale, retreat])
        if retreat.numpy()[0] == multipliers.HOLD:
            return k
    return None


def test_a_merit_at_its_floor_is_held(device):
    """The vine's warm start at the floor never meets its tolerance (3e-5 of 3.1e-9): without the stop it runs
    all 16 iterations; with a floor of 1.2e-9 and factor 2 it holds at the first iteration within 2.4e-9 that no
    longer fell by 1.41 times in the root (iteration 2, 1.4e-9, fell from 2.4e-9; iteration 3, 2.3e-9, rose);
    at factor 1 it would need 1.2e-9, below all of them. Without waiting for the stall (``newton_floor_stall``
    0, the vines') it holds at iteration 2, the first within 2.4e-9."""
    assert held_at(AT_THE_FLOOR, 3.0e-5, 1.2e-9, 0.0, device) is None
    assert held_at(AT_THE_FLOOR, 3.0e-5, 1.2e-9, 2.0, device) == 3
    assert held_at(AT_THE_FLOOR, 3.0e-5, 1.2e-9, 2.0, device, stall=0.0) == 2
    assert held_at(AT_THE_FLOOR, 3.0e-5, 1.2e-9, 1.0, device) is None


def test_a_merit_far_above_its_floor_is_not_held(device):
    """A world leaving its start (roots recorded from the same batch: 1.3e-4, oscillating, then converging)
    with a floor of 1.2e-9 holds only where its merit reaches 2.4e-9 and stops falling, not while it oscillates
    far above: without a tolerance, a root of 2.0e-9 just down from 1.1e-8 goes on, the next, 1.9e-9, holds."""
    roots = [1.31e-4, 6.67e-5, 2.22e-4, 8.89e-5, 1.00e-4, 1.78e-5, 3.11e-6, 8.33e-6, 1.59e-6, 4.36e-7, 4.21e-7,
             9.29e-08, 7.82e-08, 8.20e-09, 1.82e-08, 1.08e-08]
    assert held_at(roots, 3.0e-5, 1.2e-9, 2.0, device) is None
    assert held_at(roots + [2.0e-9], 0.0, 1.2e-9, 2.0, device) is None
    assert held_at(roots + [2.0e-9, 1.9e-9], 0.0, 1.2e-9, 2.0, device) == len(roots) + 1


def test_a_bad_floor_factor_is_one_line():
    """newton_floor takes a non-negative finite number (2 by default; 0 never stops there)."""
    assert SolverSettings().newton_floor == 2.0
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ConfigError, match="newton_floor must be non-negative and finite"):
            SolverSettings(newton_floor=bad)
