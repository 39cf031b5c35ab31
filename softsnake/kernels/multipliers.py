"""The constraint multipliers lambda and the Newton step's judgement: the warm start (carrying the
contact rows' multipliers into the next substep), the rows' residuals scaled into the merit, the
per-world acceptance or retreat of a step, and the update lambda += dlambda.
"""

import warp as wp

from .entities import nonnegative, row_world_held

# Never on a wp.Tape (softsnake.gradients): no backward code, less to compile (tests/kernels/test_backward_options.py).
wp.set_module_options({"enable_backward": False})


@wp.kernel
def keep_carried_multipliers(lam: wp.array(dtype=float), row_carried: wp.array(dtype=int), factor: float):
    """lambda <- factor lambda on the rows that carry their multipliers into the next substep, 0 on the
    others."""
    i = nonnegative(wp.tid())
    if row_carried[i] != 0:
        lam[i] = lam[i] * factor
    else:
        lam[i] = 0.0


@wp.kernel
def scale_residuals(rhs: wp.array(dtype=float), residual_scale: wp.array(dtype=float), row_world: wp.array(dtype=int),
                    held: wp.array(dtype=int), scaled: wp.array(dtype=float)):
    """The residual of each row's own equation: the right-hand side times the row's scale (d phi/d a
    for complementarity rows, whose right-hand side is -phi / (d phi/d a); 1 for the others), except in held worlds
    (``Solver.held_worlds``)."""
    i = nonnegative(wp.tid())
    if not row_world_held(row_world, held, i):
        scaled[i] = rhs[i] * residual_scale[i]


@wp.kernel
def start_line_search(step_scale: wp.array(dtype=float)):
    """A substep's first Newton step has nothing to compare with: mark every world "no step yet"."""
    step_scale[nonnegative(wp.tid())] = 0.0


ROUND_OFF = wp.constant(3.44e-8)
"""Standard deviation of float32's rounding of a number x, relative to |x| [-]: 2^-23 / sqrt(12), the spread
of an error uniform over half a unit in the last place either side."""


@wp.func
def coordinate_axis(j: int, particle_count: int):
    """The axis (0-2) of degree of freedom j if it is a particle's or a body's coordinate, -1 for a body's rotation."""
    if j < 3 * particle_count:
        return j % 3
    k = j - 3 * particle_count
    if k % 6 < 3:
        return k % 6
    return -1


@wp.func
def coordinate_value(j: int, particle_q: wp.array(dtype=wp.vec3), body_q: wp.array(dtype=wp.transform),
                     particle_count: int):
    """The coordinate [m] of degree of freedom j (a particle's or a body's; 0 for a body's rotation)."""
    if j < 3 * particle_count:
        return particle_q[j // 3][j % 3]
    k = j - 3 * particle_count
    if k % 6 < 3:
        return wp.transform_get_translation(body_q[k // 6])[k % 6]
    return 0.0


@wp.kernel
def row_round_off(offsets: wp.array(dtype=int), columns: wp.array(dtype=int), values: wp.array(dtype=float),
                  particle_q: wp.array(dtype=wp.vec3), body_q: wp.array(dtype=wp.transform), particle_count: int,
                  compensated: int, residual_scale: wp.array(dtype=float), floor: wp.array(dtype=float)):
    """Each row's residual as float32's rounding of the positions leaves it, in the merit's scale:
    ROUND_OFF sqrt(sum_j (J_ij m_j)^2) times the row's residual scale. A row reads the coordinates x_j it touches,
    each stored to about ROUND_OFF |x_j|, and subtracts them from one another, each difference rounded to about
    ROUND_OFF times its size; those independent errors add in squares. So m_j is |x_j| plus the row's spread along
    x_j's axis (the largest difference of the coordinates it reads there), and 1 for a body's rotation (a unit
    quaternion's components are rounded at 1). The spread matters in the frame a substep runs in
    (``kernels.world_frame``), where a world's coordinates are small near the frame's origin but its rows'
    differences are not: estimated from |x_j| alone, a double pendulum's floor fell below what its rows leave and
    a tenth of its substeps ended above twice the floor at any budget (none with the spread, as in the model's
    frame); a floor raised to the world's size for every coordinate stopped a cantilever early enough to gain
    energy from one frame to the next. With compensated positions (``kernels.compensated``) a coordinate's own
    rounding is carried in its remainder and the rows see it (c + J r): m_j is the spread alone, which the row's
    float32 differences still round; a rotation's stays 1, the rows turning their levers by the float32 quaternion,
    whose products round at 1 whatever its remainder."""
    i = nonnegative(wp.tid())
    lo = wp.vec3(wp.inf)
    hi = wp.vec3(-wp.inf)
    k = offsets[i]
    while k < offsets[i + 1]:
        j = nonnegative(columns[k])
        a = coordinate_axis(j, particle_count)
        if a >= 0:
            c = coordinate_value(j, particle_q, body_q, particle_count)
            lo[a] = wp.min(lo[a], c)
            hi[a] = wp.max(hi[a], c)
        k += 1
    total = float(0.0)
    k = offsets[i]
    while k < offsets[i + 1]:
        j = nonnegative(columns[k])
        a = coordinate_axis(j, particle_count)
        m = float(1.0)
        if a >= 0:
            m = hi[a] - lo[a]
            if compensated == 0:
                m += wp.abs(coordinate_value(j, particle_q, body_q, particle_count))
        v = values[k] * m
        total += v * v
        k += 1
    floor[i] = ROUND_OFF * wp.sqrt(total) * residual_scale[i]


HOLD = wp.constant(2)
"""``retreat`` value of a world whose Newton iteration has converged: it keeps its point."""


@wp.kernel
def judge_newton_steps(
    merit: wp.array(dtype=float),
    line_search: int,
    min_scale: float,
    tolerance_sq: float,
    floor_sq: float,
    floor_stall: float,
    merit_floor: wp.array(dtype=float),
    merit_ref: wp.array(dtype=float),
    merit_first: wp.array(dtype=float),
    step_scale: wp.array(dtype=float),
    retreat: wp.array(dtype=int),
):
    """Per world: hold a converged point, keep the last Newton step if it did not raise the merit, or
    halve it.

    step_scale is the fraction of the last computed step the world now stands at (0: none yet this
    substep). A world whose merit fell to ``tolerance_sq`` times the substep's first merit has
    converged: it holds its point (retreat = HOLD) for the rest of the substep. A world whose merit
    fell (or that has taken no step yet) accepts: its merit becomes the reference and its next update
    takes the new step in full. A world whose merit rose retreats to half of what it took, unless it
    already stands at ``min_scale``: then it keeps the point (the step was a descent of the linear
    model; round-off can hide that in the merit) and goes on from there.

    Round-off (``floor_sq`` > 0, ``SolverSettings.newton_floor`` squared): a world whose merit is within
    ``floor_sq`` of ``merit_floor``, what float32's rounding of its positions alone leaves in its merit
    (``row_round_off``), and that has stopped falling (its last step left at least ``floor_stall`` of the
    merit before it, or it has taken none this substep), has converged as far as float32 can tell: it holds
    its point too.
    """
    w = nonnegative(wp.tid())
    m = merit[w]
    scale = step_scale[w]
    if scale == 0.0:
        merit_first[w] = m
    at_floor = m <= floor_sq * merit_floor[w] and (scale == 0.0 or m >= floor_stall * merit_ref[w])
    if m <= tolerance_sq * merit_first[w] or at_floor:
        merit_ref[w] = m
        step_scale[w] = 1.0
        retreat[w] = HOLD
    elif line_search == 0 or scale == 0.0 or m <= merit_ref[w] or scale <= min_scale:
        merit_ref[w] = m
        step_scale[w] = 1.0
        retreat[w] = 0
    else:
        step_scale[w] = 0.5 * scale
        retreat[w] = 1


@wp.kernel
def start_least_merit(merit_least: wp.array(dtype=float)):
    """A substep's Newton loop has visited no point yet (``SolverSettings.wander_limit``)."""
    merit_least[nonnegative(wp.tid())] = 3.0e38


@wp.kernel
def note_least_merit(merit: wp.array(dtype=float), merit_least: wp.array(dtype=float), taken: wp.array(dtype=int)):
    """After a judgement: taken[w] = 1 where the world's current point has the least merit of its substep so far
    (it becomes ``merit_least``), else 0 (``SolverSettings.wander_limit``; NaN is never least)."""
    w = nonnegative(wp.tid())
    taken[w] = 0
    if merit[w] < merit_least[w]:
        merit_least[w] = merit[w]
        taken[w] = 1


@wp.kernel
def choose_least_merit(merit_least: wp.array(dtype=float), retreat: wp.array(dtype=int), ratio: float,
                       merit: wp.array(dtype=float), taken: wp.array(dtype=int), returns: wp.array(dtype=int)):
    """After the end point's judgement: taken[w] = 1 where a world that has not converged (retreat != HOLD)
    ends with more than ``ratio`` times the least merit it visited; its merit becomes that point's, which it goes
    back to (``copy_rows_where``, ``integration.copy_positions_where``), and returns[w] counts it. A converged
    world keeps its point."""
    w = nonnegative(wp.tid())
    taken[w] = 0
    if retreat[w] != HOLD and ratio * merit_least[w] < merit[w]:
        merit[w] = merit_least[w]
        taken[w] = 1
        returns[w] = returns[w] + 1


@wp.kernel
def copy_rows_where(row_world: wp.array(dtype=int), taken: wp.array(dtype=int), source: wp.array(dtype=float),
                    target: wp.array(dtype=float)):
    """target[i] = source[i] for the rows of the worlds with taken[w] = 1."""
    i = nonnegative(wp.tid())
    if taken[nonnegative(row_world[i])] == 1:
        target[i] = source[i]


@wp.kernel
def flag_iterating_worlds(retreat: wp.array(dtype=int), world_count: int, iterating: wp.array(dtype=int),
                          unfinished: wp.array(dtype=int), held: wp.array(dtype=int)):
    """iterating[0] = unfinished[0] = 1 if some world has not converged (retreat != HOLD), else 0: one thread block
    (on the CPU one thread) counts them, each thread every block_dim-th world, then a sum over the block (integers:
    exact in any order). The Newton loop goes on while ``iterating`` is 1 (``Solver._substep``: on a GPU a
    conditional node of the step's CUDA graph, a conditional branch of a CPU graph); the budget's end sets it to 0
    (``count_newton_iteration``) and leaves ``unfinished``, which runs the substep's end assembly
    (``SolverSettings.wander_limit``) only where some world did not converge. held[w] = 1 where world w holds its
    point: the loop's next iterations skip its items (``Solver.held_worlds``)."""
    _block, lane = wp.tid()
    count = int(0)
    w = lane
    while w < world_count:
        if retreat[w] != HOLD:
            count += 1
            held[w] = 0
        else:
            held[w] = 1
        w += wp.block_dim()
    total = wp.tile_sum(wp.tile(count))[0]
    if lane == 0:
        iterating[0] = wp.where(total > 0, 1, 0)
        unfinished[0] = iterating[0]


@wp.kernel
def start_newton_count(count: wp.array(dtype=int)):
    """The substep's Newton iterations counted from zero (``count_newton_iteration``)."""
    count[0] = 0


@wp.kernel
def count_newton_iteration(count: wp.array(dtype=int), budget: int, iterating: wp.array(dtype=int)):
    """One more Newton iteration done; at the budget the loop ends (iterating[0] = 0) whatever the worlds."""
    done = count[0] + 1
    count[0] = done
    if done >= budget:
        iterating[0] = 0


@wp.kernel
def count_world_newton_steps(retreat: wp.array(dtype=int), steps: wp.array(dtype=int)):
    """steps[w] += 1 for every world that takes this iteration's step: one that has not converged
    (retreat != HOLD; a retreat to half its last step counts as a step too)."""
    w = nonnegative(wp.tid())
    if retreat[w] != HOLD:
        steps[w] = steps[w] + 1


@wp.kernel
def count_substep_ends(
    retreat: wp.array(dtype=int),
    merit: wp.array(dtype=float),
    merit_floor: wp.array(dtype=float),
    margin_sq: float,
    substeps: wp.array(dtype=int),
    budget_ends: wp.array(dtype=int),
    unconverged_ends: wp.array(dtype=int),
):
    """After a substep's Newton loop: substeps[w] += 1; budget_ends[w] += 1 for a world the budget stopped
    before it met its stop (its last judgement left it iterating); and unconverged_ends[w] += 1 where, besides,
    its last judged merit lay above ``margin_sq`` times its round-off floor (``row_round_off``): a world
    stopped at the floor is converged as far as float32 tells, one above it is not. The last step of a budget
    is judged by the substep's end assembly (the line search's final check, or else ``SolverSettings.wander_limit``
    > 0); without one its merit is that of the point before."""
    w = nonnegative(wp.tid())
    substeps[w] = substeps[w] + 1
    if retreat[w] != HOLD:
        budget_ends[w] = budget_ends[w] + 1
        if merit[w] > margin_sq * merit_floor[w]:
            unconverged_ends[w] = unconverged_ends[w] + 1


@wp.kernel
def hold_converged_rows(row_world: wp.array(dtype=int), retreat: wp.array(dtype=int), rhs: wp.array(dtype=float)):
    """A zero right-hand side for the rows of worlds that hold their point: their solve does nothing."""
    i = nonnegative(wp.tid())
    if retreat[nonnegative(row_world[i])] == HOLD:
        rhs[i] = 0.0


@wp.kernel
def update_multipliers(
    row_world: wp.array(dtype=int),
    retreat: wp.array(dtype=int),
    step_scale: wp.array(dtype=float),
    take_step: int,
    dlam: wp.array(dtype=float),
    lam: wp.array(dtype=float),
    dlam_taken: wp.array(dtype=float),
):
    """lambda += dlambda (the new step, kept in dlam_taken) where the world accepted, or back by the
    half of its last step it gives up where it retreats (``take_step`` 0: retreats only); a world that
    holds its point keeps it."""
    i = nonnegative(wp.tid())
    w = nonnegative(row_world[i])
    r = retreat[w]
    if r == 1:
        lam[i] = lam[i] - step_scale[w] * dlam_taken[i]
    elif r == 0 and take_step != 0:
        lam[i] = lam[i] + dlam[i]
        dlam_taken[i] = dlam[i]


SECOND_START_MARGIN = wp.constant(4.0)
"""How much higher than the first start's merit the elastic warm start's second start may begin and still be
kept [-] (``keeps_second_start``). Without a margin (1) the paper-mesh stand at 8 x 100 stalled at 4 %
above its converged curvature: its substeps' ends had 1-3 times the merit of the first start (zero soft
multipliers), so the carried start lost nearly every substep; at 4 it rests within 0.03 %, and the energy
audit's cases settle as they did at 1 (experiments/results/convergence.md, "The stand"). Where a world's chamber
pressures changed since the multipliers were carried (the rest lengths they balanced moved), the margin is 1:
the carried start must begin better than the first. With 4 there too, the paper-mesh snake under the gait at
8 x 40 kept a start of stale forces nearly every substep and travelled 0.816 m in 10 s, 15 % short of its
finer budgets; with 1 there, 0.940 m ("The elastic start under changing pressure")."""


@wp.func
def keeps_second_start(merit_first: float, merit_second: float, stale: int):
    """Whether a world keeps the elastic warm start's second start (carried soft rows' multipliers): where its
    merit is below ``SECOND_START_MARGIN`` times the first start's, or below the first start's where the
    carried multipliers are stale (``stale_second_starts``)."""
    margin = SECOND_START_MARGIN
    if stale != 0:
        margin = 1.0
    return merit_second < margin * merit_first


@wp.kernel
def stale_second_starts(channel_world_start: wp.array(dtype=int), pressure: wp.array(dtype=float),
                        pressure_carried: wp.array(dtype=float), stale: wp.array(dtype=int)):
    """Per world: 1 where a chamber pressure differs from the one the carried multipliers were computed under
    (the last substep's), else 0."""
    w = nonnegative(wp.tid())
    s = int(0)
    c = nonnegative(channel_world_start[w])
    while c < channel_world_start[w + 1]:
        if pressure[c] != pressure_carried[c]:
            s = 1
        c += 1
    stale[w] = s


@wp.kernel
def choose_first_start(merit_first: wp.array(dtype=float), merit_second: wp.array(dtype=float),
                       stale: wp.array(dtype=int), taken: wp.array(dtype=int)):
    """Per world: taken[w] = 1 where the world goes back to the elastic warm start's first start (it does not keep
    the second: ``keeps_second_start``), else 0; ``copy_rows_where`` and ``integration.copy_positions_where`` then
    put the first start's multipliers and positions back (``newton.elastic_start_commands``)."""
    w = nonnegative(wp.tid())
    taken[w] = wp.where(keeps_second_start(merit_first[w], merit_second[w], stale[w]), 0, 1)
