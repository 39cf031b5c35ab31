"""SolverSettings.momentum_balance: the converged step is the implicit-Euler step, momentum included.

A swinging double pendulum of two compliant distance rows (tests/engine_scenes.py's ``chain_builder``) is
stepped by the engine with and without momentum balance and by an independent float64 solve of the
implicit-Euler equations of the same model (SciPy's fsolve on M (x - x~) - J(x)^T lambda = 0 and
c(x) + alpha lambda = 0 per step, v = (x - x_n) / h). Measured over 30 steps of 1/60 s at 20 x 20
iterations: with balance the engine stays within 1.4e-7 m of the reference and its momentum gap is at
float32 round-off (1.4e-8 sqrt(kg) m); without it the gap reaches 1.3e-4 and the positions drift 8 mm
from the implicit-Euler solution. Allowed: 2e-6 m and 1e-7 sqrt(kg) m with balance; the test also
requires the unbalanced drift above 1e-3 m, so that it shows the difference.
"""

import numpy as np
import pytest
import scipy.optimize

import softsnake
from engine_scenes import chain_builder, run, scene_bodies

G = 9.81

COMPLIANCE, H, STEPS, LENGTH = 1.0e-4, 1.0 / 60.0, 30, 0.3
MASS = np.array([0.2, 0.1])
TIGHT = {"substeps": 1, "newton_iterations": 20, "linear_iterations": 20, "newton_tolerance": 0.0,
         "linear_tolerance": 0.0}


def reference_step(pivot, x, v):
    """One implicit-Euler step of the two bobs (float64): unknowns x (2, 3) and the multipliers (2,)."""
    x_pred = x + H * v + H * H * np.array([0.0, 0.0, -G])
    alpha = COMPLIANCE / (H * H)

    def equations(y):
        p, lam = y[:6].reshape(2, 3), y[6:]
        points = np.vstack([pivot, p])
        force = np.zeros((3, 3))
        rows = []
        for row, (i, j) in enumerate(((0, 1), (1, 2))):
            d = points[j] - points[i]
            n = d / np.linalg.norm(d)
            force[j] += n * lam[row]
            force[i] -= n * lam[row]
            rows.append(np.linalg.norm(d) - LENGTH + alpha * lam[row])
        momentum = MASS[:, None] * (p - x_pred) - force[1:]
        return np.concatenate([momentum.ravel(), rows])

    y = scipy.optimize.fsolve(equations, np.concatenate([x_pred.ravel(), np.zeros(2)]), xtol=1e-13)
    assert np.max(np.abs(equations(y))) < 1e-10
    x_new = y[:6].reshape(2, 3)
    return x_new, (x_new - x) / H


def engine_run(balance, device, budget=TIGHT):
    model = chain_builder(COMPLIANCE, speed=5.0).finalize(device)
    solver = softsnake.Solver(model, momentum_balance=balance, **budget)
    state, control = model.state(), model.control()
    positions, gaps = [], []
    for _ in range(STEPS):
        solver.step(state, state, control, H)
        positions.append(state.particle_q.numpy()[1:].astype(np.float64))
        gaps.append(solver.residual_norms(state, control, H).momentum[0])
    return np.array(positions), np.array(gaps)


def implicit_euler_reference():
    """The reference trajectory of the two bobs (STEPS, 2, 3) [m]."""
    model = chain_builder(COMPLIANCE, speed=5.0).finalize()
    q0 = model.particle_q.numpy().astype(np.float64)
    x, v = q0[1:], model.particle_qd.numpy().astype(np.float64)[1:]
    reference = []
    for _ in range(STEPS):
        x, v = reference_step(q0[0], x, v)
        reference.append(x)
    return np.array(reference)


def test_balanced_steps_are_the_implicit_euler_steps(device):
    reference = implicit_euler_reference()
    balanced, balanced_gaps = engine_run(True, device)
    plain, plain_gaps = engine_run(False, device)
    assert np.max(np.abs(balanced - reference)) < 2e-6
    assert np.max(balanced_gaps) < 1e-7
    # Without balance the converged steps keep the lag: the same rows, another trajectory.
    assert np.max(np.abs(plain - reference)) > 1e-3
    assert np.max(plain_gaps) > 1e-5


def test_engine_default_steps_are_the_implicit_euler_steps(device):
    """The engine's default settings (one substep here: the reference's step) balance momentum ("auto" at
    16 Newton iterations) and stop at their tolerances: measured 5.0e-7 m from the reference (the plain
    iteration at the same budget: 8.6 mm); allowed 2e-6 m, as the tight balanced budget."""
    reference = implicit_euler_reference()
    default, gaps = engine_run("auto", device, budget={"substeps": 1})
    assert np.max(np.abs(default - reference)) < 2e-6, np.max(np.abs(default - reference))
    assert np.max(gaps) < 1e-7


def test_setting_is_auto_by_default():
    """"auto" balances momentum from MOMENTUM_BALANCE_MIN_NEWTON (16) Newton iterations on, the default budget."""
    from softsnake.solver_settings import MOMENTUM_BALANCE_MIN_NEWTON

    settings = softsnake.SolverSettings()
    assert settings.momentum_balance == "auto" and settings.uses_momentum_balance
    assert MOMENTUM_BALANCE_MIN_NEWTON == 16 and settings.newton_iterations == 16
    assert not settings.replace(newton_iterations=15).uses_momentum_balance
    assert softsnake.SolverSettings(momentum_balance=1).momentum_balance is True
    assert not softsnake.SolverSettings(momentum_balance=False).uses_momentum_balance
    with pytest.raises(softsnake.ConfigError, match="momentum_balance must be True, False or 'auto'"):
        softsnake.SolverSettings(momentum_balance="yes")
    with pytest.raises(softsnake.ConfigError, match="unknown solver setting"):
        softsnake.SolverSettings().replace(momentum_balanced=True)


@pytest.mark.parametrize("scene", ["pendulum", "bodies"])
def test_default_answer_does_not_depend_on_the_start(scene):
    """Warm and cold runs at the engine's default settings end in the same place: the double pendulum
    (0.5 s of 1/60 s, one substep) and bodies of every shape with friction and a hinge (tests/engine_scenes.py's
    ``scene_bodies``, 0.75 s of 1/120 s). Measured: 1.3e-6 m and 1.1e-4 m apart (9.3e-6 m before each substep ran in
    its world's frame). Allowed 1e-5 m and 3e-4 m: the bodies' scene is as sensitive to round-off as that (the frame
    alone, a change of round-off path, moves one of its bodies by 0.08 mm warm and 0.17 mm cold, and its warm-cold
    difference from 0.019 to 0.11 mm; the same at 32 x 200).
    The plain iteration at the same budget: the pendulum's 0.67 mm (experiments/start_independence.py: the
    same at every budget to 32 x 200; its momentum lag depends on the path the iterates took), checked to be
    more than 1e-4 m so that the test shows the difference; the bodies' 0.067 mm, 6.5 mm until their carried
    contact forces were fitted to the prediction (eighteenth session): most of their start dependence was the
    whole carried force, not the lag."""
    make, seconds, options, allowed = {
        "pendulum": (lambda: chain_builder(COMPLIANCE, speed=5.0).finalize(), 0.5, {"substeps": 1, "dt": H}, 1e-5),
        "bodies": (scene_bodies, 0.75, {}, 3e-4)}[scene]

    def final_positions(**settings):
        state, _ = run(make(), seconds, **options, **settings)
        return np.vstack([state.particle_q.numpy().reshape(-1, 3), state.body_q.numpy().reshape(-1, 7)[:, :3]])

    apart = np.abs(final_positions() - final_positions(warm_start=False)).max()
    assert apart < allowed, f"warm and cold end {apart:.3g} m apart"
    if scene == "pendulum":
        plain_apart = np.abs(final_positions(momentum_balance=False)
                             - final_positions(momentum_balance=False, warm_start=False)).max()
        assert plain_apart > 10.0 * allowed, f"the plain iteration's warm and cold runs end only {plain_apart:.3g} m apart"


def test_bodies_only_balance_leaves_the_particles_plain(device):
    """``momentum_balance="bodies"`` balances the rigid bodies' momentum and leaves the particles' to the plain
    iteration: on the double pendulum of particles it steps as the plain iteration, bit for bit, and on bodies of
    every shape (``scene_bodies``) as the balanced one, bit for bit. (A model of both: the snake,
    tests/robots/snake/test_robot.py::test_snake_at_rest_stays_at_rest.)"""
    bodies_only, bodies_only_gaps = engine_run("bodies", device)
    plain, plain_gaps = engine_run(False, device)
    assert np.array_equal(bodies_only, plain)
    assert np.array_equal(bodies_only_gaps, plain_gaps) and np.all(plain_gaps > 0.0)

    def merit_floor(balance):
        """The round-off floor of the merit at the last assembly: the particles' momentum is not in a "bodies"
        merit, so neither is its rounding."""
        model = chain_builder(COMPLIANCE, speed=5.0).finalize(device)
        solver = softsnake.Solver(model, momentum_balance=balance, **TIGHT)
        state, control = model.state(), model.control()
        solver.step(state, state, control, H)
        return solver.merit_floor.numpy()

    assert np.array_equal(merit_floor("bodies"), merit_floor(False))
    assert np.all(merit_floor(True) > merit_floor(False))

    def body_poses(balance):
        state, _ = run(scene_bodies(), 0.25, momentum_balance=balance, newton_iterations=8, linear_iterations=40)
        return state.body_q.numpy(), state.body_qd.numpy()

    for mine, balanced in zip(body_poses("bodies"), body_poses(True)):
        assert np.array_equal(mine, balanced)
    assert not np.array_equal(body_poses("bodies")[0], body_poses(False)[0])
    assert softsnake.SolverSettings(momentum_balance="bodies").uses_momentum_balance
