"""Structured tetrahedral meshes of boxes and the nodal forces of surface tractions (numpy only).

``box_tet_mesh`` splits a box into nx * ny * nz hexahedral cells and every cell into
tetrahedra: six around the cell's main diagonal (Kuhn/Freudenthal split, the same in every
cell) or five (one central tetrahedron and four corner ones, mirrored in alternate cells so
that the face diagonals of neighbouring cells match). Either way the mesh is conforming and
every tetrahedron is positively oriented, det[x1 - x0, x2 - x0, x3 - x0] > 0, the orientation
``ModelBuilder.add_soft_mesh`` expects.
"""

from itertools import permutations

import numpy as np

from .errors import ModelError

# Faces of a positively oriented tetrahedron (v0, v1, v2, v3), counter-clockwise seen from outside.
_TET_FACES = np.array([[1, 2, 3], [0, 3, 2], [0, 1, 3], [0, 2, 1]])


def _cell_corner(a, b, c):
    """Local index of the hexahedral cell corner at offsets (a, b, c) in {0, 1}."""
    return a + 2 * b + 4 * c


def _kuhn_tets():
    """Six tetrahedra along the paths from corner (0,0,0) to (1,1,1), one per axis order."""
    tets = []
    for order in permutations(range(3)):
        corner = [0, 0, 0]
        path = [_cell_corner(*corner)]
        for axis in order:
            corner[axis] = 1
            path.append(_cell_corner(*corner))
        tets.append(path)
    return np.array(tets)


def _five_tets(mirrored):
    """One central and four corner tetrahedra; ``mirrored`` swaps the roles of the two corner sets."""
    even = [(0, 0, 0), (1, 1, 0), (1, 0, 1), (0, 1, 1)]
    odd = [(1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 1, 1)]
    corners, others = (odd, even) if mirrored else (even, odd)
    tets = [[_cell_corner(*c) for c in others]]
    for c in corners:
        # The corner's three neighbours along the cell edges all belong to the other set.
        neighbours = [tuple(c[k] ^ (k == axis) for k in range(3)) for axis in range(3)]
        tets.append([_cell_corner(*c)] + [_cell_corner(*n) for n in neighbours])
    return np.array(tets)


def _orient_positive(vertices, tets):
    """Swap two vertices of every negatively oriented tetrahedron."""
    x = vertices[tets]
    det = np.linalg.det(np.stack([x[:, 1] - x[:, 0], x[:, 2] - x[:, 0], x[:, 3] - x[:, 0]], axis=2))
    flip = det < 0.0
    tets[flip] = tets[flip][:, [0, 2, 1, 3]]
    return tets


def box_tet_mesh(size=(1.0, 1.0, 1.0), cells=(1, 1, 1), *, tets_per_cell=6):
    """Tetrahedral mesh of a box centred at the origin.

    Args:
        size: edge lengths (lx, ly, lz) [m], positive
        cells: hexahedral cells (nx, ny, nz) along each edge, positive integers
        tets_per_cell: 6 (Kuhn split around each cell's diagonal) or 5 (alternating split)

    Returns:
        vertices: (n, 3) float64 [m], n = (nx + 1)(ny + 1)(nz + 1), index i + (nx + 1)(j + (ny + 1) k)
            for the grid point (i, j, k)
        tets: (m, 4) int64, m = tets_per_cell * nx * ny * nz, positively oriented
    """
    size = np.asarray(size, dtype=np.float64)
    if size.shape != (3,) or not np.all(np.isfinite(size)) or np.any(size <= 0.0):
        raise ModelError(f"box size must be three positive lengths [m], got {np.asarray(size).tolist()}")
    cells_arr = np.asarray(cells)
    if cells_arr.shape != (3,) or not np.all(cells_arr == np.round(cells_arr)) or np.any(cells_arr < 1):
        raise ModelError(f"box cells must be three positive integers, got {cells_arr.tolist()}")
    if tets_per_cell not in (5, 6):
        raise ModelError(f"tets_per_cell must be 5 or 6, got {tets_per_cell}")
    nx, ny, nz = (int(n) for n in cells_arr)

    axes = [np.linspace(-0.5 * s, 0.5 * s, n + 1) for s, n in zip(size, (nx, ny, nz))]
    gz, gy, gx = np.meshgrid(axes[2], axes[1], axes[0], indexing="ij")
    vertices = np.stack([gx.ravel(), gy.ravel(), gz.ravel()], axis=1)

    i, j, k = (a.ravel() for a in np.meshgrid(np.arange(nx), np.arange(ny), np.arange(nz), indexing="ij"))
    corners = np.stack(
        [(i + a) + (nx + 1) * ((j + b) + (ny + 1) * (k + c)) for c in (0, 1) for b in (0, 1) for a in (0, 1)], axis=1
    )
    if tets_per_cell == 6:
        tets = corners[:, _kuhn_tets()].reshape(-1, 4)
    else:
        parity = (i + j + k) % 2 == 1
        tets = np.where(parity[:, None, None], corners[:, _five_tets(True)], corners[:, _five_tets(False)]).reshape(-1, 4)
    return vertices, _orient_positive(vertices, tets.astype(np.int64))


def boundary_faces(tets):
    """Boundary triangles of a tetrahedral mesh (faces that belong to one tetrahedron only).

    Args:
        tets: (m, 4) vertex indices, positively oriented

    Returns:
        (k, 3) vertex indices, ordered counter-clockwise seen from outside (outward normals)
    """
    t = np.asarray(tets)
    faces = t[:, _TET_FACES].reshape(-1, 3)
    _, first, counts = np.unique(np.sort(faces, axis=1), axis=0, return_index=True, return_counts=True)
    return faces[np.sort(first[counts == 1])]


def traction_nodal_forces(vertices, faces, traction):
    """Consistent nodal forces of a uniform traction on triangles (a third of each triangle's load per corner).

    With these forces a linear-tetrahedron mesh carries a uniform stress state exactly.

    Args:
        vertices: (n, 3) positions [m]
        faces: (k, 3) vertex indices of the loaded triangles
        traction: force per area [Pa], a 3-vector (the same on every face)

    Returns:
        (n, 3) nodal forces [N]; their sum is traction times the total area of the faces
    """
    v = np.asarray(vertices, dtype=np.float64)
    f = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
    area = 0.5 * np.linalg.norm(np.cross(v[f[:, 1]] - v[f[:, 0]], v[f[:, 2]] - v[f[:, 0]]), axis=1)
    forces = np.zeros_like(v)
    np.add.at(forces, f.ravel(), np.repeat(area / 3.0, 3)[:, None] * np.asarray(traction, dtype=np.float64))
    return forces
