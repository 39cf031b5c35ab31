"""One soft link of the snake: its tetrahedral mesh (TetGen) and its particle-constraint sets.

Frame: the link axis is +x, from x = 0 to x = length; the two chambers sit side by side along y
(chamber 0 at y < 0, chamber 1 at y > 0); z is up; the inextensible layer is the plane y = 0.

Particles lie only on the cross-sections x_s = s * length / (section_count - 1), all with the same
layout (paper Sec. V: a radially symmetric mesh on 13 cross-sections). Within a section, with
N = outer_ring_points and M = chamber_ring_points, the local indices are

    [0, N)            outer ring, at angle 2 pi k / N from +z towards +y: k = 0 is the top
                      (z = +R) and k = N / 2 the bottom, both on the layer y = 0
    [N, N + M)        chamber 0 ring, at angle pi / M + 2 pi i / M about the chamber axis
    [N + M, N + 2M)   chamber 1 ring, the mirror image (y -> -y) of chamber 0's

and particle index = section * (N + 2M) + local index. The chamber cavities are through-holes
(the rigid caps seal them), so they are not meshed as solid.

Constraint sets (paper Fig. 3a), all pairs of particles with rest lengths from the geometry:

- ``chamber_limit`` (green): each chamber ring point to the opposite one, per section;
- ``perimeter`` (blue): consecutive points around each chamber ring, per section (the fibre
  wrap keeps the chamber perimeter constant);
- ``inextensible``: the top and bottom layer particles along x, and top to bottom across
  each section;
- ``actuation`` (red), one set per chamber: each chamber ring point to the same point on the next
  section, parallel to x; the simulator gives them the rest length r (1 + p / Y) (paper eq. 4).

Files. ``save_link_mesh(mesh, "link.vtu")`` writes the points and tetrahedra with meshio (any
meshio format that holds ``tetra`` cells: .vtu, .msh, ...) and a sidecar ``link.constraints.npz``
with the integer arrays ``vertex_section`` (n,), ``chamber_limit``, ``perimeter``, ``inextensible``,
``actuation_0``, ``actuation_1`` (each (p, 2)), ``end_particles_first`` and ``end_particles_last``.
Rest lengths and surface triangles are not stored: they follow from the points and tetrahedra.
Users may supply their own mesh in this form: ``load_link_mesh`` validates it, and
``robot.add_snake(..., link_mesh=...)`` (or ``add_link_stand``) builds every link of it.
"""

import zipfile
from dataclasses import dataclass
from pathlib import Path

import meshio
import numpy as np
import tetgen
from scipy.spatial import Delaunay

from softsnake.errors import ModelError, UsageError
from softsnake.output_files import replaced_when_complete

TETGEN_OPTIONS = {"plc": True, "nobisect": True, "quality": False, "quiet": True}
"""TetGen switches ``pYQ`` as keyword arguments (a switch string makes the wrapper print to
stdout): tetrahedralise the closed surface (p), keep its triangles unchanged (Y), quietly (Q).
Without quality refinement no Steiner points are added, so every particle stays on a section."""

DEGENERATE_TET_QUALITY = 1e-6
"""A tetrahedron whose volume is below this fraction of the volume of a regular tetrahedron on
its longest edge counts as degenerate (zero volume)."""

_SIDECAR_KEYS = ("vertex_section", "chamber_limit", "perimeter", "inextensible", "actuation_0",
                 "actuation_1", "end_particles_first", "end_particles_last")

# Faces of a positively oriented tetrahedron (v0, v1, v2, v3) with outward normals.
_TET_FACES = np.array([[1, 2, 3], [0, 3, 2], [0, 1, 3], [0, 2, 1]])


@dataclass(frozen=True)
class DistanceSet:
    """Distance constraints between pairs of particles.

    pairs: particle indices (p, 2) int32
    rest_lengths: distance of each pair in the undeformed link (p,) [m]
    """

    pairs: np.ndarray
    rest_lengths: np.ndarray

    def __len__(self):
        return len(self.pairs)


@dataclass(frozen=True)
class LinkMesh:
    """One soft link: particles, tetrahedra, surface and constraint sets (see the module doc).

    vertices: particle rest positions (n, 3) float64 [m]
    tets: tetrahedra (m, 4) int32, positively oriented: det[x1 - x0, x2 - x0, x3 - x0] > 0
    surface_triangles: boundary triangles (k, 3) int32, counter-clockwise seen from outside
    vertex_section: cross-section index of each particle (n,) int32
    chamber_limit: across each chamber ring, per section
    perimeter: around each chamber ring, per section
    inextensible: on the layer y = 0, along x and across
    actuation: (chamber 0, chamber 1) pairs along each chamber between consecutive sections
    end_particles: (particles on the first section, particles on the last section), int32
    """

    vertices: np.ndarray
    tets: np.ndarray
    surface_triangles: np.ndarray
    vertex_section: np.ndarray
    chamber_limit: DistanceSet
    perimeter: DistanceSet
    inextensible: DistanceSet
    actuation: tuple
    end_particles: tuple

    @property
    def section_count(self):
        """Number of cross-sections [-]."""
        return int(self.vertex_section.max()) + 1

    @property
    def distance_constraint_count(self):
        """Number of distance constraints of all kinds, actuation included [-]."""
        sets = (self.chamber_limit, self.perimeter, self.inextensible) + tuple(self.actuation)
        return sum(len(s) for s in sets)

    def tet_volumes(self):
        """Volume of each tetrahedron (m,) [m^3]."""
        return _tet_volumes(self.vertices, self.tets)

    def particle_masses(self, density):
        """Lumped particle masses: a quarter of each adjacent tetrahedron's mass (n,) [kg].

        density: material density [kg/m^3]
        """
        if not density > 0:
            raise ModelError(f"density must be positive, got {density}")
        masses = np.zeros(len(self.vertices))
        np.add.at(masses, self.tets.ravel(), np.repeat(0.25 * density * self.tet_volumes(), 4))
        return masses


def _tet_volumes(vertices, tets):
    corners = vertices[tets]
    edges = corners[:, 1:] - corners[:, :1]
    return np.linalg.det(edges) / 6.0


def _section_points(config, resolution):
    """(y, z) of every particle of one cross-section [m], in the local-index order."""
    outer_radius = 0.5 * config.outer_diameter
    n, m = resolution.outer_ring_points, resolution.chamber_ring_points
    theta = 2.0 * np.pi * np.arange(n) / n
    outer = outer_radius * np.column_stack([np.sin(theta), np.cos(theta)])
    # A flat chamber side faces the layer and one faces the outer wall.
    phi = np.pi / m + 2.0 * np.pi * np.arange(m) / m
    chamber0 = np.column_stack([-config.chamber_offset + config.chamber_radius * np.cos(phi),
                                config.chamber_radius * np.sin(phi)])
    chamber1 = chamber0 * np.array([-1.0, 1.0])
    return np.concatenate([outer, chamber0, chamber1])


def _ring_edges(start, count):
    """Edges (count, 2) of the closed ring of local indices start .. start + count - 1."""
    ring = start + np.arange(count)
    return np.column_stack([ring, np.roll(ring, -1)])


def _section_ring_edges(n, m):
    """Edges of the outer ring and of both chamber rings of one section, in local indices."""
    return np.concatenate([_ring_edges(0, n), _ring_edges(n, m), _ring_edges(n + m, m)])


def _end_face_triangles(points, n, m):
    """Triangles of the cross-section region between the outer ring and the two chamber rings.

    A Delaunay triangulation of the section points covers the outer polygon; the triangles inside a
    chamber are those whose three corners lie on that chamber's ring (the rings are convex).
    """
    triangulation = Delaunay(points)
    triangles = triangulation.simplices
    ring = np.concatenate([np.zeros(n, int), np.ones(m, int), np.full(m, 2)])
    corner_ring = ring[triangles]
    inside_chamber = (corner_ring[:, 0] > 0) & (corner_ring == corner_ring[:, :1]).all(axis=1)
    triangles = triangles[~inside_chamber]
    # Every ring edge must be an edge of exactly one remaining triangle, and no other edge may be
    # on the region's boundary; otherwise the chambers are too close to a wall to triangulate.
    edges = np.sort(triangles[:, [0, 1, 1, 2, 2, 0]].reshape(-1, 2), axis=1)
    unique, counts = np.unique(edges, axis=0, return_counts=True)
    boundary = {tuple(e) for e in unique[counts == 1]}
    if boundary != {tuple(sorted(e)) for e in _section_ring_edges(n, m)}:
        raise ModelError("cannot triangulate the link cross-section: chambers too close to the walls")
    return triangles


def _surface_faces(section_triangles, n, m, section_count):
    """Triangles of the closed link surface (outer wall, chamber walls, both end faces)."""
    points_per_section = n + 2 * m
    rings = _section_ring_edges(n, m)
    offsets = points_per_section * np.arange(section_count - 1)[:, None]
    a = rings[None, :, 0] + offsets
    b = rings[None, :, 1] + offsets
    a_next, b_next = a + points_per_section, b + points_per_section
    walls = np.concatenate([np.stack([a, b, b_next], axis=-1).reshape(-1, 3),
                            np.stack([a, b_next, a_next], axis=-1).reshape(-1, 3)])
    last = points_per_section * (section_count - 1)
    return np.concatenate([walls, section_triangles, section_triangles + last])


def _pairs_across_sections(local_indices, points_per_section, section_count):
    """Pairs joining each local index to itself on the next section, for every section gap."""
    base = points_per_section * np.arange(section_count - 1)[:, None] + np.asarray(local_indices)[None, :]
    return np.stack([base, base + points_per_section], axis=-1).reshape(-1, 2)


def _pairs_within_sections(local_pairs, points_per_section, section_count):
    """The given pairs of local indices repeated on every section."""
    offsets = points_per_section * np.arange(section_count)[:, None, None]
    return (np.asarray(local_pairs)[None] + offsets).reshape(-1, 2)


def _constraint_indices(n, m, section_count):
    """Index arrays of every constraint set and of the end particles (see the module doc)."""
    points_per_section = n + 2 * m
    chambers = [n + np.arange(m), n + m + np.arange(m)]
    top, bottom = 0, n // 2
    half = m // 2
    return {
        "chamber_limit": _pairs_within_sections(
            np.concatenate([np.column_stack([c[:half], c[half:]]) for c in chambers]),
            points_per_section, section_count),
        "perimeter": _pairs_within_sections(
            np.concatenate([_ring_edges(c[0], m) for c in chambers]), points_per_section, section_count),
        "inextensible": np.concatenate([
            _pairs_across_sections([top, bottom], points_per_section, section_count),
            _pairs_within_sections([[top, bottom]], points_per_section, section_count)]),
        "actuation_0": _pairs_across_sections(chambers[0], points_per_section, section_count),
        "actuation_1": _pairs_across_sections(chambers[1], points_per_section, section_count),
        "end_particles_first": np.arange(points_per_section),
        "end_particles_last": points_per_section * (section_count - 1) + np.arange(points_per_section),
    }


def build_link_mesh(config, resolution):
    """Build one soft link in code and tetrahedralise it with TetGen.

    config: the link geometry (``LinkConfig``)
    resolution: a ``ResolutionConfig`` or the name of one of ``config.resolutions``
    Returns a validated ``LinkMesh``.
    """
    if isinstance(resolution, str):
        resolution = config.resolution(resolution)
    n, m = resolution.outer_ring_points, resolution.chamber_ring_points
    section_count = resolution.section_count
    section = _section_points(config, resolution)
    section_x = config.length * np.arange(section_count) / (section_count - 1)
    vertices = np.concatenate([np.column_stack([np.full(len(section), x), section]) for x in section_x])
    faces = _surface_faces(_end_face_triangles(section, n, m), n, m, section_count)
    nodes, tets, _, _ = tetgen.TetGen(vertices, faces.astype(np.int32)).tetrahedralize(**TETGEN_OPTIONS)
    if nodes.shape != vertices.shape or not np.array_equal(nodes, vertices):
        raise ModelError(f"TetGen added {len(nodes) - len(vertices)} points off the cross-sections")
    tets = np.asarray(tets, dtype=np.int32)
    # Make every tetrahedron positively oriented whatever TetGen's convention.
    inverted = _tet_volumes(vertices, tets) < 0
    tets[inverted] = tets[inverted][:, [0, 2, 1, 3]]
    indices = _constraint_indices(n, m, section_count)
    indices["vertex_section"] = np.repeat(np.arange(section_count), len(section))
    return _link_mesh(vertices, tets, indices, source="generated link mesh")


def _surface_triangles(tets):
    """Boundary faces of a positively oriented tet mesh, with outward normals."""
    faces = tets[:, _TET_FACES].reshape(-1, 3)
    _, first, counts = np.unique(np.sort(faces, axis=1), axis=0, return_index=True, return_counts=True)
    return faces[np.sort(first[counts == 1])].astype(np.int32)


def _link_mesh(vertices, tets, indices, *, source):
    """Validate the arrays of a link mesh and assemble the ``LinkMesh`` (rest lengths, surface)."""
    vertices = np.asarray(vertices, dtype=np.float64)
    if vertices.ndim != 2 or vertices.shape[1] != 3 or len(vertices) < 4:
        raise ModelError(f"{source}: expected at least 4 points of 3 coordinates, got shape {vertices.shape}")
    if not np.isfinite(vertices).all():
        raise ModelError(f"{source}: point coordinates must be finite")
    count = len(vertices)
    tets = _index_array(tets, 4, count, "tets", source)
    if len(tets) == 0:
        raise ModelError(f"{source}: no tetrahedra")
    if (np.sort(tets, axis=1)[:, 1:] == np.sort(tets, axis=1)[:, :-1]).any():
        raise ModelError(f"{source}: a tetrahedron repeats a point")
    volumes = _tet_volumes(vertices, tets)
    corners = vertices[tets]
    longest = np.linalg.norm(corners[:, :, None] - corners[:, None, :], axis=-1).max(axis=(1, 2))
    regular = longest**3 / (6.0 * np.sqrt(2.0))
    degenerate = np.abs(volumes) < DEGENERATE_TET_QUALITY * regular
    if degenerate.any():
        raise ModelError(f"{source}: tetrahedron {int(np.argmax(degenerate))} has zero volume")
    if (volumes < 0).any():
        raise ModelError(f"{source}: tetrahedron {int(np.argmax(volumes < 0))} is inverted (negative volume)")
    unused = np.setdiff1d(np.arange(count), tets)
    if len(unused):
        raise ModelError(f"{source}: point {int(unused[0])} belongs to no tetrahedron")
    vertex_section = np.asarray(indices["vertex_section"])
    if vertex_section.shape != (count,) or not np.issubdtype(vertex_section.dtype, np.integer):
        raise ModelError(f"{source}: vertex_section must hold one integer per point")
    if vertex_section.min() < 0:
        raise ModelError(f"{source}: vertex_section must not be negative")

    def distance_set(key):
        pairs = _index_array(indices[key], 2, count, key, source)
        rest_lengths = np.linalg.norm(vertices[pairs[:, 1]] - vertices[pairs[:, 0]], axis=1)
        if (rest_lengths == 0).any():
            raise ModelError(f"{source}: {key} pair {int(np.argmin(rest_lengths))} joins coincident points")
        return DistanceSet(pairs=pairs, rest_lengths=rest_lengths)

    ends = []
    for key in ("end_particles_first", "end_particles_last"):
        particles = _index_array(indices[key], None, count, key, source)
        if len(particles) == 0:
            raise ModelError(f"{source}: {key} is empty")
        ends.append(particles)
    return LinkMesh(
        vertices=vertices,
        tets=tets,
        surface_triangles=_surface_triangles(tets),
        vertex_section=vertex_section.astype(np.int32),
        chamber_limit=distance_set("chamber_limit"),
        perimeter=distance_set("perimeter"),
        inextensible=distance_set("inextensible"),
        actuation=(distance_set("actuation_0"), distance_set("actuation_1")),
        end_particles=tuple(ends),
    )


def _index_array(values, width, count, key, source):
    """``values`` as int32 of shape (p, width) (or (p,) for width None) with entries in [0, count)."""
    values = np.asarray(values)
    shape = (0,) if width is None else (0, width)
    if values.size == 0:
        return np.zeros(shape, dtype=np.int32)
    if not np.issubdtype(values.dtype, np.integer):
        raise ModelError(f"{source}: {key} must hold integer indices, got {values.dtype}")
    if values.ndim != len(shape) or (width is not None and values.shape[1] != width):
        expected = "(p,)" if width is None else f"(p, {width})"
        raise ModelError(f"{source}: {key} must have shape {expected}, got {values.shape}")
    if values.min() < 0 or values.max() >= count:
        raise ModelError(f"{source}: {key} has an index outside 0..{count - 1}")
    return values.astype(np.int32)


def sidecar_path(path):
    """The constraint file that goes with mesh file ``path``: ``link.vtu`` -> ``link.constraints.npz``."""
    path = Path(path)
    return path.with_name(f"{path.stem}.constraints.npz")


def save_link_mesh(mesh, path):
    """Write ``mesh`` to ``path`` (meshio, format from the suffix) and its sidecar constraint file.

    Both files are written under temporary names, the mesh file is read back to check that it
    holds every tetrahedron, and then both are renamed; nothing is left behind on failure.
    """
    path = Path(path)
    sidecar = sidecar_path(path)
    arrays = {
        "vertex_section": mesh.vertex_section,
        "chamber_limit": mesh.chamber_limit.pairs,
        "perimeter": mesh.perimeter.pairs,
        "inextensible": mesh.inextensible.pairs,
        "actuation_0": mesh.actuation[0].pairs,
        "actuation_1": mesh.actuation[1].pairs,
        "end_particles_first": mesh.end_particles[0],
        "end_particles_last": mesh.end_particles[1],
    }
    try:
        with replaced_when_complete(path) as partial_mesh, replaced_when_complete(sidecar) as partial_sidecar:
            meshio.write(partial_mesh, meshio.Mesh(mesh.vertices, [("tetra", mesh.tets)]))
            written = meshio.read(partial_mesh)
            # Some formats (STL, OBJ, ...) silently drop tetrahedra: refuse them.
            if sum(len(block.data) for block in written.cells if block.type == "tetra") != len(mesh.tets):
                raise UsageError(f"{path}: the format '{path.suffix}' cannot hold tetrahedra")
            with open(partial_sidecar, "wb") as stream:
                np.savez(stream, **arrays)
    except (OSError, meshio.ReadError, meshio.WriteError, ImportError) as exc:
        raise UsageError(f"{path}: cannot write the mesh: {exc}") from None


def load_link_mesh(path):
    """Read a link mesh written by ``save_link_mesh`` (or supplied by a user in that form).

    path: the mesh file (any meshio format with ``tetra`` cells); its sidecar
        ``<stem>.constraints.npz`` must sit beside it
    Returns a validated ``LinkMesh``; raises ModelError naming the file and the problem.
    """
    path = Path(path)
    sidecar = sidecar_path(path)
    try:
        data = meshio.read(path)
    except (OSError, meshio.ReadError, ImportError) as exc:
        raise ModelError(f"{path}: cannot read mesh: {exc}") from None
    blocks = [block.data for block in data.cells if block.type == "tetra"]
    if not blocks:
        raise ModelError(f"{path}: no tetrahedra (meshio cell type 'tetra')")
    try:
        stored = np.load(sidecar, allow_pickle=False)
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise ModelError(f"{sidecar}: cannot read constraint file: {exc}") from None
    if not isinstance(stored, np.lib.npyio.NpzFile):
        raise ModelError(f"{sidecar}: not an .npz archive of named arrays")
    with stored:
        missing = [key for key in _SIDECAR_KEYS if key not in stored.files]
        if missing:
            raise ModelError(f"{sidecar}: missing array '{missing[0]}'")
        indices = {key: stored[key] for key in _SIDECAR_KEYS}
    return _link_mesh(data.points, np.concatenate(blocks), indices, source=str(path))
