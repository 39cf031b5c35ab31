"""The prismatic joint's drive against its closed forms (``softsnake.constraints.prismatic``).

A driven joint's drive row reads e - e_n - u h = -b F h (the extension e advanced by the commanded rate u every
substep, a drive mobility b [m/(N s)] giving way under the axial load F the row carries). A body of mass m on the
joint, pushed back along the axis by a constant force P, then follows a closed recurrence: with v = (e - e_n) / h,
the row's load F = (u - v) / b and the body's momentum m (v - v_n) = (F - P) h give

    v = (m v_n + (u / b - P) h) / (m + h / b),

whose fixed point is the drive's law v = u - b P: the extension rate drops by b per newton of load and stalls at
P = u / b (seed 000 sec. II-E). Without mobility the rate is met exactly whatever the load, and an undriven joint
lets the body slide freely along its axis (its acceleration P / m, which implicit Euler meets exactly). The engine
must follow these to float32 round-off while the locking rows hold the body on the axis.
"""

import numpy as np
import pytest

import softsnake

MASS = 0.1  # [kg]
RATE = 0.1  # the commanded extension rate u [m/s]
H = 1.0 / 120.0  # [s]
AXIS = np.array([0.6, 0.8, 0.0])  # in the plane z = 0, off the coordinate axes


def slider(drive, mobility, push):
    """Body b on a prismatic joint to the static world along AXIS, without gravity, pushed back along the axis by
    ``push`` [N]; its extension rate along the axis at the end of each of 60 steps [m/s], and its distance from the
    axis line at the end [m]."""
    b = softsnake.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    body = b.add_body((0.0, 0.0, 0.0), mass=MASS, inertia=np.eye(3) * 1e-4)
    b.add_prismatic(-1, body, (0.0, 0.0, 0.0), AXIS, drive=drive, rate=RATE if drive else 0.0,
                    drive_mobility=mobility)
    model = b.finalize()
    solver = softsnake.Solver(model, substeps=1)  # one implicit-Euler step of H per step, as the recurrence
    state, control = model.state(), model.control()
    force = np.zeros((1, 6), dtype=np.float32)
    force[0, :3] = -push * AXIS
    state.body_f.assign(force)
    rates, position = [], np.zeros(3)
    for _ in range(60):
        solver.step(state, state, control, H)
        q = state.body_q.numpy()[0, :3].astype(np.float64)
        rates.append((q - position) @ AXIS / H)
        position = q
    off_axis = np.linalg.norm(position - (position @ AXIS) * AXIS)
    return np.array(rates), off_axis


def recurrence(mobility, push, steps=60):
    """The extension rates of the closed recurrence above (float64)."""
    v, rates = 0.0, []
    for _ in range(steps):
        v = (MASS * v + (RATE / mobility - push) * H) / (MASS + H / mobility)
        rates.append(v)
    return np.array(rates)


@pytest.mark.parametrize("push", [0.0, 4.0, 10.0])
def test_drive_gives_way_by_its_mobility(push):
    """b = 0.01 m/(N s): the rate follows the recurrence step by step and settles at u - b P: 0.1, 0.06 and 0 m/s
    (the stall load u / b = 10 N) for pushes of 0, 4 and 10 N, to 1e-5 m/s (float32 positions over one step;
    measured 4e-7)."""
    mobility = 0.01
    rates, off_axis = slider(True, mobility, push)
    np.testing.assert_allclose(rates, recurrence(mobility, push), atol=1e-5)
    assert rates[-1] == pytest.approx(RATE - mobility * push, abs=1e-5)
    assert off_axis < 1e-6


@pytest.mark.parametrize("push", [0.0, 4.0])
def test_rigid_drive_meets_its_rate_under_any_load(push):
    """No mobility: the extension rate is u at every step, pushed or not, to 1e-5 m/s (measured 4e-7)."""
    rates, off_axis = slider(True, 0.0, push)
    np.testing.assert_allclose(rates, RATE, atol=1e-5)
    assert off_axis < 1e-6


def test_undriven_joint_slides_freely():
    """No drive: a push of 0.2 N accelerates the body along the axis at P / m, v_n = -n h P / m (implicit Euler,
    exact for a constant force), to 1e-5 m/s (measured 1.1e-6)."""
    rates, off_axis = slider(False, 0.0, 0.2)
    np.testing.assert_allclose(rates, -np.arange(1, 61) * H * 0.2 / MASS, atol=1e-5)
    assert off_axis < 1e-6
