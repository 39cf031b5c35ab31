"""Compensated positions (``SolverSettings.compensated_positions``): each position a float32 pair, the value the
constraints read and the remainder its rounding dropped.

Positions are the unknowns of a substep and the velocity is (x - x_n) / h, so a float32 position resolves velocities
only to its spacing over h: 3e-8 m / h for a coordinate near 0.3 m from its world's frame (``kernels.world_frame``),
6e-5 m/s at h = 1/1920 s. Each substep's answer is rounded at that level, and what rolls freely keeps it: the coarse
snake at rest gains 5e-9 J at 16 substeps (experiments/results/snake_at_rest.md; convergence.md, "The time step and
float32's velocity resolution"). Storing the remainder r of every rounding (x = hi + r exactly, |r| <= half hi's spacing; Kahan's
compensated summation, the pair renormalised after every addition) removes the rounding where it enters the
velocity, and the rows see it to first order:

- the prediction x~ = x + h v and every position update x = x~ + u add into the pair (``pair_add``), so x - x~ is u
  exactly and the velocity v~ + (x - x~) / h carries no rounding of the positions;
- velocities are pairs too (``State.particle_qd_low``, ``State.body_qd_low``, linear and angular): v~ = v + h (g +
  f / m) and v = v~ + (x - x~) / h add into the pair and x~ takes both parts, so that a change the same every
  substep (a slide's mu g h, a spinning body's torque h alpha) is not rounded the same way every substep, a bias of
  up to half the velocity's spacing each time;
- a body's rotation is a pair too (``State.body_q_low``'s bottom): the float32 quaternion q the rows read and the
  rotation vector delta its rounding dropped, the rotation exp(delta) q. The prediction q~ = exp(h w) q and each
  update q = exp(u) q~ are formed in float64 and split back (``rotated_pair``), so that a turn per substep below
  q's spacing (6e-8 rad where its components lie near 0.7; a pendulum released from rest turns 3e-9 rad per
  substep at 1/9600 s) is kept, not rounded away while the joints move its centre;
- the displacements x - x_n and x - x~ (damping rows, the momentum gap) and the velocities add the remainders'
  difference to the values' (``compensated_displacements``); a body's turns are taken between the pairs in float64
  (``rotation_between_pairs``): a float32 q q~^-1 carries its product's rounding, ~6e-8 rad whatever the angle;
- a row's residual is evaluated at the values, and the remainders shift it by J r, which ``add_remainders_to_rows``
  adds (c(hi + r) = c(hi) + J r + O(r^2), the linearisation the Newton iteration itself uses; a body's angular
  degrees of freedom take delta); rows that measure a motion since the substep's start (a prismatic drive's
  extension) add J (r - r_n) instead (``ConstraintType.rows_from_start``); rows whose residual is not J x at unit
  slope (contacts' Fischer-Burmeister rows) read the remainders in their own kernel
  (``ConstraintType.reads_remainders``; a body's contact point: ``body_point_remainder``).

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
def rotation_exp64(v: wp.vec3d):
    """exp(v): the unit quaternion of the rotation vector v [rad] (world frame), float64. Below 1e-4 rad the
    sine and cosine of the half angle by their series, which then agree with them to 1e-20."""
    a2 = wp.dot(v, v)
    s = wp.float64(0.0)
    c = wp.float64(0.0)
    if a2 < wp.float64(1.0e-8):
        s = wp.float64(0.5) - a2 / wp.float64(48.0)
        c = wp.float64(1.0) - a2 / wp.float64(8.0) + a2 * a2 / wp.float64(384.0)
    else:
        a = wp.sqrt(a2)
        s = wp.sin(wp.float64(0.5) * a) / a
        c = wp.cos(wp.float64(0.5) * a)
    return wp.quatd(v[0] * s, v[1] * s, v[2] * s, c)


@wp.func
def rotation_log64(q: wp.quatd):
    """The rotation vector of the unit quaternion q [rad], the shorter way round, float64 (``rotation_exp64``'s
    inverse: the angle from the atan2 of the vector part's length and the scalar, exact for small angles)."""
    if q[3] < wp.float64(0.0):
        q = -q
    v = wp.vec3d(q[0], q[1], q[2])
    s = wp.length(v)
    if s == wp.float64(0.0):
        return v
    return v * (wp.float64(2.0) * wp.atan2(s, q[3]) / s)


@wp.func
def normalized64(q: wp.quat):
    """The float32 quaternion q (its norm within float32's rounding of 1) as a unit float64 quaternion, q / |q|."""
    return wp.normalize(wp.quatd(wp.float64(q[0]), wp.float64(q[1]), wp.float64(q[2]), wp.float64(q[3])))


@wp.func
def rotation64(q: wp.quat, delta: wp.vec3):
    """The rotation of the pair (q, delta), exp(delta) q / |q|, as a float64 quaternion: q the float32 value,
    delta the rotation vector its rounding dropped [rad] (world frame)."""
    return rotation_exp64(wp.vec3d(delta)) * normalized64(q)


@wp.func
def rotation_pair(q: wp.quatd):
    """A float64 unit quaternion as the pair (q_hi, delta): q_hi its float32 rounding, delta = log(q q_hi^-1) the
    rotation that rounding dropped [rad] (``rotation64``'s inverse; |delta| about float32's spacing)."""
    hi = wp.quat(q)
    return hi, wp.vec3(rotation_log64(q * wp.quat_inverse(normalized64(hi))))


@wp.func
def rotated_pair(q: wp.quat, delta: wp.vec3, v: wp.vec3d):
    """The pair (q, delta) turned by the rotation vector v [rad] (world frame, float64: a turn h omega formed from
    the angular velocity's pair): exp(v) exp(delta) q in float64, split back into a pair (``rotation_pair``), so that
    a turn smaller than q's spacing is kept, not rounded away."""
    return rotation_pair(wp.normalize(rotation_exp64(v) * rotation64(q, delta)))


@wp.func
def rotation_between_pairs(q: wp.quat, delta: wp.vec3, q_ref: wp.quat, delta_ref: wp.vec3):
    """The rotation vector taking the pair (q_ref, delta_ref) to the pair (q, delta) [rad] (world frame), in float64:
    a float32 q q_ref^-1 would carry its components' rounding, ~6e-8 whatever the angle."""
    return wp.vec3(rotation_log64(rotation64(q, delta) * wp.quat_inverse(rotation64(q_ref, delta_ref))))


@wp.func
def body_point_remainder(body_low: wp.spatial_vector, lever: wp.vec3):
    """The remainder of a point of a body at ``lever`` from its centre [m] (world frame): the centre's, and the point's
    turn by the rotation's remainder delta, delta x lever (first order, as the rows take it)."""
    return wp.spatial_top(body_low) + wp.cross(wp.spatial_bottom(body_low), lever)


@wp.func
def entity_remainder(e: int, particle_count: int, particle_low: wp.array(dtype=wp.vec3),
                     body_low: wp.array(dtype=wp.spatial_vector)):
    """The remainder of entity e's position (a body's: its centre's)."""
    if e < particle_count:
        return particle_low[e]
    return wp.spatial_top(body_low[nonnegative(e - particle_count)])


@wp.func
def entity_position(e: int, particle_count: int, particle_q: wp.array(dtype=wp.vec3),
                    body_q: wp.array(dtype=wp.transform)):
    """The position of entity e (a body's: its centre's)."""
    if e < particle_count:
        return particle_q[e]
    return wp.transform_get_translation(body_q[nonnegative(e - particle_count)])


@wp.kernel
def compensated_displacements(
    particle_q: wp.array(dtype=wp.vec3),
    particle_q_prev: wp.array(dtype=wp.vec3),
    particle_q_pred: wp.array(dtype=wp.vec3),
    particle_low: wp.array(dtype=wp.vec3),
    particle_prev_low: wp.array(dtype=wp.vec3),
    particle_pred_low: wp.array(dtype=wp.vec3),
    body_q: wp.array(dtype=wp.transform),
    body_q_prev: wp.array(dtype=wp.transform),
    body_q_pred: wp.array(dtype=wp.transform),
    body_low: wp.array(dtype=wp.spatial_vector),
    body_prev_low: wp.array(dtype=wp.spatial_vector),
    body_pred_low: wp.array(dtype=wp.spatial_vector),
    particle_count: int,
    particle_world: wp.array(dtype=int),
    body_world: wp.array(dtype=int),
    held: wp.array(dtype=int),
    displacement: wp.array(dtype=float),
    offset: wp.array(dtype=float),
):
    """``integration.substep_displacements`` between pairs: x - x_n and x - x~ per degree of freedom, the values'
    difference plus the remainders'; a body's rotations between the pairs in float64 (``rotation_between_pairs``:
    the values' float32 rotation vector would carry its product's rounding). Held worlds (``Solver.held_worlds``)
    are skipped as there."""
    e = nonnegative(wp.tid())
    if entity_world_held(e, particle_count, particle_world, body_world, held):
        return
    base = entity_dof_start(e, particle_count)
    x = entity_position(e, particle_count, particle_q, body_q)
    x_n = entity_position(e, particle_count, particle_q_prev, body_q_prev)
    x_pred = entity_position(e, particle_count, particle_q_pred, body_q_pred)
    r = entity_remainder(e, particle_count, particle_low, body_low)
    r_n = entity_remainder(e, particle_count, particle_prev_low, body_prev_low)
    r_pred = entity_remainder(e, particle_count, particle_pred_low, body_pred_low)
    for k in range(3):
        displacement[base + k] = (x[k] - x_n[k]) + (r[k] - r_n[k])
        offset[base + k] = (x[k] - x_pred[k]) + (r[k] - r_pred[k])
    if e >= particle_count:
        b = nonnegative(e - particle_count)
        q = wp.transform_get_rotation(body_q[b])
        delta = wp.spatial_bottom(body_low[b])
        turn = rotation_between_pairs(q, delta, wp.transform_get_rotation(body_q_prev[b]),
                                      wp.spatial_bottom(body_prev_low[b]))
        turn_pred = rotation_between_pairs(q, delta, wp.transform_get_rotation(body_q_pred[b]),
                                           wp.spatial_bottom(body_pred_low[b]))
        for k in range(3):
            displacement[base + 3 + k] = turn[k]
            offset[base + 3 + k] = turn_pred[k]


@wp.kernel
def remainder_vectors(
    particle_low: wp.array(dtype=wp.vec3),
    particle_prev_low: wp.array(dtype=wp.vec3),
    body_low: wp.array(dtype=wp.spatial_vector),
    body_prev_low: wp.array(dtype=wp.spatial_vector),
    particle_count: int,
    remainder: wp.array(dtype=float),
    remainder_since_start: wp.array(dtype=float),
):
    """Per degree of freedom: the remainder r of the current position and r - r_n since the substep's start (a
    body's rotation: delta and delta - delta_n, to first order the turn the rows' values miss)."""
    e = nonnegative(wp.tid())
    base = entity_dof_start(e, particle_count)
    r = entity_remainder(e, particle_count, particle_low, body_low)
    r_n = entity_remainder(e, particle_count, particle_prev_low, body_prev_low)
    for k in range(3):
        remainder[base + k] = r[k]
        remainder_since_start[base + k] = r[k] - r_n[k]
    if e >= particle_count:
        b = nonnegative(e - particle_count)
        delta = wp.spatial_bottom(body_low[b])
        delta_n = wp.spatial_bottom(body_prev_low[b])
        for k in range(3):
            remainder[base + 3 + k] = delta[k]
            remainder_since_start[base + 3 + k] = delta[k] - delta_n[k]


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
