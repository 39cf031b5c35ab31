"""The torque-free rotation of a rigid body (``kernels.integration.torque_free_rotation``): Euler's
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
