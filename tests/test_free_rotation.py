"""The torque-free rotation of a rigid body (``kernels.integration.torque_free_change``): Euler's
equations I omega_dot = -omega x I omega, by the implicit midpoint rule in the body frame."""

import numpy as np
import pytest
from scipy.integrate import solve_ivp

import softsnake
from softsnake.spatial import quat_to_matrix

INERTIA = np.array([1.0e-3, 2.0e-3, 3.0e-3])  # [kg m^2], principal axes along the body's x, y, z


def _spin(omega, dt, steps, device=None):
    """Body-frame angular velocities [rad/s] of a free body after each of ``steps`` steps of ``dt``."""
    b = softsnake.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    b.add_body((0.0, 0.0, 0.0), angular_velocity=tuple(omega), mass=1.0, inertia=np.diag(INERTIA))
    model = b.finalize(device)
    solver = softsnake.Solver(model)
    state, control = model.state(), model.control()
    body_frame = []
    for _ in range(steps):
        solver.step(state, state, control, dt)
        R = quat_to_matrix(state.body_q.numpy()[0, 3:].astype(np.float64))
        body_frame.append(R.T @ state.body_qd.numpy()[0, 3:].astype(np.float64))
    return np.asarray(body_frame)


@pytest.mark.parametrize("omega_h", [2.5, 10.0])
def test_long_steps_keep_energy_and_angular_momentum(device, omega_h):
    """A body spinning at 50 rad/s near its least axis, nudged toward the middle one, for 200 steps of
    omega h = 2.5 and 10: the midpoint rule keeps the kinetic energy omega . I omega / 2 and |I omega|
    at any step length. Reference: their initial values; tolerance 1e-3 relative (float32; measured
    2.1e-4 and 1.1e-4). The explicit gyroscopic term this replaced blew up in eleven steps at omega h = 2.5."""
    omega = np.array([50.0, 2.5, 0.0])
    w = _spin(omega, omega_h / 50.0, 200, device)
    energy = 0.5 * (INERTIA * w * w).sum(axis=1)
    momentum = np.linalg.norm(INERTIA * w, axis=1)
    assert np.abs(energy / (0.5 * (INERTIA * omega * omega).sum()) - 1.0).max() < 1e-3
    assert np.abs(momentum / np.linalg.norm(INERTIA * omega) - 1.0).max() < 1e-3


@pytest.mark.parametrize("dt, tolerance", [(1.0e-2, 1.0e-3), (4.0e-3, 1.0e-3)])
def test_intermediate_axis_flip_follows_eulers_equations(dt, tolerance):
    """A body spun at 10 rad/s about its middle axis with 0.05 rad/s about its least one flips
    (Dzhanibekov's effect) at 1.157 s. Reference: Euler's equations by SciPy (rtol 1e-10) over 2 s,
    the first flip and the way back out of it; the body-frame angular velocity must stay within
    ``tolerance`` x |omega| of it (measured: 4.6e-4 at 1e-2 s, 5.8e-4 at 4e-3 s, float32 round-off
    more than the rule's error; the explicit term this replaced: 7.9e-2 and 3.2e-2, first order). Over longer runs float32 round-off decides when the
    body next leaves the unstable axis, so the comparison stops at 2 s."""
    omega = np.array([0.05, 10.0, 0.0])
    steps = int(round(2.0 / dt))
    w = _spin(omega, dt, steps)
    t = dt * np.arange(1, steps + 1)
    reference = solve_ivp(lambda _, v: -np.cross(v, INERTIA * v) / INERTIA, (0.0, 2.0), omega, t_eval=t,
                          rtol=1e-10, atol=1e-12).y.T
    assert np.sign(w[-1, 1]) == np.sign(reference[-1, 1]) == -1.0  # flipped
    assert np.abs(w - reference).max() < tolerance * np.linalg.norm(omega)


def _spin_up(substeps, compensated, alpha=0.01, omega=10.0, seconds=1.0):
    """A free body (no gravity) spinning at ``omega`` [rad/s] about its greatest principal axis, its frame turned
    0.3 rad about y, under a torque that gives it ``alpha`` [rad/s^2] about that axis, for ``seconds`` in frames of
    1/240 s of ``substeps``: (its angular velocity's gain along the axis, what it gained across it) [rad/s]."""
    inertia = np.diag([0.01, 0.02, 0.03])
    rotation = np.array([0.0, np.sin(0.15), 0.0, np.cos(0.15)])
    b = softsnake.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    axis = quat_to_matrix(rotation) @ np.array([0.0, 0.0, 1.0])
    b.add_body((0.3, 0.2, 0.1), tuple(rotation), angular_velocity=tuple(omega * axis), mass=1.0, inertia=inertia)
    model = b.finalize("cpu")
    solver = softsnake.Solver(model, substeps=substeps, compensated_positions=compensated)
    state, control = model.state(), model.control()
    torque = np.zeros((1, 6), dtype=np.float32)
    torque[0, 3:] = 0.03 * alpha * axis  # I about the axis: 0.03 kg m^2
    for _ in range(round(240 * seconds)):
        state.body_f.assign(torque)
        solver.step(state, state, control, 1.0 / 240.0)
    w = state.body_qd.numpy()[0, 3:].astype(np.float64)
    return w @ axis - omega, np.linalg.norm(w - (w @ axis) * axis)


@pytest.mark.parametrize("substeps", [2, 10, 40])
def test_a_spinning_body_gains_what_its_torque_gives(substeps):
    """A body spinning at 10 rad/s about its greatest principal axis under a torque of 0.01 rad/s^2 about it gains
    0.01 rad/s in 1 s, at 2, 10 and 40 substeps of 1/240 s: the prediction adds the torque-free change and the
    torque's impulse to the world-frame omega (``integration.angular_velocity_increment``). Through the body
    frame and back, omega rounded at its own size every substep: the body gained 0.0114, 0.0154 and 0.034 rad/s,
    and 5e-5 to 1.2e-3 rad/s across its axis. Float32 positions: within 5e-4 rad/s (a substep's gain, 2e-5 to
    1e-6 rad/s, rounded at omega's spacing, 9.5e-7 rad/s; measured 6e-5, 4.1e-4, 4.2e-4) and 1e-4 across (measured
    5e-6 to 9e-5). Compensated, the angular velocity a pair (``State.body_qd_low``): within 2e-6 rad/s (measured
    5e-7) and 1e-6 across (measured 2e-7)."""
    gain, across = _spin_up(substeps, compensated=False)
    assert abs(gain - 0.01) < 5e-4 and across < 1e-4, (gain, across)
    gain, across = _spin_up(substeps, compensated=True)
    assert abs(gain - 0.01) < 2e-6 and across < 1e-6, (gain, across)
