"""The constraint types of the engine, one module each: its kernel, its descriptor, its builder method.

- ``distance``: c = |x_i - x_j| - r s, structural and pressure-driven (seed 001, eqs. 3-4).
- ``tetrahedron``: corotational linear tetrahedra, six compliant strain rows (seed 001, eq. 5).
- ``attachment``: a particle fixed to a point of a body (seed 001, eq. 6).
- ``hinge``: revolute joints between bodies or to the static world.
- ``prismatic``: slider joints with a growth drive (seed 000 sec. II-E).
- ``angular_spring``: torsional springs, linear or with a sampled moment curve.
- ``contact``: normal (Fischer-Burmeister) and friction rows against static obstacles; the
  geometry they act on (shapes, obstacles, collision points) is ``shapes``.

``REGISTRY`` pairs each type's descriptor with the mixin that gives ``ModelBuilder`` its ``add_*``
methods, in the order of the rows inside a world; a new type is one more line there.
"""

from .angular_spring import ANGULAR_SPRING, AngularSpringBuilder
from .attachment import ATTACHMENT, AttachmentBuilder
from .contact import CONTACT_SLOT
from .distance import DISTANCE, DistanceBuilder
from .hinge import HINGE, HingeBuilder
from .prismatic import PRISMATIC, PrismaticBuilder
from .shapes import ShapeBuilder
from .tetrahedron import TETRAHEDRON, TetrahedronBuilder

REGISTRY = (
    (DISTANCE, DistanceBuilder),
    (TETRAHEDRON, TetrahedronBuilder),
    (ATTACHMENT, AttachmentBuilder),
    (HINGE, HingeBuilder),
    (PRISMATIC, PrismaticBuilder),
    (ANGULAR_SPRING, AngularSpringBuilder),
    (CONTACT_SLOT, ShapeBuilder),  # contacts come from the collision shapes and obstacles
)

CONSTRAINT_TYPES = tuple(ctype for ctype, _ in REGISTRY)
"""Every constraint type, in the order of their rows inside a world."""

BUILDER_METHODS = tuple(methods for _, methods in REGISTRY)
"""The mixins that add each type's ``add_*`` methods to ``ModelBuilder``."""


def field_docs():
    """One line per model array of every constraint type: name, dtype, unit and meaning."""
    lines = []
    for ctype in CONSTRAINT_TYPES:
        for field in ctype.fields:
            if field.upload:
                unit = f" [{field.unit}]" if field.unit else ""
                dtype = getattr(field.dtype, "__name__", str(field.dtype))
                lines.append(f"{ctype.name}_{field.name}: {field.doc}{unit}; {dtype}, shape ({ctype.name}_count,)")
        lines.append(f"{ctype.name}_row: first row of each {ctype.label}; int, shape ({ctype.name}_count,)")
    return lines
