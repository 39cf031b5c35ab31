"""ModelBuilder: collect particles, bodies, shapes, constraints and obstacles, then finalize.

Every quantity is SI: lengths [m], masses [kg], densities [kg/m^3], moduli and pressures [Pa],
angles [rad], times [s]. Quaternions are (x, y, z, w).

Worlds: items added directly to a builder belong to world 0. ``add_world(builder)`` appends
another builder's items as a new, independent world and ``replicate(builder, count, spacing)``
appends many copies; obstacles added directly to the top-level builder are shared by all
worlds, obstacles of an added builder belong to its world only.
"""

import math

import numpy as np

from .errors import ModelError
from .spatial import box_inertia, cylinder_inertia, perpendicular_pair, quat_between, quat_inverse, quat_multiply, quat_to_matrix

SHAPE_SPHERE = 0
SHAPE_BOX = 1
SHAPE_CAPSULE = 2
SHAPE_CYLINDER = 3

OBSTACLE_PLANE = 0
OBSTACLE_BOX = 1
OBSTACLE_CYLINDER = 2


def _vec(value, n, what):
    a = np.asarray(value, dtype=np.float64)
    if a.shape != (n,):
        raise ModelError(f"{what} must have {n} components, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ModelError(f"{what} contains NaN or Inf: {a.tolist()}")
    return a


def _quat(value, what):
    q = _vec(value, 4, what)
    norm = np.linalg.norm(q)
    if norm < 1e-12:
        raise ModelError(f"{what} is a zero quaternion")
    return q / norm


def _positive(value, what):
    v = float(value)
    if not math.isfinite(v) or v <= 0.0:
        raise ModelError(f"{what} must be positive and finite, got {value}")
    return v


def _unit_axis(axis, what):
    """A joint axis as a unit 3-vector; a zero axis is an error naming the joint."""
    axis = _vec(axis, 3, f"{what} axis")
    norm = np.linalg.norm(axis)
    if norm < 1e-12:
        raise ModelError(f"{what} axis is zero")
    return axis / norm


def _non_negative(value, what):
    v = float(value)
    if not math.isfinite(v) or v < 0.0:
        raise ModelError(f"{what} must be non-negative and finite, got {value}")
    return v


class ModelBuilder:
    """Collects everything to simulate; ``finalize(device)`` turns it into a :class:`softsnake.Model`.

    Args:
        gravity: gravitational acceleration [m/s^2], default (0, 0, -9.81) (z up).
        planar: if True, the model moves in the plane z = const (vine robots: seeds 000, 003, 004);
            velocities along z and rotations about x and y are removed at every prediction, joints
            and contacts get no rows for out-of-plane motion, and bodies must turn about z only
            (z a principal axis of inertia; hinge and angular spring axes along z, prismatic axes
            in the plane), which ``finalize`` checks.
    """

    def __init__(self, gravity=(0.0, 0.0, -9.81), planar=False):
        self.gravity = _vec(gravity, 3, "gravity")
        self.planar = bool(planar)
        self._has_worlds = False
        self.world_count = 0
        # Particles.
        self.particle_q, self.particle_qd, self.particle_mass = [], [], []
        self.particle_radius, self.particle_collide, self.particle_world = [], [], []
        # Bodies and their collision shapes.
        self.body_q, self.body_qd, self.body_mass, self.body_inertia = [], [], [], []
        self.body_kinematic, self.body_world = [], []
        self.shape_body, self.shape_type, self.shape_pos, self.shape_rot = [], [], [], []
        self.shape_size, self.shape_mu = [], []
        # Constraints.
        self.distance_particles, self.distance_rest, self.distance_compliance = [], [], []
        self.distance_damping, self.distance_channel, self.distance_youngs, self.distance_world = [], [], [], []
        self.tet_particles, self.tet_inv_rest, self.tet_volume = [], [], []
        self.tet_youngs, self.tet_poisson, self.tet_damping, self.tet_world = [], [], [], []
        self.attachment_body, self.attachment_particle, self.attachment_local = [], [], []
        self.attachment_compliance, self.attachment_damping, self.attachment_world = [], [], []
        self.hinge_body_a, self.hinge_body_b, self.hinge_anchor_a, self.hinge_anchor_b = [], [], [], []
        self.hinge_axis_a, self.hinge_normal_b1, self.hinge_normal_b2 = [], [], []
        self.hinge_compliance, self.hinge_world = [], []
        self.spring_body_a, self.spring_body_b, self.spring_axis_a, self.spring_rest_rotation = [], [], [], []
        self.spring_stiffness, self.spring_damping, self.spring_target, self.spring_world = [], [], [], []
        self.spring_curves = []
        self.prismatic_body_a, self.prismatic_body_b, self.prismatic_anchor_a, self.prismatic_anchor_b = [], [], [], []
        self.prismatic_axis_a, self.prismatic_normal_a1, self.prismatic_normal_a2 = [], [], []
        self.prismatic_rest_rotation, self.prismatic_compliance, self.prismatic_driven = [], [], []
        self.prismatic_drive_mobility, self.prismatic_rate, self.prismatic_world = [], [], []
        # Pressure channels and static obstacles.
        self.pressure_channel_world = []
        self.obstacle_kind, self.obstacle_pos, self.obstacle_rot, self.obstacle_size = [], [], [], []
        self.obstacle_mu, self.obstacle_world = [], []

    # ------------------------------------------------------------------ counts
    @property
    def particle_count(self):
        return len(self.particle_q)

    @property
    def body_count(self):
        return len(self.body_q)

    @property
    def tet_count(self):
        return len(self.tet_particles)

    @property
    def distance_count(self):
        return len(self.distance_particles)

    @property
    def attachment_count(self):
        return len(self.attachment_body)

    @property
    def hinge_count(self):
        return len(self.hinge_body_a)

    @property
    def spring_count(self):
        return len(self.spring_body_a)

    @property
    def prismatic_count(self):
        return len(self.prismatic_body_a)

    @property
    def shape_count(self):
        return len(self.shape_body)

    @property
    def obstacle_count(self):
        return len(self.obstacle_kind)

    @property
    def pressure_channel_count(self):
        return len(self.pressure_channel_world)

    def _direct_world(self):
        if self._has_worlds:
            raise ModelError(
                "this builder already holds worlds added with add_world/replicate; "
                "add particles, bodies and constraints to a world builder instead"
            )
        self.world_count = max(self.world_count, 1)
        return 0

    def _check_particle(self, index, what):
        if not (0 <= int(index) < self.particle_count):
            raise ModelError(f"{what}: particle index {index} out of range [0, {self.particle_count})")
        return int(index)

    def _check_body(self, index, what, allow_world=False):
        if allow_world and int(index) == -1:
            return -1
        if not (0 <= int(index) < self.body_count):
            raise ModelError(f"{what}: body index {index} out of range [0, {self.body_count})")
        return int(index)

    def _check_joint_bodies(self, body_a, body_b, what):
        """(body_a, body_b) of a joint: body_a may be -1 (the world), and the two must differ."""
        body_a = self._check_body(body_a, what, allow_world=True)
        body_b = self._check_body(body_b, what)
        if body_a == body_b:
            raise ModelError(f"{what} joins body {body_b} to itself")
        return body_a, body_b

    # ------------------------------------------------------------------ particles
    def add_particle(self, position, velocity=(0.0, 0.0, 0.0), mass=1.0, *, radius=0.0, collide=True, kinematic=False):
        """Add a point mass and return its index.

        Args:
            position: initial position [m]
            velocity: initial velocity [m/s]
            mass: mass [kg], positive (ignored for kinematic particles)
            radius: contact radius [m]
            collide: whether the particle collides with obstacles
            kinematic: if True the particle is not moved by forces (infinite mass)
        """
        what = f"particle {self.particle_count}"
        world = self._direct_world()
        self.particle_q.append(_vec(position, 3, f"{what} position"))
        self.particle_qd.append(_vec(velocity, 3, f"{what} velocity"))
        self.particle_mass.append(0.0 if kinematic else _positive(mass, f"{what} mass"))
        self.particle_radius.append(_non_negative(radius, f"{what} radius"))
        self.particle_collide.append(bool(collide))
        self.particle_world.append(world)
        return self.particle_count - 1

    def add_soft_mesh(
        self,
        vertices,
        tets,
        density,
        youngs_modulus,
        poisson_ratio,
        *,
        position=(0.0, 0.0, 0.0),
        rotation=(0.0, 0.0, 0.0, 1.0),
        velocity=(0.0, 0.0, 0.0),
        damping=0.0,
        particle_radius=0.0,
        collide="surface",
    ):
        """Add a tetrahedral mesh of corotational linear elements (seed 001, eq. 5).

        Each tetrahedron adds six compliant strain rows with compliance S / V (S the isotropic
        compliance, V the rest volume); particle masses are lumped (a quarter of every adjacent
        element's mass).

        Args:
            vertices: rest positions (n, 3) [m] in the mesh frame
            tets: vertex indices (m, 4), positively oriented (det[x1-x0, x2-x0, x3-x0] > 0)
            density: mass density [kg/m^3]
            youngs_modulus: Young's modulus Y [Pa]
            poisson_ratio: nu in [0, 0.5)
            position, rotation: placement of the mesh frame [m], quaternion (x, y, z, w)
            velocity: initial velocity of every vertex [m/s]
            damping: stiffness-proportional damping time beta [s] (damping force = beta K v)
            particle_radius: contact radius of the vertices [m]
            collide: "surface" (boundary vertices collide), "all" or "none"

        Returns:
            the index of the mesh's first particle (its vertices are consecutive).
        """
        verts = np.asarray(vertices, dtype=np.float64)
        t = np.asarray(tets)
        if verts.ndim != 2 or verts.shape[1] != 3 or len(verts) == 0:
            raise ModelError(f"soft mesh vertices must have shape (n, 3), got {verts.shape}")
        if not np.all(np.isfinite(verts)):
            raise ModelError("soft mesh vertices contain NaN or Inf")
        if t.ndim != 2 or t.shape[1] != 4 or len(t) == 0:
            raise ModelError(f"soft mesh tets must have shape (m, 4), got {t.shape}")
        if not np.issubdtype(t.dtype, np.integer):
            raise ModelError(f"soft mesh tets must be integer indices, got dtype {t.dtype}")
        bad = np.argwhere((t < 0) | (t >= len(verts)))
        if len(bad):
            k = bad[0][0]
            raise ModelError(f"soft mesh tet {k} has vertex index {t[k].tolist()} out of range [0, {len(verts)})")
        density = _positive(density, "soft mesh density")
        youngs_modulus = _positive(youngs_modulus, "soft mesh youngs_modulus")
        nu = float(poisson_ratio)
        if not (0.0 <= nu < 0.5):
            raise ModelError(f"soft mesh poisson_ratio must lie in [0, 0.5), got {poisson_ratio}")
        damping = _non_negative(damping, "soft mesh damping")
        if collide not in ("surface", "all", "none"):
            raise ModelError(f"soft mesh collide must be 'surface', 'all' or 'none', got {collide!r}")

        Dm = np.stack([verts[t[:, 1]] - verts[t[:, 0]], verts[t[:, 2]] - verts[t[:, 0]], verts[t[:, 3]] - verts[t[:, 0]]], axis=2)
        det = np.linalg.det(Dm)
        scale = np.max(np.ptp(verts, axis=0)) ** 3
        tiny = np.argwhere(np.abs(det) <= 1e-12 * scale)
        if len(tiny):
            k = tiny[0][0]
            raise ModelError(f"soft mesh tet {k} {t[k].tolist()} has zero volume")
        inverted = np.argwhere(det < 0)
        if len(inverted):
            k = inverted[0][0]
            raise ModelError(f"soft mesh tet {k} {t[k].tolist()} is inverted (negative volume); reorder its vertices")
        volume = det / 6.0

        mass = np.zeros(len(verts))
        np.add.at(mass, t.ravel(), np.repeat(volume * density / 4.0, 4))
        orphan = np.argwhere(mass == 0)
        if len(orphan):
            raise ModelError(f"soft mesh vertex {orphan[0][0]} belongs to no tetrahedron")

        if collide == "surface":
            faces = np.sort(np.concatenate([t[:, [0, 1, 2]], t[:, [0, 1, 3]], t[:, [0, 2, 3]], t[:, [1, 2, 3]]]), axis=1)
            uniq, counts = np.unique(faces, axis=0, return_counts=True)
            on_surface = np.zeros(len(verts), dtype=bool)
            on_surface[uniq[counts == 1].ravel()] = True
        else:
            on_surface = np.full(len(verts), collide == "all")

        R = quat_to_matrix(_quat(rotation, "soft mesh rotation"))
        world_verts = verts @ R.T + _vec(position, 3, "soft mesh position")
        start = self.particle_count
        for k in range(len(verts)):
            self.add_particle(world_verts[k], velocity, mass[k], radius=particle_radius, collide=bool(on_surface[k]))
        inv_rest = np.linalg.inv(Dm)
        world = self._direct_world()
        for k in range(len(t)):
            self.tet_particles.append(t[k].astype(np.int64) + start)
            self.tet_inv_rest.append(inv_rest[k])
            self.tet_volume.append(volume[k])
            self.tet_youngs.append(youngs_modulus)
            self.tet_poisson.append(nu)
            self.tet_damping.append(damping)
            self.tet_world.append(world)
        return start

    # ------------------------------------------------------------------ bodies
    def add_body(
        self,
        position=(0.0, 0.0, 0.0),
        rotation=(0.0, 0.0, 0.0, 1.0),
        *,
        mass=0.0,
        inertia=None,
        velocity=(0.0, 0.0, 0.0),
        angular_velocity=(0.0, 0.0, 0.0),
        kinematic=False,
    ):
        """Add a rigid body whose frame origin is its centre of mass; return its index.

        Mass and inertia may be given here or accumulated from shapes with a density.

        Args:
            position: centre of mass [m]
            rotation: orientation quaternion (x, y, z, w)
            mass: mass [kg]
            inertia: 3x3 inertia tensor about the centre of mass in the body frame [kg m^2]
            velocity: linear velocity [m/s]; angular_velocity: world frame [rad/s]
            kinematic: if True the body is not moved by forces
        """
        what = f"body {self.body_count}"
        world = self._direct_world()
        self.body_q.append((_vec(position, 3, f"{what} position"), _quat(rotation, f"{what} rotation")))
        self.body_qd.append((_vec(velocity, 3, f"{what} velocity"), _vec(angular_velocity, 3, f"{what} angular_velocity")))
        self.body_mass.append(_non_negative(mass, f"{what} mass"))
        I = np.zeros((3, 3)) if inertia is None else np.asarray(inertia, dtype=np.float64).reshape(3, 3)
        if not np.all(np.isfinite(I)):
            raise ModelError(f"{what} inertia contains NaN or Inf")
        self.body_inertia.append(I)
        self.body_kinematic.append(bool(kinematic))
        self.body_world.append(world)
        return self.body_count - 1

    def _add_shape(self, body, kind, position, rotation, size, density, mu, mass, inertia_local):
        body = self._check_body(body, f"shape {self.shape_count}")
        pos = _vec(position, 3, f"shape {self.shape_count} position")
        rot = _quat(rotation, f"shape {self.shape_count} rotation")
        density = _non_negative(density, f"shape {self.shape_count} density")
        if mu is not None:
            mu = _non_negative(mu, f"shape {self.shape_count} mu")
        if density > 0.0:
            m = mass * density
            R = quat_to_matrix(rot)
            I = R @ (inertia_local * density) @ R.T + m * (np.dot(pos, pos) * np.eye(3) - np.outer(pos, pos))
            self.body_mass[body] += m
            self.body_inertia[body] = self.body_inertia[body] + I
        self.shape_body.append(body)
        self.shape_type.append(kind)
        self.shape_pos.append(pos)
        self.shape_rot.append(rot)
        self.shape_size.append(np.asarray(size, dtype=np.float64))
        self.shape_mu.append(math.inf if mu is None else mu)
        return self.shape_count - 1

    def add_shape_sphere(self, body, radius, *, position=(0, 0, 0), density=0.0, mu=None):
        """Collision sphere of ``radius`` [m] on ``body`` at ``position`` [m] in the body frame.

        A ``density`` [kg/m^3] adds the shape's mass and inertia to the body. ``mu`` (default:
        the obstacle's) is the friction coefficient; a contact uses the smaller of shape's and obstacle's.
        """
        r = _positive(radius, "sphere radius")
        vol = 4.0 / 3.0 * math.pi * r**3
        return self._add_shape(body, SHAPE_SPHERE, position, (0, 0, 0, 1), (r, 0, 0), density, mu, vol, np.eye(3) * 0.4 * vol * r * r)

    def add_shape_box(self, body, half_extents, *, position=(0, 0, 0), rotation=(0, 0, 0, 1), density=0.0, mu=None):
        """Collision box with ``half_extents`` [m] (its eight corners collide). See add_shape_sphere."""
        he = _vec(half_extents, 3, "box half_extents")
        if np.any(he <= 0):
            raise ModelError(f"box half_extents must be positive, got {he.tolist()}")
        vol = 8.0 * np.prod(he)
        return self._add_shape(body, SHAPE_BOX, position, rotation, he, density, mu, vol, box_inertia(vol, he))

    def add_shape_capsule(self, body, radius, half_height, *, position=(0, 0, 0), rotation=(0, 0, 0, 1), density=0.0, mu=None):
        """Capsule along the shape's local z: two end spheres of ``radius`` at +-``half_height`` [m]."""
        r = _positive(radius, "capsule radius")
        hh = _positive(half_height, "capsule half_height")
        vol = math.pi * r * r * 2.0 * hh
        return self._add_shape(body, SHAPE_CAPSULE, position, rotation, (r, hh, 0), density, mu, vol, cylinder_inertia(vol, r, hh))

    def add_shape_cylinder(self, body, radius, half_height, *, position=(0, 0, 0), rotation=(0, 0, 0, 1), density=0.0, mu=None):
        """Cylinder along the shape's local z: the lowest rim point of each cap collides, or for a
        wheel (2 half_height <= radius) the lowest rim point of its mid-plane."""
        r = _positive(radius, "cylinder radius")
        hh = _positive(half_height, "cylinder half_height")
        vol = math.pi * r * r * 2.0 * hh
        return self._add_shape(body, SHAPE_CYLINDER, position, rotation, (r, hh, 0), density, mu, vol, cylinder_inertia(vol, r, hh))

    # ------------------------------------------------------------------ constraints
    def add_pressure_channel(self):
        """A chamber pressure input (``Control.pressure[channel]`` [Pa]); returns the channel index."""
        self.pressure_channel_world.append(self._direct_world())
        return self.pressure_channel_count - 1

    def add_distance(self, i, j, rest_length=None, *, compliance=0.0, damping=0.0, pressure_channel=-1, youngs_modulus=None):
        """Distance row c = |x_i - x_j| - r s between two particles; returns its index.

        Args:
            rest_length: r [m]; default: the current distance
            compliance: inverse stiffness [m/N] (0: rigid)
            damping: stiffness-proportional damping time [s]
            pressure_channel: for actuation rows, the channel whose pressure p sets
                s = 1 + p / Y (seed 001, eq. 4); the row is inactive while p <= 0
            youngs_modulus: Y [Pa] of the actuated material (required with a pressure channel)
        """
        what = f"distance {self.distance_count}"
        i = self._check_particle(i, what)
        j = self._check_particle(j, what)
        if i == j:
            raise ModelError(f"{what} connects particle {i} to itself")
        if rest_length is None:
            rest_length = float(np.linalg.norm(self.particle_q[i] - self.particle_q[j]))
        rest_length = _positive(rest_length, f"{what} rest_length")
        channel = int(pressure_channel)
        if channel >= 0:
            if channel >= self.pressure_channel_count:
                raise ModelError(f"{what}: pressure channel {channel} out of range [0, {self.pressure_channel_count})")
            if youngs_modulus is None:
                raise ModelError(f"{what}: an actuation row needs youngs_modulus")
            youngs_modulus = _positive(youngs_modulus, f"{what} youngs_modulus")
        self.distance_particles.append((i, j))
        self.distance_rest.append(rest_length)
        self.distance_compliance.append(_non_negative(compliance, f"{what} compliance"))
        self.distance_damping.append(_non_negative(damping, f"{what} damping"))
        self.distance_channel.append(max(channel, -1))
        self.distance_youngs.append(youngs_modulus if channel >= 0 else 1.0)
        self.distance_world.append(self._direct_world())
        return self.distance_count - 1

    def _body_pose(self, body):
        if body < 0:
            return np.zeros(3), np.array([0.0, 0.0, 0.0, 1.0])
        return self.body_q[body]

    def add_attachment(self, body, particle, *, local_position=None, compliance=0.0, damping=0.0):
        """Attach a particle to a point of a body (seed 001, eq. 6); three rows.

        Args:
            local_position: attachment point in the body frame [m]; default: the particle's current position
            compliance: [m/N]; damping: [s]
        """
        what = f"attachment {self.attachment_count}"
        body = self._check_body(body, what)
        particle = self._check_particle(particle, what)
        p, q = self._body_pose(body)
        if local_position is None:
            local_position = quat_to_matrix(q).T @ (self.particle_q[particle] - p)
        self.attachment_body.append(body)
        self.attachment_particle.append(particle)
        self.attachment_local.append(_vec(local_position, 3, f"{what} local_position"))
        self.attachment_compliance.append(_non_negative(compliance, f"{what} compliance"))
        self.attachment_damping.append(_non_negative(damping, f"{what} damping"))
        self.attachment_world.append(self._direct_world())
        return self.attachment_count - 1

    def add_hinge(self, body_a, body_b, anchor, axis, *, compliance=0.0):
        """Hinge (revolute) joint between body_a (-1: the static world) and body_b; five rows (planar model: two,
        and the axis must be the plane normal).

        Args:
            anchor: joint point in world coordinates at the current poses [m]
            axis: hinge axis in world coordinates at the current poses
            compliance: [m/N] for all its rows (0: rigid)
        """
        what = f"hinge {self.hinge_count}"
        body_a, body_b = self._check_joint_bodies(body_a, body_b, what)
        anchor = _vec(anchor, 3, f"{what} anchor")
        axis = _unit_axis(axis, what)
        pa, qa = self._body_pose(body_a)
        pb, qb = self._body_pose(body_b)
        Ra, Rb = quat_to_matrix(qa), quat_to_matrix(qb)
        e1, e2 = perpendicular_pair(Rb.T @ axis)
        self.hinge_body_a.append(body_a)
        self.hinge_body_b.append(body_b)
        self.hinge_anchor_a.append(Ra.T @ (anchor - pa))
        self.hinge_anchor_b.append(Rb.T @ (anchor - pb))
        self.hinge_axis_a.append(Ra.T @ axis)
        self.hinge_normal_b1.append(e1)
        self.hinge_normal_b2.append(e2)
        self.hinge_compliance.append(_non_negative(compliance, f"{what} compliance"))
        self.hinge_world.append(self._direct_world())
        return self.hinge_count - 1

    def add_angular_spring(self, body_a, body_b, axis, *, stiffness=None, damping=0.0, target=0.0, moment_curve=None):
        """Torsional spring-damper about ``axis`` between body_a (-1: world) and body_b; one row.

        The angle is measured from the current relative orientation. Either a linear
        ``stiffness`` K [N m/rad], or a ``moment_curve`` (angles [rad], moments [N m]): sorted
        samples of a nonlinear restoring moment M(theta), interpolated linearly. ``damping`` C
        [N m s/rad]; ``target`` [rad] the initial rest angle (``Control.joint_target``).
        """
        what = f"angular spring {self.spring_count}"
        body_a = self._check_body(body_a, what, allow_world=True)
        body_b = self._check_body(body_b, what)
        axis = _unit_axis(axis, what)
        curve = None
        if moment_curve is not None:
            angles, moments = (np.asarray(c, dtype=np.float64) for c in moment_curve)
            if angles.ndim != 1 or angles.shape != moments.shape or len(angles) < 2:
                raise ModelError(f"{what} moment_curve needs two equal-length 1-D arrays of at least 2 samples")
            if not (np.all(np.isfinite(angles)) and np.all(np.isfinite(moments))):
                raise ModelError(f"{what} moment_curve contains NaN or Inf")
            slopes = np.diff(moments) / np.diff(angles)
            if np.any(np.diff(angles) <= 0):
                raise ModelError(f"{what} moment_curve angles must be strictly increasing")
            if np.any(slopes <= 0):
                raise ModelError(f"{what} moment_curve must be strictly increasing (positive stiffness)")
            curve = (angles, moments)
            stiffness = float(np.max(slopes)) if stiffness is None else stiffness
        if stiffness is None:
            raise ModelError(f"{what} needs a stiffness or a moment_curve")
        pa, qa = self._body_pose(body_a)
        pb, qb = self._body_pose(body_b)
        self.spring_body_a.append(body_a)
        self.spring_body_b.append(body_b)
        self.spring_axis_a.append(quat_to_matrix(qa).T @ axis)
        self.spring_rest_rotation.append(quat_multiply(quat_inverse(qa), qb))
        self.spring_stiffness.append(_positive(stiffness, f"{what} stiffness"))
        self.spring_damping.append(_non_negative(damping, f"{what} damping"))
        self.spring_target.append(float(_vec([target], 1, f"{what} target")[0]))
        self.spring_curves.append(curve)
        self.spring_world.append(self._direct_world())
        return self.spring_count - 1

    def add_prismatic(self, body_a, body_b, anchor, axis, *, compliance=0.0, drive=False, rate=0.0, drive_mobility=0.0):
        """Prismatic (slider) joint between body_a (-1: the static world) and body_b; six rows (planar model:
        three, and the axis must lie in the plane).

        The relative rotation is locked and b's anchor stays on the line through a's anchor along
        ``axis`` (fixed in a's frame); b slides freely along it unless the joint is driven. A driven
        joint extends at the commanded rate ``Control.prismatic_rate`` (the growth constraint of
        seed 000 sec. II-E). The extension is measured from the build pose.

        Args:
            anchor: joint point in world coordinates at the current poses [m] (both bodies' anchors)
            axis: sliding axis in world coordinates at the current poses
            compliance: [m/N] of the five locking rows (0: rigid)
            drive: whether the joint is driven along its axis
            rate: initial commanded extension rate [m/s] (``Control.prismatic_rate``)
            drive_mobility: [m/(N s)] drop of the extension rate per newton of axial load (0: the rate
                is met exactly; u / mobility is the load that stalls the drive)
        """
        what = f"prismatic {self.prismatic_count}"
        body_a, body_b = self._check_joint_bodies(body_a, body_b, what)
        anchor = _vec(anchor, 3, f"{what} anchor")
        axis = _unit_axis(axis, what)
        rate = float(_vec([rate], 1, f"{what} rate")[0])
        pa, qa = self._body_pose(body_a)
        pb, qb = self._body_pose(body_b)
        Ra, Rb = quat_to_matrix(qa), quat_to_matrix(qb)
        axis_local = Ra.T @ axis
        e1, e2 = perpendicular_pair(axis_local)
        self.prismatic_body_a.append(body_a)
        self.prismatic_body_b.append(body_b)
        self.prismatic_anchor_a.append(Ra.T @ (anchor - pa))
        self.prismatic_anchor_b.append(Rb.T @ (anchor - pb))
        self.prismatic_axis_a.append(axis_local)
        self.prismatic_normal_a1.append(e1)
        self.prismatic_normal_a2.append(e2)
        self.prismatic_rest_rotation.append(quat_multiply(quat_inverse(qa), qb))
        self.prismatic_compliance.append(_non_negative(compliance, f"{what} compliance"))
        self.prismatic_driven.append(bool(drive))
        self.prismatic_drive_mobility.append(_non_negative(drive_mobility, f"{what} drive_mobility"))
        self.prismatic_rate.append(rate)
        self.prismatic_world.append(self._direct_world())
        return self.prismatic_count - 1

    # ------------------------------------------------------------------ obstacles
    def _add_obstacle(self, kind, position, rotation, size, mu, what):
        self.obstacle_kind.append(kind)
        self.obstacle_pos.append(_vec(position, 3, f"{what} position"))
        self.obstacle_rot.append(_quat(rotation, f"{what} rotation"))
        self.obstacle_size.append(np.asarray(size, dtype=np.float64))
        self.obstacle_mu.append(_non_negative(mu, f"{what} mu"))
        self.obstacle_world.append(-1)
        return self.obstacle_count - 1

    def add_ground(self, *, mu=1.0, normal=(0.0, 0.0, 1.0), height=0.0):
        """Static half-space below the plane n . x = height [m] with friction coefficient ``mu``."""
        n = _vec(normal, 3, "ground normal")
        if np.linalg.norm(n) < 1e-12:
            raise ModelError("ground normal is zero")
        n = n / np.linalg.norm(n)
        return self._add_obstacle(OBSTACLE_PLANE, n * float(height), quat_between([0, 0, 1], n), (0, 0, 0), mu, "ground")

    def add_obstacle_box(self, position, half_extents, *, rotation=(0, 0, 0, 1), mu=1.0):
        """Static box with ``half_extents`` [m] centred at ``position`` [m]."""
        he = _vec(half_extents, 3, "obstacle box half_extents")
        if np.any(he <= 0):
            raise ModelError(f"obstacle box half_extents must be positive, got {he.tolist()}")
        return self._add_obstacle(OBSTACLE_BOX, position, rotation, he, mu, "obstacle box")

    def add_obstacle_cylinder(self, position, radius, half_height, *, rotation=(0, 0, 0, 1), mu=1.0):
        """Static cylinder (axis: local z, vertical by default) of ``radius`` and ``half_height`` [m]."""
        r = _positive(radius, "obstacle cylinder radius")
        hh = _positive(half_height, "obstacle cylinder half_height")
        return self._add_obstacle(OBSTACLE_CYLINDER, position, rotation, (r, hh, 0), mu, "obstacle cylinder")

    # ------------------------------------------------------------------ worlds
    def add_world(self, builder, *, offset=(0.0, 0.0, 0.0)):
        """Append everything in ``builder`` as a new independent world, shifted by ``offset`` [m].

        Returns the new world's index.
        """
        if self.world_count > 0 and not self._has_worlds:
            raise ModelError("this builder already holds items of world 0; build every world in its own builder")
        offset = _vec(offset, 3, "world offset")
        world = self.world_count
        self._has_worlds = True
        self.world_count += 1
        p0, b0, c0 = self.particle_count, self.body_count, self.pressure_channel_count

        def shift_body(b):
            return b + b0 if b >= 0 else -1

        self.particle_q += [q + offset for q in builder.particle_q]
        self.particle_qd += list(builder.particle_qd)
        self.particle_mass += list(builder.particle_mass)
        self.particle_radius += list(builder.particle_radius)
        self.particle_collide += list(builder.particle_collide)
        self.particle_world += [world] * builder.particle_count
        self.body_q += [(p + offset, q) for p, q in builder.body_q]
        self.body_qd += list(builder.body_qd)
        self.body_mass += list(builder.body_mass)
        self.body_inertia += list(builder.body_inertia)
        self.body_kinematic += list(builder.body_kinematic)
        self.body_world += [world] * builder.body_count
        self.shape_body += [b + b0 for b in builder.shape_body]
        for name in ("shape_type", "shape_pos", "shape_rot", "shape_size", "shape_mu"):
            getattr(self, name).extend(getattr(builder, name))
        self.distance_particles += [(i + p0, j + p0) for i, j in builder.distance_particles]
        self.distance_channel += [c + c0 if c >= 0 else -1 for c in builder.distance_channel]
        for name in ("distance_rest", "distance_compliance", "distance_damping", "distance_youngs"):
            getattr(self, name).extend(getattr(builder, name))
        self.distance_world += [world] * builder.distance_count
        self.tet_particles += [t + p0 for t in builder.tet_particles]
        for name in ("tet_inv_rest", "tet_volume", "tet_youngs", "tet_poisson", "tet_damping"):
            getattr(self, name).extend(getattr(builder, name))
        self.tet_world += [world] * builder.tet_count
        self.attachment_body += [b + b0 for b in builder.attachment_body]
        self.attachment_particle += [p + p0 for p in builder.attachment_particle]
        for name in ("attachment_local", "attachment_compliance", "attachment_damping"):
            getattr(self, name).extend(getattr(builder, name))
        self.attachment_world += [world] * builder.attachment_count
        # Joints to the static world (-1) keep world-space anchors: shift them with the world.
        for a, anchor in zip(builder.hinge_body_a, builder.hinge_anchor_a):
            self.hinge_anchor_a.append(anchor + offset if a < 0 else anchor)
        self.hinge_body_a += [shift_body(b) for b in builder.hinge_body_a]
        self.hinge_body_b += [b + b0 for b in builder.hinge_body_b]
        for name in ("hinge_anchor_b", "hinge_axis_a", "hinge_normal_b1", "hinge_normal_b2", "hinge_compliance"):
            getattr(self, name).extend(getattr(builder, name))
        self.hinge_world += [world] * builder.hinge_count
        self.spring_body_a += [shift_body(b) for b in builder.spring_body_a]
        self.spring_body_b += [b + b0 for b in builder.spring_body_b]
        for name in ("spring_axis_a", "spring_rest_rotation", "spring_stiffness", "spring_damping", "spring_target", "spring_curves"):
            getattr(self, name).extend(getattr(builder, name))
        self.spring_world += [world] * builder.spring_count
        for a, anchor in zip(builder.prismatic_body_a, builder.prismatic_anchor_a):
            self.prismatic_anchor_a.append(anchor + offset if a < 0 else anchor)
        self.prismatic_body_a += [shift_body(b) for b in builder.prismatic_body_a]
        self.prismatic_body_b += [b + b0 for b in builder.prismatic_body_b]
        for name in ("prismatic_anchor_b", "prismatic_axis_a", "prismatic_normal_a1", "prismatic_normal_a2",
                     "prismatic_rest_rotation", "prismatic_compliance", "prismatic_driven", "prismatic_drive_mobility",
                     "prismatic_rate"):
            getattr(self, name).extend(getattr(builder, name))
        self.prismatic_world += [world] * builder.prismatic_count
        self.pressure_channel_world += [world] * builder.pressure_channel_count
        self.obstacle_kind += list(builder.obstacle_kind)
        self.obstacle_pos += [p + offset for p in builder.obstacle_pos]
        for name in ("obstacle_rot", "obstacle_size", "obstacle_mu"):
            getattr(self, name).extend(getattr(builder, name))
        self.obstacle_world += [world] * builder.obstacle_count
        return world

    def replicate(self, builder, count, *, spacing=(0.0, 0.0, 0.0)):
        """Append ``count`` copies of ``builder`` as independent worlds, copy k shifted by k * spacing [m]."""
        if int(count) < 1:
            raise ModelError(f"replicate count must be at least 1, got {count}")
        spacing = _vec(spacing, 3, "replicate spacing")
        return [self.add_world(builder, offset=k * spacing) for k in range(int(count))]

    def finalize(self, device="cpu"):
        """Validate everything, lay out rows and sparse matrices, and upload to ``device``.

        Raises ModelError for bad input and for an unknown device.
        """
        from .finalize import finalize_model

        return finalize_model(self, device)
