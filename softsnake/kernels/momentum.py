"""The momentum gap of a Newton iterate and its share of the merit (``SolverSettings.momentum_balance``).

The step's momentum equation, g = M (x - x~) - J(x)^T lambda = 0, in position form: the gap

    d = x - x~ - M^-1 J(x)^T lambda        (bodies: the rotation vector from q~ to q for the angular part)

is zero where the positions balance the multipliers. An iteration that moves x only by
M^-1 J^T dlambda (``softsnake.kernels.rows``) leaves d as it found it, up to the change of J; with
momentum balance on, the right-hand side carries J d and the update lands on x~ + M^-1 J(x)^T lambda_new,
so d is driven to zero with the rows. Its squared M-norm d^T M d [kg m^2] is the momentum share of
the merit, as ``softsnake.residuals`` defines the momentum norm.
"""

import warp as wp

from .entities import dof_entity, entity_world_held, nonnegative
from .multipliers import ROUND_OFF

# Never on a wp.Tape (softsnake.gradients): no backward code, less to compile (tests/kernels/test_backward_options.py).
wp.set_module_options({"enable_backward": False})


@wp.kernel
def momentum_gaps(offset: wp.array(dtype=float), u_lambda: wp.array(dtype=float), first_dof: int, particle_count: int,
                  particle_world: wp.array(dtype=int), body_world: wp.array(dtype=int), held: wp.array(dtype=int),
                  gap: wp.array(dtype=float)):
    """d = (x - x~) - M^-1 J^T lambda, per degree of freedom from ``first_dof`` on, 0 before it (kinematic entities:
    both parts are 0). ``first_dof`` 0 balances every entity; the first body's (3 x particle_count) the bodies
    alone (``SolverSettings.momentum_balance`` "bodies"): a particle whose gap is 0 takes the plain iteration's
    update, its merit share and right-hand side term vanish. Held worlds (``Solver.held_worlds``) keep theirs."""
    k = nonnegative(wp.tid())
    if entity_world_held(dof_entity(k, particle_count), particle_count, particle_world, body_world, held):
        return
    d = float(0.0)
    if k >= first_dof:
        d = offset[k] - u_lambda[k]
    gap[k] = d


@wp.kernel
def add_momentum_merit(
    particle_world_start: wp.array(dtype=int),
    body_world_start: wp.array(dtype=int),
    particle_count: int,
    particles: int,
    gap: wp.array(dtype=float),
    particle_inv_mass: wp.array(dtype=float),
    body_q: wp.array(dtype=wp.transform),
    body_inv_mass: wp.array(dtype=float),
    body_inertia: wp.array(dtype=wp.mat33),
    held: wp.array(dtype=int),
    merit: wp.array(dtype=float),
):
    """merit[w] += d^T M d over world w's moving particles (``particles`` 1; 0: their gap is 0, "bodies") and
    bodies, one thread per world in a fixed order (deterministic). Bodies: m |d_lin|^2 + d_ang^T I_world d_ang. A
    held world (``Solver.held_worlds``), whose rows' share was not summed again either, keeps its merit."""
    w = nonnegative(wp.tid())
    if held[w] != 0:
        return
    total = float(0.0)
    i = nonnegative(particle_world_start[w])
    if particles == 0:
        i = particle_world_start[w + 1]
    while i < particle_world_start[w + 1]:
        if particle_inv_mass[i] > 0.0:
            d = wp.vec3(gap[3 * i], gap[3 * i + 1], gap[3 * i + 2])
            total += wp.dot(d, d) / particle_inv_mass[i]
        i += 1
    b = nonnegative(body_world_start[w])
    while b < body_world_start[w + 1]:
        if body_inv_mass[b] > 0.0:
            base = 3 * particle_count + 6 * b
            lin = wp.vec3(gap[base], gap[base + 1], gap[base + 2])
            ang = wp.vec3(gap[base + 3], gap[base + 4], gap[base + 5])
            R = wp.quat_to_matrix(wp.transform_get_rotation(body_q[b]))
            local = wp.transpose(R) * ang
            total += wp.dot(lin, lin) / body_inv_mass[b] + wp.dot(local, body_inertia[b] * local)
        b += 1
    merit[w] = merit[w] + total


@wp.kernel
def add_momentum_round_off(
    particle_world_start: wp.array(dtype=int),
    body_world_start: wp.array(dtype=int),
    particles: int,
    particle_q: wp.array(dtype=wp.vec3),
    particle_inv_mass: wp.array(dtype=float),
    body_q: wp.array(dtype=wp.transform),
    body_inv_mass: wp.array(dtype=float),
    body_inertia: wp.array(dtype=wp.mat33),
    merit_floor: wp.array(dtype=float),
):
    """merit_floor[w] += what float32's rounding of the positions leaves in ``add_momentum_merit``'s d^T M d:
    each coordinate x rounded by ``ROUND_OFF`` |x| (a body's rotation by ``ROUND_OFF`` rad about each axis),
    one thread per world in a fixed order; the particles' share only where their gap is in the merit
    (``particles`` 1), since a plain particle's merit share is 0 whatever its rounding. Not with compensated
    positions (``kernels.compensated``): x - x~ carries the remainders there, a body's turn taken between its
    rotation pairs in float64, and nothing of the gap is rounded. (The rotations' share, kept there until the
    fortieth session, stopped substeps that could still improve: with it the resting snake's late kinetic energy
    at 1/3840 s peaked at 5.7e-9 J, without it 1.1e-9 J, and a sphere resting on the ground jittered by 1.1e-3 g
    against 4.9e-4 g; a vine's small substeps then run to the budget more often, at up to twice the wall time,
    their tips within 0.6 mm: experiments/results/convergence.md, "Rotations as pairs".)"""
    w = nonnegative(wp.tid())
    total = float(0.0)
    i = nonnegative(particle_world_start[w])
    if particles == 0:
        i = particle_world_start[w + 1]
    while i < particle_world_start[w + 1]:
        if particle_inv_mass[i] > 0.0:
            x = particle_q[i]
            total += wp.dot(x, x) / particle_inv_mass[i]
        i += 1
    b = nonnegative(body_world_start[w])
    while b < body_world_start[w + 1]:
        if body_inv_mass[b] > 0.0:
            p = wp.transform_get_translation(body_q[b])
            inertia = body_inertia[b]
            total += inertia[0, 0] + inertia[1, 1] + inertia[2, 2] + wp.dot(p, p) / body_inv_mass[b]
        b += 1
    merit_floor[w] = merit_floor[w] + ROUND_OFF * ROUND_OFF * total
