"""Compensated positions (``SolverSettings.compensated_positions``): each position a float32 pair, the value the
constraints read and the remainder its rounding dropped.

Positions are the unknowns of a substep and the velocity is (x - x_n) / h, so a float32 position resolves velocities
only to its spacing over h: 3e-8 m / h for a coordinate near 0.3 m from its world's frame (``kernels.world_frame``),
6e-5 m/s at h = 1/1920 s. Each substep's answer is rounded at that level, and what rolls freely keeps it: the coarse
snake at rest gains 1e-8 J at 16 substeps (experiments/results/convergence.md, "The time step and float32's velocity
resolution"). Storing the remainder r of every rounding (x = hi + r exactly, |r| <= half hi's spacing; Kahan's
compensated summation, the pair renormalised after every addition) removes the rounding where it enters the
velocity, and the rows see it to first order:

- the prediction x~ = x + h v and every position update x = x~ + u add into the pair (``pair_add``), so x - x~ is u
  exactly and the velocity v~ + (x - x~) / h carries no rounding of the positions;
- linear velocities are pairs too (``State.particle_qd_low``, ``State.body_qd_low``): v~ = v + h (g + f / m) and
  v = v~ + (x - x~) / h add into the pair and x~ takes both parts, so that a change the same every substep (a
  slide's mu g h) is not rounded the same way every substep, a bias of up to half the velocity's spacing each time;
- the displacements x - x_n and x - x~ (damping rows, the momentum gap) and the velocities add the remainders'
  difference to the values' (``add_remainder_differences``; translations only: a rotation keeps its float32
  quaternion, whose rounding moves a wheel's rim by ~1e-9 m);
- a row's residual is evaluated at the values, and the remainders shift it by J r, which ``add_remainders_to_rows``
  adds (c(hi + r) = c(hi) + J r + O(r^2), the linearisation the Newton iteration itself uses); rows that measure a
  motion since the substep's start (a prismatic drive's extension) add J (r - r_n) instead
  (``ConstraintType.rows_from_start``); rows whose residual is not J x at unit slope (contacts' Fischer-Burmeister
  rows) read the remainders in their own kernel (``ConstraintType.reads_remainders``).

The Newton iteration then determines the positions continuously instead of up to their spacing. Where the solver does
not compensate (``SolverSettings.compensates_positions``: "auto" from substeps of 1/600 s on), none of these kernels
run and the others skip the remainders: every result is bit for bit the float32 one.
"""

import warp as wp

from .entities import entity_dof_start, entity_world_held, nonnegative, row_world_held
from .operator import row_dot

# Never on a wp.Tape (softsnake.gradients): no backward code, less to compile (tests/kernels/test_backward_options.py).
wp.set_module_options({"enable_backward": False})


@wp.func
def pair_add(hi: wp.vec3, lo: wp.vec3, d: wp.vec3):
    """(hi, lo) + d as a renormalised pair (hi', lo'): hi' = fl(hi + lo + d), lo' what hi' leaves of the exact sum
    (Knuth's two-sum of hi and d, the remainders added, then a second two-sum: |lo'| <= half hi''s spacing). Two
    full two-sums, not a fast one for the second: in a world's frame a value can be smaller than its remainder's
    sum (a coordinate near the frame's origin), where the fast two-sum's ordering does not hold."""
    s = hi + d
    b = s - hi
    err = (hi - (s - b)) + (d - b)
    t = lo + err
    out = s + t
    c = out - s
    return out, (s - (out - c)) + (t - c)


@wp.func
def entity_remainder(e: int, particle_count: int, particle_low: wp.array(dtype=wp.vec3), body_low: wp.array(dtype=wp.vec3)):
    """The remainder of entity e's position (a body's: its centre's)."""
    if e < particle_count:
        return particle_low[e]
    return body_low[nonnegative(e - particle_count)]


@wp.kernel
def add_remainder_differences(
    particle_low: wp.array(dtype=wp.vec3),
    particle_prev_low: wp.array(dtype=wp.vec3),
    particle_pred_low: wp.array(dtype=wp.vec3),
    body_low: wp.array(dtype=wp.vec3),
    body_prev_low: wp.array(dtype=wp.vec3),
    body_pred_low: wp.array(dtype=wp.vec3),
    particle_count: int,
    particle_world: wp.array(dtype=int),
    body_world: wp.array(dtype=int),
    held: wp.array(dtype=int),
    displacement: wp.array(dtype=float),
    offset: wp.array(dtype=float),
):
    """x - x_n and x - x~ per degree of freedom (``integration.substep_displacements``, from the values) plus the
    remainders' differences; a body's rotation has none. Held worlds (``Solver.held_worlds``) are skipped here as
    there."""
    e = nonnegative(wp.tid())
    if entity_world_held(e, particle_count, particle_world, body_world, held):
        return
    base = entity_dof_start(e, particle_count)
    r = entity_remainder(e, particle_count, particle_low, body_low)
    r_n = entity_remainder(e, particle_count, particle_prev_low, body_prev_low)
    r_pred = entity_remainder(e, particle_count, particle_pred_low, body_pred_low)
    for k in range(3):
        displacement[base + k] = displacement[base + k] + (r[k] - r_n[k])
        offset[base + k] = offset[base + k] + (r[k] - r_pred[k])


@wp.kernel
def remainder_vectors(
    particle_low: wp.array(dtype=wp.vec3),
    particle_prev_low: wp.array(dtype=wp.vec3),
    body_low: wp.array(dtype=wp.vec3),
    body_prev_low: wp.array(dtype=wp.vec3),
    particle_count: int,
    remainder: wp.array(dtype=float),
    remainder_since_start: wp.array(dtype=float),
):
    """Per degree of freedom: the remainder r of the current position and r - r_n since the substep's start
    (rotations: 0)."""
    e = nonnegative(wp.tid())
    base = entity_dof_start(e, particle_count)
    r = entity_remainder(e, particle_count, particle_low, body_low)
    r_n = entity_remainder(e, particle_count, particle_prev_low, body_prev_low)
    for k in range(3):
        remainder[base + k] = r[k]
        remainder_since_start[base + k] = r[k] - r_n[k]
    if e >= particle_count:
        for k in range(3, 6):
            remainder[base + k] = 0.0
            remainder_since_start[base + k] = 0.0


@wp.kernel
def add_remainders_to_rows(
    J_offsets: wp.array(dtype=int),
    J_columns: wp.array(dtype=int),
    J_values: wp.array(dtype=float),
    row_from_start: wp.array(dtype=int),
    row_reads_remainders: wp.array(dtype=int),
    remainder: wp.array(dtype=float),
    remainder_since_start: wp.array(dtype=float),
    row_world: wp.array(dtype=int),
    held: wp.array(dtype=int),
    row_c: wp.array(dtype=float),
):
    """c += J r: each row's residual at the values, moved to the pair's position to first order (rows that measure
    a motion since the substep's start: J (r - r_n); rows whose kernel read the remainders itself: nothing). Held
    worlds' rows (``Solver.held_worlds``), which their row kernels skipped, are not moved again."""
    i = nonnegative(wp.tid())
    start = nonnegative(J_offsets[i])
    end = J_offsets[i + 1]
    if row_reads_remainders[i] != 0 or row_world_held(row_world, held, i):
        return
    if row_from_start[i] != 0:
        row_c[i] = row_c[i] + row_dot(J_values, J_columns, start, end, remainder_since_start)
    else:
        row_c[i] = row_c[i] + row_dot(J_values, J_columns, start, end, remainder)
