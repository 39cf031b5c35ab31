"""Detection of non-finite simulation states, per world."""

import warp as wp


@wp.kernel
def flag_nonfinite_particles(
    particle_q: wp.array(dtype=wp.vec3), particle_world: wp.array(dtype=int), world_flag: wp.array(dtype=int)
):
    i = wp.tid()
    x = particle_q[i]
    if not (wp.isfinite(x[0]) and wp.isfinite(x[1]) and wp.isfinite(x[2])):
        wp.atomic_max(world_flag, particle_world[i], 1)


@wp.kernel
def flag_nonfinite_bodies(
    body_q: wp.array(dtype=wp.transform), body_world: wp.array(dtype=int), world_flag: wp.array(dtype=int)
):
    i = wp.tid()
    tf = body_q[i]
    ok = True
    for k in range(7):
        if not wp.isfinite(tf[k]):
            ok = False
    if not ok:
        wp.atomic_max(world_flag, body_world[i], 1)
