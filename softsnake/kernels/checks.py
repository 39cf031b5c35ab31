"""Detection of blown-up simulation states, per world: a position or velocity that is NaN or Inf
(flag NONFINITE), a linear or angular speed above a bound no simulated robot reaches (TOO_FAST,
SPINNING), or kinetic energy that runs away: grows by orders of magnitude in one step (ENERGY_GROWTH),
over two steps that each multiply it by more than that limit to the power 3/4 (ENERGY_GROWTH_TWO_STEPS: 32
and more each, 1 000 times and more together, for the default 100), or over a streak of consecutive steps
that each multiply it by more than 1.25, steadily, together more than the limit squared (ENERGY_RUNAWAY:
10 000 times for the default 100): a diverging solve, not a robot; and of inputs of a step that are NaN or
Inf (controls and external forces, ``softsnake.input_checks``).

Why two steps: an unconverged solve can run away in steps of 84 and 87 times (the stiff block of
``experiments/results/convergence.md`` at 2 x 40), each under a one-step limit of 100, while what
physics does to a world's kinetic energy is mostly a single jump (an impact, a force switched on, a
vine link snapping through its wrinkling curve: up to 29 times) followed by smaller growth; the
smaller of two consecutive growth factors was at most 7.3 in every run measured (convergence.md).

Why a streak: a runaway made of smaller steps (1.5 times each, say) passes both rules until its speed
reaches ``max_speed``, writing ever faster states into the results on the way.

Why the one-step rule and the streak judge a slow world only in part (the one-step rule where the world's
energy before the step is at least a tenth of its recent peak, ``TURNING_FRACTION``; the streak not at all),
and a fast one (its fastest particle or body above ``runaway_speed``, 10 m/s by default) always: while a
world is slow, physics multiplies its kinetic energy by any factor from potential energy it had all along.
A pendulum leaves its turning point with almost no kinetic energy: one step later it has 100 times more (a 4 cm pendulum swinging over its top at 1/30 s was
stopped in its 32nd step); a body toppling from an unstable rest gains kinetic energy geometrically,
5-6 times per step at 1/30 s, until it has fallen (a 4 cm pendulum falling from upright was stopped by the
streak in its 12th step, at 0.1 m/s). Energy converted from potential energy runs out before a robot's
parts reach 10 m/s (a fall of 5 m); a diverging solve does not, and reaches it within a few steps of
its start (100 times per step: from 1 mm/s in 4 steps). The two-step rule judges every world: a turning
point or an impact is a single jump.

Why steadily: a force that rises from zero (a push ramped up from rest) grows a world's kinetic energy as a
power of time, t^2 for a constant force, t^4 for one rising linearly, t^6 quadratically: many steps of more
than 1.25 times, whose growth slows down (6 ln(n / (n - 1)) in step n for t^6), while a diverging solve's
does not. A step continues the streak's count only while its own growth is at least the streak's mean
growth per step to the power ``STREAK_STEADINESS`` (0.7): a power law from rest never passes (up to t^12),
a geometric runaway always does (a quadratic force ramp on a particle from rest was stopped in its 5th
step, at 0.25 m/s, before this rule).

Measured in runs that do not diverge (tenth session of 2026-11-25, CPU; experiments/results/convergence.md,
"The blow-up check judges fast worlds"): the largest steady streak 355 (the vine video fits' wrinkling
model, at most 1.06 m/s), 45 in the five shipped vine scenes, 36 in the test suite outside the tests that
run away on purpose, 12 in the main gait run; the fastest point 19.6 m/s (2 s of free fall, streak 8.4)."""

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

STREAK_STEP_GROWTH = 1.25
"""The growth [-] a step must exceed to continue a world's streak of growing steps (ENERGY_RUNAWAY)."""

TURNING_FRACTION = 0.1
"""A slow world's one-step growth is judged where its kinetic energy before the step is at least this fraction
of its recent peak [-] (``PEAK_DECAY``): not near a turning point or a rest, where physics multiplies it by any
factor, but a world moving as it has been, whose energy physics cannot multiply by 100 in one step (a
conservative swing never exceeds its peak)."""

PEAK_DECAY = 0.99
"""Per step, a world's recent peak of kinetic energy decays by this factor [-] (half in 69 steps), so that a
robot that once moved fast is judged again once it has moved slowly for a while."""

STREAK_STEADINESS = 0.7
"""A streak flags ENERGY_RUNAWAY only at a step whose growth is at least the streak's mean growth per step to
this power [-] (ln g >= 0.7 ln(product) / steps): growth that is a power of time slows down step by step and
never passes, growth by a constant factor always does."""


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
    streak_steadiness: float,
    runaway_speed: float,
    peak_decay: float,
    turning_fraction: float,
    energy_floor: float,
    kinetic_energy: wp.array(dtype=float),
    energy_growth: wp.array(dtype=float),
    energy_streak: wp.array(dtype=float),
    energy_streak_steps: wp.array(dtype=int),
    energy_peak: wp.array(dtype=float),
    world_flag: wp.array(dtype=int),
):
    """One thread per world, in a fixed order (deterministic): flag a non-finite position or velocity,
    a linear speed above ``max_speed``, an angular speed above ``max_angular_speed``, or kinetic energy
    that grew more than ``two_step_limit`` times in this step and in the last; more than
    ``energy_growth_limit`` times since the last step in a world whose fastest particle or body moves faster
    than ``runaway_speed`` [m/s] or whose energy before the step was at least ``turning_fraction`` of its
    recent peak (``energy_peak``, decaying by ``peak_decay`` per step); or, in a fast world, steadily
    (``streak_steadiness``) more than ``streak_limit`` times over consecutive steps of more than
    ``streak_step_growth`` times each; each step judged from above ``energy_floor`` [J]. Store the world's
    kinetic energy [J], its growth (0 where not judged), its streak (the product of the growth of the current
    run of such steps, 1 where none, and their count) and its peak for the next step. The flag keeps the worst finding
    since the host last read and cleared it (``SolverSettings.check_interval``)."""
    w = nonnegative(wp.tid())
    flag = int(0)
    energy = float(0.0)
    fastest = float(0.0)
    i = nonnegative(particle_world_start[w])
    while i < particle_world_start[w + 1]:
        v = particle_qd[i]
        if not (vec_finite(particle_q[i]) and vec_finite(v)):
            flag = wp.max(flag, NONFINITE)
        else:
            speed = wp.length(v)
            fastest = wp.max(fastest, speed)
            if speed > max_speed:
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
            speed = wp.length(v)
            fastest = wp.max(fastest, speed)
            if speed > max_speed:
                flag = wp.max(flag, TOO_FAST)
            if wp.length(omega) > max_angular_speed:
                flag = wp.max(flag, SPINNING)
            if body_inv_mass[b] > 0.0:
                R = wp.quat_to_matrix(wp.transform_get_rotation(tf))
                energy += 0.5 * wp.dot(v, v) / body_inv_mass[b] + 0.5 * wp.dot(omega, R * body_inertia[b] * wp.transpose(R) * omega)
        b += 1
    previous = kinetic_energy[w]
    peak = wp.max(energy_peak[w] * peak_decay, previous)
    growth = float(0.0)
    streak = float(1.0)
    steps = int(0)
    if flag < NONFINITE and previous > energy_floor:
        growth = energy / previous
        fast = fastest > runaway_speed
        if (fast or previous >= turning_fraction * peak) and growth > energy_growth_limit:
            flag = wp.max(flag, ENERGY_GROWTH)
        if wp.min(growth, energy_growth[w]) > two_step_limit:
            flag = wp.max(flag, ENERGY_GROWTH_TWO_STEPS)
        if growth > streak_step_growth:
            streak = wp.max(energy_streak[w], 1.0) * growth
            steps = energy_streak_steps[w] + 1
            steady = wp.log(growth) * float(steps) >= streak_steadiness * wp.log(streak)
            if fast and steady and streak > streak_limit:
                flag = wp.max(flag, ENERGY_RUNAWAY)
    kinetic_energy[w] = energy
    energy_growth[w] = growth
    energy_streak[w] = streak
    energy_streak_steps[w] = steps
    if flag < NONFINITE:
        peak = wp.max(peak, energy)
    energy_peak[w] = peak
    world_flag[w] = wp.max(world_flag[w], flag)


@wp.func
def flag_nonfinite_input(finite: bool, i: int, world: int, input_index: int, input_count: int,
                         input_flag: wp.array(dtype=int)):
    """Entry i of a step input that is NaN or Inf flags (its world, the input) in input_flag as i + 1, the
    largest such entry winning (``softsnake.input_checks`` names them)."""
    if not finite:
        wp.atomic_max(input_flag, world * input_count + input_index, i + 1)


# One kernel per input type (controls: float; particle forces: vec3; body forces: spatial_vector), not one
# generic kernel with overloads: a CPU graph (Warp's API capture) replayed an overload of the wrong type,
# reading a vec3 array as spatial vectors, past its end (twentieth session).
@wp.kernel
def flag_nonfinite_floats(values: wp.array(dtype=float), item_world: wp.array(dtype=int), input_index: int,
                          input_count: int, input_flag: wp.array(dtype=int)):
    i = nonnegative(wp.tid())
    flag_nonfinite_input(wp.isfinite(values[i]), i, nonnegative(item_world[i]), input_index, input_count, input_flag)


@wp.kernel
def flag_nonfinite_vec3s(values: wp.array(dtype=wp.vec3), item_world: wp.array(dtype=int), input_index: int,
                         input_count: int, input_flag: wp.array(dtype=int)):
    i = nonnegative(wp.tid())
    flag_nonfinite_input(wp.isfinite(values[i]), i, nonnegative(item_world[i]), input_index, input_count, input_flag)


@wp.kernel
def flag_nonfinite_spatial_vectors(values: wp.array(dtype=wp.spatial_vector), item_world: wp.array(dtype=int),
                                   input_index: int, input_count: int, input_flag: wp.array(dtype=int)):
    i = nonnegative(wp.tid())
    flag_nonfinite_input(wp.isfinite(values[i]), i, nonnegative(item_world[i]), input_index, input_count, input_flag)


FLAG_NONFINITE = {wp.float32: flag_nonfinite_floats, wp.vec3: flag_nonfinite_vec3s,
                  wp.spatial_vector: flag_nonfinite_spatial_vectors}
"""The kernel that checks a step input of each element type."""
