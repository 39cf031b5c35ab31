"""Contact and Coulomb friction against analytic answers, in both of the solver's starts.

The engine warm starts (``SolverSettings.warm_start``, the robots' configuration); every test here
runs warm and cold, with the same tolerances: a converged solve does not depend on its start. The
friction rows are derived in ``softsnake.constraints.contact``.
"""

import math

import numpy as np
import pytest
import warp as wp

import softsnake
from engine_scenes import run
from softsnake.meshing import box_tet_mesh
from softsnake.spatial import cylinder_inertia, quat_from_axis_angle, quat_to_matrix

G = 9.81


@pytest.fixture(params=[True, False], ids=["warm", "cold"])
def warm_start(request):
    return request.param


def body_position(state):
    return state.body_q.numpy()[0, :3].astype(np.float64)


def particle_position(state):
    return state.particle_q.numpy()[0].astype(np.float64)


def tilt_degrees(quaternion):
    """Angle [deg] between a body's z axis and the world's."""
    return math.degrees(math.acos(min(1.0, abs(1.0 - 2.0 * (quaternion[0] ** 2 + quaternion[1] ** 2)))))


def test_resting_on_ground(device, warm_start):
    """A particle and a box resting on the ground for 2 s: sink < 1e-5 m, drift < 1e-5 m (measured: at most 5e-8 m,
    the box's sink; the particle's nothing)."""
    b = softsnake.ModelBuilder()
    b.add_ground(mu=0.5)
    b.add_particle((0.0, 0.0, 0.05), mass=0.1, radius=0.05)
    box = b.add_body((1.0, 0.0, 0.05))
    b.add_shape_box(box, (0.05, 0.05, 0.05), density=1000.0)
    model = b.finalize(device)
    _, traj = run(model, 2.0, record=lambda s: np.concatenate([s.particle_q.numpy()[0], s.body_q.numpy()[0, :3]]),
                  warm_start=warm_start)
    particle, body = traj[:, :3], traj[:, 3:]
    assert np.abs(particle[:, 2] - 0.05).max() < 1e-5 and np.abs(body[:, 2] - 0.05).max() < 1e-5
    assert np.linalg.norm(particle[-1, :2] - [0.0, 0.0]) < 1e-5
    assert np.linalg.norm(body[-1, :2] - [1.0, 0.0]) < 1e-5


@pytest.mark.parametrize("compensated", [False, True], ids=["float32", "compensated"])
def test_resting_particle_holds_its_weight_without_jitter(device, compensated):
    """A 1 kg particle (radius 5 cm) resting on the ground in substeps of 1/3840 s: every substep's normal
    multiplier is its weight's, m g h^2, within 1e-4 of it, and its height moves by less than 1e-12 m
    (measured on the CPU: within 2.5e-5 of it with float32 positions, 1e-7 compensated; the height still). Before the gap was taken from the
    ground moved out by the radius (``shapes.obstacle_gap``), the gap carried float32's rounding of the 5 cm
    distance (3.7e-9 m spacing) afresh each substep: the height jittered by 1e-9 m and the normal force by
    4e-3 of the weight (convergence.md, "Contacts at small steps")."""
    h = 1.0 / 3840.0
    b = softsnake.ModelBuilder()
    b.add_ground(mu=0.5)
    b.add_particle((0.0, 0.0, 0.05), mass=1.0, radius=0.05)
    model = b.finalize(device)
    _, records = run(model, 200 * h, dt=h, substeps=1, compensated_positions=compensated,
                     record=lambda s: [float(s.multipliers.numpy()[0]), float(s.particle_q.numpy()[0, 2])
                                       + (float(s.particle_q_low.numpy()[0, 2]) if compensated else 0.0)])
    normal, height = records[:, 0], records[:, 1]
    assert np.abs(normal / (G * h * h) - 1.0).max() < 1e-4, normal / (G * h * h)
    assert np.ptp(height[10:]) < 1e-12, np.ptp(height[10:])


def slope_model(device, mu, angle, body="box"):
    """A 10 cm cube (``box``: rigid on its four corners; ``soft``: a 2x2x2-cell tet block, Y = 1e5 Pa)
    or a particle (``point``) resting on a plane tilted by ``angle`` [rad]; (model, record): record(state)
    is the position [m] of the body, the particle, or the soft block's bottom face."""
    b = softsnake.ModelBuilder()
    normal = np.array([math.sin(angle), 0.0, math.cos(angle)])
    b.add_ground(mu=mu, normal=normal)
    rot = quat_from_axis_angle((0, 1, 0), angle)
    if body == "box":
        box = b.add_body(normal * 0.05, rot)
        b.add_shape_box(box, (0.05, 0.05, 0.05), density=1000.0)
        record = body_position
    elif body == "soft":
        vertices, tets = box_tet_mesh((0.1, 0.1, 0.1), (2, 2, 2))
        b.add_soft_mesh(vertices, tets, 1000.0, 1.0e5, 0.3, position=normal * 0.05, rotation=rot, damping=0.002)
        bottom = np.flatnonzero(vertices[:, 2] < -0.05 + 1e-9)
        record = lambda s: s.particle_q.numpy()[bottom].astype(np.float64).mean(axis=0)  # noqa: E731
    else:
        b.add_particle(normal * 0.05, mass=1.0, radius=0.05)
        record = particle_position
    return b.finalize(device), record


def slope_run(device, mu, angle, body, seconds=1.0, dt=1.0 / 120.0, **solver_options):
    """(times [s], displacement [m] along the fall line) of ``slope_model``."""
    model, record = slope_model(device, mu, angle, body)
    _, xs = run(model, seconds, dt=dt, record=record, **solver_options)
    down = np.array([math.cos(angle), 0.0, -math.sin(angle)])
    return np.arange(1, len(xs) + 1) * dt, (xs - xs[0]) @ down


@pytest.mark.parametrize("mu", [0.3, 0.6])
@pytest.mark.parametrize("margin", [-0.15, -0.06])
def test_box_sticks_on_slope(device, warm_start, mu, margin):
    """tan(angle) = mu + margin < mu - 0.05: the box stays (moves < 1 mm in 1 s)."""
    _, along = slope_run(device, mu, math.atan(mu + margin), "box", warm_start=warm_start)
    assert np.abs(along).max() < 1e-3


@pytest.mark.parametrize("mu", [0.3, 0.6])
@pytest.mark.parametrize("margin", [0.06, 0.2])
@pytest.mark.parametrize("footprint", ["point", "box"])
def test_sliding_on_slope(device, warm_start, mu, margin, footprint):
    """tan(angle) = mu + margin > mu + 0.05: acceleration g (sin - mu cos) within 0.2 % (measured: at most 0.04 %,
    the particle at mu 0.6 and margin 0.06; the cube's corners at most 0.006 %).

    ``point``: a particle (one contact); ``box``: a cube on its four corners.
    """
    angle = math.atan(mu + margin)
    t, along = slope_run(device, mu, angle, footprint, warm_start=warm_start)
    start = len(t) // 4
    acc = 2 * np.polyfit(t[start:], along[start:], 2)[0]
    expected = G * (math.sin(angle) - mu * math.cos(angle))
    assert abs(acc / expected - 1) < 2e-3, acc / expected - 1


@pytest.mark.parametrize("degrees", [10, 20])
@pytest.mark.parametrize("body", ["box", "soft"])
def test_no_creep_below_friction_angle(device, warm_start, degrees, body):
    """mu = 0.5 (friction angle 26.6 deg): a rigid or soft cube on a 10 or 20 deg slope moves less than
    0.1 mm along the fall line in 10 s (a soft cube's bottom face, after 0.5 s to settle elastically)."""
    dt = 1.0 / 60.0
    _, along = slope_run(device, 0.5, math.radians(degrees), body, seconds=10.5, dt=dt, warm_start=warm_start)
    settled = int(round(0.5 / dt)) - 1
    creep = np.abs(along[settled:] - along[settled]).max()
    assert creep < 1e-4, f"crept {creep * 1e3:.4f} mm in 10 s"


@pytest.mark.parametrize("mu", [0.2, 0.5, 1.0])
def test_sliding_starts_at_the_friction_angle(device, warm_start, mu):
    """A flat block (10 x 10 x 2 cm: it slides before it could tip, tan = 5) on a plane tilted slowly
    from 0 deg at 2 deg/s starts sliding within +-1 deg of atan(mu). The plane is static and gravity
    turns instead (the same thing in the plane's frame, at this rate). Sliding starts when the block
    has moved 1 mm down the fall line (at the measured angle it lags the onset by a fraction of a
    degree: the block has barely accelerated)."""
    b = softsnake.ModelBuilder()
    b.add_ground(mu=mu)
    block = b.add_body((0.0, 0.0, 0.01))
    b.add_shape_box(block, (0.05, 0.05, 0.01), density=1000.0)
    model = b.finalize(device)
    solver = softsnake.Solver(model, warm_start=warm_start)
    state, control = model.state(), model.control()
    dt, rate = 1.0 / 60.0, math.radians(2.0)
    limit = math.atan(mu) + math.radians(3.0)
    angle, onset = 0.0, None
    while angle < limit and onset is None:
        angle += rate * dt
        model.gravity = wp.vec3(G * math.sin(angle), 0.0, -G * math.cos(angle))
        solver.step(state, state, control, dt)
        if state.body_q.numpy()[0, 0] > 1e-3:
            onset = angle
    assert onset is not None, f"still sticking at {math.degrees(angle):.2f} deg"
    assert abs(math.degrees(onset - math.atan(mu))) < 1.0, f"slid at {math.degrees(onset):.2f} deg"


def sliding_particle(device, mu, v0, x0=0.0):
    """A 1 kg particle (radius 5 cm) resting on ground with friction ``mu`` at x = ``x0`` [m] of its world, sliding
    along +x at ``v0`` [m/s]."""
    b = softsnake.ModelBuilder()
    b.add_ground(mu=mu)
    b.add_particle((x0, 0.0, 0.05), velocity=(v0, 0.0, 0.0), mass=1.0, radius=0.05)
    return b.finalize(device)


@pytest.mark.parametrize("mu", [0.3, 0.8])
def test_stopping_distance(device, warm_start, mu):
    """A particle sliding on flat ground from v0 stops after v0^2 / (2 mu g), within 5 %."""
    v0 = 2.0
    model = sliding_particle(device, mu, v0)
    state, xs = run(model, 1.5 * v0 / (mu * G), record=particle_position, warm_start=warm_start)
    assert np.linalg.norm(state.particle_qd.numpy()[0]) < 1e-3
    assert abs(xs[-1, 0] / (v0 * v0 / (2 * mu * G)) - 1) < 0.05


def test_stopping_distance_converges_at_first_order(device, warm_start):
    """The stopping distance of a particle sliding from 2 m/s (mu 0.3) converges to v0^2 / (2 mu g) at first order
    in the step: errors at h = 1/60 ... 1/960 s of -8.3, -4.2, -2.1, -1.0, -0.53 mm (about -v0 h / 4), each halving
    of h halving it (ratios 1.8-2.2 accepted), and never more than implicit Euler's v0 h / 2. Each substep runs in a
    frame that follows the particle (``softsnake.kernels.world_frame``): in the model's own frame the convergence
    ended near 1/480 s, where the friction's change of position in a step (mu g h^2) nears the float32 spacing of
    positions half a metre out (+0.3 mm at 1/960 s; experiments/results/convergence.md, "The time step")."""
    v0, mu = 2.0, 0.3
    exact = v0 * v0 / (2 * mu * G)
    errors = []
    for h in (1.0 / 60.0, 1.0 / 120.0, 1.0 / 240.0, 1.0 / 480.0, 1.0 / 960.0):
        state, _ = run(sliding_particle(device, mu, v0), 1.2 * v0 / (mu * G), dt=h, warm_start=warm_start)
        errors.append(float(state.particle_q.numpy()[0, 0]) - exact)
        assert abs(errors[-1]) <= v0 * h / 2, (h, errors[-1])
    for coarse, fine in zip(errors, errors[1:]):
        assert 1.8 < coarse / fine < 2.2, errors


@pytest.mark.parametrize("x0", [4.0, 30.0])
def test_stopping_distance_does_not_depend_on_where_the_particle_starts(device, x0):
    """The same particle started 4 or 30 m from its world's origin stops where it does from the origin, to 0.02 mm,
    at h = 1/240 and 1/1920 s (measured: within 0.0032 mm at 1/240 s, float32 positions, and to the printed 0.0001 mm
    at 1/1920 s, compensated; errors -2.07 and -0.2604 mm). Before each substep ran in a
    frame of its own world (``softsnake.kernels.world_frame``), 4 m out it stopped 7.4 mm short at 1/240 s and
    807 mm long at 1/1920 s (a step's friction change, mu g h^2, is a few float32 spacings there), 30 m out
    31 mm short and 950 mm long (experiments/results/convergence.md, "The time step")."""
    v0, mu = 2.0, 0.3
    for h in (1.0 / 240.0, 1.0 / 1920.0):
        travel = []
        for start in (0.0, x0):
            state, _ = run(sliding_particle(device, mu, v0, x0=start), 1.2 * v0 / (mu * G), dt=h)
            travel.append(float(state.particle_q.numpy()[0, 0]) - start)
        assert abs(travel[1] - travel[0]) < 2e-5, (h, travel)
        assert abs(travel[0] - v0 * v0 / (2 * mu * G)) < 0.3 * v0 * h, (h, travel)


def test_soft_block_stopping_distance(device, warm_start):
    """A soft tet block (10 cm, 2x2x2 cells, Y = 1e5 Pa) sliding at 1 m/s on ground with mu = 0.5 stops
    after v0^2 / (2 mu g) = 0.102 m (its centre of mass), within 5 %, and stays there."""
    v0, mu = 1.0, 0.5
    vertices, tets = box_tet_mesh((0.1, 0.1, 0.1), (2, 2, 2))
    b = softsnake.ModelBuilder()
    b.add_ground(mu=mu)
    b.add_soft_mesh(vertices, tets, 1000.0, 1.0e5, 0.3, position=(0.0, 0.0, 0.05), velocity=(v0, 0.0, 0.0),
                    damping=0.002)
    model = b.finalize(device)
    _, xs = run(model, 3.0 * v0 / (mu * G), dt=1.0 / 120.0, record=lambda s: s.particle_q.numpy().mean(axis=0),
                warm_start=warm_start)
    assert abs(xs[-1, 0] / (v0 * v0 / (2 * mu * G)) - 1) < 0.05, f"stopped after {xs[-1, 0]:.4f} m"
    # at rest, up to its elastic vibration (a fraction of a millimetre): the last two tenths of a
    # second have the same mean position
    assert abs(xs[-24:-12, 0].mean() - xs[-12:, 0].mean()) < 1e-4


def slide_stop(device, warm_start, kind, angle):
    """Where a body sliding on flat ground (mu 0.5) along the direction ``angle`` [rad] from +x stops, in its
    own frame: (along the direction, to its left) [m]. The body is turned with the direction, so every angle is
    the same physics turned about z: a particle from 2 m/s, a rigid 10 cm cube from 2 m/s, a soft 10 cm block
    (2x2x2 cells, Y = 1e5 Pa) from 1 m/s (its centre of mass)."""
    R = quat_to_matrix(quat_from_axis_angle((0.0, 0.0, 1.0), angle))
    direction = R[:, 0]
    b = softsnake.ModelBuilder()
    b.add_ground(mu=0.5)
    if kind == "particle":
        b.add_particle((0.0, 0.0, 0.05), velocity=tuple(2.0 * direction), mass=1.0, radius=0.05)
    elif kind == "cube":
        cube = b.add_body((0.0, 0.0, 0.05), rotation=tuple(quat_from_axis_angle((0.0, 0.0, 1.0), angle)),
                          velocity=tuple(2.0 * direction))
        b.add_shape_box(cube, (0.05, 0.05, 0.05), density=1000.0)
    else:
        vertices, tets = box_tet_mesh((0.1, 0.1, 0.1), (2, 2, 2))
        b.add_soft_mesh(vertices @ R.T, tets, 1000.0, 1.0e5, 0.3, position=(0.0, 0.0, 0.05),
                        velocity=tuple(1.0 * direction), damping=0.002)
    model = b.finalize(device)
    state, _ = run(model, 0.6 if kind == "soft" else 1.0, warm_start=warm_start)
    if kind == "particle":
        stop = state.particle_q.numpy()[0]
    elif kind == "cube":
        stop = state.body_q.numpy()[0, :3]
    else:
        stop = state.particle_q.numpy().mean(axis=0)
    return (R.T @ stop.astype(np.float64))[:2]


@pytest.mark.parametrize("kind", ["particle", "cube", "soft"])
def test_sliding_does_not_depend_on_its_direction(device, warm_start, kind):
    """Coulomb friction is isotropic: the same body sliding, turned with its direction (0, 45, 135 and 250 deg),
    stops at the same place in its own frame. Along the direction within 2e-4 of the distance, to the side within
    1e-5 m of each other (measured on the CPU: 6e-5 of it and 4e-6 m; the soft block drifts 0.05 mm to its left in
    every direction alike: its tetrahedra are not mirror-symmetric). The distances are v0^2 / (2 mu g) within 5 %,
    as in the tests above (measured: -1.0 % for the particle and the cube, -2.5 % for the soft block)."""
    stops = np.array([slide_stop(device, warm_start, kind, math.radians(degrees)) for degrees in (0, 45, 135, 250)])
    along, side = stops[:, 0], stops[:, 1]
    assert np.ptp(along) < 2e-4 * along.mean(), along
    assert np.ptp(side) < 1e-5, side
    v0 = 1.0 if kind == "soft" else 2.0
    assert abs(along.mean() / (v0 * v0 / (2 * 0.5 * G)) - 1) < 0.05, along


def test_cube_landing_while_sliding_stops_without_tipping(device, warm_start):
    """A 10 cm cube (mu = 0.5) dropped from 1 cm while sliding at 2 m/s lands flat and stops after
    v0^2 / (2 mu g) = 0.408 m, within 5 %, never tilting more than 1 deg."""
    v0, mu = 2.0, 0.5
    b = softsnake.ModelBuilder()
    b.add_ground(mu=mu)
    cube = b.add_body((0.0, 0.0, 0.06), velocity=(v0, 0.0, 0.0))
    b.add_shape_box(cube, (0.05, 0.05, 0.05), density=1000.0)
    model = b.finalize(device)
    _, q = run(model, 1.0, record=lambda s: s.body_q.numpy()[0].astype(np.float64), warm_start=warm_start)
    assert abs(q[-1, 0] / (v0 * v0 / (2 * mu * G)) - 1) < 0.05, f"stopped after {q[-1, 0]:.4f} m"
    assert max(tilt_degrees(quaternion) for quaternion in q[:, 3:]) < 1.0


def test_sphere_rolls_down_slope(device, warm_start):
    """A solid sphere on a slope with enough friction rolls: acceleration (5/7) g sin(angle), within 0.1 % (measured
    1.2e-5 warm, 8e-6 cold)."""
    angle, r, m = math.radians(20), 0.05, 1.0
    b = softsnake.ModelBuilder()
    normal = np.array([math.sin(angle), 0.0, math.cos(angle)])
    b.add_ground(mu=1.0, normal=normal)
    ball = b.add_body(normal * r, mass=m, inertia=np.eye(3) * 0.4 * m * r * r)
    b.add_shape_sphere(ball, r)
    model = b.finalize(device)
    dt = 1.0 / 120.0
    _, xs = run(model, 1.0, dt=dt, record=body_position, warm_start=warm_start)
    t = np.arange(1, len(xs) + 1) * dt
    along = (xs - xs[0]) @ np.array([math.cos(angle), 0.0, -math.sin(angle)])
    acc = 2 * np.polyfit(t[30:], along[30:], 2)[0]
    assert abs(acc / (5.0 / 7.0 * G * math.sin(angle)) - 1) < 1e-3, acc / (5.0 / 7.0 * G * math.sin(angle)) - 1


@pytest.mark.parametrize("half_height", [0.1, 0.01], ids=["caps", "wheel"])
@pytest.mark.parametrize("mu", [1.0, 0.05], ids=["rolls", "slips"])
def test_cylinder_rolls_or_slips_down_slope(device, warm_start, half_height, mu):
    """A solid cylinder (r = 5 cm) lying across a 20 degree slope, touching it with its caps' rims (long) or with its
    mid-plane's rim (a wheel, as the snake's). Where mu >= tan(angle) / 3 it rolls: acceleration (2/3) g sin(angle),
    spin rate growing at that over r; below it slips: g (sin(angle) - mu cos(angle)) and 2 mu g cos(angle) / r. Both
    within 0.5 % (measured: 1e-4), on its surface (1e-4 m) and straight down the slope: sideways within 1 mm over its
    up to 1.45 m (measured below 1e-4 m on the CPU; 2.2e-4 m on an H200 for the slipping wheel, growing from
    round-off as a disc slipping on its rim does)."""
    angle, r, m = math.radians(20), 0.05, 1.0
    b = softsnake.ModelBuilder()
    normal = np.array([math.sin(angle), 0.0, math.cos(angle)])
    b.add_ground(mu=mu, normal=normal)
    body = b.add_body(normal * r, quat_from_axis_angle((1, 0, 0), -0.5 * math.pi), mass=m,
                      inertia=cylinder_inertia(m, r, half_height))  # its axis along y, across the slope
    b.add_shape_cylinder(body, r, half_height)
    model = b.finalize(device)
    dt = 1.0 / 120.0
    _, records = run(model, 1.0, dt=dt, warm_start=warm_start,
                     record=lambda s: np.concatenate([s.body_q.numpy()[0, :3], s.body_qd.numpy()[0, 3:]]).astype(np.float64))
    t = np.arange(1, len(records) + 1) * dt
    along = (records[:, :3] - records[0, :3]) @ np.array([math.cos(angle), 0.0, -math.sin(angle)])
    acceleration = 2 * np.polyfit(t[30:], along[30:], 2)[0]
    spin_rate = np.polyfit(t[30:], records[30:, 4], 1)[0]  # d(omega_y)/dt
    if mu >= math.tan(angle) / 3:
        expected = (2.0 / 3.0 * G * math.sin(angle), 2.0 / 3.0 * G * math.sin(angle) / r)
    else:
        expected = (G * (math.sin(angle) - mu * math.cos(angle)), 2.0 * mu * G * math.cos(angle) / r)
    assert acceleration == pytest.approx(expected[0], rel=5e-3)
    assert spin_rate == pytest.approx(expected[1], rel=5e-3)
    assert np.abs(records[:, 1]).max() < 1e-3
    assert np.abs(records[:, :3] @ normal - r).max() < 1e-4


@pytest.mark.parametrize("margin", [-0.15, 0.2], ids=["sticking", "sliding"])
def test_contact_regularization_does_not_move_the_answer(device, margin):
    """The proximal regularisation of the contact rows (``contact_regularization``, ``friction_regularization``)
    keeps the system regular where a box's four corners share its load, and moves no converged answer: a cube on a
    slope (mu 0.3; tan(angle) = mu - 0.15 sticks, mu + 0.2 slides) at 1e-2 (the default), 1e-3 and 1e-4 ends 1 s at
    the same place to 1e-5 m (measured 4.4e-6 m of the slide's 0.88 m: the Newton tolerance's), and its corners'
    normal multipliers sum to its weight's share m g cos(angle) h^2 to 2e-4 (measured at most 8.2e-5, either sign;
    a regularisation that moved the answer would move these by about itself, 1e-2)."""
    mu, h, substeps = 0.3, 1.0 / 120.0, 2
    angle = math.atan(mu + margin)
    ends = []
    for regularization in (1e-2, 1e-3, 1e-4):
        model, record = slope_model(device, mu, angle, "box")
        normal_rows = np.flatnonzero(softsnake.residuals.row_kinds(model) == 1)
        _, positions = run(model, 1.0, dt=h, record=record, contact_regularization=regularization,
                           friction_regularization=regularization)
        ends.append(positions[-1])
        mass = 1.0 / float(model.body_inv_mass.numpy()[0])
        solver = softsnake.Solver(model, contact_regularization=regularization, friction_regularization=regularization)
        state, control = model.state(), model.control()
        for _ in range(30):
            solver.step(state, state, control, h)
        load = float(state.multipliers.numpy()[normal_rows].astype(np.float64).sum())
        weight = mass * G * math.cos(angle) * (h / substeps) ** 2
        assert load == pytest.approx(weight, rel=2e-4), (regularization, load / weight - 1)
    for end in ends[1:]:
        assert np.abs(end - ends[0]).max() < 1e-5, (ends, margin)
    travel = np.linalg.norm(ends[0] - model.body_q.numpy()[0, :3])  # from where the model starts it
    assert (travel < 1e-3) == (margin < 0.0), travel  # it stuck, or it slid
