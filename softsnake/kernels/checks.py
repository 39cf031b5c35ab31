"""Detection of blown-up simulation states, per world: a position or velocity that is NaN or Inf
(flag NONFINITE), or a linear speed above a bound no simulated robot reaches (flag TOO_FAST); and
of inputs of a step that are NaN or Inf (controls and external forces, ``softsnake.input_checks``)."""

from typing import Any

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
