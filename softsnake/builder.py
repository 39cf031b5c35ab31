"""ModelBuilder: collect particles, bodies, shapes, constraints and obstacles, then finalize.

Every quantity is SI: lengths [m], masses [kg], densities [kg/m^3], moduli and pressures [Pa],
angles [rad], times [s]. Quaternions are (x, y, z, w).

Worlds: items added directly to a builder belong to world 0. ``add_world(builder)`` appends
another builder's items as a new, independent world and ``replicate(builder, count, spacing)``
appends many copies; obstacles added directly to the top-level builder are shared by all
worlds, obstacles of an added builder belong to its world only. Every world is simulated in its
own frame, the coordinates of its builder; its offset places it in the scene only in outputs
(``Model.world_offset``, ``Model.scene_particle_q``), so that a world's trajectory does not depend
on where the batch puts it (float32 positions far from the origin would round friction and
contact differently).

The builder keeps one list per field of every kind of item (``particle_q``, ``distance_rest_length``,
...; see ``softsnake.constraints.base``). Particles and bodies are declared here; each constraint
type's ``add_*`` method comes from its own module (``softsnake.constraints``).
"""

import numpy as np

from .consistency import check_builder_tables
from .constraints import BUILDER_METHODS
from .constraints.base import BuilderTables, shift_field
from .errors import ModelError
from .finalize import finalize_model
from .items import BODY, PARTICLE, PRESSURE_CHANNEL, item_kinds
from .validation import index_value, inverse_representable, mass_value, non_negative_value
from .validation import position as checked_position
from .validation import unit_quaternion, vector, whole_count

class ModelBuilder(BuilderTables, *BUILDER_METHODS):
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
        self.gravity = vector(gravity, 3, "gravity")
        self.planar = bool(planar)
        self.has_worlds = False
        """Whether items came in through ``add_world``/``replicate`` (then none may be added directly)."""
        self.world_count = 0
        self.world_offset = []
        """Offset of each world added with ``add_world``/``replicate`` [m], float64 (3,) each: where the
        scene places the world's frame (``Model.world_offset``)."""
        for kind in item_kinds():
            self.declare(kind)

    # ------------------------------------------------------------------ counts and checks
    @property
    def particle_count(self):
        return self.item_count(PARTICLE)

    @property
    def body_count(self):
        return self.item_count(BODY)

    @property
    def pressure_channel_count(self):
        return self.item_count(PRESSURE_CHANNEL)

    def current_world(self):
        """The world that items added directly belong to (0); an error once worlds were added."""
        if self.has_worlds:
            raise ModelError(
                "this builder already holds worlds added with add_world/replicate; "
                "add particles, bodies and constraints to a world builder instead"
            )
        self.world_count = max(self.world_count, 1)
        return 0

    def check_particle(self, index, what):
        """A particle index of this builder, or a ModelError naming ``what``."""
        index = index_value(index, f"{what}: particle index")
        if not (0 <= index < self.particle_count):
            raise ModelError(f"{what}: particle index {index} out of range [0, {self.particle_count})")
        return index

    def check_body(self, index, what, allow_world=False):
        """A body index of this builder (or -1, the static world, with ``allow_world``)."""
        index = index_value(index, f"{what}: body index")
        if allow_world and index == -1:
            return -1
        if not (0 <= index < self.body_count):
            raise ModelError(f"{what}: body index {index} out of range [0, {self.body_count})")
        return index

    def check_joint_bodies(self, body_a, body_b, what):
        """(body_a, body_b) of a joint: body_a may be -1 (the world), and the two must differ."""
        body_a = self.check_body(body_a, what, allow_world=True)
        body_b = self.check_body(body_b, what)
        if body_a == body_b:
            raise ModelError(f"{what} joins body {body_b} to itself")
        return body_a, body_b

    def body_pose(self, body):
        """(position [m], quaternion) of a body at build time; the identity for -1 (the static world)."""
        if body < 0:
            return np.zeros(3), np.array([0.0, 0.0, 0.0, 1.0])
        return self.body_q[body]

    # ------------------------------------------------------------------ particles and bodies
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
        return self.append_particle(self.particle_values(
            f"particle {self.particle_count}", position, velocity, mass, radius, collide, kinematic))

    def append_particle(self, values):
        """Append a particle of checked ``values`` (``particle_values``); returns its index."""
        return self.append_item(PARTICLE, values)

    @staticmethod
    def particle_values(what, q, qd, mass, radius, collide, kinematic):
        """The checked fields of a particle named ``what`` in messages (see ``add_particle``)."""
        return {"q": checked_position(q, f"{what} position"), "qd": vector(qd, 3, f"{what} velocity"),
                "mass": 0.0 if kinematic else mass_value(mass, f"{what} mass"),
                "radius": non_negative_value(radius, f"{what} radius"), "collide": bool(collide)}

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
        I = np.zeros((3, 3)) if inertia is None else vector(np.ravel(inertia), 9, f"{what} inertia").reshape(3, 3)
        return self.append_item(BODY, {
            "q": (checked_position(position, f"{what} position"), unit_quaternion(rotation, f"{what} rotation")),
            "qd": (vector(velocity, 3, f"{what} velocity"), vector(angular_velocity, 3, f"{what} angular_velocity")),
            "mass": inverse_representable(non_negative_value(mass, f"{what} mass"), f"{what} mass"), "inertia": I,
            "mass_moment": np.zeros(3), "kinematic": bool(kinematic)})

    def add_pressure_channel(self):
        """A chamber pressure input (``Control.pressure[channel]`` [Pa]); returns the channel index."""
        return self.append_item(PRESSURE_CHANNEL, {})

    # ------------------------------------------------------------------ worlds
    def add_world(self, builder, *, offset=(0.0, 0.0, 0.0)):
        """Append everything in ``builder`` as a new independent world placed at ``offset`` [m].

        The world is simulated in its own frame: its positions, its obstacles and its joint anchors
        to the static world stay as ``builder`` holds them, and ``offset`` only places the world in
        the scene's outputs (``Model.world_offset``, ``Model.scene_particle_q``,
        ``Model.scene_body_q``). Positions are float32, whose spacing grows with the distance from
        the origin; simulated at its offset, a world's friction and contact would round differently
        wherever the batch put it. Obstacles shared by every world (added to this builder) are
        seen by each world in its own frame.

        ``builder`` must have this builder's gravity and planar flag (a model has one of each) and
        hold no worlds of its own. The world is added whole or not at all. Returns the new world's index.
        """
        self._check_world_builder(builder)
        return self._append_world(builder, checked_position(offset, "world offset"))

    def replicate(self, builder, count, *, spacing=(0.0, 0.0, 0.0), first=0):
        """Append ``count`` copies of ``builder`` as independent worlds, copy k placed at (first + k) *
        spacing [m] (``first``: where these copies start in a longer row, e.g. a worker's share of it).

        Each copy is simulated in its own frame, as with ``add_world``: the copies' trajectories are
        the same wherever they are placed, and ``spacing`` applies in the outputs only. Returns the
        new worlds' indices; a spacing that places a copy beyond the position bound adds none.
        """
        count = whole_count(count, "replicate count")
        first = index_value(first, "replicate first")
        if first < 0:
            raise ModelError(f"replicate first must be at least 0, got {first}")
        spacing = vector(spacing, 3, "replicate spacing")
        self._check_world_builder(builder)
        offsets = [checked_position(k * spacing, f"replicate offset of copy {k}") for k in range(first, first + count)]
        return [self._append_world(builder, offset) for offset in offsets]

    def world_offsets(self):
        """Offset of every world [m], float64, shape (world_count, 3) (at least one world): zeros for a
        builder whose items were added directly (one world, at the origin)."""
        if not self.has_worlds:
            return np.zeros((max(self.world_count, 1), 3))
        return np.array(self.world_offset, dtype=np.float64).reshape(self.world_count, 3)

    def _check_world_builder(self, builder):
        """ModelError unless ``builder`` can be added to this scene as a world (``add_world``)."""
        if not isinstance(builder, ModelBuilder) or builder is self:
            raise ModelError(f"add_world needs another ModelBuilder, got {builder!r}")
        if self.world_count > 0 and not self.has_worlds:
            raise ModelError("this builder already holds items of world 0; build every world in its own builder")
        if builder.has_worlds:
            # Its worlds have frames of their own: merged into one world, they would overlap.
            raise ModelError("add_world: the world's builder holds worlds of its own; add each of them to this "
                             "scene instead")
        if builder.planar != self.planar:
            raise ModelError(f"add_world: the world's builder has planar={builder.planar}, this scene planar={self.planar}; "
                             "a model is planar or not as a whole: build both with the same ModelBuilder(planar=...)")
        if not np.array_equal(builder.gravity, self.gravity):
            raise ModelError(f"add_world: the world's gravity {builder.gravity.tolist()} m/s^2 differs from this scene's "
                             f"{self.gravity.tolist()}; a model has one gravity: build both with the same "
                             "ModelBuilder(gravity=...)")
        check_builder_tables(builder)

    def _append_world(self, builder, offset):
        """Append the checked ``builder`` as a new world at the checked ``offset`` [m]; its index. The
        world's coordinates stay its own (``add_world``). Every list is computed before the first is
        extended, so a world is added whole or not at all."""
        world = self.world_count
        shifts = {"particle_offset": self.particle_count, "body_offset": self.body_count,
                  "channel_offset": self.pressure_channel_count}
        added = {}
        for kind in item_kinds():
            for field in kind.fields:
                name = f"{kind.name}_{field.name}"
                added[name] = shift_field(field, getattr(builder, name), **shifts)
            added[f"{kind.name}_world"] = [world] * builder.item_count(kind)
        # Everything is checked and computed: from here on nothing raises, so no list is left half-extended.
        for name, values in added.items():
            getattr(self, name).extend(values)
        self.world_offset.append(np.array(offset, dtype=np.float64))
        self.has_worlds = True
        self.world_count += 1
        return world

    def finalize(self, device=None):
        """Validate everything, lay out rows and sparse matrices, and upload to ``device`` (a Warp device or
        its name, "cpu", "cuda", "cuda:1" ...; None: Warp's default device, the first GPU where there is
        one, as ``wp.set_device`` left it).

        Raises ModelError for bad input and for an unknown device.
        """
        return finalize_model(self, device)
