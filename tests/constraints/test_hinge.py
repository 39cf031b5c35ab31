"""The hinge's alignment rows: one root, their Jacobian, and light wheels on a loaded axle.

Rows 3-4 of a hinge (``softsnake.constraints.hinge``) are c = (a . e_k) / cos(theta / 2): twice the
sine of half the angle theta between the two axes, along the misalignment. The plain projections
a . e_k = sin(theta) (...) also vanish with the axle turned end for end (theta = pi), and a light
wheel thrown past a right angle by one Newton iteration converged there (tumbling at pi per step).
"""

import math

import numpy as np
import pytest

import softsnake
from softsnake.gradients import tape_rows
from softsnake.spatial import box_inertia, cylinder_inertia, quat_from_axis_angle, quat_multiply, quat_to_matrix

H = 1.0 / 120.0


def turned_hinge(angle, turn_axis=(1.0, 0.0, 0.0), spin=0.0):
    """A body on a hinge to the world (axis y through its centre), turned by ``spin`` about the hinge
    axis and then by ``angle`` [rad] about ``turn_axis``; (solver, state, control, first hinge row)."""
    b = softsnake.ModelBuilder()
    body = b.add_body((0.0, 0.0, 1.0), mass=1.0, inertia=np.eye(3) * 1e-3)
    b.add_hinge(-1, body, anchor=(0.0, 0.0, 1.0), axis=(0.0, 1.0, 0.0))
    model = b.finalize()
    solver = softsnake.Solver(model)
    state, control = model.state(), model.control()
    q = quat_multiply(quat_from_axis_angle(turn_axis, angle), quat_from_axis_angle((0.0, 1.0, 0.0), spin))
    body_q = state.body_q.numpy()
    body_q[0, 3:] = q
    state.body_q.assign(body_q)
    return solver, state, control, int(model.hinge_row.numpy()[0])


def alignment_rows(solver, state, control, row0):
    """(c of rows 3-4, their 12 Jacobian values each: the body's linear then angular block)."""
    tape_rows(solver, state, control, H)
    offsets = solver.model.J_offsets.numpy()
    values = solver.J_values.numpy()
    c = solver.row_c.numpy()[row0 + 3:row0 + 5].astype(np.float64)
    jac = np.array([values[offsets[row0 + k]:offsets[row0 + k] + 6] for k in (3, 4)], dtype=np.float64)
    return c, jac


@pytest.mark.parametrize("angle", [0.05, 0.5, 1.5, 2.5, 3.0, math.pi - 0.01])
def test_alignment_rows_measure_twice_the_sine_of_half_the_angle(angle):
    """|c| = 2 sin(theta / 2), growing all the way to the axle turned end for end; the plain
    projections sin(theta) were 0.01 at pi - 0.01 (float32 rounding: 1e-5 absolute)."""
    solver, state, control, row0 = turned_hinge(angle, turn_axis=(1.0, 0.0, 0.2), spin=0.7)
    c, _ = alignment_rows(solver, state, control, row0)
    # The angle between the axes: the turn axis is not perpendicular to the hinge axis (y).
    axis_after = quat_to_matrix(state.body_q.numpy()[0, 3:].astype(np.float64)) @ np.array([0.0, 1.0, 0.0])
    theta = math.acos(np.clip(axis_after[1], -1.0, 1.0))
    assert np.linalg.norm(c) == pytest.approx(2.0 * math.sin(0.5 * theta), abs=1e-5)


@pytest.mark.parametrize("angle", [0.3, 1.2, 2.4])
def test_alignment_rows_jacobian_is_their_derivative(angle):
    """The angular Jacobian of rows 3-4 against central differences of c under small world rotations of
    the body (steps 1e-3 rad, float32 rows: 2e-3 of the largest entry)."""
    solver, state, control, row0 = turned_hinge(angle, turn_axis=(0.6, 0.0, 0.8), spin=0.4)
    start = state.body_q.numpy().copy()
    _, jac = alignment_rows(solver, state, control, row0)
    step = 1e-3
    numeric = np.zeros((2, 3))
    for i in range(3):
        rotation = np.zeros(3)
        rotation[i] = step
        values = []
        for sign in (1.0, -1.0):
            turned = start.copy()
            turned[0, 3:] = quat_multiply(quat_from_axis_angle(rotation, sign * step), start[0, 3:])
            state.body_q.assign(turned)
            values.append(alignment_rows(solver, state, control, row0)[0])
        numeric[:, i] = (values[0] - values[1]) / (2.0 * step)
    # The static world is body a: the rows' single block is the body's (b), linear part zero here.
    np.testing.assert_allclose(jac[:, 3:], numeric, atol=2e-3 * np.abs(numeric).max())


def module_on_wheels(yaw_rate):
    """A 0.5 kg module (the snake's 5 x 5 x 4.5 cm box, no collision shape) on two 10 g wheels (2.5 cm
    radius, 8 mm wide: the snake's) hinged on its axle, on ground with mu = 1. Every body starts at
    0.1 m/s forward and ``yaw_rate`` [rad/s] about the vertical: the wheels' centres as if each moved
    alone, not with the yawing module, so the first step's hinge impulses jerk them (inelastically)."""
    b = softsnake.ModelBuilder()
    b.add_ground(mu=1.0)
    height = 0.025
    module = b.add_body((0.0, 0.0, height), mass=0.5, inertia=box_inertia(0.5, (0.025, 0.025, 0.0225)),
                        velocity=(0.1, 0.0, 0.0), angular_velocity=(0.0, 0.0, yaw_rate))
    wheel_rotation = quat_from_axis_angle((1.0, 0.0, 0.0), -0.5 * math.pi)
    wheels = []
    for side in (1.0, -1.0):
        centre = (0.0, side * 0.032, height)
        wheel = b.add_body(centre, wheel_rotation, mass=0.01, inertia=cylinder_inertia(0.01, 0.025, 0.004),
                           velocity=(0.1, 0.0, 0.0), angular_velocity=(0.0, 0.0, yaw_rate))
        b.add_shape_cylinder(wheel, 0.025, 0.004, mu=1.0)
        b.add_hinge(module, wheel, anchor=centre, axis=(0.0, 1.0, 0.0))
        wheels.append(wheel)
    return b.finalize(), wheels


@pytest.mark.parametrize("momentum_balance", [True, False], ids=["balanced", "plain"])
def test_light_wheels_on_a_yawing_module_gain_no_energy(momentum_balance):
    """Passive bodies on flat ground: the kinetic energy never rises above its start (implicit Euler
    only removes energy). The wheels' 1.6e-6 kg m^2 about a diameter is far below their load times
    the radius times h^2, so one Newton iteration turns a wheel far across its axle. With the old
    alignment rows the balanced steps converged with the wheels turned end for end (wheels' fastest
    2172 rad/s at 30 x 200; 9.5 rad/s at 1/480 s); with the wheels' friction measured on a point fixed
    on the rim (the chord of its turn), the plain iteration's lag spun them too (959 rad/s at 30 x 200,
    1788 at 8 x 40; experiments/results/convergence.md, "Light wheels")."""
    model, wheels = module_on_wheels(yaw_rate=5.0)
    solver = softsnake.Solver(model, substeps=1, newton_iterations=30, linear_iterations=200, momentum_balance=momentum_balance,
                              check_finite=False)
    state, control = model.state(), model.control()
    start = float(model.kinetic_energy(state).sum())
    energies, spins = [], []
    for _ in range(60):
        solver.step(state, state, control, H)
        energies.append(float(model.kinetic_energy(state).sum()))
        spins.append(np.abs(state.body_qd.numpy()[wheels, 3:]).max())
    assert max(energies) <= start * 1.001, f"kinetic energy rose from {start:.3g} J to {max(energies):.3g} J"
    assert max(spins) < 20.0
