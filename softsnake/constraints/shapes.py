"""Collision geometry: the shapes on bodies, the static obstacles, and the points that touch them.

Shapes (``ModelBuilder.add_shape_*``) are fixed on bodies: spheres, boxes, capsules and cylinders,
each reduced to collision points (a sphere's centre with its radius, a capsule's two end centres,
a box's eight corners, a cylinder's rim points). Particles collide as points with their radius.
Obstacles (``add_ground``, ``add_obstacle_box``, ``add_obstacle_cylinder``) are static: a
half-space, a box, a cylinder, each with a signed distance (``obstacle_distance``). Contact rows
between them are ``softsnake.constraints.contact``.

Every world is simulated in its own frame (``ModelBuilder.add_world``), so an obstacle shared by
all worlds is seen by each at another place: ``world_obstacles`` gives every world its own copy of
each shared obstacle, moved into the world's frame, next to the world's own obstacles. That table
is the model's obstacle arrays and what contact slots point at.
"""

import math
from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import warp as wp

from softsnake.errors import ModelError
from softsnake.spatial import box_inertia, capsule_inertia, capsule_volume, cylinder_inertia, quat_between, quat_to_matrix
from softsnake.validation import bounded_vector, finite_value, length_value, non_negative_value, unit_quaternion, vector
from softsnake.validation import position as checked_position

from .base import Field, ItemKind


class ShapeKind(IntEnum):
    """Collision shapes on bodies."""

    SPHERE = 0
    BOX = 1
    CAPSULE = 2
    CYLINDER = 3


class ObstacleKind(IntEnum):
    """Static obstacles."""

    PLANE = 0
    BOX = 1
    CYLINDER = 2


class PointKind(IntEnum):
    """Collision points: fixed in the body frame, or the rim point of a cylinder nearest the obstacle."""

    FIXED = 0
    CYLINDER_RIM = 1


SHAPE = ItemKind("shape", (
    Field("body", int, "", "the body the shape is fixed on", index="body"),
    Field("kind", int, "", "ShapeKind"),
    Field("pos", wp.vec3, "m", "shape centre in the body frame"),
    Field("rot", wp.quat, "", "shape orientation in the body frame"),
    Field("size", wp.vec3, "m", "sphere (radius, 0, 0); box half extents; capsule and cylinder (radius, half height, 0)"),
    Field("mu", float, "", "friction coefficient (inf: the obstacle's)"),
))

OBSTACLE = ItemKind("obstacle", (
    Field("kind", int, "", "ObstacleKind"),
    Field("pos", wp.vec3, "m", "obstacle centre (plane: a point on it)"),
    Field("rot", wp.quat, "", "obstacle orientation (plane: local z is its normal)"),
    Field("size", wp.vec3, "m", "box half extents; cylinder (radius, half height, 0); plane (0, 0, 0)"),
    Field("mu", float, "", "friction coefficient"),
))


@wp.func
def obstacle_in_world_frame(kind: int, tf: wp.transform, frame_shift: wp.vec3):
    """A static obstacle seen from the frame a world's substep runs in (``softsnake.kernels.world_frame``), as
    ``obstacle_in_frame`` sees it from a world's offset: a box or a cylinder moves by -frame_shift, a plane along
    its normal n only, by -(n . frame_shift) n (a ground moved within itself stays the same ground, to the bit)."""
    p = wp.transform_get_translation(tf)
    q = wp.transform_get_rotation(tf)
    if kind == ObstacleKind.PLANE:
        n = wp.quat_rotate(q, wp.vec3(0.0, 0.0, 1.0))
        return wp.transform(p - n * wp.dot(n, frame_shift), q)
    return wp.transform(p - frame_shift, q)


@wp.func
def obstacle_distance(kind: int, tf: wp.transform, size: wp.vec3, p: wp.vec3):
    """Signed distance and outward normal of a static obstacle at p, packed as (n, d).

    Plane: the local z = 0 plane, normal local +z. Box: half extents size. Cylinder: local z
    axis, radius size[0], half height size[1].
    """
    q = wp.transform_get_rotation(tf)
    pl = wp.quat_rotate_inv(q, p - wp.transform_get_translation(tf))
    n = wp.vec3(0.0, 0.0, 1.0)
    d = pl[2]
    if kind == ObstacleKind.BOX:
        c = wp.vec3(wp.clamp(pl[0], -size[0], size[0]), wp.clamp(pl[1], -size[1], size[1]), wp.clamp(pl[2], -size[2], size[2]))
        diff = pl - c
        dist = wp.length(diff)
        if dist > 0.0:
            n = diff / dist
            d = dist
        else:
            # Inside: the nearest face.
            best = int(0)
            gap = wp.abs(pl[0]) - size[0]
            for k in range(1, 3):
                g = wp.abs(pl[k]) - size[k]
                if g > gap:
                    gap = g
                    best = k
            n = wp.vec3(0.0)
            n[best] = wp.sign(pl[best])
            d = gap
    elif kind == ObstacleKind.CYLINDER:
        rho = wp.sqrt(pl[0] * pl[0] + pl[1] * pl[1])
        radial = wp.vec3(1.0, 0.0, 0.0)
        if rho > 0.0:
            radial = wp.vec3(pl[0] / rho, pl[1] / rho, 0.0)
        axial = wp.vec3(0.0, 0.0, wp.sign(pl[2]))
        dr = rho - size[0]
        dz = wp.abs(pl[2]) - size[1]
        if dr > 0.0 and dz > 0.0:
            d = wp.sqrt(dr * dr + dz * dz)
            n = (radial * dr + axial * dz) / d
        elif dr > dz:
            d = dr
            n = radial
        else:
            d = dz
            n = axial
    return wp.vec4(wp.quat_rotate(q, n)[0], wp.quat_rotate(q, n)[1], wp.quat_rotate(q, n)[2], d)


@wp.func
def obstacle_gap(kind: int, tf: wp.transform, size: wp.vec3, p: wp.vec3, radius: float, distance: float):
    """The gap [m] between a static obstacle and a ball of this radius centred at p, whose distance to the
    obstacle (``obstacle_distance``) is ``distance``.

    For a plane it is measured from the plane moved out by the radius, not as distance - radius: the distance of
    a ball resting on the ground is its radius, and float32 rounds it to the radius's spacing (3.7e-9 m for 5 cm),
    which the gap then carries. The contact rows read that rounding afresh every substep, as a jitter of the
    normal force of (spacing) / (g h^2) of the weight: 1e-5 at 1/240 s, 4e-3 at 1/3840 s. The moved-out plane
    lies as close to p along n as the ball to the ground, so for the ground their difference is exact and a
    resting particle stays still to the bit (convergence.md, "Contacts at small steps"). Boxes' and cylinders'
    distances are lengths of a difference of about the radius, which keeps that rounding: distance - radius."""
    # One return: Warp's adjoint runs the code after a return inside a branch (detection is on the gradients' tape).
    gap = distance - radius
    if kind == ObstacleKind.PLANE:
        n = wp.quat_rotate(wp.transform_get_rotation(tf), wp.vec3(0.0, 0.0, 1.0))
        gap = wp.dot(n, p - (wp.transform_get_translation(tf) + n * radius))
    return gap


@dataclass(frozen=True)
class WorldObstacles:
    """Every world's obstacles in its own frame, world after world (``world_obstacles``).

    Attributes:
        world: world of each entry, int64, shape (n,)
        source: the builder's obstacle each entry is (a shared one once per world), int64, shape (n,)
        pos: centre (plane: a point on it) in the world's frame [m], float64, shape (n, 3)
    The kind, rotation, size and mu of an entry are its source's (``ModelBuilder.obstacle_*``).
    """

    world: np.ndarray
    source: np.ndarray
    pos: np.ndarray

    def of_world(self, world):
        """Indices of the entries of ``world``, in the builder's order of their sources."""
        return np.flatnonzero(self.world == world)


def obstacle_in_frame(kind, position, rotation, offset):
    """Position [m] of a shared obstacle seen from a world placed at ``offset`` [m], in float64.

    A box or a cylinder moves by -offset. A plane is the same plane wherever a point on it sits,
    so only its height along the normal n changes, by -n . offset: the point moves along n, and a
    plane through the origin stays there for every offset within it (a ground under worlds side by
    side is the same ground, to the bit, in every world).
    """
    position, offset = np.asarray(position, dtype=np.float64), np.asarray(offset, dtype=np.float64)
    if kind == ObstacleKind.PLANE:
        normal = quat_to_matrix(rotation)[:, 2]
        return position - normal * float(np.dot(normal, offset))
    return position - offset


def world_obstacles(builder):
    """The obstacle table of ``builder``'s model (``WorldObstacles``): for every world, in the builder's
    order, its own obstacles as they are and a copy of each shared one (world -1) in its frame."""
    offsets = builder.world_offsets()
    obstacle_world = np.asarray(builder.obstacle_world, dtype=np.int64)
    world, source, pos = [], [], []
    for w, offset in enumerate(offsets):
        for o in np.flatnonzero((obstacle_world == -1) | (obstacle_world == w)):
            shared = obstacle_world[o] == -1
            world.append(w)
            source.append(int(o))
            pos.append(obstacle_in_frame(builder.obstacle_kind[o], builder.obstacle_pos[o], builder.obstacle_rot[o],
                                         offset) if shared else np.asarray(builder.obstacle_pos[o], dtype=np.float64))
    return WorldObstacles(np.asarray(world, dtype=np.int64), np.asarray(source, dtype=np.int64),
                          np.asarray(pos, dtype=np.float64).reshape(-1, 3))


def collision_points(builder):
    """(entity, kind, local point, local axis, rim radius, contact radius, mu, world) of everything that collides."""
    P = builder.particle_count
    points = []
    for i in range(P):
        if builder.particle_collide[i] and builder.particle_mass[i] > 0.0:
            points.append((i, PointKind.FIXED, np.zeros(3), np.zeros(3), 0.0, builder.particle_radius[i], np.inf, builder.particle_world[i]))
    for s in range(builder.shape_count):
        b = builder.shape_body[s]
        if builder.body_kinematic[b]:
            continue
        pos, R, size = builder.shape_pos[s], quat_to_matrix(builder.shape_rot[s]), builder.shape_size[s]
        kind, mu, world, ent = builder.shape_kind[s], builder.shape_mu[s], builder.body_world[b], P + b
        z = R[:, 2]
        if kind == ShapeKind.SPHERE:
            points.append((ent, PointKind.FIXED, pos, z, 0.0, size[0], mu, world))
        elif kind == ShapeKind.CAPSULE:
            for sign in (-1.0, 1.0):
                points.append((ent, PointKind.FIXED, pos + sign * size[1] * z, z, 0.0, size[0], mu, world))
        elif kind == ShapeKind.BOX:
            for corner in np.array(np.meshgrid([-1, 1], [-1, 1], [-1, 1], indexing="ij")).reshape(3, -1).T:
                points.append((ent, PointKind.FIXED, pos + R @ (corner * size), z, 0.0, 0.0, mu, world))
        elif kind == ShapeKind.CYLINDER:
            # A wheel (width <= radius) touches through one rim point in its mid-plane: two points
            # on a line along the axis would leave sideways friction split between them undetermined.
            signs = (0.0,) if size[1] <= 0.5 * size[0] else (-1.0, 1.0)
            for sign in signs:
                points.append((ent, PointKind.CYLINDER_RIM, pos + sign * size[1] * z, z, size[0], 0.0, mu, world))
    return points


class ShapeBuilder:
    """``ModelBuilder.add_shape_*`` (collision shapes on bodies) and the static obstacles."""

    @property
    def shape_count(self):
        return self.item_count(SHAPE)

    @property
    def obstacle_count(self):
        return self.item_count(OBSTACLE)

    def add_shape(self, body, kind, position, rotation, size, density, mu, mass, inertia_local):
        """Add a collision shape of ``kind`` (checked values; the ``add_shape_*`` methods check theirs) whose
        unit-density ``mass`` and ``inertia_local`` (about its centre, shape frame) scale with ``density``."""
        what = self.shape_label(kind)
        body = self.check_body(body, what)
        pos = bounded_vector(position, 3, f"{what} position")
        rot = unit_quaternion(rotation, f"{what} rotation")
        density = non_negative_value(density, f"{what} density")
        if mu is not None:
            mu = non_negative_value(mu, f"{what} mu")
        body_mass, body_inertia, body_moment = self.body_mass[body], self.body_inertia[body], self.body_mass_moment[body]
        if density > 0.0:
            m = mass * density
            R = quat_to_matrix(rot)
            I = R @ (inertia_local * density) @ R.T + m * (np.dot(pos, pos) * np.eye(3) - np.outer(pos, pos))
            body_mass, body_inertia, body_moment = body_mass + m, body_inertia + I, body_moment + m * pos
            vector([body_mass], 1, f"{what}: body {body} mass with the shape's")
            vector(np.ravel(body_inertia), 9, f"{what}: body {body} inertia with the shape's")
        index = self.append_item(SHAPE, {
            "body": body, "kind": int(kind), "pos": pos, "rot": rot, "size": np.asarray(size, dtype=np.float64),
            "mu": math.inf if mu is None else mu}, world=self.body_world[body])
        # The body's mass changes only once the shape is in: a rejected shape leaves the body as it was.
        self.body_mass[body], self.body_inertia[body], self.body_mass_moment[body] = body_mass, body_inertia, body_moment
        return index

    def shape_label(self, kind):
        """How messages name the next shape: "shape 3 (sphere)"."""
        return f"shape {self.shape_count} ({ShapeKind(kind).name.lower()})"

    def add_shape_sphere(self, body, radius, *, position=(0, 0, 0), density=0.0, mu=None):
        """Collision sphere of ``radius`` [m] on ``body`` at ``position`` [m] in the body frame.

        A ``density`` [kg/m^3] adds the shape's mass and inertia to the body. ``mu`` (default:
        the obstacle's) is the friction coefficient; a contact uses the smaller of shape's and obstacle's.
        """
        r = length_value(radius, f"{self.shape_label(ShapeKind.SPHERE)} radius")
        vol = 4.0 / 3.0 * math.pi * r**3
        return self.add_shape(body, ShapeKind.SPHERE, position, (0, 0, 0, 1), (r, 0, 0), density, mu, vol, np.eye(3) * 0.4 * vol * r * r)

    def add_shape_box(self, body, half_extents, *, position=(0, 0, 0), rotation=(0, 0, 0, 1), density=0.0, mu=None):
        """Collision box with ``half_extents`` [m] (its eight corners collide). See add_shape_sphere."""
        he = positive_lengths(half_extents, f"{self.shape_label(ShapeKind.BOX)} half_extents")
        vol = 8.0 * np.prod(he)
        return self.add_shape(body, ShapeKind.BOX, position, rotation, he, density, mu, vol, box_inertia(vol, he))

    def add_shape_capsule(self, body, radius, half_height, *, position=(0, 0, 0), rotation=(0, 0, 0, 1), density=0.0, mu=None):
        """Capsule along the shape's local z: two end spheres of ``radius`` at +-``half_height`` [m]; its mass and
        inertia, with a ``density``, are a solid capsule's (the cylinder between the sphere centres and the two
        half-spheres). See add_shape_sphere."""
        what = self.shape_label(ShapeKind.CAPSULE)
        r = length_value(radius, f"{what} radius")
        hh = length_value(half_height, f"{what} half_height")
        vol = capsule_volume(r, hh)
        return self.add_shape(body, ShapeKind.CAPSULE, position, rotation, (r, hh, 0), density, mu, vol, capsule_inertia(vol, r, hh))

    def add_shape_cylinder(self, body, radius, half_height, *, position=(0, 0, 0), rotation=(0, 0, 0, 1), density=0.0, mu=None):
        """Cylinder along the shape's local z: the lowest rim point of each cap collides, or for a
        wheel (2 half_height <= radius) the lowest rim point of its mid-plane."""
        what = self.shape_label(ShapeKind.CYLINDER)
        r = length_value(radius, f"{what} radius")
        hh = length_value(half_height, f"{what} half_height")
        vol = math.pi * r * r * 2.0 * hh
        return self.add_shape(body, ShapeKind.CYLINDER, position, rotation, (r, hh, 0), density, mu, vol, cylinder_inertia(vol, r, hh))

    def add_obstacle(self, kind, position, rotation, size, mu):
        """Add a static obstacle of ``kind`` shared by every world (the ``add_obstacle_*`` methods check ``size``)."""
        what = self.obstacle_label(kind)
        return self.append_item(OBSTACLE, {
            "kind": int(kind), "pos": checked_position(position, f"{what} position"),
            "rot": unit_quaternion(rotation, f"{what} rotation"), "size": np.asarray(size, dtype=np.float64),
            "mu": non_negative_value(mu, f"{what} mu")}, world=-1)

    def obstacle_label(self, kind):
        """How messages name the next obstacle: "obstacle 2 (box)"; the ground is ObstacleKind.PLANE."""
        return f"obstacle {self.obstacle_count} ({'ground' if kind == ObstacleKind.PLANE else ObstacleKind(kind).name.lower()})"

    def add_ground(self, *, mu=1.0, normal=(0.0, 0.0, 1.0), height=0.0):
        """Static half-space below the plane n . x = height [m] with friction coefficient ``mu``."""
        what = self.obstacle_label(ObstacleKind.PLANE)
        n = vector(normal, 3, f"{what} normal")
        if np.linalg.norm(n) < 1e-12:
            raise ModelError(f"{what} normal is zero")
        n = n / np.linalg.norm(n)
        height = finite_value(height, f"{what} height")
        return self.add_obstacle(ObstacleKind.PLANE, n * height, quat_between([0, 0, 1], n), (0, 0, 0), mu)

    def add_obstacle_box(self, position, half_extents, *, rotation=(0, 0, 0, 1), mu=1.0):
        """Static box with ``half_extents`` [m] centred at ``position`` [m]."""
        he = positive_lengths(half_extents, f"{self.obstacle_label(ObstacleKind.BOX)} half_extents")
        return self.add_obstacle(ObstacleKind.BOX, position, rotation, he, mu)

    def add_obstacle_cylinder(self, position, radius, half_height, *, rotation=(0, 0, 0, 1), mu=1.0):
        """Static cylinder (axis: local z, vertical by default) of ``radius`` and ``half_height`` [m]."""
        what = self.obstacle_label(ObstacleKind.CYLINDER)
        r = length_value(radius, f"{what} radius")
        hh = length_value(half_height, f"{what} half_height")
        return self.add_obstacle(ObstacleKind.CYLINDER, position, rotation, (r, hh, 0), mu)


def positive_lengths(value, what):
    """Three positive lengths [m] (half extents), each within ``POSITION_LIMIT``."""
    he = bounded_vector(value, 3, what)
    if np.any(he <= 0):
        raise ModelError(f"{what} must be positive, got {he.tolist()}")
    return he
