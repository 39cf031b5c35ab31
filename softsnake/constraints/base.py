"""What every constraint type declares: its fields, its rows, and how its kernel is launched.

A constraint type is one module of ``softsnake.constraints`` holding, in one place:

- its Warp kernel, which evaluates the type's rows at the current positions (residual c,
  Jacobian blocks, compliance alpha = E / h^2, damping ratio gamma) and writes them into the
  solver's row arrays (see ``softsnake.kernels.rows`` for what the solver makes of them);
- a :class:`ConstraintType` descriptor: the per-item fields (``Field``: name, Warp dtype, unit,
  meaning, and how ``ModelBuilder.add_world`` renumbers them), the rows per item, the entities
  (particles, bodies) each row touches, and the launch of its kernel;
- a builder mixin with its ``ModelBuilder.add_<type>`` method, which validates an item and
  appends it (all fields at once, or nothing).

Naming: an item's field ``f`` of type ``name`` is the list ``builder.<name>_<f>`` and the array
``model.<name>_<f>``, the same name on both sides. Every type also has ``<name>_world`` (the world
of each item), ``model.<name>_row`` (each item's first row, set by ``finalize``) and the count
``<name>_count``.

Adding a constraint type: write its module (kernel, descriptor, builder mixin) and register the
descriptor in ``softsnake.constraints.CONSTRAINT_TYPES``. Its row kernel takes ``Solver.row_skip_inputs()`` (each
row's world and the held-world flags) before ``Solver.row_outputs()`` and returns at once for an item whose first
row's world holds its converged point (``kernels.entities.row_world_held``): the Newton loop's later iterations
leave such a world's rows as they stand (``Solver.held_worlds``).
"""

from dataclasses import dataclass

import numpy as np
import warp as wp

from softsnake.errors import ModelError


@dataclass(frozen=True)
class Field:
    """One per-item field of a constraint type (or of particles, bodies, shapes, obstacles).

    Attributes:
        name: the field's name; the builder list and the model array are ``<type>_<name>``
        dtype: Warp dtype of the model array (``float``, ``int``, ``wp.vec3``, ``wp.mat33`` ...)
        unit: SI unit in brackets, or "" for indices, flags and dimensionless values
        doc: what the value means
        index: "particle", "body" or "pressure_channel" for an index that ``add_world`` renumbers
            (negative values, meaning "none" or "the static world", are kept); "" otherwise
        optional: for an index, whether -1 ("none", or the static world) is allowed
        upload: False for builder-only fields that ``finalize`` turns into other arrays
    """

    name: str
    dtype: object
    unit: str
    doc: str
    index: str = ""
    optional: bool = False
    upload: bool = True


def shift_field(field, values, *, particle_offset, body_offset, channel_offset):
    """A field's values from another builder, renumbered for ``ModelBuilder.add_world``.

    Index fields hold an int (negative: none, or the static world, kept as it is) or a tuple of
    ints. Nothing is moved: every world keeps the coordinates of its builder (its own frame).
    """
    if field.index:
        shift = {"particle": particle_offset, "body": body_offset, "pressure_channel": channel_offset}[field.index]
        if values and isinstance(values[0], tuple):
            return [tuple(i + shift for i in v) for v in values]
        return [v + shift if v >= 0 else v for v in values]
    return list(values)


def upload_array(values, dtype, device, shape_if_empty=0):
    """A Warp array of ``dtype`` from a list of per-item values (an empty list gives ``shape_if_empty`` zeros)."""
    a = np.asarray(values)
    if a.size == 0:
        return wp.zeros(shape_if_empty, dtype=dtype, device=device)
    return wp.array(a, dtype=dtype, device=device)


class ItemKind:
    """Something a builder holds a list of: a name and its per-item fields (particles, bodies, shapes,
    obstacles; ``ConstraintType`` extends it for constraint types)."""

    name = ""
    fields = ()

    def __init__(self, name="", fields=()):
        if name:
            self.name = name
        if fields:
            self.fields = tuple(fields)


class ConstraintType(ItemKind):
    """Descriptor of one constraint type; subclasses set the class attributes and the methods.

    Attributes:
        name: prefix of the type's builder lists, model arrays and count (``distance``)
        label: how messages name one item ("distance", "angular spring")
        fields: the per-item ``Field`` declarations, in the order the builder appends them
    """

    name = ""
    label = ""
    fields = ()
    built = True
    """Whether a builder holds the items (False: ``columns`` makes them at finalize, as contact slots)."""
    carries_multipliers = False
    """Whether the warm start carries this type's multipliers into the next substep. Contacts do: their
    forces persist from substep to substep (a resting body's weight, a sticking contact's friction),
    and rebuilding them from zero every substep lets sticking contacts creep (a type that carries them
    can fit them to the prediction first: ``warm_start_commands``). Elastic and bilateral
    rows start from zero: a stiff row's force can change sign between substeps (omega h > 1), and
    carrying it then starts the iteration on the wrong side of its solution."""
    tries_carried_multipliers = False
    """Whether ``SolverSettings.elastic_warm_start`` tries carrying this type's multipliers too: the rows of
    a soft body (tetrahedra, distance rows, attachments), whose restart from zero every substep leaves a
    short solve's residual in a body at rest (convergence.md, "The stand"). Joints' rows are not tried:
    carried, they moved a frictional vine's converged answer and blew it up."""
    reads_remainders = False
    """Whether the type's row kernel evaluates its rows at the compensated positions itself (``kernels.compensated``,
    ``Solver.remainder_inputs``) rather than at the float32 values, shifted afterwards by J r. That shift is the
    row's change only where the residual moves with J x at unit slope; a row scaled by a slope of its own does not:
    a sliding contact's friction row is the Fischer-Burmeister function divided by its d phi / d a, floored at
    1e-3 where the true slope is 0, and J (r - r_n) added to it moved the friction force by up to 0.5 % of itself
    a substep where the remainders are large (a particle 30 m out: 1e-6 m; convergence.md, "Contacts at small steps")."""
    detected_arrays = ()
    """The solver's arrays (attribute names) that a substep fills before its rows are assembled and this type's row
    kernel reads: contacts' points and normals, detected once per substep. A gradient's tape of the rows holds copies
    of its own (``softsnake.gradients``), refilled per recorded substep."""
    planar_axis = None
    """For joints (fields body_a, axis_a): in a planar model the axis must be the plane "normal", or lie
    "in_plane"; None for types without an axis."""

    # ------------------------------------------------------------------ rows
    def rows_per_item(self, planar):
        """Rows of one item (``planar``: the model moves in the plane z = const)."""
        raise NotImplementedError

    def item_entities(self, columns, particle_count):
        """Entities (particle i, or body b as particle_count + b) each item's rows touch, in the order
        its kernel writes their Jacobian blocks: an int array (items, k), -1 where an item touches
        fewer. ``columns``: {field name: NumPy array of the builder's values}."""
        raise NotImplementedError

    def rows_from_start(self, planar):
        """Per row of an item, whether its residual measures a motion since the substep's start (a drive's extension
        over the substep) rather than a function of the current positions alone: compensated positions
        (``softsnake.kernels.compensated``) shift it by J (r - r_n) instead of J r (unless ``reads_remainders``)."""
        return [False] * self.rows_per_item(planar)

    def block_rows(self, planar):
        """Per row of an item, the row (relative to the item's first) that starts the 3x3 compliance
        block it belongs to, or None for a row with a diagonal compliance of its own."""
        return [None] * self.rows_per_item(planar)

    # ------------------------------------------------------------------ model
    def columns(self, builder):
        """{field name: list of values} of every item, plus "world": the builder's lists. Types whose
        items are made at finalize (contact slots) build them here."""
        columns = {f.name: getattr(builder, f"{self.name}_{f.name}") for f in self.fields}
        columns["world"] = getattr(builder, f"{self.name}_world")
        return columns

    def upload(self, columns, model, device):
        """Set the type's model arrays from its columns (the fields with ``upload``); types whose items
        need other arrays too (sampled moment curves) extend this."""
        for field in self.fields:
            if field.upload:
                setattr(model, f"{self.name}_{field.name}", upload_array(columns[field.name], field.dtype, device))

    # ------------------------------------------------------------------ solver
    def allocate(self, solver):
        """Create the type's per-item solver arrays on ``solver`` (most types have none)."""

    def predict_commands(self, solver, state, h):
        """Recorded launches after the prediction of a substep (contact detection); most types have none."""
        return []

    def warm_start_commands(self, solver, state):
        """Recorded launches that fit the carried multipliers to the prediction, with J at x~ and
        ``solver.u_lambda`` = M^-1 J^T lambda of the carried multipliers (types that carry them; none:
        the warm start skips that product)."""
        return []

    def velocity_correction_commands(self, solver, state, h):
        """Recorded launches after a substep's velocities are set that write into ``solver.dlam`` (zeroed
        before) the multipliers of a velocity change the substep's positions must not carry: the solver
        adds u = M^-1 J^T of them to the velocities (``newton.finish_commands``). Contacts take back the
        velocity of a penetration a point started its substep with; most types have none."""
        return []

    def leave_frame_commands(self, solver):
        """Recorded launches at a substep's end, while ``solver.frame_shift`` still holds each world's shift, that
        move the positions this type keeps between substeps from the substep's frame back to the model's
        (``softsnake.kernels.world_frame``): contacts their surface and start points; most types keep none."""
        return []

    def body_velocity_limit_commands(self, solver, state, h):
        """Recorded launches, after ``solver.u_lambda`` holds u = M^-1 J^T of the corrections, that lower
        ``solver.body_correction_scale`` (1 before) to the share of u a body keeps (contacts: no contact point
        loses more than its own correction)."""
        return []

    def row_command(self, solver, state, control, h):
        """The recorded launch that evaluates every row of this type (called only when count > 0)."""
        raise NotImplementedError


def joint_fields(axis_doc, anchors=True):
    """The fields every joint between body_a (-1: the static world) and body_b starts with: the two
    bodies, their anchors (the joint point in each body's frame) and the joint's axis in a's frame."""
    fields = [Field("body_a", int, "", "first body, -1 for the static world", index="body", optional=True),
              Field("body_b", int, "", "second body", index="body")]
    if anchors:
        fields += [Field("anchor_a", wp.vec3, "m", "joint point in a's frame (the world's frame for the static world)"),
                   Field("anchor_b", wp.vec3, "m", "joint point in b's frame")]
    return (*fields, Field("axis_a", wp.vec3, "", axis_doc))


def joint_entities(columns, particle_count):
    """Entities of joints between body_a (-1: the static world) and body_b: (P + a, P + b), or
    (P + b, -1) for a joint to the static world, whose rows touch only b."""
    a = np.asarray(columns["body_a"], dtype=np.int64)
    b = np.asarray(columns["body_b"], dtype=np.int64)
    first = np.where(a >= 0, particle_count + a, particle_count + b)
    second = np.where(a >= 0, particle_count + b, -1)
    return np.stack([first, second], axis=1).reshape(-1, 2)


class BuilderTables:
    """Per-item lists on a builder, one per declared field, appended all at once.

    ``declare(kind)`` creates ``<kind.name>_<field>`` lists and ``<kind.name>_world``;
    ``append_item`` takes every field's value and appends them together, after the caller has
    validated them all, so that a rejected item leaves no trace.
    """

    def declare(self, kind):
        for field in kind.fields:
            setattr(self, f"{kind.name}_{field.name}", [])
        setattr(self, f"{kind.name}_world", [])

    def item_count(self, kind):
        return len(getattr(self, f"{kind.name}_world"))

    def append_item(self, kind, values, world=None):
        """Append one item of ``kind`` (``values``: every field's value) to the current world, or to
        ``world``; returns its index."""
        names = [f.name for f in kind.fields]
        if sorted(values) != sorted(names):
            raise ModelError(f"{kind.name}: fields {sorted(values)} differ from the declared {sorted(names)}")
        world = self.current_world() if world is None else world
        for name in names:
            getattr(self, f"{kind.name}_{name}").append(values[name])
        getattr(self, f"{kind.name}_world").append(world)
        return self.item_count(kind) - 1
