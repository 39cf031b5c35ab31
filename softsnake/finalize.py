"""Turn a ModelBuilder into a Model: validation, row layout (``softsnake.layout``), device upload.

Every constraint type lays out and uploads its own items through its descriptor
(``softsnake.constraints``); particles, bodies and obstacles are uploaded here, as the arrays the
kernels use (inverse masses, inverse inertias, transforms). Every world stays in its own frame:
positions are uploaded as the builder holds them and the worlds' offsets are kept on the host
(``Model.world_offset``).
"""

import numpy as np
import warp as wp

from .constraints import CONSTRAINT_TYPES
from .consistency import check_builder_tables
from .constraints.base import upload_array
from .constraints.shapes import world_obstacles
from .errors import ModelError
from .layout import kept_columns, lay_out_rows, reduction_chunks, solve_layout
from .model import Model
from .spatial import quat_to_matrix
from .validation import FLOAT32_TINY, INVERSE_LIMIT, inverse_representable

PLANAR_TOLERANCE = 1e-6

CENTRE_OF_MASS_TOLERANCE = 1e-6
"""How far [m] the centre of the mass a body's shapes added may lie from the body's origin, which the engine takes
as the body's centre of mass (gravity acts there, and the body turns about it)."""
"""Largest out-of-plane component of a unit joint axis in a planar model [-]."""


def is_cpu_device(device):
    """Whether ``device`` (a name, a Warp device, or None: Warp's default) is the CPU; an unknown name
    is not (the device checks that report it run later)."""
    if device is None:
        return wp.get_device().is_cpu
    return str(device) == "cpu"


def resolve_device(device):
    try:
        return wp.get_device(device)
    except Exception:
        names = [str(d) for d in wp.get_devices()]
        raise ModelError(f"unknown device {device!r}; available devices: {', '.join(names)}") from None


def check_bodies(builder):
    """Every dynamic body has a mass and an inertia whose inverses float32 holds (shapes with a density
    add up to them, so they are checked here, once all are added). All bodies at once; the first
    failing one is named."""
    dynamic = np.flatnonzero(~np.asarray(builder.body_kinematic, dtype=bool))
    if len(dynamic) == 0:
        return
    mass = np.asarray(builder.body_mass, dtype=np.float64)[dynamic]
    inertia = np.asarray(builder.body_inertia, dtype=np.float64).reshape(-1, 3, 3)[dynamic]
    # The shapes' mass centred on the origin: a shape off it adds its mass there, not where the shape is.
    offset = np.asarray(builder.body_mass_moment, dtype=np.float64).reshape(-1, 3)[dynamic] / \
        np.where(mass > 0.0, mass, 1.0)[:, None]
    off_centre = np.linalg.norm(offset, axis=1) > CENTRE_OF_MASS_TOLERANCE
    if off_centre.any():
        k = int(np.argmax(off_centre))
        raise ModelError(f"body {int(dynamic[k])}: its shapes' mass is centred at {np.round(offset[k], 9).tolist()} m "
                         f"in its frame, not at its origin, which the engine takes as its centre of mass: place the body "
                         f"there (add_body's position) and its shapes around it")
    transposed = inertia.transpose(0, 2, 1)
    moments = np.linalg.eigvalsh(0.5 * (inertia + transposed))
    scale = 1e-12 * np.maximum(1.0, np.abs(inertia).max(axis=(1, 2)))
    asymmetric = ~np.all(np.abs(inertia - transposed) <= scale[:, None, None] + 1e-5 * np.abs(transposed),
                         axis=(1, 2))  # np.allclose(I, I.T, atol=scale), body by body
    bad = (mass <= 0.0) | (mass > INVERSE_LIMIT) | asymmetric | (moments.min(axis=1) <= 0.0) | \
        (moments.max(axis=1) > INVERSE_LIMIT) | (moments.min(axis=1) < FLOAT32_TINY)
    if not bad.any():
        return
    k = int(np.argmax(bad))
    b, I = int(dynamic[k]), inertia[k]
    if mass[k] <= 0.0:
        raise ModelError(f"body {b} has zero mass: give add_body(mass=...) or a shape density")
    inverse_representable(mass[k], f"body {b} mass")
    if asymmetric[k] or moments[k].min() <= 0:
        raise ModelError(f"body {b} inertia must be symmetric positive definite, got {I.tolist()}")
    raise ModelError(f"body {b} inertia has principal moments {moments[k].tolist()} kg m^2: float32, in which the "
                     f"model is simulated, holds neither them and their inverses outside "
                     f"[{FLOAT32_TINY:.2g}, {INVERSE_LIMIT:.2g}]")


def check_planar(builder):
    """A planar model moves in z = const: its bodies turn about z only and its joints must allow that."""
    z = np.array([0.0, 0.0, 1.0])
    for b in range(builder.body_count):
        q, I = builder.body_q[b][1], builder.body_inertia[b]
        if np.abs(q[:2]).max() > PLANAR_TOLERANCE:
            raise ModelError(f"body {b} of a planar model must be rotated about z only, got quaternion {q.tolist()}")
        if np.abs(I[:2, 2]).max() > PLANAR_TOLERANCE * max(np.abs(I).max(), 1e-30):
            raise ModelError(f"body {b} of a planar model needs z as a principal axis of inertia, got {I.tolist()}")
    for ctype in CONSTRAINT_TYPES:
        if ctype.planar_axis is None:
            continue
        joints = zip(getattr(builder, f"{ctype.name}_body_a"), getattr(builder, f"{ctype.name}_axis_a"))
        for k, (a, axis_local) in enumerate(joints):
            axis = quat_to_matrix(builder.body_q[a][1]) @ axis_local if a >= 0 else np.asarray(axis_local)
            along = abs(float(np.dot(axis, z)))
            about_normal = ctype.planar_axis == "normal"
            if (about_normal and along < 1.0 - PLANAR_TOLERANCE) or (not about_normal and along > PLANAR_TOLERANCE):
                plane = "be the plane normal (0, 0, 1)" if about_normal else "lie in the plane z = const"
                raise ModelError(f"{ctype.label} {k} of a planar model: its axis must {plane}, got {axis.tolist()}")


def world_starts(worlds, world_count):
    """Index of each world's first item (and one past the last) of items listed with their worlds."""
    counts = np.bincount(np.asarray(worlds, dtype=np.int64), minlength=world_count) if len(worlds) else np.zeros(world_count, int)
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


def upload_obstacles(m, builder, arr):
    """The obstacle arrays of model ``m``: the table of ``world_obstacles``, each entry with its source's
    kind, rotation, size; shared obstacles once per world, moved into its frame."""
    table = world_obstacles(builder)
    rotations = [builder.obstacle_rot[o] for o in table.source]
    m.obstacle_count = len(table.source)
    m.obstacle_kind = arr([builder.obstacle_kind[o] for o in table.source], int)
    m.obstacle_transform = arr([np.concatenate([p, q]) for p, q in zip(table.pos, rotations)], wp.transform)
    m.obstacle_size = arr(np.asarray([builder.obstacle_size[o] for o in table.source]).reshape(-1, 3), wp.vec3)
    m.obstacle_world = arr(table.world, int)


def finalize_model(builder, device):
    """The Model of ``builder`` on ``device`` (see ``ModelBuilder.finalize``)."""
    dev = resolve_device(device)
    check_builder_tables(builder)
    check_bodies(builder)
    if builder.planar:
        check_planar(builder)
    P, B = builder.particle_count, builder.body_count
    world_count = max(builder.world_count, 1)

    columns = {ctype.name: ctype.columns(builder) for ctype in CONSTRAINT_TYPES}
    groups = [(ctype.name, columns[ctype.name]["world"], ctype.item_entities(columns[ctype.name], P),
               ctype.rows_per_item(builder.planar), ctype.block_rows(builder.planar)) for ctype in CONSTRAINT_TYPES]
    layout = lay_out_rows(groups, world_count, P)
    keep = kept_columns(P, B, builder.planar)
    particle_world_start = world_starts(builder.particle_world, world_count)
    body_world_start = world_starts(builder.body_world, world_count)
    solve_offsets, solve_columns, solve_source, JT_offsets, JT_columns, JT_source = solve_layout(
        layout.J_offsets, layout.J_columns, keep, layout.world_row_start, particle_world_start, body_world_start)
    chunk_start, chunk_end, world_chunk_start = reduction_chunks(layout.world_row_start)

    m = Model(dev)
    m.world_count = world_count
    m.particle_count, m.body_count, m.row_count = P, B, layout.row_count
    m.shape_count = builder.shape_count
    m.pressure_channel_count = builder.pressure_channel_count
    m.gravity = wp.vec3(*builder.gravity)
    m.planar_axis = 2 if builder.planar else -1
    m.nnz = len(layout.J_columns)
    m.solve_nnz = len(solve_columns)
    m.solve_compact = m.solve_nnz < m.nnz

    def arr(values, dtype, shape_if_empty=0):
        return upload_array(values, dtype, dev, shape_if_empty)

    m.world_offset = builder.world_offsets()
    m.particle_world_start, m.body_world_start = particle_world_start, body_world_start
    m.pressure_channel_world_start = world_starts(builder.pressure_channel_world, world_count)
    m.pressure_channel_world = arr(np.asarray(builder.pressure_channel_world, dtype=np.int64), int)
    m.row_world_start = layout.world_row_start
    m.row_world_start_device = arr(layout.world_row_start, int)
    m.particle_world_start_device = arr(m.particle_world_start, int)
    m.body_world_start_device = arr(m.body_world_start, int)
    m.pressure_channel_world_start_device = arr(m.pressure_channel_world_start, int)

    # Particles.
    mass = np.asarray(builder.particle_mass, dtype=np.float64)
    m.particle_q = arr(np.asarray(builder.particle_q).reshape(-1, 3), wp.vec3)
    m.particle_qd = arr(np.asarray(builder.particle_qd).reshape(-1, 3), wp.vec3)
    m.particle_inv_mass = arr(np.where(mass > 0, 1.0 / np.where(mass > 0, mass, 1.0), 0.0), float)
    m.particle_radius = arr(builder.particle_radius, float)
    m.particle_world = arr(builder.particle_world, int)

    # Bodies.
    kinematic = np.asarray(builder.body_kinematic, dtype=bool)
    inertia = [np.zeros((3, 3)) if k else I for I, k in zip(builder.body_inertia, kinematic)]
    m.body_q = arr([np.concatenate([p, q]) for p, q in builder.body_q], wp.transform)
    m.body_qd = arr([np.concatenate([v, w]) for v, w in builder.body_qd], wp.spatial_vector)
    m.body_inv_mass = arr([0.0 if k else 1.0 / mb for mb, k in zip(builder.body_mass, kinematic)], float)
    m.body_inertia = arr(inertia, wp.mat33)
    m.body_inv_inertia = arr([np.zeros((3, 3)) if k else np.linalg.inv(I) for I, k in zip(inertia, kinematic)], wp.mat33)
    m.body_world = arr(builder.body_world, int)
    m.body_mass_numpy = np.asarray(builder.body_mass, dtype=np.float64)

    # Obstacles: every world's, in its frame (the contact slots point into the same table).
    upload_obstacles(m, builder, arr)

    # Constraints: each type's arrays, count and first rows.
    for ctype in CONSTRAINT_TYPES:
        ctype.upload(columns[ctype.name], m, dev)
        setattr(m, f"{ctype.name}_count", len(columns[ctype.name]["world"]))
        setattr(m, f"{ctype.name}_row", arr(layout.first_row[ctype.name], int))
        if ctype.built:  # items added world after world: each world's items are one range
            setattr(m, f"{ctype.name}_world_start", world_starts(columns[ctype.name]["world"], world_count))
            setattr(m, f"{ctype.name}_world", arr(columns[ctype.name]["world"], int))

    # Rows, sparse topology, reductions.
    m.row_world = arr(layout.row_world, int)
    m.row_block_start = arr(layout.row_block_start, int)
    m.J_offsets = arr(layout.J_offsets, int, 1)
    m.J_columns = arr(layout.J_columns, int)
    if m.solve_compact:
        m.solve_offsets = arr(solve_offsets, int, 1)
        m.solve_columns = arr(solve_columns, int)
        m.solve_source = arr(solve_source, int)
    else:  # the solver's J is J: the same arrays, and no gather
        m.solve_offsets, m.solve_columns, m.solve_source = m.J_offsets, m.J_columns, arr([], int)
    m.JT_offsets = arr(JT_offsets, int, 1)
    m.JT_columns = arr(JT_columns, int)
    m.JT_source = arr(JT_source, int)
    m.chunk_start = arr(chunk_start, int)
    m.chunk_end = arr(chunk_end, int)
    m.chunk_count = len(chunk_start)
    m.world_chunk_start = arr(world_chunk_start, int)
    return m
