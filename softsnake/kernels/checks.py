"""Detection of blown-up simulation states, per world: a position or velocity that is NaN or Inf
(flag NONFINITE), a linear or angular speed above a bound no simulated robot reaches (TOO_FAST,
SPINNING), or kinetic energy that runs away: grows by orders of magnitude in one step (ENERGY_GROWTH),
over two steps that each multiply it by more than that limit to the power 3/4 (ENERGY_GROWTH_TWO_STEPS: 32
and more each, 1 000 times and more together, for the default 100), or over a streak of consecutive steps
that each more than double it, together more than the limit squared (ENERGY_RUNAWAY: 10 000 times for the
default 100): a diverging solve, not a robot; and of inputs of a step that are NaN or Inf (controls and
external forces, ``softsnake.input_checks``).

Why two steps: an unconverged solve can run away in steps of 84 and 87 times (the stiff block of
``experiments/results/convergence.md`` at 2 x 40), each under a one-step limit of 100, while what
physics does to a world's kinetic energy is mostly a single jump (an impact, a force switched on, a
vine link snapping through its wrinkling curve: up to 29 times) followed by smaller growth; the
smaller of two consecutive growth factors was at most 7.3 in every run measured (convergence.md).

Why a streak: a runaway made of smaller steps (3 times each, say) passes both rules until its speed
reaches ``max_speed``, writing ever faster states into the results on the way. Physics doubles a world's
kinetic energy step after step only briefly: growth that is a power of time (free fall from rest: 4, 2.25,
1.8 ...) falls below 2 within a few steps, so its streak ends small (free fall: 9); only geometric growth,
a diverging solve, keeps doubling until the product passes the limit.
The largest streak measured in runs that did not diverge (ninth session of 2026-11-24, CPU): 125 over
the whole test suite outside the tests that run away on purpose (a batch of worlds; free fall with
changing steps 100), 355 in the vine video fits' models on all six videos at 1/30 and 1/90 s (the
wrinkling model's snap-through), 125 in the five shipped vine scenes (4 vines each), 4.9 in the main gait
run (3 coarse snakes, 10 s): the limit of 10 000 is 28 times above the largest."""

from typing import Any

import warp as wp

from .entities import nonnegative

# Never on a wp.Tape (softsnake.gradients): no backward code, less to compile (tests/kernels/test_backward_options.py).
wp.set_module_options({"enable_backward": False})

TOO_FAST = wp.constant(1)
SPINNING = wp.constant(2)
ENERGY_RUNAWAY = wp.constant(3)
ENERGY_GROWTH_TWO_STEPS = wp.constant(4)
ENERGY_GROWTH = wp.constant(5)
NONFINITE = wp.constant(6)
"""World flags of the blow-up check, the most serious largest."""

STREAK_STEP_GROWTH = 2.0
"""The growth [-] a step must exceed to continue a world's streak of growing steps (ENERGY_RUNAWAY)."""


def two_step_growth_limit(energy_growth_limit):
    """The growth [-] each of two consecutive steps must exceed to flag ENERGY_GROWTH_TWO_STEPS: the
    one-step limit to the power 3/4 (31.6 for 100; 1 000 times together)."""
    return energy_growth_limit ** 0.75


def streak_growth_limit(energy_growth_limit):
    """The growth [-] a streak of steps, each more than ``STREAK_STEP_GROWTH`` times, must exceed together
    to flag ENERGY_RUNAWAY: the one-step limit squared (10 000 for 100)."""
    return energy_growth_limit ** 2


@wp.func
def vec_finite(v: wp.vec3):
    return wp.isfinite(v[0]) and wp.isfinite(v[1]) and wp.isfinite(v[2])


@wp.kernel
def check_worlds(
    particle_world_start: wp.array(dtype=int),
    body_world_start: wp.array(dtype=int),
    particle_q: wp.array(dtype=wp.vec3),
    particle_qd: wp.array(dtype=wp.vec3),
    particle_inv_mass: wp.array(dtype=float),
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    body_inv_mass: wp.array(dtype=float),
    body_inertia: wp.array(dtype=wp.mat33),
    max_speed: float,
    max_angular_speed: float,
    energy_growth_limit: float,
    two_step_limit: float,
    streak_step_growth: float,
    streak_limit: float,
    energy_floor: float,
    kinetic_energy: wp.array(dtype=float),
    energy_growth: wp.array(dtype=float),
    energy_streak: wp.array(dtype=float),
    world_flag: wp.array(dtype=int),
):
    """One thread per world, in a fixed order (deterministic): flag a non-finite position or velocity,
    a linear speed above ``max_speed``, an angular speed above ``max_angular_speed``, or kinetic energy
    that grew more than ``energy_growth_limit`` times since the last step, more than ``two_step_limit`` times in
    this step and in the last, or more than ``streak_limit`` times over consecutive steps of more than
    ``streak_step_growth`` times each, each step judged from above ``energy_floor`` [J]; store the world's
    kinetic energy [J], its growth (0 where not judged) and its streak (the product of the growth of the
    current run of such steps, 1 where none) for the next step. The flag keeps the worst finding
    since the host last read and cleared it (``SolverSettings.check_interval``)."""
    w = nonnegative(wp.tid())
    flag = int(0)
    energy = float(0.0)
    i = nonnegative(particle_world_start[w])
    while i < particle_world_start[w + 1]:
        v = particle_qd[i]
        if not (vec_finite(particle_q[i]) and vec_finite(v)):
            flag = wp.max(flag, NONFINITE)
        elif wp.length(v) > max_speed:
            flag = wp.max(flag, TOO_FAST)
        if particle_inv_mass[i] > 0.0:
            energy += 0.5 * wp.dot(v, v) / particle_inv_mass[i]
        i += 1
    b = nonnegative(body_world_start[w])
    while b < body_world_start[w + 1]:
        tf = body_q[b]
        v = wp.spatial_top(body_qd[b])
        omega = wp.spatial_bottom(body_qd[b])
        finite = vec_finite(v) and vec_finite(omega)
        for k in range(7):
            finite = finite and wp.isfinite(tf[k])
        if not finite:
            flag = wp.max(flag, NONFINITE)
        else:
            if wp.length(v) > max_speed:
                flag = wp.max(flag, TOO_FAST)
            if wp.length(omega) > max_angular_speed:
                flag = wp.max(flag, SPINNING)
            if body_inv_mass[b] > 0.0:
                R = wp.quat_to_matrix(wp.transform_get_rotation(tf))
                energy += 0.5 * wp.dot(v, v) / body_inv_mass[b] + 0.5 * wp.dot(omega, R * body_inertia[b] * wp.transpose(R) * omega)
        b += 1
    previous = kinetic_energy[w]
    growth = float(0.0)
    streak = float(1.0)
    if flag < NONFINITE and previous > energy_floor:
        growth = energy / previous
        if energy > energy_growth_limit * previous:
            flag = wp.max(flag, ENERGY_GROWTH)
        elif wp.min(growth, energy_growth[w]) > two_step_limit:
            flag = wp.max(flag, ENERGY_GROWTH_TWO_STEPS)
        if growth > streak_step_growth:
            streak = wp.max(energy_streak[w], 1.0) * growth
            if streak > streak_limit:
                flag = wp.max(flag, ENERGY_RUNAWAY)
    kinetic_energy[w] = energy
    energy_growth[w] = growth
    energy_streak[w] = streak
    world_flag[w] = wp.max(world_flag[w], flag)


@wp.kernel
def flag_nonfinite_inputs(
    values: wp.array(dtype=Any),
    item_world: wp.array(dtype=int),
    input_index: int,
    input_count: int,
    input_flag: wp.array(dtype=int),
):
    """Inputs of a step (controls: float; forces: vec3 or spatial_vector) that are NaN or Inf: entry i
    flags (its world, the input) in input_flag as i + 1, the largest such entry winning
    (``softsnake.input_checks`` names them)."""
    i = nonnegative(wp.tid())
    if not wp.isfinite(values[i]):
        wp.atomic_max(input_flag, nonnegative(item_world[i]) * input_count + input_index, i + 1)
