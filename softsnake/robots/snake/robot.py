"""The four-link soft snake built into a ModelBuilder (seed 001, sections III and V).

A snake is ``link_count`` soft links joined by ``link_count + 1`` rigid modules (cap plates and
electronics, one box-shaped body each). Every link end is clamped by a module: the particles of
the link's end cross-sections are attached to it (particle attachments, eq. 6). Every module
carries two passive wheels on hinges; a wheel rolls freely forward and grips sideways with the
Coulomb coefficient ``config.friction``, which gives the snake its anisotropic friction.

Snake frame: the head points along +x (the ``heading``), z is up, modules are numbered 0 (head)
to ``link_count`` (tail) and link i joins module i (its front cap) to module i + 1 (its rear
cap). Each link mesh is laid with its own +x axis toward the tail, so its chamber 0 is on the
snake's left and chamber 1 on its right: a positive gait command (chamber 1, right side)
lengthens the right side and bends the link to the left, i.e. positive command, positive
curvature, as in the paper's Fig. 5 ("negative values mean the left chamber is inflated").

Curvature of a link [1/m]: (yaw of its front cap - yaw of its rear cap) / link length, positive
when the link bends to the left (counter-clockwise seen from above).

Only the wheels touch the ground (paper section IV-C4: contact is between the wheels and the
floor); the links and modules ride above it on the wheels.
"""

import math
from dataclasses import dataclass

import numpy as np

from softsnake.spatial import box_inertia, cylinder_inertia, quat_from_axis_angle, quat_multiply, quat_to_matrix

from softsnake.errors import ConfigError

from ..actuation import chamber_targets
from .link_mesh import build_link_mesh

LINK_COLLIDE_DEFAULT = "none"
"""Link particles do not collide: in the paper only the wheels touch the floor, and contact slots
for every surface particle would add a fifth of a link's rows for contacts that never occur."""

ATTACHMENT_COMPLIANCE = 0.0
"""Compliance of the cap clamps [m/N]: the ABS plates hold the silicone rim rigidly."""


@dataclass(frozen=True, eq=False)
class LinkHandle:
    """One soft link in a builder.

    particle_start: index of the link's first particle in the builder [-]
    particle_count: number of particles of the link [-]
    channels: pressure channel indices (chamber 0, chamber 1) [-]
    mesh: the ``LinkMesh`` it was built from (local particle indices)
    length: rest length of the link [m]
    """

    particle_start: int
    particle_count: int
    channels: tuple
    mesh: object
    length: float

    @property
    def particles(self):
        """Slice of the link's particles in the builder."""
        return slice(self.particle_start, self.particle_start + self.particle_count)

    @property
    def surface_triangles(self):
        """Boundary triangles (k, 3) in the link's local particle indices, outward normals."""
        return self.mesh.surface_triangles


@dataclass(frozen=True, eq=False)
class SnakeHandle:
    """One snake in a builder; all indices are the builder's (world-local after ``replicate``).

    config: the ``SnakeConfig`` it was built from
    links: ``LinkHandle`` of every link, head first
    module_bodies: body index of every rigid module, head first [-]
    wheel_bodies: body indices (module_count, 2) of the (left, right) wheel of every module [-]
    particle_range, body_range, channel_range: slices covering everything the snake added
    """

    config: object
    links: tuple
    module_bodies: tuple
    wheel_bodies: np.ndarray
    particle_range: slice
    body_range: slice
    channel_range: slice

    @property
    def link_count(self):
        return len(self.links)

    @property
    def cap_bodies(self):
        """Body indices (link_count, 2) of the (front, rear) cap of every link [-]."""
        modules = np.asarray(self.module_bodies)
        return np.column_stack([modules[:-1], modules[1:]])

    @property
    def link_channels(self):
        """Pressure channels (link_count, 2) of (chamber 0, chamber 1) of every link [-]."""
        return np.asarray([link.channels for link in self.links], dtype=np.int64)

    @property
    def link_lengths(self):
        """Rest length of every link (link_count,) [m]."""
        return np.asarray([link.length for link in self.links])


def chamber_area(link_config, resolution):
    """Cross-section area of one chamber as meshed: the regular polygon of
    ``chamber_ring_points`` corners on a circle of ``chamber_radius`` [m^2].

    link_config: ``LinkConfig``; resolution: a ``ResolutionConfig`` or its name
    """
    if isinstance(resolution, str):
        resolution = link_config.resolution(resolution)
    corners = resolution.chamber_ring_points
    return 0.5 * corners * link_config.chamber_radius**2 * math.sin(2.0 * math.pi / corners)


def _rotate_z(angle):
    return quat_from_axis_angle((0.0, 0.0, 1.0), angle)


LINK_MESH_LENGTH_TOLERANCE = 1e-6
"""How far a given link mesh's extent along its axis may differ from the configured link length [m]."""


def _begin(builder, config, resolution, heading, link_mesh=None):
    """What the snake and the stand builders start from: the ``ResolutionConfig``, its link mesh (``link_mesh``, checked
    against the config's link length, or the one the config describes), the builder's (particle, body, channel)
    counts so far, and the heading as a quaternion and as a rotation matrix."""
    resolution = config.resolution(resolution)
    heading_rotation = _rotate_z(heading)
    starts = (builder.particle_count, builder.body_count, builder.pressure_channel_count)
    if link_mesh is None:
        link_mesh = build_link_mesh(config.link, resolution)
    else:
        x = np.asarray(link_mesh.vertices)[:, 0]
        if abs(x.min()) > LINK_MESH_LENGTH_TOLERANCE or abs(x.max() - config.link.length) > LINK_MESH_LENGTH_TOLERANCE:
            raise ConfigError(f"the link mesh spans x = {x.min():.6g} .. {x.max():.6g} m, the configured link "
                              f"0 .. {config.link.length:.6g} m (the caps sit at its two ends)")
    return resolution, link_mesh, starts, heading_rotation, quat_to_matrix(heading_rotation)


def _ranges(builder, starts):
    """``SnakeHandle`` ranges of everything added to ``builder`` since ``_begin`` counted ``starts``."""
    particle_start, body_start, channel_start = starts
    return {"particle_range": slice(particle_start, builder.particle_count),
            "body_range": slice(body_start, builder.body_count),
            "channel_range": slice(channel_start, builder.pressure_channel_count)}


def _clamp(builder, link, caps):
    """Attach the particles of the link's first and last cross-sections to its (front, rear) cap bodies."""
    for cap_module, end in zip(caps, link.mesh.end_particles):
        for particle in end:
            builder.add_attachment(cap_module, link.particle_start + int(particle), compliance=ATTACHMENT_COMPLIANCE)


def add_soft_link(builder, config, resolution, *, position, rotation, mesh=None, collide=LINK_COLLIDE_DEFAULT):
    """Add one soft link: Ecoflex tetrahedra, stiff constraint sets and two pressure channels.

    builder: the ModelBuilder (one world)
    config: the ``SnakeConfig`` (material, link geometry, stiff compliance, damping)
    resolution: mesh resolution name or ``ResolutionConfig``
    position: where the mesh origin (the centre of the link's x = 0 end) goes [m]
    rotation: orientation of the mesh frame, quaternion (x, y, z, w)
    mesh: a prebuilt ``LinkMesh`` of this config and resolution (saves TetGen runs), or None
    collide: "none", "surface" or "all" (see ``ModelBuilder.add_soft_mesh``)

    The tetrahedra get ``material.young_modulus`` times the resolution's ``element_modulus_factor``
    (a coarse mesh's calibration, see ``ResolutionConfig``). The chamber-limit, perimeter and
    inextensible sets become distance rows with
    ``config.stiff_compliance``; chamber c's actuation set becomes rows r (1 + p / Y) driven by
    the pressure of channel c (paper eqs. 3-4), inactive while that chamber is not pressurised.
    Actuation rows are not stiff: each is a column of Ecoflex with its share a = A / n of the
    chamber cross-section A (n rows per chamber between two sections), compliance r / (Y a).
    Held at its rest length r such a row pushes with (Y a / r) (r p / Y) = p a, so a chamber's
    rows push its end caps apart with p A, the pressure force on the sealed chamber, and a free
    chamber column stretches by r p / Y, eq. 4. (Stiff actuation rows would impose eq. 4's
    length whatever the load and bend a link far beyond its elastic range.)
    Returns a ``LinkHandle``.
    """
    if isinstance(resolution, str):
        resolution = config.resolution(resolution)
    if mesh is None:
        mesh = build_link_mesh(config.link, resolution)
    material = config.material
    start = builder.add_soft_mesh(
        mesh.vertices, mesh.tets, material.density, material.young_modulus * resolution.element_modulus_factor,
        material.tet_poisson_ratio,
        position=position, rotation=rotation, damping=config.damping_time, collide=collide)
    channels = (builder.add_pressure_channel(), builder.add_pressure_channel())
    stiff = {"compliance": config.stiff_compliance, "damping": config.damping_time}
    for constraint_set in (mesh.chamber_limit, mesh.perimeter, mesh.inextensible):
        for (i, j), rest in zip(constraint_set.pairs, constraint_set.rest_lengths):
            builder.add_distance(start + int(i), start + int(j), float(rest), **stiff)
    # Each chamber's rows between two sections share the chamber's cross-section equally.
    rows_per_gap = len(mesh.actuation[0]) // (mesh.section_count - 1)
    row_area = chamber_area(config.link, resolution) / rows_per_gap
    for channel, constraint_set in zip(channels, mesh.actuation):
        for (i, j), rest in zip(constraint_set.pairs, constraint_set.rest_lengths):
            builder.add_distance(start + int(i), start + int(j), float(rest), pressure_channel=channel,
                                 youngs_modulus=material.young_modulus,
                                 compliance=float(rest) / (material.young_modulus * row_area),
                                 damping=config.damping_time)
    return LinkHandle(particle_start=start, particle_count=len(mesh.vertices), channels=channels, mesh=mesh,
                      length=float(config.link.length))


def add_module(builder, config, *, position, rotation):
    """Add one rigid module (box body) with its two wheels on hinges.

    position: centre of mass of the module [m]; rotation: its orientation (x, y, z, w), x along
    the snake toward the head.
    Returns (module body, (left wheel body, right wheel body)).
    """
    cap, wheel = config.cap, config.wheel
    half = np.array([cap.length, cap.width, cap.height]) * 0.5
    module = builder.add_body(position, rotation, mass=cap.mass, inertia=box_inertia(cap.mass, half))
    R = quat_to_matrix(rotation)
    axle = R @ np.array([0.0, 1.0, 0.0])
    # The wheel's cylinder axis (shape local z) lies along the module's y axis: the axle.
    wheel_rotation = quat_multiply(rotation, quat_from_axis_angle((1.0, 0.0, 0.0), -0.5 * math.pi))
    half_width = 0.5 * wheel.width
    wheels = []
    mount_x, mount_y, mount_z = wheel.mount_offset
    for side in (1.0, -1.0):
        centre = np.asarray(position) + R @ np.array([mount_x, side * mount_y, mount_z])
        body = builder.add_body(centre, wheel_rotation, mass=wheel.mass,
                                inertia=cylinder_inertia(wheel.mass, wheel.radius, half_width))
        builder.add_shape_cylinder(body, wheel.radius, half_width, mu=config.friction)
        builder.add_hinge(module, body, anchor=centre, axis=axle)
        wheels.append(body)
    return module, tuple(wheels)


def snake_length(config):
    """Length of the whole snake, module ends included [m]."""
    return config.module_count * config.cap.length + config.link_count * config.link.length


def module_height(config):
    """Height of the module centres (and link axes) above the ground when standing on the wheels [m]."""
    return config.wheel.radius - config.wheel.mount_offset[2]


def add_snake(builder, config, resolution=None, *, position=(0.0, 0.0, 0.0), heading=0.0,
              link_collide=LINK_COLLIDE_DEFAULT, link_mesh=None):
    """Add a whole snake standing on its wheels, straight, at rest.

    builder: the ModelBuilder (one world)
    config: the ``SnakeConfig``
    resolution: link mesh resolution name (None: the one chosen when the config was loaded); its
        ``element_modulus_factor`` scales the elements' modulus, of a given ``link_mesh`` too
    position: the ground point below the middle of the snake [m] (its z is the ground height)
    heading: direction of the head from the middle, angle from +x about +z [rad]
    link_collide: contact of the link particles, see ``add_soft_link``
    link_mesh: a ``LinkMesh`` for every link (your own, read by ``link_mesh.load_link_mesh``), spanning x = 0 .. the
        config's link length; None: the mesh the config and resolution describe (TetGen)
    Returns a ``SnakeHandle``.
    """
    position = np.asarray(position, dtype=np.float64)
    if position.shape != (3,) or not np.all(np.isfinite(position)):
        raise ConfigError(f"snake position must be 3 finite numbers [m], got {position.tolist()}")
    if not math.isfinite(heading):
        raise ConfigError(f"snake heading must be finite [rad], got {heading}")
    resolution, mesh, starts, heading_rotation, R = _begin(builder, config, resolution, heading, link_mesh)
    height = module_height(config)
    pitch = config.cap.length + config.link.length
    front_x = 0.5 * snake_length(config) - 0.5 * config.cap.length
    module_x = front_x - pitch * np.arange(config.module_count)

    modules, wheels = [], []
    for x in module_x:
        module, pair = add_module(builder, config, position=position + R @ np.array([x, 0.0, height]),
                                  rotation=heading_rotation)
        modules.append(module)
        wheels.append(pair)

    # Link meshes point toward the tail: rotated half a turn about z from the snake frame.
    link_rotation = quat_multiply(heading_rotation, _rotate_z(math.pi))
    links = []
    for i in range(config.link_count):
        origin = position + R @ np.array([module_x[i] - 0.5 * config.cap.length, 0.0, height])
        link = add_soft_link(builder, config, resolution, position=origin, rotation=link_rotation, mesh=mesh,
                             collide=link_collide)
        _clamp(builder, link, (modules[i], modules[i + 1]))
        links.append(link)

    return SnakeHandle(config=config, links=tuple(links), module_bodies=tuple(modules),
                       wheel_bodies=np.asarray(wheels, dtype=np.int64), **_ranges(builder, starts))


def chamber_pressures(model, link_channels, differential, dtype=np.float32):
    """The pressure of every channel of ``model`` [Pa] (float32, for ``Control.pressure``) that
    drives the active chamber of every link with its differential pressure and leaves the other
    chamber at 0 (``softsnake.robots.actuation.chamber_targets``).

    model: the finalized Model, one snake or stand per world
    link_channels: (links, 2) channels of (chamber 0, chamber 1) of each link within one world
        (``SnakeHandle.link_channels``)
    differential: (worlds, links) signed differential pressure [Pa], > 0 drives chamber 1
    dtype: of the result (float64 for a derivative by differences, ``gait_gradient``)
    """
    channels = model.pressure_channel_world_start[:-1, None, None] + np.asarray(link_channels)[None]
    pressure = np.zeros(max(model.pressure_channel_count, 1), dtype=dtype)
    pressure[channels.ravel()] = chamber_targets(differential).ravel()
    return pressure


def table_counts(builder):
    """Model size in the categories of the paper's Table I, for everything in ``builder``.

    Returns a dict: rigid_bodies, particles, distance_constraints, tetrahedra, rigid_joints
    (hinges), attachments [-].
    """
    return {
        "rigid_bodies": builder.body_count,
        "particles": builder.particle_count,
        "distance_constraints": builder.distance_count,
        "tetrahedra": builder.tet_count,
        "rigid_joints": builder.hinge_count,
        "attachments": builder.attachment_count,
    }


TABLE_1 = {
    "rigid_bodies": 15,
    "particles": 1504,
    "distance_constraints": 1460,
    "tetrahedra": 4536,
    "rigid_joints": 10,
    "attachments": 217,
}
"""The paper's Table I: size of one simulated snake."""


def body_yaw(body_q):
    """Yaw of bodies from their poses (n, 7) (position, quaternion x, y, z, w): the angle of each
    body's x axis projected on the ground plane, from +x about +z [rad]."""
    q = np.asarray(body_q, dtype=np.float64)[..., 3:7]
    x, y, z, w = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    # First column of the rotation matrix: the body x axis in world coordinates.
    axis_x = 1.0 - 2.0 * (y * y + z * z)
    axis_y = 2.0 * (x * y + z * w)
    return np.arctan2(axis_y, axis_x)


def link_curvature(body_q, cap_bodies, link_lengths):
    """Curvature of links from the yaw difference of their caps [1/m].

    body_q: body poses (..., body_count, 7)
    cap_bodies: (link_count, 2) body indices of (front, rear) caps
    link_lengths: (link_count,) rest lengths [m]
    Returns (..., link_count), positive when a link bends to the left (counter-clockwise).
    """
    yaw = body_yaw(body_q)
    difference = yaw[..., cap_bodies[:, 0]] - yaw[..., cap_bodies[:, 1]]
    wrapped = (difference + math.pi) % (2.0 * math.pi) - math.pi
    return wrapped / np.asarray(link_lengths)


def add_link_stand(builder, config, resolution=None, *, position=(0.0, 0.0, 0.0), heading=0.0,
                   fixed="rear", link_mesh=None):
    """Add one link between two caps as on a test stand: one cap held fixed, the other free.

    position: the centre of the link [m]; heading: direction of the front cap [rad]
    fixed: which cap is held, "rear" or "front" (the other hangs free in the air, no ground)
    link_mesh: the link's ``LinkMesh`` (see ``add_snake``); None: the config's
    Returns a ``SnakeHandle`` with one link, two module bodies (front, rear) and no wheels.
    """
    if fixed not in ("rear", "front"):
        raise ConfigError(f"fixed cap must be 'rear' or 'front', got {fixed!r}")
    resolution, mesh, starts, heading_rotation, R = _begin(builder, config, resolution, heading, link_mesh)
    position = np.asarray(position, dtype=np.float64)
    cap = config.cap
    half = np.array([cap.length, cap.width, cap.height]) * 0.5
    offset = 0.5 * (config.link.length + cap.length)
    modules = []
    for name, x in (("front", offset), ("rear", -offset)):
        modules.append(builder.add_body(position + R @ np.array([x, 0.0, 0.0]), heading_rotation, mass=cap.mass,
                                        inertia=box_inertia(cap.mass, half), kinematic=(name == fixed)))
    origin = position + R @ np.array([0.5 * config.link.length, 0.0, 0.0])
    link = add_soft_link(builder, config, resolution, position=origin,
                         rotation=quat_multiply(heading_rotation, _rotate_z(math.pi)), mesh=mesh)
    _clamp(builder, link, modules)
    return SnakeHandle(config=config, links=(link,), module_bodies=tuple(modules),
                       wheel_bodies=np.zeros((0, 2), dtype=np.int64), **_ranges(builder, starts))
