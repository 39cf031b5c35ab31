"""One soft link's mesh: geometry against the analytic solid, symmetry, constraint sets, Table I
counts and the meshio round trip."""

import math

import meshio
import numpy as np
import pytest
from scipy.spatial import cKDTree

from softsnake.errors import ConfigError, ModelError, UsageError
from softsnake.robots.snake.config import load_snake_config
from softsnake.robots.snake.link_mesh import (
    build_link_mesh,
    load_link_mesh,
    save_link_mesh,
    sidecar_path,
)

# Paper Table I, for the whole four-link snake.
TABLE_1_PARTICLES = 1504
TABLE_1_TETS = 4536
TABLE_1_DISTANCE_CONSTRAINTS = 1460
TABLE_1_ATTACHMENTS = 217
TABLE_1_TOLERANCE = 0.20
"""Relative tolerance on the per-link counts: the paper gives totals only, not its mesh."""

EXACT = 1e-9
"""Relative tolerance on volumes, areas and lengths that the mesh holds exactly (round-off only)."""

MIRROR_TOLERANCE = 1e-12
"""Absolute tolerance [m] for a mirrored point to coincide with a mesh point."""


@pytest.fixture(scope="module")
def config():
    return load_snake_config()


@pytest.fixture(scope="module")
def meshes(config):
    return {name: build_link_mesh(config.link, name) for name in ("paper", "coarse")}


@pytest.fixture(scope="module", params=["paper", "coarse"])
def case(request, config, meshes):
    """(link config, resolution, mesh) for each resolution."""
    return config.link, config.resolution(request.param), meshes[request.param]


def polygon_area(circumradius, sides):
    """Area of the regular polygon with ``sides`` corners on a circle of ``circumradius`` [m^2]."""
    return 0.5 * sides * circumradius**2 * math.sin(2.0 * math.pi / sides)


def polygon_perimeter(circumradius, sides):
    return 2.0 * sides * circumradius * math.sin(math.pi / sides)


def solid_section_area(link, resolution):
    """Analytic cross-section area: outer polygon minus the two chamber polygons [m^2]."""
    return (polygon_area(0.5 * link.outer_diameter, resolution.outer_ring_points)
            - 2.0 * polygon_area(link.chamber_radius, resolution.chamber_ring_points))


def relative_error(value, expected):
    return abs(value - expected) / abs(expected)


def test_all_tets_positively_oriented(case):
    _, _, mesh = case
    assert mesh.tets.dtype == np.int32
    assert mesh.tet_volumes().min() > 0


def test_tet_volume_equals_analytic_solid(case):
    link, resolution, mesh = case
    expected = link.length * solid_section_area(link, resolution)
    assert relative_error(mesh.tet_volumes().sum(), expected) < EXACT


def test_lumped_masses_sum_to_solid_mass(case, config):
    link, resolution, mesh = case
    density = config.material.density
    masses = mesh.particle_masses(density)
    assert masses.min() > 0
    expected = density * link.length * solid_section_area(link, resolution)
    assert relative_error(masses.sum(), expected) < EXACT


def test_surface_is_closed_outward_and_has_analytic_area(case):
    link, resolution, mesh = case
    corners = mesh.vertices[mesh.surface_triangles]
    cross = np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0])
    n, m = resolution.outer_ring_points, resolution.chamber_ring_points
    walls = link.length * (polygon_perimeter(0.5 * link.outer_diameter, n)
                           + 2.0 * polygon_perimeter(link.chamber_radius, m))
    expected_area = walls + 2.0 * solid_section_area(link, resolution)
    assert relative_error(0.5 * np.linalg.norm(cross, axis=1).sum(), expected_area) < EXACT
    # Divergence theorem: the flux of x / 3 through an outward-oriented surface is the volume.
    flux = np.einsum("ij,ij->", corners.mean(axis=1), cross) / 6.0
    assert relative_error(flux, mesh.tet_volumes().sum()) < EXACT
    edges = np.sort(mesh.surface_triangles[:, [0, 1, 1, 2, 2, 0]].reshape(-1, 2), axis=1)
    _, counts = np.unique(edges, axis=0, return_counts=True)
    assert (counts == 2).all()


def test_particles_lie_on_the_cross_sections(case):
    link, resolution, mesh = case
    sections = resolution.section_count
    assert mesh.section_count == sections
    section_x = link.length * np.arange(sections) / (sections - 1)
    assert np.abs(mesh.vertices[:, 0] - section_x[mesh.vertex_section]).max() < 1e-15
    per_section = np.bincount(mesh.vertex_section)
    assert (per_section == resolution.outer_ring_points + 2 * resolution.chamber_ring_points).all()


def test_paper_mesh_has_13_cross_sections(meshes):
    # Paper Sec. V: "The link mesh was subdivided in 13 cross-sections along its length".
    assert meshes["paper"].section_count == 13


def mirror_map(vertices):
    """Index of the mirror image (y -> -y) of every vertex; fails if an image is not a vertex."""
    distance, image = cKDTree(vertices).query(vertices * np.array([1.0, -1.0, 1.0]))
    assert distance.max() < MIRROR_TOLERANCE
    return image


def pair_set(pairs):
    return {tuple(sorted(pair)) for pair in pairs.tolist()}


def chamber_side(mesh, distance_set, sign):
    """The pairs of ``distance_set`` on the side y * sign > 0."""
    y = mesh.vertices[distance_set.pairs[:, 0], 1]
    return distance_set.pairs[y * sign > 0]


def test_mirror_symmetry(case):
    _, _, mesh = case
    image = mirror_map(mesh.vertices)
    assert (mesh.vertex_section[image] == mesh.vertex_section).all()
    act0, act1 = mesh.actuation
    assert pair_set(image[act0.pairs]) == pair_set(act1.pairs)
    for distance_set in (mesh.chamber_limit, mesh.perimeter):
        chamber0 = chamber_side(mesh, distance_set, -1.0)
        chamber1 = chamber_side(mesh, distance_set, +1.0)
        assert len(chamber0) == len(chamber1) == len(distance_set) // 2
        assert pair_set(image[chamber0]) == pair_set(chamber1)
    assert pair_set(image[mesh.inextensible.pairs]) == pair_set(mesh.inextensible.pairs)


def test_chamber_sides(case):
    _, _, mesh = case
    act0, act1 = mesh.actuation
    assert (mesh.vertices[act0.pairs, 1] < 0).all()
    assert (mesh.vertices[act1.pairs, 1] > 0).all()


def test_actuation_pairs_run_along_x_between_consecutive_sections(case):
    link, resolution, mesh = case
    spacing = link.length / (resolution.section_count - 1)
    for chamber, distance_set in enumerate(mesh.actuation):
        delta = mesh.vertices[distance_set.pairs[:, 1]] - mesh.vertices[distance_set.pairs[:, 0]]
        assert np.abs(delta[:, 1:]).max() < 1e-15
        assert np.abs(delta[:, 0] - spacing).max() < EXACT * spacing
        assert np.abs(distance_set.rest_lengths - spacing).max() < EXACT * spacing
        # Every chamber ring point is driven on every section gap, and lies on the chamber's circle.
        assert len(distance_set) == resolution.chamber_ring_points * (resolution.section_count - 1)
        axis = np.array([(-1.0, 1.0)[chamber] * link.chamber_offset, 0.0])
        radius = np.linalg.norm(mesh.vertices[distance_set.pairs.ravel(), 1:] - axis, axis=1)
        assert np.abs(radius - link.chamber_radius).max() < EXACT * link.chamber_radius


def test_perimeter_constraints_sum_to_the_chamber_perimeter(case):
    link, resolution, mesh = case
    m = resolution.chamber_ring_points
    lengths = mesh.perimeter.rest_lengths.reshape(-1, m).sum(axis=1)
    assert len(lengths) == 2 * resolution.section_count
    assert np.abs(lengths / polygon_perimeter(link.chamber_radius, m) - 1.0).max() < EXACT


def test_chamber_limit_constraints_span_the_chamber_diameter(case):
    link, resolution, mesh = case
    assert len(mesh.chamber_limit) == resolution.chamber_ring_points * resolution.section_count
    assert np.abs(mesh.chamber_limit.rest_lengths / (2.0 * link.chamber_radius) - 1.0).max() < EXACT


def test_inextensible_constraints_lie_on_the_layer(case):
    link, resolution, mesh = case
    assert np.abs(mesh.vertices[mesh.inextensible.pairs, 1]).max() < 1e-15
    delta = np.abs(mesh.vertices[mesh.inextensible.pairs[:, 1]] - mesh.vertices[mesh.inextensible.pairs[:, 0]])
    along = delta[:, 0] > 0
    spacing = link.length / (resolution.section_count - 1)
    assert along.sum() == 2 * (resolution.section_count - 1)
    assert np.abs(mesh.inextensible.rest_lengths[along] / spacing - 1.0).max() < EXACT
    assert (~along).sum() == resolution.section_count
    assert np.abs(mesh.inextensible.rest_lengths[~along] / link.outer_diameter - 1.0).max() < EXACT


def test_end_particles_are_the_end_sections(case):
    link, resolution, mesh = case
    first, last = mesh.end_particles
    assert np.array_equal(np.sort(first), np.flatnonzero(mesh.vertex_section == 0))
    assert np.array_equal(np.sort(last), np.flatnonzero(mesh.vertex_section == resolution.section_count - 1))
    assert np.abs(mesh.vertices[last, 0] - link.length).max() < 1e-15


def test_paper_counts_match_table_1(config, meshes):
    mesh = meshes["paper"]
    links = config.link_count
    module_ends = 2 * links
    counts = {
        "particles": (links * len(mesh.vertices), TABLE_1_PARTICLES),
        "tets": (links * len(mesh.tets), TABLE_1_TETS),
        "distance constraints": (links * mesh.distance_constraint_count, TABLE_1_DISTANCE_CONSTRAINTS),
        "attachments": (module_ends * len(mesh.end_particles[0]), TABLE_1_ATTACHMENTS),
    }
    for name, (count, published) in counts.items():
        assert relative_error(count, published) < TABLE_1_TOLERANCE, (name, count, published)


def test_coarse_mesh_is_smaller(meshes):
    paper, coarse = meshes["paper"], meshes["coarse"]
    assert len(coarse.vertices) < len(paper.vertices)
    assert len(coarse.tets) < len(paper.tets)
    assert coarse.distance_constraint_count < paper.distance_constraint_count


def test_unknown_resolution(config):
    with pytest.raises(ConfigError, match="unknown resolution"):
        build_link_mesh(config.link, "fine")


@pytest.mark.parametrize("suffix", [".vtu", ".msh"])
def test_save_load_round_trip(tmp_path, meshes, suffix):
    mesh = meshes["paper"]
    path = tmp_path / f"link{suffix}"
    save_link_mesh(mesh, path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([path.name, sidecar_path(path).name])
    loaded = load_link_mesh(path)
    assert np.array_equal(loaded.vertices, mesh.vertices)
    assert np.array_equal(loaded.tets, mesh.tets)
    assert np.array_equal(loaded.surface_triangles, mesh.surface_triangles)
    assert np.array_equal(loaded.vertex_section, mesh.vertex_section)
    for name in ("chamber_limit", "perimeter", "inextensible"):
        assert np.array_equal(getattr(loaded, name).pairs, getattr(mesh, name).pairs)
        assert np.array_equal(getattr(loaded, name).rest_lengths, getattr(mesh, name).rest_lengths)
    for chamber in (0, 1):
        assert np.array_equal(loaded.actuation[chamber].pairs, mesh.actuation[chamber].pairs)
        assert np.array_equal(loaded.end_particles[chamber], mesh.end_particles[chamber])


def write_mesh(tmp_path, mesh, *, vertices=None, tets=None, **sidecar):
    """Save ``mesh``, then overwrite its points, tetrahedra or sidecar arrays."""
    path = tmp_path / "link.vtu"
    save_link_mesh(mesh, path)
    meshio.write(path, meshio.Mesh(mesh.vertices if vertices is None else vertices,
                                   [("tetra", mesh.tets if tets is None else tets)]))
    if sidecar:
        stored = dict(np.load(sidecar_path(path)))
        stored.update(sidecar)
        np.savez(sidecar_path(path), **stored)
    return path


def test_load_refuses_inverted_tet(tmp_path, meshes):
    mesh = meshes["coarse"]
    tets = mesh.tets.copy()
    tets[5] = tets[5, [1, 0, 2, 3]]
    with pytest.raises(ModelError, match="tetrahedron 5 is inverted"):
        load_link_mesh(write_mesh(tmp_path, mesh, tets=tets))


def test_load_refuses_zero_volume_tet(tmp_path, meshes):
    mesh = meshes["coarse"]
    vertices = mesh.vertices.copy()
    corners = mesh.tets[7]
    # Move the last corner into the plane of the other three.
    vertices[corners[3]] = vertices[corners[:3]].mean(axis=0)
    with pytest.raises(ModelError, match="zero volume"):
        load_link_mesh(write_mesh(tmp_path, mesh, vertices=vertices))


def test_load_refuses_index_out_of_range(tmp_path, meshes):
    mesh = meshes["coarse"]
    pairs = mesh.perimeter.pairs.copy()
    pairs[0, 1] = len(mesh.vertices)
    with pytest.raises(ModelError, match="perimeter has an index outside"):
        load_link_mesh(write_mesh(tmp_path, mesh, perimeter=pairs))
    tets = mesh.tets.copy()
    tets[0, 0] = -1
    with pytest.raises(ModelError, match="tets has an index outside"):
        load_link_mesh(write_mesh(tmp_path, mesh, tets=tets))


def test_load_refuses_unused_point(tmp_path, meshes):
    mesh = meshes["coarse"]
    vertices = np.concatenate([mesh.vertices, [[1.0, 1.0, 1.0]]])
    section = np.concatenate([mesh.vertex_section, [0]])
    with pytest.raises(ModelError, match=f"point {len(mesh.vertices)} belongs to no tetrahedron"):
        load_link_mesh(write_mesh(tmp_path, mesh, vertices=vertices, vertex_section=section))


def test_load_refuses_missing_files(tmp_path, meshes):
    path = write_mesh(tmp_path, meshes["coarse"])
    sidecar_path(path).unlink()
    with pytest.raises(ModelError, match="cannot read constraint file"):
        load_link_mesh(path)
    with pytest.raises(ModelError, match="cannot read mesh"):
        load_link_mesh(tmp_path / "absent.vtu")


@pytest.mark.parametrize("name, problem", [("link.stl", "cannot hold tetrahedra"),
                                           ("link.unknown", "cannot write the mesh")])
def test_save_refuses_formats_without_tetrahedra_and_leaves_nothing(tmp_path, meshes, name, problem):
    with pytest.raises(UsageError, match=problem):
        save_link_mesh(meshes["coarse"], tmp_path / name)
    assert list(tmp_path.iterdir()) == []


def test_save_into_missing_folder_is_a_clear_error(tmp_path, meshes):
    with pytest.raises(UsageError, match="cannot write the mesh"):
        save_link_mesh(meshes["coarse"], tmp_path / "absent" / "link.vtu")


def test_user_mesh_may_leave_constraint_sets_empty(tmp_path, meshes):
    path = write_mesh(tmp_path, meshes["coarse"], inextensible=np.zeros((0, 2), dtype=np.int64))
    assert len(load_link_mesh(path).inextensible) == 0


@pytest.mark.parametrize("key, value, problem", [
    ("actuation_0", np.zeros((4, 2)), "actuation_0 must hold integer indices"),
    ("chamber_limit", np.zeros((4, 3), dtype=np.int64), r"chamber_limit must have shape \(p, 2\)"),
    ("vertex_section", np.zeros(3, dtype=np.int64), "vertex_section must hold one integer per point"),
    ("perimeter", np.array([[1, 1]]), "perimeter pair 0 joins coincident points"),
])
def test_load_refuses_bad_sidecar_arrays(tmp_path, meshes, key, value, problem):
    with pytest.raises(ModelError, match=problem):
        load_link_mesh(write_mesh(tmp_path, meshes["coarse"], **{key: value}))


def test_a_snake_of_a_users_link_mesh(tmp_path, config, meshes):
    """A link mesh read from files (``load_link_mesh``) builds a snake (``add_snake(link_mesh=...)``): the shipped
    coarse mesh saved and read back gives the snake the config builds, particle for particle and row for row; a mesh
    that does not span the configured link length (stretched by 10 % along its axis) is refused in one line."""
    import dataclasses

    import softsnake
    from softsnake.robots.snake.robot import add_snake

    path = tmp_path / "my_link.vtu"
    save_link_mesh(meshes["coarse"], path)
    built, read = softsnake.ModelBuilder(), softsnake.ModelBuilder()
    add_snake(built, config, "coarse")
    add_snake(read, config, "coarse", link_mesh=load_link_mesh(path))
    a, b = built.finalize(), read.finalize()
    assert a.particle_count == b.particle_count and a.row_count == b.row_count
    assert np.array_equal(a.particle_q.numpy(), b.particle_q.numpy())
    assert np.array_equal(a.distance_rest_length.numpy(), b.distance_rest_length.numpy())
    assert np.array_equal(a.tet_particles.numpy(), b.tet_particles.numpy())
    stretched = dataclasses.replace(meshes["coarse"], vertices=meshes["coarse"].vertices * [1.1, 1.0, 1.0])
    with pytest.raises(ConfigError, match="the link mesh spans x = 0 .. 0.1.* m, the configured link 0 .. 0.1"):
        add_snake(softsnake.ModelBuilder(), config, "coarse", link_mesh=stretched)
