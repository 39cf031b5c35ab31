"""A frame that follows each world through its substeps: float32 positions near their own origin.

Positions are float32, whose spacing grows with the distance from the origin: 6e-8 m at 0.5 m, 4.8e-7 m at 4 m,
1.9e-6 m at 30 m. A substep's physics lives in differences of nearby positions (x - x~, x - x_n: the velocity, the
friction's slip), and those differences are quantised to that spacing. A particle sliding to rest changes its
offset x - x~ by mu g h^2 per substep (3.2e-6 m at h = 1/960 s, 8e-7 m at 1/1920 s): 4 m out that is a few spacings
and rounds by tens of percent, 30 m out it rounds to nothing, and the particle does not slow down
(tests/test_friction.py; experiments/results/convergence.md, "The time step").

So every substep runs in a frame of its own world. At its start each world w takes the bounding box of its
particles and bodies (atomic minima and maxima: the same numbers in any order) and picks a shift s_w, the box's
centre rounded to a multiple of ``FRAME_GRID``; every position of the world moves by -s_w, contact detection sees the
static obstacles moved by -s_w (``softsnake.constraints.shapes.obstacle_in_world_frame``: a plane only along its
normal), joints to the static world see its frame at -s_w (``softsnake.kernels.entities.body_frame``). At the
substep's end each stored position takes the substep's displacement, x = x_start + (x_local - x_n,local), and the
points the solver keeps between substeps (x_n, x~, the contacts') go back to the model's frame, so that what
reads them between substeps (``Solver.residual_norms``, the gradients) sees one frame; the shift is zero there.

- s_w is a whole multiple of FRAME_GRID, 2^-10 m, which is a multiple of the float32 spacing of every coordinate
  below 16384 m, so x - s_w is exact wherever |x - s_w| <= |x|, and the world's centre sits within half a
  millimetre of its frame's origin;
- the substep's differences, and with them the velocities, are rounded as for a world centred at the origin:
  by the world's own size, not by where it is;
- a stored position changes by the displacement alone, rounded once to its spacing: an entity that did not move
  (a pinned one) keeps its position to the bit;
- the round-off floor of the Newton loop's stop (``kernels.multipliers.row_round_off``) counts each coordinate a
  row reads at its size in the substep's frame plus the row's own spread along that axis: near the frame's origin
  the coordinates are small, but a row's differences of them are not. (The floor in the model's frame would stop a
  world far out early: the sliding particle 30 m out then ended 36 mm short at 1/1920 s.)

Measured (tests/test_friction.py, a particle sliding from 2 m/s to rest, mu 0.3): the stopping distance converges
at first order down to h = 1/1920 s (errors -2.08 / -0.53 / -0.27 mm at 1/240 / 1/960 / 1/1920 s), the same to
0.005 mm started 0, 4 or 30 m out; without the frame convergence ended near 1/480 s at the origin, and 30 m out
the error was -31 mm at 1/240 s and +904 mm at 1/960 s.
"""

import warp as wp

from .compensated import pair_add
from .entities import entity_point, entity_world, nonnegative

FRAME_GRID = wp.constant(2.0**-10)
"""The shifts' grid [m] (0.98 mm): a world's bounding-box centre starts its substep within half of it of its frame's
origin. A power of two no finer than the float32 spacing at ``softsnake.validation.POSITION_LIMIT`` (2^-10 m from
8192 m on), so that every shift is a whole multiple of the spacing of every position the builder takes."""


@wp.func
def unshifted(frame_shift: wp.vec3):
    """Whether a world's substep runs in the model's own frame (shift zero: nothing to move)."""
    return frame_shift[0] == 0.0 and frame_shift[1] == 0.0 and frame_shift[2] == 0.0


@wp.kernel(enable_backward=False)  # never on a wp.Tape: a change of frame, not a differentiable step
def world_bounds(particle_count: int, particle_world: wp.array(dtype=int), body_world: wp.array(dtype=int),
                 particle_q: wp.array(dtype=wp.vec3), body_q: wp.array(dtype=wp.transform),
                 lower: wp.array(dtype=wp.vec3), upper: wp.array(dtype=wp.vec3)):
    """Each world's bounding box of its entities (``lower``, ``upper`` start at +-inf): atomic minima and maxima,
    which give the same numbers in any order. An entity inside the box read so far skips the atomics (a bound only
    moves outward, so a stale read never skips one that would move it): most of a large world's threads then only
    read, instead of queueing on the world's two entries."""
    e = nonnegative(wp.tid())
    w = entity_world(e, particle_count, particle_world, body_world)
    p = entity_point(e, wp.vec3(0.0), particle_count, particle_q, body_q)
    lo = lower[w]
    if p[0] < lo[0] or p[1] < lo[1] or p[2] < lo[2]:
        wp.atomic_min(lower, w, p)
    hi = upper[w]
    if p[0] > hi[0] or p[1] > hi[1] or p[2] > hi[2]:
        wp.atomic_max(upper, w, p)


@wp.kernel(enable_backward=False)  # never on a wp.Tape: a change of frame, not a differentiable step
def choose_world_frames(lower: wp.array(dtype=wp.vec3), upper: wp.array(dtype=wp.vec3),
                        frame_shift: wp.array(dtype=wp.vec3)):
    """s_w = the centre of the world's bounding box rounded to the nearest multiple of FRAME_GRID, per axis (a world
    without entities: 0); the box set back to +-inf for the next substep."""
    w = nonnegative(wp.tid())
    lo, hi = lower[w], upper[w]
    s = wp.vec3(0.0)
    for k in range(3):
        if lo[k] <= hi[k]:
            s[k] = FRAME_GRID * wp.floor((0.5 * lo[k] + 0.5 * hi[k]) / FRAME_GRID + 0.5)
    frame_shift[w] = s
    lower[w] = wp.vec3(wp.inf)
    upper[w] = wp.vec3(-wp.inf)


@wp.kernel(enable_backward=False)  # never on a wp.Tape: a change of frame, not a differentiable step
def enter_world_frames(particle_count: int, particle_world: wp.array(dtype=int), body_world: wp.array(dtype=int),
                       frame_shift: wp.array(dtype=wp.vec3), particle_q: wp.array(dtype=wp.vec3),
                       body_q: wp.array(dtype=wp.transform), particle_q_start: wp.array(dtype=wp.vec3),
                       body_q_start: wp.array(dtype=wp.transform)):
    """Keep each entity's stored position, then move it by -s_w into its world's frame (s_w = 0: left as it is)."""
    e = nonnegative(wp.tid())
    s = frame_shift[entity_world(e, particle_count, particle_world, body_world)]
    if unshifted(s):
        return
    if e < particle_count:
        particle_q_start[e] = particle_q[e]
        particle_q[e] = particle_q[e] - s
    else:
        b = nonnegative(e - particle_count)
        tf = body_q[b]
        body_q_start[b] = tf
        body_q[b] = wp.transform(wp.transform_get_translation(tf) - s, wp.transform_get_rotation(tf))


@wp.func
def displaced(tf: wp.transform, t0: wp.vec3, prev: wp.vec3):
    """tf's translation t as t0 + (t - prev), its rotation as it is (the same in every frame)."""
    return wp.transform(t0 + (wp.transform_get_translation(tf) - prev), wp.transform_get_rotation(tf))


@wp.func
def displaced_pair(x0: wp.vec3, r_n: wp.vec3, x: wp.vec3, r: wp.vec3, prev: wp.vec3):
    """The pair (x0, r_n) moved by the substep's displacement (x + r) - (prev + r_n) (``kernels.compensated``)."""
    out, low = pair_add(x0, r_n, (x - prev) + (r - r_n))
    return out, low


@wp.kernel(enable_backward=False)  # never on a wp.Tape: a change of frame, not a differentiable step
def leave_world_frames(particle_count: int, particle_world: wp.array(dtype=int), body_world: wp.array(dtype=int),
                       frame_shift: wp.array(dtype=wp.vec3), particle_q_start: wp.array(dtype=wp.vec3),
                       body_q_start: wp.array(dtype=wp.transform), particle_q: wp.array(dtype=wp.vec3),
                       body_q: wp.array(dtype=wp.transform), particle_q_prev: wp.array(dtype=wp.vec3),
                       particle_q_pred: wp.array(dtype=wp.vec3), body_q_prev: wp.array(dtype=wp.transform),
                       body_q_pred: wp.array(dtype=wp.transform), compensated: int,
                       particle_q_low: wp.array(dtype=wp.vec3), particle_q_prev_low: wp.array(dtype=wp.vec3),
                       particle_q_pred_low: wp.array(dtype=wp.vec3), body_q_low: wp.array(dtype=wp.spatial_vector),
                       body_q_prev_low: wp.array(dtype=wp.spatial_vector),
                       body_q_pred_low: wp.array(dtype=wp.spatial_vector)):
    """x = x_start + (x - x_n) in the world's frame: the stored position takes the substep's displacement. The
    substep's start x_n and prediction x~ go back to the model's frame the same way (x_n = x_start exactly), so that
    what reads them between substeps (``Solver.residual_norms``, the gradients) sees one frame. Compensated
    (``kernels.compensated``): the displacement with the remainders' difference, added into the pair (x_start, r_n)
    (the frame moved the values only, by a multiple of their spacing, so x_n's remainder is x_start's)."""
    e = nonnegative(wp.tid())
    if unshifted(frame_shift[entity_world(e, particle_count, particle_world, body_world)]):
        return
    if e < particle_count:
        x0 = particle_q_start[e]
        prev = particle_q_prev[e]
        if compensated != 0:
            r_n = particle_q_prev_low[e]
            x, r = displaced_pair(x0, r_n, particle_q[e], particle_q_low[e], prev)
            x_pred, r_pred = displaced_pair(x0, r_n, particle_q_pred[e], particle_q_pred_low[e], prev)
            particle_q[e] = x
            particle_q_low[e] = r
            particle_q_pred[e] = x_pred
            particle_q_pred_low[e] = r_pred
        else:
            particle_q[e] = x0 + (particle_q[e] - prev)
            particle_q_pred[e] = x0 + (particle_q_pred[e] - prev)
        particle_q_prev[e] = x0
    else:
        b = nonnegative(e - particle_count)
        t0 = wp.transform_get_translation(body_q_start[b])
        prev = wp.transform_get_translation(body_q_prev[b])
        if compensated != 0:
            # The rotations' remainders stay as they are, as the rotations do.
            r_n = wp.spatial_top(body_q_prev_low[b])
            low = body_q_low[b]
            pred_low = body_q_pred_low[b]
            t, r = displaced_pair(t0, r_n, wp.transform_get_translation(body_q[b]), wp.spatial_top(low), prev)
            t_pred, r_pred = displaced_pair(t0, r_n, wp.transform_get_translation(body_q_pred[b]),
                                            wp.spatial_top(pred_low), prev)
            body_q[b] = wp.transform(t, wp.transform_get_rotation(body_q[b]))
            body_q_low[b] = wp.spatial_vector(r, wp.spatial_bottom(low))
            body_q_pred[b] = wp.transform(t_pred, wp.transform_get_rotation(body_q_pred[b]))
            body_q_pred_low[b] = wp.spatial_vector(r_pred, wp.spatial_bottom(pred_low))
        else:
            body_q[b] = displaced(body_q[b], t0, prev)
            body_q_pred[b] = displaced(body_q_pred[b], t0, prev)
        body_q_prev[b] = wp.transform(t0, wp.transform_get_rotation(body_q_prev[b]))


@wp.func
def to_model_frame(p: wp.vec3, frame_shift: wp.vec3):
    """A point of a substep's frame in the model's frame (``Solver``'s arrays between substeps)."""
    return p + frame_shift
