"""The kinds of items a model holds besides constraints: particles, bodies and pressure channels,
and the list of every kind a builder keeps per-item lists of (see ``softsnake.constraints.base``).
"""

import warp as wp

from .constraints import CONSTRAINT_TYPES
from .constraints.base import Field, ItemKind
from .constraints.shapes import OBSTACLE, SHAPE

PARTICLE = ItemKind("particle", (
    Field("q", wp.vec3, "m", "initial position"),
    Field("qd", wp.vec3, "m/s", "initial velocity"),
    Field("mass", float, "kg", "mass, 0 for kinematic particles"),
    Field("radius", float, "m", "contact radius"),
    Field("collide", bool, "", "whether the particle collides with obstacles"),
))

BODY = ItemKind("body", (
    Field("q", wp.transform, "m", "initial pose: (centre of mass [m], rotation quaternion)"),
    Field("qd", wp.spatial_vector, "m/s", "initial velocity: (linear [m/s], angular [rad/s]), world frame"),
    Field("mass", float, "kg", "mass (accumulated from shapes with a density)"),
    Field("inertia", wp.mat33, "kg m^2", "inertia about the centre of mass, body frame"),
    Field("mass_moment", wp.vec3, "kg m", "first moment about the origin of the mass its shapes added, body frame "
          "(zero where the origin is their centre of mass, as the engine takes it: ``finalize.check_bodies``)"),
    Field("kinematic", bool, "", "whether the body ignores forces (infinite mass)"),
))

PRESSURE_CHANNEL = ItemKind("pressure_channel", ())


def item_kinds():
    """Every kind of item a builder holds lists of, constraint types built item by item included."""
    return (PARTICLE, BODY, SHAPE, PRESSURE_CHANNEL, OBSTACLE, *(t for t in CONSTRAINT_TYPES if t.built))
