"""A Newton iteration that stops on stagnation (``multipliers.judge_newton_steps`` with ``stall_iterations``,
``SolverSettings.newton_stall_iterations``): the merit sequences below are roots of merits recorded from a
64-vine batch in cluttered scene 1 (every iteration run, Newton tolerance 0), one at float32's round-off
floor and one oscillating far above it before it converges."""

import pytest
import warp as wp

from softsnake import ConfigError, SolverSettings
from softsnake.kernels import multipliers

AT_THE_FLOOR = [3.093e-09, 2.443e-09, 1.375e-09, 2.344e-09, 2.328e-09, 1.535e-09, 1.365e-09, 1.801e-09, 2.070e-09,
                1.986e-09, 1.461e-09, 1.979e-09, 2.025e-09, 1.522e-09, 1.700e-09, 1.656e-09]
"""A warm start already at the round-off floor: it wanders between 1.4e-9 and 3.1e-9, a new low now and then."""

OSCILLATING = [1.31e-4, 6.67e-5, 2.22e-4, 8.89e-5, 1.00e-4, 1.78e-5, 3.11e-6, 8.33e-6, 1.59e-6, 4.36e-7, 4.21e-7,
               9.29e-08, 7.82e-08, 8.20e-09, 1.82e-08, 1.08e-08]
"""A world leaving its start: three iterations without a new low far above the floor, then it converges."""


def held_at(roots, stall_iterations, tolerance, device):
    """The iteration (0: the start) at which a world with these merit roots first holds its point, or None."""
    args = [wp.zeros(1, dtype=float, device=device) for _ in range(4)]  # merit_ref, merit_first, merit_best, step_scale
    stalls, retreat = wp.zeros(1, dtype=int, device=device), wp.zeros(1, dtype=int, device=device)
    merit_ref, merit_first, merit_best, step_scale = args
    for k, root in enumerate(roots):
        merit = wp.array([root * root], dtype=float, device=device)
        wp.launch(multipliers.judge_newton_steps, dim=1, device=device,
                  inputs=[merit, 0, 0.125, tolerance * tolerance, stall_iterations],
                  outputs=[merit_ref, merit_first, merit_best, stalls, step_scale, retreat])
        if retreat.numpy()[0] == multipliers.HOLD:
            return k
    return None


def test_a_merit_at_the_round_off_floor_stops_on_stagnation(device):
    """At the floor the tolerance 3e-5 (the vines') is never met: without the rule the world runs all 16
    iterations; with 4 it holds after four iterations without a new low (the last at iteration 6), at 10."""
    assert held_at(AT_THE_FLOOR, 0, 3.0e-5, device) is None
    assert held_at(AT_THE_FLOOR, 4, 3.0e-5, device) == 10


def test_an_oscillating_merit_far_above_the_floor_is_not_held_at_four(device):
    """Three iterations without a new low at the start's level: 3 would stop the world there (iteration 4, root
    1.0e-4, 1e4 times its lowest); 4 lets it run on to its lowest, 8.2e-9 (16 iterations; the tolerance 3e-5
    of its start, 3.9e-9, lies below its floor)."""
    assert held_at(OSCILLATING, 3, 3.0e-5, device) == 4
    assert held_at(OSCILLATING, 4, 3.0e-5, device) is None


def test_a_bad_stall_count_is_one_line():
    """newton_stall_iterations takes a non-negative whole number, refused otherwise before any work."""
    assert SolverSettings().newton_stall_iterations == 0  # the engine never stops on stagnation by default
    for bad in (-1, 2.5, True):
        with pytest.raises(ConfigError, match="newton_stall_iterations must be a non-negative integer"):
            SolverSettings(newton_stall_iterations=bad)
