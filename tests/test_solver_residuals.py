"""Solver.residual_norms: per-world residual norms of a step's Newton system at its end point.

The definitions (softsnake.residuals) are checked against hand computations from the state alone
(a compliant pendulum row, a frictionless resting contact), then their behaviour: zero for free
particles, falling with the Newton budget on a stiff soft block, one entry per world.
"""

import math

import numpy as np
import pytest

import softsnake
from softsnake.errors import ConfigError
from softsnake.residuals import KINDS

from engine_scenes import chain_builder, stiff_block

G = 9.81


@pytest.mark.parametrize("balance", [False, True, "bodies"])
def test_definitions_match_a_hand_computation_on_a_compliant_chain(device, balance):
    """One substep, one Newton iteration of a swinging double pendulum, from the state and the analytic
    prediction x~ = x0 + h v0 + h^2 g alone:
    compliant^2 = sum_i (c_i + alpha lambda_i)^2 / (J_i M^-1 J_i^T + alpha) and
    momentum^2 = sum_p m_p |x_p - x~_p - w_p (J(x)^T lambda)_p|^2 = sum_p m_p |d_p|^2, whatever the iteration
    balances (with "bodies" the step's own assembly leaves the particles' M^-1 J^T lambda out: the norms compute
    it); a balanced iteration's rows carry J_i d in their residual (``kernels.rows``), the plain one's and
    "bodies"' on particles do not."""
    E, h = 1.0e-4, 1.0 / 60.0
    mass = np.array([0.0, 0.2, 0.1])
    model = chain_builder(E, speed=5.0).finalize(device)
    solver = softsnake.Solver(model, substeps=1, newton_iterations=1, linear_iterations=5, momentum_balance=balance)
    state, control = model.state(), model.control()
    for _ in range(3):
        x0, v0 = state.particle_q.numpy().astype(np.float64), state.particle_qd.numpy().astype(np.float64)
        solver.step(state, state, control, h)
    norms = solver.residual_norms(state, control, h)

    x = state.particle_q.numpy().astype(np.float64)
    lam = state.multipliers.numpy().astype(np.float64)
    x_pred = x0 + h * v0 + h * h * np.array([0.0, 0.0, -G])
    x_pred[0] = x0[0]
    alpha = E / (h * h)
    rows = ((0, 1), (1, 2))
    normals = [(x[j] - x[i]) / np.linalg.norm(x[j] - x[i]) for i, j in rows]
    force = np.zeros((3, 3))
    for row, (i, j) in enumerate(rows):
        force[j] += normals[row] * lam[row]
        force[i] -= normals[row] * lam[row]
    d = np.zeros((3, 3))
    d[1:] = x[1:] - x_pred[1:] - force[1:] / mass[1:, None]
    momentum = math.sqrt(np.sum(mass[1:, None] * d[1:] * d[1:]))
    compliant_sq = 0.0
    for row, (i, j) in enumerate(rows):
        gap_term = normals[row] @ (d[j] - d[i]) if balance is True else 0.0
        diagonal = sum(1.0 / mass[k] for k in (i, j) if mass[k] > 0.0) + alpha
        compliant_sq += (np.linalg.norm(x[j] - x[i]) - 0.3 + alpha * lam[row] - gap_term) ** 2 / diagonal
    assert norms.compliant[0] == pytest.approx(math.sqrt(compliant_sq), rel=1e-2)
    assert norms.momentum[0] == pytest.approx(momentum, rel=1e-2)
    # One Newton iteration on a fast double pendulum leaves both far above float32 round-off.
    assert norms.compliant[0] > 1e-5 and norms.momentum[0] > 1e-5
    assert norms.normal[0] == 0.0 and norms.friction[0] == 0.0
    assert norms.rows[0] == pytest.approx(norms.compliant[0])
    assert norms.h == h


def test_normal_row_matches_the_fischer_burmeister_residual(device):
    """A particle landing on frictionless ground, one Newton iteration: normal = |phi| / sqrt(D) with
    phi(a, w lambda_n) and D = w (1 + phi_b / phi_a + regularization); momentum ~ 0 (J = n is constant)."""
    m, r, h = 0.5, 0.05, 1.0 / 60.0
    b = softsnake.ModelBuilder()
    b.add_ground(mu=0.0)
    b.add_particle((0.0, 0.0, r + 0.001), velocity=(0.0, 0.0, -0.3), mass=m, radius=r)
    model = b.finalize(device)
    solver = softsnake.Solver(model, substeps=1, newton_iterations=1, linear_iterations=1)
    state, control = model.state(), model.control()
    solver.step(state, state, control, h)
    norms = solver.residual_norms(state, control, h)

    w = 1.0 / m
    a = float(state.particle_q.numpy()[0, 2]) - r
    lam_n = float(state.multipliers.numpy()[0])
    bb = w * lam_n
    root = math.sqrt(a * a + bb * bb + solver.fb_epsilon ** 2)
    phi = a + bb - root
    phi_a, phi_b = max(1.0 - a / root, 1e-9), 1.0 - bb / root
    D = w * (1.0 + phi_b / phi_a + solver.contact_regularization)
    assert lam_n > 0.0
    assert norms.normal[0] == pytest.approx(abs(phi) / math.sqrt(D), rel=1e-2, abs=1e-9)
    assert norms.normal[0] > 1e-6
    assert norms.momentum[0] < 1e-7
    assert norms.friction[0] == 0.0 and norms.compliant[0] == 0.0


def test_free_particles_have_zero_residuals_and_one_entry_per_world(device):
    """Three worlds: a free particle, a free particle above (far from) the ground, a double pendulum.
    Free particles: every norm ~0; the pendulum's world alone has compliant and momentum residuals."""
    free = softsnake.ModelBuilder()
    free.add_particle((0.0, 0.0, 1.0), velocity=(0.5, 0.0, 0.0), mass=1.0)
    above = softsnake.ModelBuilder()
    above.add_ground()
    above.add_particle((0.0, 0.0, 1.0), mass=1.0, radius=0.05)
    pendulum = chain_builder(0.0, speed=5.0)
    scene = softsnake.ModelBuilder()
    for k, world in enumerate((free, above, pendulum)):
        scene.add_world(world, offset=(0.0, 2.0 * k, 0.0))
    model = scene.finalize(device)
    solver = softsnake.Solver(model, newton_iterations=1, linear_iterations=2)
    state, control = model.state(), model.control()
    for _ in range(2):
        solver.step(state, state, control, 1.0 / 60.0)
    norms = solver.residual_norms(state, control, 1.0 / 60.0)
    for kind, values in norms.as_dict().items():
        assert values.shape == (3,) and values.dtype == np.float64, kind
        assert np.all(values[:2] < 1e-9), (kind, values)
    assert set(norms.as_dict()) == {*KINDS, "rows"}
    assert norms.compliant[2] > 1e-7 and norms.momentum[2] > 1e-7

    alone = softsnake.ModelBuilder()
    alone.add_particle((0.0, 0.0, 1.0), mass=1.0)
    model = alone.finalize(device)
    solver = softsnake.Solver(model)
    state, control = model.state(), model.control()
    solver.step(state, state, control, 1.0 / 60.0)
    norms = solver.residual_norms(state, control, 1.0 / 60.0)
    assert all(values.shape == (1,) and values[0] == 0.0 for values in norms.as_dict().values())


def test_row_residuals_fall_with_newton_iterations_on_a_stiff_block(device):
    """A stiff soft block (Y = 1 MPa, omega h ~ 10) settled on the ground, then pushed sideways at
    0.5 m/s (its bottom slides: friction rows active) for one step from the same state with 1, 2 and
    8 Newton iterations (no early stop): the rows' residual falls at least 100-fold from 1 to 8 and
    every row kind's at least fourfold. Measured on the CPU (the warm start fitted to the prediction,
    ``fit_carried_contact_multipliers``): rows 8.3e-4 after 1 iteration, 2.4e-5 after 4, 2.2e-6 after 8
    (380-fold); compliant 6.0e-6 -> 1.3e-6 (4.7-fold: the start already balances the elastic rows),
    normal 4.6e-5 -> 7.3e-7, friction 8.3e-4 -> 1.6e-6. Undamped Newton is not monotone (after 2
    iterations the normal rows stand at 1.3e-3), so only 1, 4 and 8 are compared.

    The momentum residual is not driven down by more iterations (the iteration never corrects the lag
    of x = x~ + sum M^-1 J_k^T dlambda_k behind J(x)^T lambda), so it is only required to be finite."""
    model = stiff_block(device)
    dt = 1.0 / 60.0
    settle = softsnake.Solver(model, substeps=1)
    state, control = model.state(), model.control()
    for _ in range(10):
        settle.step(state, state, control, dt)
    velocities = state.particle_qd.numpy()
    velocities[:, 0] += 0.5

    norms = {}
    for n in (1, 4, 8):
        solver = softsnake.Solver(model, substeps=1, newton_iterations=n, newton_tolerance=0.0)
        start = model.state()
        start.assign(state)
        start.multipliers.assign(state.multipliers)
        start.multiplier_step = state.multiplier_step
        start.particle_qd.assign(velocities)
        solver.step(start, start, control, dt)
        norms[n] = solver.residual_norms(start, control, dt)
    for kind in ("compliant", "normal", "friction"):
        first, last = getattr(norms[1], kind)[0], getattr(norms[8], kind)[0]
        assert first > 1e-6, (kind, first)
        assert last < 0.25 * first, (kind, first, last)
    assert norms[1].rows[0] > norms[4].rows[0] > norms[8].rows[0]
    assert norms[8].rows[0] < 0.01 * norms[1].rows[0], (norms[1].rows[0], norms[8].rows[0])
    assert all(np.isfinite(norms[n].momentum[0]) for n in norms)


def test_rows_squared_equal_the_line_search_merit(device):
    """With the line search on, the solver judges its last step by the merit at the end point; where it
    kept that step, rows^2 is that merit (the same residuals and weights, summed in another order)."""
    model = stiff_block(device)
    solver = softsnake.Solver(model, substeps=1, newton_iterations=2, line_search=True)
    state, control = model.state(), model.control()
    for _ in range(5):
        solver.step(state, state, control, 1.0 / 60.0)
    assert solver.retreat.numpy()[0] != 1
    merit = float(solver.merit.numpy()[0])
    norms = solver.residual_norms(state, control, 1.0 / 60.0)
    assert norms.rows[0] ** 2 == pytest.approx(merit, rel=1e-3)


def test_needs_the_last_steps_state_and_dt(device):
    """A ConfigError before the first step, for another dt or another state; the state is not changed."""
    model = chain_builder(0.0, speed=1.0).finalize(device)
    solver = softsnake.Solver(model)
    state, control = model.state(), model.control()
    with pytest.raises(ConfigError, match="after Solver.step"):
        solver.residual_norms(state, control, 1.0 / 60.0)
    solver.step(state, state, control, 1.0 / 60.0)
    with pytest.raises(ConfigError, match="after Solver.step"):
        solver.residual_norms(state, control, 1.0 / 120.0)
    with pytest.raises(ConfigError, match="after Solver.step"):
        solver.residual_norms(model.state(), control, 1.0 / 60.0)
    before = state.particle_q.numpy().copy(), state.multipliers.numpy().copy()
    solver.residual_norms(state, control, 1.0 / 60.0)
    assert np.array_equal(state.particle_q.numpy(), before[0]) and np.array_equal(state.multipliers.numpy(), before[1])
