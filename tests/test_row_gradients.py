"""Warp's adjoints of the constraint row kernels against central differences (``softsnake.gradients``).

For every constraint type, in a state reached by stepping a scene: the gradient of
s_c . c(q) + s_J . J(q) (c the rows' residuals, J their Jacobian values, s random seeds) with respect
to every particle and body coordinate q, from ``tape_rows`` and ``tape.backward``, against central
differences of the same kernels, Richardson-extrapolated from steps of 1e-3 and 5e-4 (error of order
step^4: a sliding contact's rows curve on the scale of its slip in one substep, a few mm). The
kernels compute in float32, so the differences carry rounding of about 1e-7 / 5e-4 of the values
summed: the test allows 5e-3 of the largest derivative of the type (measured: at most 3.5e-3, on
the sliding particle's contact rows; the kernels before they were made differentiable were off by
0.3 to 1 of it). Contacts are
checked where their rows are smooth (sliding, pressed: the Fischer-Burmeister and friction
functions have kinks only where a contact just touches or just sticks).
"""

import math

import numpy as np
import pytest
import warp as wp

import softsnake
from engine_scenes import scene_chain_3d, scene_chain_planar, scene_soft
from softsnake.gradients import tape_rows

DT = 1.0 / 120.0
STEP = 1.0e-3
TOLERANCE = 5.0e-3


def scene_particles():
    """A rigid pendulum rod, a compliant damped spring and a particle sliding on frictional ground."""
    b = softsnake.ModelBuilder()
    b.add_ground(mu=0.4)
    pivot = b.add_particle((0.0, 0.0, 1.0), kinematic=True)
    bob = b.add_particle((0.3, 0.0, 0.6), mass=0.2)
    b.add_distance(pivot, bob)
    spring_end = b.add_particle((1.0, 0.0, 0.5), mass=0.1)
    b.add_distance(pivot, spring_end, 0.8, compliance=1e-3, damping=0.01)
    b.add_particle((2.0, 0.0, 0.05), velocity=(1.5, 0.3, 0.0), mass=0.3, radius=0.05)
    return b.finalize()


def scene_bodies():
    """A box sliding down a 35 degree slope (mu 0.3 < tan 35 deg) and a hinged pendulum."""
    b = softsnake.ModelBuilder()
    angle = math.radians(35.0)
    b.add_ground(mu=0.3, normal=(math.sin(angle), 0.0, math.cos(angle)))
    box = b.add_body((0.05 * math.sin(angle), 0.0, 0.05 * math.cos(angle)),
                     (0.0, math.sin(0.5 * angle), 0.0, math.cos(0.5 * angle)), velocity=(-0.5, 0.2, 0.0))
    b.add_shape_box(box, (0.05, 0.05, 0.05), density=1000.0)
    arm = b.add_body((0.0, 2.0, 1.5), mass=0.5, inertia=np.diag([1e-3, 1e-3, 1e-3]))
    b.add_hinge(-1, arm, anchor=(0.0, 2.0, 2.0), axis=(0.0, 1.0, 1.0), compliance=1e-6)
    return b.finalize()


def pressurise(control):
    control.pressure.assign(np.array([2e4], dtype=np.float32))


def bend(control):
    control.joint_target.assign(np.full(control.joint_target.shape, 0.3, dtype=np.float32))


SCENES = {
    "particles": (lambda: (scene_particles(), None), {"distance", "contact_slot"}),
    "bodies": (lambda: (scene_bodies(), None), {"hinge", "contact_slot"}),
    "soft": (lambda: (scene_soft(), pressurise), {"distance", "tet", "attachment"}),
    "chain_planar": (lambda: (scene_chain_planar(), bend), {"hinge", "prismatic", "spring"}),
    "chain_3d": (lambda: (scene_chain_3d(), bend), {"hinge", "prismatic", "spring"}),
}


def with_grad(array):
    return wp.array(array.numpy(), dtype=array.dtype, device=array.device, requires_grad=True)


def stepped(make, steps=30):
    model, control_fn = make()
    solver = softsnake.Solver(model)
    state, control = model.state(), model.control()
    if control_fn is not None:
        control_fn(control)
    for _ in range(steps):
        solver.step(state, state, control, DT)
    return model, solver, state, control, DT / solver.substeps


@pytest.mark.parametrize("scene", list(SCENES))
def test_row_kernel_adjoints_match_central_differences(scene):
    make, expected_types = SCENES[scene]
    model, solver, state, control, h = stepped(make)
    types = {ctype.name: ctype for ctype in solver.constraint_types}
    assert expected_types <= set(types), f"the scene lacks {expected_types - set(types)}"
    if "contact_slot" in expected_types:
        assert solver.contact_active.numpy().sum() > 0, "no contact is active: the contact rows would go unchecked"
    rng = np.random.default_rng(7)
    seed_c = rng.normal(size=solver.row_c.shape[0]).astype(np.float32)
    seed_J = rng.normal(size=solver.J_values.shape[0]).astype(np.float32)
    q0 = {"particle_q": state.particle_q.numpy().astype(np.float64), "body_q": state.body_q.numpy().astype(np.float64)}

    def rows_value(q):
        for name, values in q.items():
            setattr(state, name, wp.array(values, dtype=getattr(state, name).dtype, device=model.device))
        tape_rows(solver, state, control, h, [ctype])
        return float(solver.row_c.numpy().astype(np.float64) @ seed_c + solver.J_values.numpy().astype(np.float64) @ seed_J)

    for name in sorted(expected_types):
        ctype = types[name]
        for field, values in q0.items():
            setattr(state, field, wp.array(values, dtype=getattr(state, field).dtype, device=model.device,
                                           requires_grad=True))
        solver.row_c, solver.J_values = with_grad(solver.row_c), with_grad(solver.J_values)
        tape = tape_rows(solver, state, control, h, [ctype])
        tape.backward(grads={solver.row_c: wp.array(seed_c, device=model.device),
                             solver.J_values: wp.array(seed_J, device=model.device)})
        adjoint = {field: getattr(state, field).grad.numpy().astype(np.float64) for field in q0}
        worst, largest = 0.0, 0.0
        for field, values in q0.items():
            for index in np.ndindex(values.shape):
                def central(step):
                    plus, minus = {k: v.copy() for k, v in q0.items()}, {k: v.copy() for k, v in q0.items()}
                    plus[field][index] += step
                    minus[field][index] -= step
                    return (rows_value(plus) - rows_value(minus)) / (2.0 * step)
                difference = (4.0 * central(0.5 * STEP) - central(STEP)) / 3.0
                worst = max(worst, abs(difference - adjoint[field][index]))
                largest = max(largest, abs(difference))
        assert largest > 0.0, f"{scene}: the {name} rows do not depend on the positions here"
        assert worst <= TOLERANCE * largest, (
            f"{scene}: {name} rows' adjoint off by {worst:.3g} (largest derivative {largest:.3g})")
