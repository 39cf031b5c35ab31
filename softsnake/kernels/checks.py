"""Detection of blown-up simulation states, per world: a position or velocity that is NaN or Inf
(flag NONFINITE), or a linear speed above a bound no simulated robot reaches (flag TOO_FAST); and
of inputs of a step that are NaN or Inf (controls and external forces, ``softsnake.input_checks``)."""

import warp as wp

from .entities import nonnegative

NONFINITE = wp.constant(2)
TOO_FAST = wp.constant(1)


@wp.func
def vec_finite(v: wp.vec3):
    return wp.isfinite(v[0]) and wp.isfinite(v[1]) and wp.isfinite(v[2])


@wp.func
def speed_flag(v: wp.vec3, max_speed: float):
    if not vec_finite(v):
        return NONFINITE
    if wp.length(v) > max_speed:
        return TOO_FAST
    return 0


@wp.kernel
def flag_blown_up_particles(
    particle_q: wp.array(dtype=wp.vec3),
    particle_qd: wp.array(dtype=wp.vec3),
    particle_world: wp.array(dtype=int),
    max_speed: float,
    world_flag: wp.array(dtype=int),
):
    i = nonnegative(wp.tid())
    flag = speed_flag(particle_qd[i], max_speed)
    if not vec_finite(particle_q[i]):
        flag = NONFINITE
    if flag != 0:
        wp.atomic_max(world_flag, nonnegative(particle_world[i]), flag)


@wp.kernel
def flag_blown_up_bodies(
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    body_world: wp.array(dtype=int),
    max_speed: float,
    world_flag: wp.array(dtype=int),
):
    i = nonnegative(wp.tid())
    tf = body_q[i]
    qd = body_qd[i]
    flag = speed_flag(wp.vec3(qd[0], qd[1], qd[2]), max_speed)
    for k in range(7):
        if not wp.isfinite(tf[k]):
            flag = NONFINITE
    if not vec_finite(wp.vec3(qd[3], qd[4], qd[5])):
        flag = NONFINITE
    if flag != 0:
        wp.atomic_max(world_flag, nonnegative(body_world[i]), flag)


# Inputs of a step (controls and external forces) that are NaN or Inf: each flags its world and
# records which input and which entry (softsnake.input_checks names them), in input_flag[world,
# input] as the entry's index + 1 (the largest such index, atomic_max).
@wp.kernel
def flag_nonfinite_scalars(
    values: wp.array(dtype=float),
    item_world: wp.array(dtype=int),
    input_index: int,
    input_count: int,
    input_flag: wp.array(dtype=int),
):
    i = nonnegative(wp.tid())
    if not wp.isfinite(values[i]):
        wp.atomic_max(input_flag, nonnegative(item_world[i]) * input_count + input_index, i + 1)


@wp.kernel
def flag_nonfinite_vectors(
    values: wp.array(dtype=wp.vec3),
    item_world: wp.array(dtype=int),
    input_index: int,
    input_count: int,
    input_flag: wp.array(dtype=int),
):
    i = nonnegative(wp.tid())
    if not vec_finite(values[i]):
        wp.atomic_max(input_flag, nonnegative(item_world[i]) * input_count + input_index, i + 1)


@wp.kernel
def flag_nonfinite_wrenches(
    values: wp.array(dtype=wp.spatial_vector),
    item_world: wp.array(dtype=int),
    input_index: int,
    input_count: int,
    input_flag: wp.array(dtype=int),
):
    i = nonnegative(wp.tid())
    f = values[i]
    if not (vec_finite(wp.spatial_top(f)) and vec_finite(wp.spatial_bottom(f))):
        wp.atomic_max(input_flag, nonnegative(item_world[i]) * input_count + input_index, i + 1)
