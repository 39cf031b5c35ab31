"""Turn a ModelBuilder into a Model: validation, row layout, CSR topology, device upload.

Rows are laid out world after world; inside a world, by constraint type (distance,
tetrahedron, attachment, hinge, prismatic, angular spring, contact). Each row's nonzeros are one block
per entity it touches (3 columns for a particle, 6 for a body), in the order the kernels write
them. The sparsity of J and of J^T is fixed here, once: contacts use one slot per (collision
point, obstacle) pair of a world, active or not.

Planar models (everything moves in the plane z = const) have no rows for out-of-plane motion,
which the integrator removes anyway: a hinge keeps its two in-plane anchor rows, a prismatic
joint its rotation row about z, its in-plane normal row and its drive, a contact its normal and
in-plane friction rows. Their linear solve runs on the in-plane degrees of freedom only (particle
x, y; body x, y and rotation about z): the solver's copy of J (``solve_*``) leaves out the
out-of-plane columns, which planar rows leave zero.
"""

import numpy as np
import warp as wp

from softsnake.kernels.linear_solver import REDUCTION_CHUNK

from .builder import (
    SHAPE_BOX,
    SHAPE_CAPSULE,
    SHAPE_CYLINDER,
    SHAPE_SPHERE,
)
from .spatial import quat_to_matrix
from .errors import ModelError
from .model import Model


POINT_FIXED = 0
POINT_CYLINDER_RIM = 1

PLANAR_TOLERANCE = 1e-6
"""Largest out-of-plane component of a unit joint axis in a planar model [-]."""


def rows_per_item(planar):
    """Rows of one hinge, prismatic joint and contact slot (the kernels write the same layout)."""
    if planar:
        return {"hinge": 2, "prismatic": 3, "slot": 2}
    return {"hinge": 5, "prismatic": 6, "slot": 3}


def resolve_device(device):
    try:
        return wp.get_device(device)
    except Exception:
        names = [str(d) for d in wp.get_devices()]
        raise ModelError(f"unknown device {device!r}; available devices: {', '.join(names)}") from None


def _check_bodies(builder):
    for b in range(builder.body_count):
        if builder.body_kinematic[b]:
            continue
        if builder.body_mass[b] <= 0.0:
            raise ModelError(f"body {b} has zero mass: give add_body(mass=...) or a shape density")
        I = builder.body_inertia[b]
        if not np.allclose(I, I.T, atol=1e-12 * max(1.0, np.abs(I).max())) or np.any(np.linalg.eigvalsh(0.5 * (I + I.T)) <= 0):
            raise ModelError(f"body {b} inertia must be symmetric positive definite, got {I.tolist()}")


def _check_planar(builder):
    """A planar model moves in z = const: its bodies turn about z only and its joints must allow that."""
    z = np.array([0.0, 0.0, 1.0])
    for b in range(builder.body_count):
        q, I = builder.body_q[b][1], builder.body_inertia[b]
        if np.abs(q[:2]).max() > PLANAR_TOLERANCE:
            raise ModelError(f"body {b} of a planar model must be rotated about z only, got quaternion {q.tolist()}")
        if np.abs(I[:2, 2]).max() > PLANAR_TOLERANCE * max(np.abs(I).max(), 1e-30):
            raise ModelError(f"body {b} of a planar model needs z as a principal axis of inertia, got {I.tolist()}")
    joints = (("hinge", builder.hinge_body_a, builder.hinge_axis_a, True),
              ("angular spring", builder.spring_body_a, builder.spring_axis_a, True),
              ("prismatic", builder.prismatic_body_a, builder.prismatic_axis_a, False))
    for what, bodies, axes, about_normal in joints:
        for k, (a, axis_local) in enumerate(zip(bodies, axes)):
            axis = quat_to_matrix(builder.body_q[a][1]) @ axis_local if a >= 0 else np.asarray(axis_local)
            along = abs(float(np.dot(axis, z)))
            if (about_normal and along < 1.0 - PLANAR_TOLERANCE) or (not about_normal and along > PLANAR_TOLERANCE):
                plane = "be the plane normal (0, 0, 1)" if about_normal else "lie in the plane z = const"
                raise ModelError(f"{what} {k} of a planar model: its axis must {plane}, got {axis.tolist()}")


def _solve_layout(J_offsets, J_columns, keep):
    """The solver's J (the kept columns of J, as indices into J's values) and its transpose.

    Returns offsets, columns and source of J's kept entries, and offsets, columns and source of
    J^T: a gather of J's values fills both (no atomics). Inside a column of J^T, entries follow
    the row order.
    """
    row_count, dof_count = len(J_offsets) - 1, len(keep)
    nnz_rows = np.repeat(np.arange(row_count), np.diff(J_offsets))
    source = np.flatnonzero(keep[J_columns])
    offsets = np.zeros(row_count + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(np.bincount(nnz_rows[source], minlength=row_count))
    columns = J_columns[source]
    order = np.lexsort((nnz_rows[source], columns))
    transpose_offsets = np.zeros(dof_count + 1, dtype=np.int64)
    transpose_offsets[1:] = np.cumsum(np.bincount(columns, minlength=dof_count))
    return offsets, columns, source, transpose_offsets, nnz_rows[source][order], source[order]


def _collision_points(builder):
    """(entity, kind, local point, local axis, rim radius, contact radius, mu, world) of everything that collides."""
    P = builder.particle_count
    points = []
    for i in range(P):
        if builder.particle_collide[i] and builder.particle_mass[i] > 0.0:
            points.append((i, POINT_FIXED, np.zeros(3), np.zeros(3), 0.0, builder.particle_radius[i], np.inf, builder.particle_world[i]))
    for s in range(builder.shape_count):
        b = builder.shape_body[s]
        if builder.body_kinematic[b]:
            continue
        pos, R, size = builder.shape_pos[s], quat_to_matrix(builder.shape_rot[s]), builder.shape_size[s]
        kind, mu, world, ent = builder.shape_type[s], builder.shape_mu[s], builder.body_world[b], P + b
        z = R[:, 2]
        if kind == SHAPE_SPHERE:
            points.append((ent, POINT_FIXED, pos, z, 0.0, size[0], mu, world))
        elif kind == SHAPE_CAPSULE:
            for sign in (-1.0, 1.0):
                points.append((ent, POINT_FIXED, pos + sign * size[1] * z, z, 0.0, size[0], mu, world))
        elif kind == SHAPE_BOX:
            for corner in np.array(np.meshgrid([-1, 1], [-1, 1], [-1, 1], indexing="ij")).reshape(3, -1).T:
                points.append((ent, POINT_FIXED, pos + R @ (corner * size), z, 0.0, 0.0, mu, world))
        elif kind == SHAPE_CYLINDER:
            # A wheel (width <= radius) touches through one rim point in its mid-plane: two points
            # on a line along the axis would leave sideways friction split between them undetermined.
            signs = (0.0,) if size[1] <= 0.5 * size[0] else (-1.0, 1.0)
            for sign in signs:
                points.append((ent, POINT_CYLINDER_RIM, pos + sign * size[1] * z, z, size[0], 0.0, mu, world))
    return points


class _RowLayout:
    """Accumulates rows world by world: their entity blocks, world and tetrahedral coupling."""

    def __init__(self, particle_count):
        self.P = particle_count
        self.row_entities = []
        self.row_world = []
        self.row_block_start = []

    def entity_columns(self, e):
        if e < self.P:
            return range(3 * e, 3 * e + 3)
        base = 3 * self.P + 6 * (e - self.P)
        return range(base, base + 6)

    def add(self, entities, world, block_start=None):
        row = len(self.row_world)
        self.row_entities.append(entities)
        self.row_world.append(world)
        self.row_block_start.append(row if block_start is None else block_start)
        return row

    def csr(self):
        counts = [sum(3 if e < self.P else 6 for e in ents) for ents in self.row_entities]
        offsets = np.zeros(len(counts) + 1, dtype=np.int64)
        offsets[1:] = np.cumsum(counts)
        columns = np.fromiter(
            (c for ents in self.row_entities for e in ents for c in self.entity_columns(e)), dtype=np.int64, count=int(offsets[-1])
        )
        return offsets, columns


def _group_by_world(worlds, world_count):
    """Indices of the items of each world, in their original order (one pass, not one per world)."""
    groups = [[] for _ in range(world_count)]
    for k, w in enumerate(worlds):
        groups[w].append(k)
    return groups


def finalize_model(builder, device):
    dev = resolve_device(device)
    _check_bodies(builder)
    if builder.planar:
        _check_planar(builder)
    per_item = rows_per_item(builder.planar)
    P, B = builder.particle_count, builder.body_count
    world_count = max(builder.world_count, 1)

    # Contact slots: every collision point against every obstacle of its world or of all worlds.
    points = _collision_points(builder)
    slots = []
    for pt in points:
        for o in range(builder.obstacle_count):
            ow = builder.obstacle_world[o]
            if ow == -1 or ow == pt[7]:
                mu = min(pt[6], builder.obstacle_mu[o])
                slots.append((pt, o, mu))

    layout = _RowLayout(P)
    row_of = {name: np.zeros(n, dtype=np.int64) for name, n in (
        ("distance", builder.distance_count), ("tet", builder.tet_count), ("attachment", builder.attachment_count),
        ("hinge", builder.hinge_count), ("prismatic", builder.prismatic_count), ("spring", builder.spring_count),
        ("slot", len(slots)))}
    slot_world = [pt[7] for pt, _, _ in slots]
    by_world = {name: _group_by_world(getattr(builder, f"{name}_world"), world_count)
                for name in ("distance", "tet", "attachment", "hinge", "prismatic", "spring")}
    by_world["slot"] = _group_by_world(slot_world, world_count)
    world_row_start = np.zeros(world_count + 1, dtype=np.int64)
    for w in range(world_count):
        world_row_start[w] = len(layout.row_world)
        for k in by_world["distance"][w]:
            row_of["distance"][k] = layout.add(list(builder.distance_particles[k]), w)
        for k in by_world["tet"][w]:
            first = len(layout.row_world)
            row_of["tet"][k] = first
            ents = [int(i) for i in builder.tet_particles[k]]
            for r in range(6):
                layout.add(ents, w, first if r < 3 else None)
        for k in by_world["attachment"][w]:
            row_of["attachment"][k] = len(layout.row_world)
            for _ in range(3):
                layout.add([P + builder.attachment_body[k], builder.attachment_particle[k]], w)
        for k in by_world["hinge"][w]:
            a, b = builder.hinge_body_a[k], builder.hinge_body_b[k]
            ents = ([P + a] if a >= 0 else []) + [P + b]
            row_of["hinge"][k] = len(layout.row_world)
            for _ in range(per_item["hinge"]):
                layout.add(ents, w)
        for k in by_world["prismatic"][w]:
            a, b = builder.prismatic_body_a[k], builder.prismatic_body_b[k]
            ents = ([P + a] if a >= 0 else []) + [P + b]
            row_of["prismatic"][k] = len(layout.row_world)
            for _ in range(per_item["prismatic"]):
                layout.add(ents, w)
        for k in by_world["spring"][w]:
            a, b = builder.spring_body_a[k], builder.spring_body_b[k]
            row_of["spring"][k] = layout.add(([P + a] if a >= 0 else []) + [P + b], w)
        for k in by_world["slot"][w]:
            row_of["slot"][k] = len(layout.row_world)
            for _ in range(per_item["slot"]):
                layout.add([slots[k][0][0]], w)
    world_row_start[world_count] = len(layout.row_world)
    row_count = len(layout.row_world)

    J_offsets, J_columns = layout.csr()
    dof_count = 3 * P + 6 * B
    keep = np.ones(dof_count, dtype=bool)
    if builder.planar:
        keep[2:3 * P:3] = False
        for k in (2, 3, 4):
            keep[3 * P + k::6] = False
    solve_offsets, solve_columns, solve_source, JT_offsets, JT_columns, JT_source = _solve_layout(J_offsets, J_columns, keep)

    # Reduction chunks: fixed-size pieces of each world's rows.
    chunk_start, chunk_end, world_chunk_start = [], [], [0]
    for w in range(world_count):
        for s in range(int(world_row_start[w]), int(world_row_start[w + 1]), REDUCTION_CHUNK):
            chunk_start.append(s)
            chunk_end.append(min(s + REDUCTION_CHUNK, int(world_row_start[w + 1])))
        world_chunk_start.append(len(chunk_start))

    m = Model(dev)
    m.world_count = world_count
    m.particle_count, m.body_count, m.row_count = P, B, row_count
    m.distance_count, m.tet_count, m.attachment_count = builder.distance_count, builder.tet_count, builder.attachment_count
    m.hinge_count, m.spring_count, m.obstacle_count = builder.hinge_count, builder.spring_count, builder.obstacle_count
    m.prismatic_count = builder.prismatic_count
    m.contact_slot_count, m.pressure_channel_count = len(slots), builder.pressure_channel_count
    m.shape_count = builder.shape_count
    m.gravity = wp.vec3(*builder.gravity)
    m.gravity_numpy = np.asarray(builder.gravity, dtype=np.float64)
    m.planar_axis = 2 if builder.planar else -1
    m.nnz = len(J_columns)
    m.solve_nnz = len(solve_columns)
    m.solve_compact = m.solve_nnz < m.nnz

    def arr(values, dtype, shape_if_empty=0):
        a = np.asarray(values)
        if a.size == 0:
            return wp.zeros(shape_if_empty, dtype=dtype, device=dev)
        return wp.array(a, dtype=dtype, device=dev)

    def world_starts(worlds):
        counts = np.bincount(np.asarray(worlds, dtype=np.int64), minlength=world_count) if len(worlds) else np.zeros(world_count, int)
        return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)

    m.particle_world_start = world_starts(builder.particle_world)
    m.body_world_start = world_starts(builder.body_world)
    m.pressure_channel_world_start = world_starts(builder.pressure_channel_world)
    m.pressure_channel_world = arr(np.asarray(builder.pressure_channel_world, dtype=np.int64), int)
    m.spring_world_start = world_starts(builder.spring_world)
    m.row_world_start = world_row_start
    m.row_world_start_device = arr(world_row_start, int)
    m.particle_world_start_device = arr(m.particle_world_start, int)
    m.body_world_start_device = arr(m.body_world_start, int)

    # Particles.
    mass = np.asarray(builder.particle_mass, dtype=np.float64)
    m.particle_q = arr(np.asarray(builder.particle_q).reshape(-1, 3), wp.vec3)
    m.particle_qd = arr(np.asarray(builder.particle_qd).reshape(-1, 3), wp.vec3)
    m.particle_inv_mass = arr(np.where(mass > 0, 1.0 / np.where(mass > 0, mass, 1.0), 0.0), float)
    m.particle_radius = arr(builder.particle_radius, float)
    m.particle_world = arr(builder.particle_world, int)

    # Bodies.
    body_q = [np.concatenate([p, q]) for p, q in builder.body_q]
    body_qd = [np.concatenate([v, w]) for v, w in builder.body_qd]
    inv_m, inertia, inv_inertia = [], [], []
    for b in range(B):
        if builder.body_kinematic[b]:
            inv_m.append(0.0)
            inertia.append(np.zeros((3, 3)))
            inv_inertia.append(np.zeros((3, 3)))
        else:
            inv_m.append(1.0 / builder.body_mass[b])
            inertia.append(builder.body_inertia[b])
            inv_inertia.append(np.linalg.inv(builder.body_inertia[b]))
    m.body_q = arr(body_q, wp.transform)
    m.body_qd = arr(body_qd, wp.spatial_vector)
    m.body_inv_mass = arr(inv_m, float)
    m.body_inertia = arr(inertia, wp.mat33)
    m.body_inv_inertia = arr(inv_inertia, wp.mat33)
    m.body_world = arr(builder.body_world, int)
    m.body_mass_numpy = np.asarray(builder.body_mass, dtype=np.float64)

    # Constraints.
    m.distance_particles = arr(builder.distance_particles, wp.vec2i)
    m.distance_rest_length = arr(builder.distance_rest, float)
    m.distance_compliance = arr(builder.distance_compliance, float)
    m.distance_damping = arr(builder.distance_damping, float)
    m.distance_pressure_channel = arr(builder.distance_channel, int)
    m.distance_youngs_modulus = arr(builder.distance_youngs, float)
    m.distance_row = arr(row_of["distance"], int)
    m.tet_particles = arr(np.asarray(builder.tet_particles).reshape(-1, 4), wp.vec4i)
    m.tet_inv_rest = arr(builder.tet_inv_rest, wp.mat33)
    m.tet_volume = arr(builder.tet_volume, float)
    m.tet_youngs_modulus = arr(builder.tet_youngs, float)
    m.tet_poisson_ratio = arr(builder.tet_poisson, float)
    m.tet_damping = arr(builder.tet_damping, float)
    m.tet_row = arr(row_of["tet"], int)
    m.attachment_body = arr(builder.attachment_body, int)
    m.attachment_particle = arr(builder.attachment_particle, int)
    m.attachment_local = arr(np.asarray(builder.attachment_local).reshape(-1, 3), wp.vec3)
    m.attachment_compliance = arr(builder.attachment_compliance, float)
    m.attachment_damping = arr(builder.attachment_damping, float)
    m.attachment_row = arr(row_of["attachment"], int)
    m.hinge_body_a = arr(builder.hinge_body_a, int)
    m.hinge_body_b = arr(builder.hinge_body_b, int)
    for name in ("hinge_anchor_a", "hinge_anchor_b", "hinge_axis_a", "hinge_normal_b1", "hinge_normal_b2"):
        setattr(m, name, arr(np.asarray(getattr(builder, name)).reshape(-1, 3), wp.vec3))
    m.hinge_compliance = arr(builder.hinge_compliance, float)
    m.hinge_row = arr(row_of["hinge"], int)

    m.prismatic_body_a = arr(builder.prismatic_body_a, int)
    m.prismatic_body_b = arr(builder.prismatic_body_b, int)
    for name in ("prismatic_anchor_a", "prismatic_anchor_b", "prismatic_axis_a", "prismatic_normal_a1", "prismatic_normal_a2"):
        setattr(m, name, arr(np.asarray(getattr(builder, name)).reshape(-1, 3), wp.vec3))
    m.prismatic_rest_rotation = arr(np.asarray(builder.prismatic_rest_rotation).reshape(-1, 4), wp.quat)
    m.prismatic_compliance = arr(builder.prismatic_compliance, float)
    m.prismatic_driven = arr(np.asarray(builder.prismatic_driven, dtype=np.int32), int)
    m.prismatic_drive_mobility = arr(builder.prismatic_drive_mobility, float)
    m.prismatic_rate = arr(builder.prismatic_rate, float)
    m.prismatic_row = arr(row_of["prismatic"], int)

    curve_start, curve_count, curve_angle, curve_moment = [], [], [], []
    for curve in builder.spring_curves:
        curve_start.append(len(curve_angle))
        if curve is None:
            curve_count.append(0)
        else:
            curve_count.append(len(curve[0]))
            curve_angle.extend(curve[0])
            curve_moment.extend(curve[1])
    m.spring_body_a = arr(builder.spring_body_a, int)
    m.spring_body_b = arr(builder.spring_body_b, int)
    m.spring_axis_a = arr(np.asarray(builder.spring_axis_a).reshape(-1, 3), wp.vec3)
    m.spring_rest_rotation = arr(np.asarray(builder.spring_rest_rotation).reshape(-1, 4), wp.quat)
    m.spring_stiffness = arr(builder.spring_stiffness, float)
    m.spring_damping = arr(builder.spring_damping, float)
    m.spring_target = arr(builder.spring_target, float)
    m.spring_curve_start = arr(curve_start, int)
    m.spring_curve_count = arr(curve_count, int)
    m.curve_angle = arr(curve_angle, float, 1)
    m.curve_moment = arr(curve_moment, float, 1)
    m.spring_row = arr(row_of["spring"], int)

    # Obstacles and contact slots.
    m.obstacle_kind = arr(builder.obstacle_kind, int)
    m.obstacle_transform = arr([np.concatenate([p, q]) for p, q in zip(builder.obstacle_pos, builder.obstacle_rot)], wp.transform)
    m.obstacle_size = arr(np.asarray(builder.obstacle_size).reshape(-1, 3), wp.vec3)
    m.slot_entity = arr([pt[0] for pt, _, _ in slots], int)
    m.slot_kind = arr([pt[1] for pt, _, _ in slots], int)
    m.slot_local = arr(np.asarray([pt[2] for pt, _, _ in slots]).reshape(-1, 3), wp.vec3)
    m.slot_axis = arr(np.asarray([pt[3] for pt, _, _ in slots]).reshape(-1, 3), wp.vec3)
    m.slot_rim_radius = arr([pt[4] for pt, _, _ in slots], float)
    m.slot_radius = arr([pt[5] for pt, _, _ in slots], float)
    m.slot_mu = arr([mu for _, _, mu in slots], float)
    m.slot_obstacle = arr([o for _, o, _ in slots], int)
    m.slot_row = arr(row_of["slot"], int)

    # Rows, sparse topology, reductions.
    m.row_world = arr(layout.row_world, int)
    m.row_block_start = arr(layout.row_block_start, int)
    m.J_offsets = arr(J_offsets, int, 1)
    m.J_columns = arr(J_columns, int)
    m.solve_offsets = arr(solve_offsets, int, 1)
    m.solve_columns = arr(solve_columns, int)
    m.solve_source = arr(solve_source, int)
    m.JT_offsets = arr(JT_offsets, int, 1)
    m.JT_columns = arr(JT_columns, int)
    m.JT_source = arr(JT_source, int)
    m.chunk_start = arr(chunk_start, int)
    m.chunk_end = arr(chunk_end, int)
    m.chunk_count = len(chunk_start)
    m.world_chunk_start = arr(world_chunk_start, int)
    return m
