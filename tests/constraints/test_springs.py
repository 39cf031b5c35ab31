"""Compliant rows as springs and dampers, against closed forms.

A compliant row with compliance alpha = 1 / k and damping enters the step as the force -k c - C dc/dt taken at
the step's end (``softsnake.kernels.rows``), so a converged step of a one-degree-of-freedom oscillator is the
implicit-Euler step of m x'' = -k x - C x', whose recurrence is closed:

    v' = (m v / h - k x) / (m / h + k h + C),   x' = x + h v'.

The engine must follow it to float32 round-off, and, as h shrinks, the continuous damped oscillator to first
order in h. Actuation rows (seed 001, eqs. 3-4) hold a rest length r (1 + p / Y) while p > 0, and no force at all
while p <= 0.
"""

import math

import numpy as np
import pytest

import softsnake
from softsnake.spatial import quat_to_matrix

G = 9.81


def implicit_euler(x, v, mass, stiffness, damping, h, steps):
    """Positions after each of ``steps`` implicit-Euler steps of m x'' = -k x - C x' (float64)."""
    xs = []
    for _ in range(steps):
        v = (mass * v / h - stiffness * x) / (mass / h + stiffness * h + damping)
        x = x + h * v
        xs.append(x)
    return np.array(xs)


def damped_oscillator(x0, v0, mass, stiffness, damping, t):
    """The continuous solution of m x'' = -k x - C x' (under-damped) at the times t."""
    omega0 = math.sqrt(stiffness / mass)
    zeta = damping / (2.0 * math.sqrt(stiffness * mass))
    omega = omega0 * math.sqrt(1.0 - zeta * zeta)
    decay = np.exp(-zeta * omega0 * t)
    return decay * (x0 * np.cos(omega * t) + (v0 + zeta * omega0 * x0) / omega * np.sin(omega * t))


def spring_particle(device, stretch, speed, mass, stiffness, damping_time, rest=0.5):
    """A particle on a compliant distance row to a kinematic one along x, no gravity."""
    b = softsnake.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    anchor = b.add_particle((0.0, 0.0, 0.0), kinematic=True)
    bob = b.add_particle((rest + stretch, 0.0, 0.0), velocity=(speed, 0.0, 0.0), mass=mass)
    b.add_distance(anchor, bob, rest, compliance=1.0 / stiffness, damping=damping_time)
    return b.finalize(device), rest


def run_spring(model, rest, dt, seconds, substeps=1):
    solver = softsnake.Solver(model, substeps=substeps)
    state, control = model.state(), model.control()
    xs, off_axis = [], 0.0
    for _ in range(int(round(seconds / dt))):
        solver.step(state, state, control, dt)
        q = state.particle_q.numpy()[1].astype(np.float64)
        xs.append(q[0] - rest)
        off_axis = max(off_axis, abs(q[1]), abs(q[2]))
    return np.array(xs), off_axis


def test_distance_spring_damper_steps_as_implicit_euler(device):
    """A particle of 0.2 kg on a 20 N/m row with a 0.05 s damping time (C = 1 N s/m), started 2 cm out at 0.1 m/s,
    h = 1/120 s: every one of 120 positions within 3e-6 m (of 2e-2; float32 positions near 0.5 m round to 6e-8 a
    step) of the recurrence, nothing off its axis."""
    mass, stiffness, damping_time = 0.2, 20.0, 0.05
    model, rest = spring_particle(device, 0.02, 0.1, mass, stiffness, damping_time)
    h = 1.0 / 120.0
    xs, off_axis = run_spring(model, rest, h, 1.0)
    expected = implicit_euler(0.02, 0.1, mass, stiffness, stiffness * damping_time, h, len(xs))
    assert np.abs(xs - expected).max() < 3e-6
    assert off_axis == 0.0


def test_distance_spring_converges_to_the_damped_oscillator_at_first_order(device):
    """The same oscillator against its continuous solution over 1 s: the largest error halves as h halves
    (implicit Euler is first order; ratios 1.8-2.2 accepted), and at h = 1/960 s it is below 4 % of the amplitude."""
    mass, stiffness, damping_time = 0.2, 20.0, 0.01
    model, rest = spring_particle(device, 0.02, 0.0, mass, stiffness, damping_time)
    errors = []
    for substeps in (2, 4, 8):
        xs, _ = run_spring(model, rest, 1.0 / 120.0, 1.0, substeps=substeps)
        t = np.arange(1, len(xs) + 1) / 120.0
        exact = damped_oscillator(0.02, 0.0, mass, stiffness, stiffness * damping_time, t)
        errors.append(np.abs(xs - exact).max())
    ratios = [errors[0] / errors[1], errors[1] / errors[2]]
    assert all(1.8 < ratio < 2.2 for ratio in ratios), (errors, ratios)
    assert errors[-1] < 0.04 * 0.02


def twist_about_z(q):
    """Rotation angle about z of the unit quaternion q (x, y, z, w)."""
    return 2.0 * math.atan2(q[2], q[3])


@pytest.mark.parametrize("damping", [0.0, 0.02])
def test_angular_spring_steps_as_implicit_euler(device, damping):
    """A box on a hinge about z through its centre, held by an angular spring of 0.5 N m/rad (and a damper of
    C N m s/rad), started at 3 rad/s, no gravity: the twist follows I theta'' = -K theta - C theta' stepped by
    implicit Euler, every one of 120 angles within 2e-5 rad (of up to 0.26), and the hinge keeps the axis to 1e-5."""
    mass, half = 1.0, np.array([0.1, 0.05, 0.02])
    inertia = np.diag([mass / 3.0 * (half[1] ** 2 + half[2] ** 2), mass / 3.0 * (half[0] ** 2 + half[2] ** 2),
                       mass / 3.0 * (half[0] ** 2 + half[1] ** 2)])
    stiffness, omega0 = 0.5, 3.0
    b = softsnake.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    box = b.add_body((0.0, 0.0, 0.5), mass=mass, inertia=inertia, angular_velocity=(0.0, 0.0, omega0))
    b.add_hinge(-1, box, anchor=(0.0, 0.0, 0.5), axis=(0.0, 0.0, 1.0))
    b.add_angular_spring(-1, box, (0.0, 0.0, 1.0), stiffness=stiffness, damping=damping)
    model = b.finalize(device)
    solver = softsnake.Solver(model, substeps=1)
    state, control = model.state(), model.control()
    h = 1.0 / 120.0
    angles, tilt = [], 0.0
    for _ in range(120):
        solver.step(state, state, control, h)
        q = state.body_q.numpy()[0, 3:].astype(np.float64)
        angles.append(twist_about_z(q))
        tilt = max(tilt, abs(1.0 - quat_to_matrix(q)[2, 2]))
    expected = implicit_euler(0.0, omega0, inertia[2, 2], stiffness, damping, h, len(angles))
    assert np.abs(np.array(angles) - expected).max() < 2e-5
    assert tilt < 1e-5


def test_angular_spring_follows_its_target(device):
    """The same spring and damper (0.5 N m/rad, 0.02 N m s/rad) on a disc at rest, its rest angle set by
    ``Control.joint_target``: 0.3 rad for 60 steps, then -0.2 rad. The twist follows I theta'' = -K (theta -
    theta*) - C theta' stepped by implicit Euler, whose recurrence in theta - theta* restarts at the change from the
    angle and rate reached: every one of 120 angles within 2e-5 rad (measured 1.1e-6)."""
    inertia, stiffness, damping, h = 2e-3, 0.5, 0.02, 1.0 / 120.0
    b = softsnake.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    disc = b.add_body((0.0, 0.0, 0.5), mass=1.0, inertia=np.diag([1e-3, 1e-3, inertia]))
    b.add_hinge(-1, disc, anchor=(0.0, 0.0, 0.5), axis=(0.0, 0.0, 1.0))
    b.add_angular_spring(-1, disc, (0.0, 0.0, 1.0), stiffness=stiffness, damping=damping)
    model = b.finalize(device)
    solver = softsnake.Solver(model, substeps=1)
    state, control = model.state(), model.control()
    angles, expected, theta, omega = [], [], 0.0, 0.0
    for target in (0.3, -0.2):
        control.joint_target.assign(np.array([target], dtype=np.float32))
        for _ in range(60):
            solver.step(state, state, control, h)
            angles.append(twist_about_z(state.body_q.numpy()[0, 3:].astype(np.float64)))
        # The closed recurrence from where the last target left the disc, measured from this target.
        offsets = implicit_euler(theta - target, omega, inertia, stiffness, damping, h, 60)
        expected.extend(offsets + target)
        omega = (offsets[-1] - offsets[-2]) / h
        theta = offsets[-1] + target
    assert np.abs(np.array(angles) - np.array(expected)).max() < 2e-5
    assert abs(angles[59] - 0.3) < abs(angles[0] - 0.3) and abs(angles[-1] + 0.2) < 0.2  # it moved toward each


@pytest.mark.parametrize("ratio", [1e-3, 1e-1])
def test_sampled_moment_curve_holds_its_moment_whatever_the_stiffness_floor(device, ratio):
    """A disc on a hinge about z (I = 2e-3 kg m^2, no gravity) held by a spring of a sampled moment curve: 0.5 N m/rad
    up to 0.2 rad, then nearly flat (0.00125 N m/rad, a wrinkled tube's plateau). There the row's tangent stiffness is
    floored at ``min_stiffness_ratio`` times the curve's (``constraints.angular_spring``): at 1e-1 the floor is 40 times
    the plateau's slope, at 1e-3 (the default) below it. The floor only keeps the row's compliance finite; the
    converged moment is the curve's, either way:
    - pushed by 0.05 N m (damping 0.04 N m s/rad), the disc settles where M = 0.05: at 0.1 rad, to 1e-5 rad
      (measured 6.8e-7 at both);
    - started 0.3 rad out, on the plateau, and pushed by 0.15 N m, it turns as implicit Euler on
      I w' = tau - M(theta) with the curve's M (solved per step in float64 here), to 1e-4 of its speed (measured
      6.1e-6 and 5.3e-6 of 4.97 rad/s after 48 steps)."""
    inertia, h = 2e-3, 1.0 / 240.0
    angles, moments = np.array([-1.0, -0.2, 0.0, 0.2, 1.0]), np.array([-0.101, -0.1, 0.0, 0.1, 0.101])

    def disc(start, torque, damping):
        b = softsnake.ModelBuilder(gravity=(0.0, 0.0, 0.0))
        body = b.add_body((0.0, 0.0, 0.5), mass=1.0, inertia=np.diag([1e-3, 1e-3, inertia]))
        b.add_hinge(-1, body, anchor=(0.0, 0.0, 0.5), axis=(0.0, 0.0, 1.0))
        b.add_angular_spring(-1, body, (0.0, 0.0, 1.0), moment_curve=(angles, moments), damping=damping,
                             target=-start)
        model = b.finalize(device)
        solver = softsnake.Solver(model, substeps=1, min_stiffness_ratio=ratio)
        state, control = model.state(), model.control()
        state.body_f.assign(np.array([[0.0, 0.0, 0.0, 0.0, 0.0, torque]], dtype=np.float32))
        return solver, state, control

    solver, state, control = disc(0.0, 0.05, 0.04)
    for _ in range(480):
        solver.step(state, state, control, h)
    assert twist_about_z(state.body_q.numpy()[0, 3:].astype(np.float64)) == pytest.approx(0.1, abs=1e-5)

    solver, state, control = disc(0.3, 0.15, 0.0)
    theta, omega = 0.3, 0.0
    for _ in range(48):
        solver.step(state, state, control, h)
        # I (w' - w) / h = tau - M(theta + h w'), on the plateau's segment: Newton's method with its slope.
        w = omega
        for _ in range(20):
            f = inertia * (w - omega) / h - 0.15 + np.interp(theta + h * w, angles, moments)
            w -= f / (inertia / h + h * (moments[-1] - moments[-2]) / (angles[-1] - angles[-2]))
        omega, theta = w, theta + h * w
    assert float(state.body_qd.numpy()[0, 5]) == pytest.approx(omega, rel=1e-4), (state.body_qd.numpy()[0, 5], omega)


@pytest.mark.parametrize("joint, damping", [("attachment", 0.0), ("attachment", 0.01), ("hinge", 0.0),
                                            ("prismatic", 0.0)])
def test_compliant_joint_hangs_as_a_spring(device, joint, damping):
    """A 0.5 kg body hung at its centre from the static world by a compliant joint (alpha = 1e-4 m/N on each row; an
    attachment to a kinematic particle, optionally damped with beta [s]; a hinge about x; a prismatic joint sliding
    along x, which its two locking rows across the axis hold up), released where the joint has no strain: the rows
    are a spring k = 1 / alpha with a damper beta / alpha (``kernels.rows``), so its height follows the implicit-Euler
    recurrence of m z'' = -k z - (beta / alpha) z' - m g, settling alpha m g = 0.49 mm below: every one of 60
    heights within 1e-6 m (measured 4.6e-8: float32 at 1 m; without the damper the damped case is 2e-4 m off)."""
    mass, compliance, h = 0.5, 1e-4, 1.0 / 120.0
    b = softsnake.ModelBuilder()
    body = b.add_body((0.0, 0.0, 1.0), mass=mass, inertia=np.eye(3) * 1e-3)
    if joint == "attachment":
        b.add_attachment(body, b.add_particle((0.0, 0.0, 1.0), kinematic=True), compliance=compliance, damping=damping)
    elif joint == "hinge":
        b.add_hinge(-1, body, anchor=(0.0, 0.0, 1.0), axis=(1.0, 0.0, 0.0), compliance=compliance)
    else:
        b.add_prismatic(-1, body, (0.0, 0.0, 1.0), (1.0, 0.0, 0.0), compliance=compliance)
    model = b.finalize(device)
    solver = softsnake.Solver(model, substeps=1)
    state, control = model.state(), model.control()
    heights = []
    for _ in range(60):
        solver.step(state, state, control, h)
        heights.append(float(state.body_q.numpy()[0, 2]) - 1.0)
    sag = compliance * mass * G
    expected = implicit_euler(sag, 0.0, mass, 1.0 / compliance, damping / compliance, h, 60) - sag
    assert np.abs(np.array(heights) - expected).max() < 1e-6, np.abs(np.array(heights) - expected).max()
    assert abs(heights[-1] + sag) < 0.1 * sag  # it settled at the sag


def test_actuation_row_holds_r_times_one_plus_p_over_y(device):
    """A 50 g particle hanging from a fixed one by an actuation row (r = 0.1 m, Y = 100 kPa, compliance 1e-3 m/N),
    one world per pressure: at p > 0 it rests at r (1 + p / Y) + alpha m g (eq. 4 plus the row's sag under the
    weight) within 1e-6 m; at p <= 0 the row is not driven, and the particle falls freely (v = -g t, exact for
    implicit Euler under constant gravity)."""
    rest, youngs, compliance, mass = 0.1, 1e5, 1e-3, 0.05
    pressures = [-1e3, 0.0, 5e3, 2e4, 5e4]
    world = softsnake.ModelBuilder()
    top = world.add_particle((0.0, 0.0, 1.0), kinematic=True)
    bob = world.add_particle((0.0, 0.0, 1.0 - rest), mass=mass)
    world.add_distance(top, bob, rest, compliance=compliance, damping=0.02,
                       pressure_channel=world.add_pressure_channel(), youngs_modulus=youngs)
    scene = softsnake.ModelBuilder()
    scene.replicate(world, len(pressures), spacing=(1.0, 0.0, 0.0))
    model = scene.finalize(device)
    solver = softsnake.Solver(model)
    state, control = model.state(), model.control()
    control.pressure.assign(np.array(pressures, dtype=np.float32))
    h, steps = 1.0 / 120.0, 240
    for _ in range(steps):
        solver.step(state, state, control, h)
    q, qd = state.particle_q.numpy().reshape(len(pressures), 2, 3), state.particle_qd.numpy().reshape(len(pressures), 2, 3)
    for world_index, p in enumerate(pressures):
        if p > 0.0:
            length = float(q[world_index, 0, 2] - q[world_index, 1, 2])
            assert abs(length - (rest * (1.0 + p / youngs) + compliance * mass * G)) < 1e-6, (p, length)
            assert abs(qd[world_index, 1, 2]) < 5e-5  # at rest: a few float32 steps of 6e-8 m over h
        else:
            assert qd[world_index, 1, 2] == pytest.approx(-G * steps * h, rel=1e-5)
