"""Engine scenes and stepping shared by several test files (tests/ is on pytest's path: pyproject's
``pythonpath``).

``run`` steps a model and records; the scenes are small models that together cover every
constraint type: a soft cantilever (tetrahedra, attachments, pressure-driven distance rows) and a
chain of bodies (driven prismatic base, hinges, linear and sampled angular springs, obstacles),
planar or in 3-D; a small clamped pneumatic beam (``pneumatic_beam``); a double pendulum of two distance rows (``chain_builder``; three worlds of it, ``pendulum_worlds``); bodies of every shape with friction
and a hinge (``scene_bodies``); a stiff soft block
resting on the ground or clamped (``stiff_block``); and a box on two light wheels at rest (``wheeled_cart``).
"""

import math

import numpy as np

import softsnake
from softsnake.meshing import box_tet_mesh


def run(model, seconds, dt=1.0 / 120.0, record=None, **solver_options):
    """Step a model for ``seconds`` [s] with a new Solver; ``record(state)`` is called after every step
    and collected. Returns (the final state, the records as an array)."""
    solver = softsnake.Solver(model, **solver_options)
    state, control = model.state(), model.control()
    out = []
    for _ in range(int(round(seconds / dt))):
        solver.step(state, state, control, dt)
        if record is not None:
            out.append(record(state))
    return state, np.asarray(out)


def scene_soft():
    """A soft cantilever attached to a kinematic body, with pressure-driven distance rows."""
    b = softsnake.ModelBuilder()
    b.add_ground(mu=0.8)
    add_soft_cantilever(b)
    return b.finalize()


def add_soft_cantilever(b):
    """``scene_soft``'s cantilever into builder ``b``: a 5-cell tetrahedral beam clamped at one end by attachments to
    a kinematic body, pressure-driven distance rows along a top edge (one channel)."""
    verts, tets = box_tet_mesh((0.2, 0.04, 0.04), (5, 1, 1))
    start = b.add_soft_mesh(verts, tets, 1100.0, 1e5, 0.45, position=(0.0, 0.0, 0.2), damping=0.002,
                            particle_radius=0.002)
    wall = b.add_body((0.0, 0.0, 0.2), kinematic=True)
    n = len(verts)
    # The mesh is centred on its frame: the clamped end is x = -0.1, the top edge z = 0.02, y = -0.02.
    low, high = verts.min(axis=0), verts.max(axis=0)
    for k in range(n):
        if verts[k, 0] < low[0] + 1e-9:
            b.add_attachment(wall, start + k, compliance=1e-7)
    channel = b.add_pressure_channel()
    top = [start + k for k in range(n) if verts[k, 2] > high[2] - 1e-9 and verts[k, 1] < low[1] + 1e-9]
    top.sort(key=lambda k: verts[k - start, 0])
    for i, j in zip(top[:-1], top[1:]):
        b.add_distance(i, j, pressure_channel=channel, youngs_modulus=1e5, compliance=1e-4)


def _quat_y(angle):
    return (0.0, math.sin(0.5 * angle), 0.0, math.cos(0.5 * angle))


def scene_bodies():
    """A box on a 20 deg slope, a rolling sphere, a capsule, a wheel, a hinge pendulum."""
    b = softsnake.ModelBuilder()
    angle = math.radians(20.0)
    b.add_ground(mu=0.5, normal=(math.sin(angle), 0.0, math.cos(angle)))
    box = b.add_body((0.0, 0.0, 0.06), _quat_y(angle), velocity=(0.0, 0.2, 0.0))
    b.add_shape_box(box, (0.05, 0.05, 0.05), density=1000.0)
    ball = b.add_body((0.5, 0.0, 0.3), velocity=(0.0, 1.0, 0.0))
    b.add_shape_sphere(ball, 0.05, density=800.0, mu=0.3)
    cap = b.add_body((1.0, 0.0, 0.4), _quat_y(0.3))
    b.add_shape_capsule(cap, 0.03, 0.08, density=900.0)
    wheel = b.add_body((1.5, 0.0, 0.4), (math.sin(-math.pi / 4), 0.0, 0.0, math.cos(-math.pi / 4)), velocity=(0.5, 0.0, 0.0))
    b.add_shape_cylinder(wheel, 0.05, 0.01, density=1200.0)
    arm = b.add_body((0.0, 2.0, 1.5), mass=0.5, inertia=np.diag([1e-3, 1e-3, 1e-3]))
    b.add_hinge(-1, arm, anchor=(0.0, 2.0, 2.0), axis=(0.0, 1.0, 1.0), compliance=1e-6)
    b.add_obstacle_box((3.0, 0.0, 0.2), (0.2, 0.2, 0.2), mu=0.2)
    b.add_obstacle_cylinder((3.0, 1.0, 0.2), 0.1, 0.3, mu=0.2)
    return b.finalize("cpu")


HINGED_BAR_HALF_EXTENTS = np.array([0.2, 0.02, 0.01])
"""Half extents of ``hinged_bar``'s bar [m]."""
HINGED_BAR_PIVOT = np.array([0.0, 0.0, 1.0])
"""Where ``hinged_bar``'s hinge holds the bar's end [m]."""


def hinged_bar(tilt, device=None, mass=0.3, pivot=HINGED_BAR_PIVOT):
    """A 0.4 m bar (a box of ``HINGED_BAR_HALF_EXTENTS``, ``mass`` [kg]) hanging from a hinge about y at its end at
    ``pivot`` [m], at rest ``tilt`` [rad] off the vertical; its frame is turned a quarter turn about the hinge, so its
    quaternion's components lie near 0.7 (float32's spacing there: 6e-8). The bar of
    tests/test_compensated_positions.py and experiments/rotation_rounding.py."""
    from softsnake.spatial import box_inertia, quat_from_axis_angle, quat_to_matrix

    rotation = quat_from_axis_angle((0.0, 1.0, 0.0), 0.5 * math.pi + tilt)
    b = softsnake.ModelBuilder()
    pivot = np.asarray(pivot, dtype=float)
    bar = b.add_body(pivot + quat_to_matrix(rotation) @ np.array([HINGED_BAR_HALF_EXTENTS[0], 0.0, 0.0]),
                     rotation, mass=mass, inertia=box_inertia(mass, HINGED_BAR_HALF_EXTENTS))
    b.add_hinge(-1, bar, anchor=pivot, axis=(0.0, 1.0, 0.0))
    return b.finalize(device)


def wheeled_cart(mu, device="cpu"):
    """A 12 x 6 x 3 cm box (500 kg/m^3, 108 g) resting on two wheels (2.5 cm radius, 1 cm wide, 9.8 g), each on a
    hinge about its axle through the box's centre of mass: the snake's module in shape. Its chassis balances
    on the axle line (its bottom 1 cm above the ground), and spinning in place on rolling wheels costs no
    friction: two free modes an iteration that adds energy excites."""
    radius = 0.025
    b = softsnake.ModelBuilder()
    b.add_ground(mu=mu)
    chassis = b.add_body((0.0, 0.0, radius))
    b.add_shape_box(chassis, (0.06, 0.03, 0.015), density=500.0)
    for side in (-0.04, 0.04):
        wheel = b.add_body((0.0, side, radius), (math.sin(-math.pi / 4), 0.0, 0.0, math.cos(-math.pi / 4)))
        b.add_shape_cylinder(wheel, radius, 0.005, density=500.0)
        b.add_hinge(chassis, wheel, (0.0, side, radius), (0.0, 1.0, 0.0))
    return b.finalize(device)


def chain(planar):
    """The chain's builder (planar: in the plane z = 0 without gravity, else in 3-D under gravity)."""
    b = softsnake.ModelBuilder(gravity=(0.0, 0.0, 0.0) if planar else (0.0, 0.0, -9.81), planar=planar)
    b.add_ground(mu=0.3, normal=(0.0, 1.0, 0.0), height=-0.2) if planar else b.add_ground(mu=0.3)
    prev = -1
    bodies = []
    for k in range(4):
        body = b.add_body((0.1 * k + 0.05, 0.0, 0.0 if planar else 0.3), mass=0.05,
                          inertia=np.diag([1e-4, 1e-4, 2e-4]))
        b.add_shape_sphere(body, 0.02, mu=0.3)
        bodies.append(body)
        anchor = (0.1 * k, 0.0, 0.0 if planar else 0.3)
        if k == 0:
            b.add_prismatic(-1, body, anchor, (1.0, 0.0, 0.0), drive=True, rate=0.05, drive_mobility=1e-3)
        else:
            b.add_hinge(prev, body, anchor, (0.0, 0.0, 1.0))
            if k == 2:
                curve = (np.array([-1.0, 0.0, 1.0]), np.array([-0.02, 0.0, 0.05]))
                b.add_angular_spring(prev, body, (0.0, 0.0, 1.0), moment_curve=curve, damping=1e-4)
            else:
                b.add_angular_spring(prev, body, (0.0, 0.0, 1.0), stiffness=0.05, damping=1e-4, target=0.2)
        prev = body
    b.add_obstacle_cylinder((0.3, 0.08, 0.0), 0.03, 0.5, mu=0.2)
    b.add_obstacle_box((0.5, -0.1, 0.0), (0.05, 0.02, 0.5), mu=0.0)
    return b


def scene_chain_planar():
    """A planar chain: driven prismatic base, hinges, linear and sampled angular springs, obstacles."""
    return chain(True).finalize()


def scene_chain_3d():
    """The same chain in 3-D under gravity."""
    return chain(False).finalize()


def chain_builder(compliance, speed):
    """A kinematic pivot, then two bobs on distance rows (0.3 m each); the last bob moves at ``speed``
    [m/s] across the chain. (A single pendulum would not do: one Newton step along its row's gradient
    solves it exactly.)"""
    b = softsnake.ModelBuilder()
    b.add_particle((0.0, 0.0, 1.0), kinematic=True)
    b.add_particle((0.3, 0.0, 1.0), mass=0.2)
    b.add_particle((0.6, 0.0, 1.0), velocity=(0.0, 0.0, -speed), mass=0.1)
    b.add_distance(0, 1, compliance=compliance)
    b.add_distance(1, 2, compliance=compliance)
    return b


def pendulum_worlds(device=None):
    """Three worlds of a compliant double pendulum (``chain_builder``, 1e-4 m/N) swinging at 0.5, 2 and 5 m/s:
    they converge at different Newton iterations. device: as ``ModelBuilder.finalize``'s (None: Warp's default)."""
    worlds = softsnake.ModelBuilder()
    for speed in (0.5, 2.0, 5.0):
        worlds.add_world(chain_builder(1e-4, speed))
    return worlds.finalize(device)


def stiff_block(device, support="ground"):
    """A stiff soft block (10 cm cube of 2x2x2 cells, Y = 1 MPa, nu = 0.3, 1000 kg/m^3, damping 0.01 s;
    omega h ~ 10 at 1/60 s) standing on z = 0: resting on the ground with mu = 0.5 ("ground") or on
    frictionless ground ("frictionless"), or its bottom face attached to a fixed body, without contact
    ("clamped")."""
    vertices, tets = box_tet_mesh(size=(0.1, 0.1, 0.1), cells=(2, 2, 2))
    b = softsnake.ModelBuilder()
    if support == "clamped":
        first = b.add_soft_mesh(vertices, tets, 1000.0, 1.0e6, 0.3, position=(0.0, 0.0, 0.05), damping=0.01,
                                collide="none")
        wall = b.add_body((0.0, 0.0, 0.0), kinematic=True)
        for i in np.flatnonzero(np.isclose(vertices[:, 2], vertices[:, 2].min())):
            b.add_attachment(wall, first + int(i))
    else:
        b.add_ground(mu=0.0 if support == "frictionless" else 0.5)
        b.add_soft_mesh(vertices, tets, 1000.0, 1.0e6, 0.3, position=(0.0, 0.0, 0.05), damping=0.01)
    return b.finalize(device)


BEAM_MODULUS = 1.0e5  # [Pa]
BEAM_PRESSURE = 2.0e4  # [Pa]


def pneumatic_beam(youngs_modulus=BEAM_MODULUS, poisson_ratio=0.45):
    """A soft beam (6 x 2 x 2 cm, 3x1x1 cells, 18 tetrahedra) clamped at x = -3 cm by attachments to a
    kinematic body, with pressure-driven distance rows along its top edges (one channel): the snake
    link's physics (corotational elements, actuation rows, attachments) in a model small enough for
    central differences."""
    vertices, tets = box_tet_mesh((0.06, 0.02, 0.02), (3, 1, 1))
    b = softsnake.ModelBuilder()
    start = b.add_soft_mesh(vertices, tets, 1070.0, youngs_modulus, poisson_ratio, damping=0.01)
    clamp = b.add_body((-0.03, 0.0, 0.0), kinematic=True)
    for k in np.flatnonzero(vertices[:, 0] < -0.03 + 1e-6):
        b.add_attachment(clamp, start + int(k))
    channel = b.add_pressure_channel()
    top = np.flatnonzero(vertices[:, 2] > 0.01 - 1e-6)
    for i in top:
        for j in top:
            if np.allclose(vertices[j] - vertices[i], (0.02, 0.0, 0.0)):
                b.add_distance(start + int(i), start + int(j), pressure_channel=channel, youngs_modulus=youngs_modulus,
                               compliance=0.02 / (youngs_modulus * 1e-5), damping=0.01)
    return b.finalize()
