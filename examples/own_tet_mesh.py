"""Your own tetrahedral mesh as a pneumatic soft body: read it with meshio, clamp it, actuate it.

    python examples/own_tet_mesh.py                 # first writes beam.vtu, a sample made with TetGen
    python examples/own_tet_mesh.py my_part.msh     # any tetrahedral mesh meshio reads (.msh, .vtu, .vtk, .mesh, ...)

The mesh is taken in metres, its long axis along x. The example clamps the end at the smallest x
to a fixed body and lays "actuation" distance rows along the top surface (largest z), the way a
chamber's walls are pushed apart: each row's rest length r grows to r (1 + p / Y) with the
pressure p of one channel (``add_distance(..., pressure_channel=c, youngs_modulus=Y)``). Two
worlds run in one batch, at 0 kPa and at ``--kpa``, so the bending the pressure causes is seen
apart from the sag under gravity. Printed: mesh size, and the free end's sag in both worlds.
"""

import argparse
from pathlib import Path

import meshio
import numpy as np
import warp as wp

import softsnake

DENSITY = 1070.0          # [kg/m^3] silicone rubber (Ecoflex 00-30)
YOUNGS_MODULUS = 66243.0  # [Pa]
POISSON_RATIO = 0.45      # [-] linear tetrahedra lock as nu -> 0.5 (experiments/results/snake.md)
DAMPING = 0.02            # [s] stiffness-proportional damping of the elements and rows


def write_sample_mesh(path, size=(0.1, 0.02, 0.02)):
    """Tetrahedralise a box of ``size`` [m] with TetGen and write it with meshio (a stand-in for
    the user's own file)."""
    import tetgen

    corners = np.array([[x, y, z] for z in (0, 1) for y in (0, 1) for x in (0, 1)], dtype=float) * size
    quads = [(0, 2, 3, 1), (4, 5, 7, 6), (0, 1, 5, 4), (2, 6, 7, 3), (0, 4, 6, 2), (1, 3, 7, 5)]
    faces = np.array([tri for a, b, c, d in quads for tri in ((a, b, c), (a, c, d))], dtype=np.int32)
    # Quality tetrahedra of at most 0.2 cm^3 each (TetGen's switches pq1.5a2e-7, quietly).
    nodes, tets, *_ = tetgen.TetGen(corners, faces).tetrahedralize(
        plc=True, quality=True, minratio=1.5, fixedvolume=True, maxvolume=2e-7, quiet=True)
    meshio.Mesh(nodes, [("tetra", np.asarray(tets)[:, :4])]).write(path)
    return path


def read_tet_mesh(path):
    """(vertices (n, 3) [m], tets (m, 4)) of a mesh file, every tetrahedron positively oriented
    (det[x1 - x0, x2 - x0, x3 - x0] > 0), as ``add_soft_mesh`` expects."""
    mesh = meshio.read(path)
    if "tetra" not in mesh.cells_dict:
        raise SystemExit(f"{path}: no tetrahedra (cell types: {', '.join(mesh.cells_dict)})")
    vertices = np.asarray(mesh.points, dtype=np.float64)[:, :3]
    tets = np.asarray(mesh.cells_dict["tetra"], dtype=np.int64)
    x = vertices[tets]
    negative = np.linalg.det(np.stack([x[:, 1] - x[:, 0], x[:, 2] - x[:, 0], x[:, 3] - x[:, 0]], axis=2)) < 0.0
    tets[negative] = tets[negative][:, [0, 2, 1, 3]]
    return vertices, tets


def actuated_body(vertices, tets):
    """One world: the mesh clamped at its smallest x, with pressure-driven rows along its top."""
    world = softsnake.ModelBuilder()
    start = world.add_soft_mesh(vertices, tets, DENSITY, YOUNGS_MODULUS, POISSON_RATIO, damping=DAMPING)
    low, high = vertices.min(axis=0), vertices.max(axis=0)
    tolerance = 1e-3 * np.ptp(vertices, axis=0).max()
    clamp = world.add_body(tuple(low), kinematic=True)
    for k in np.flatnonzero(vertices[:, 0] < low[0] + tolerance):
        world.add_attachment(clamp, start + int(k))
    # Actuation rows: the mesh's edges on the top surface that run mostly along x.
    channel = world.add_pressure_channel()
    top = vertices[:, 2] > high[2] - tolerance
    edges = {tuple(sorted((int(a), int(b)))) for tet in tets for a in tet for b in tet if a != b and top[a] and top[b]}
    rows = 0
    for a, b in sorted(edges):
        along = vertices[b] - vertices[a]
        length = np.linalg.norm(along)
        if abs(along[0]) > 0.8 * length:
            # A column of silicone a tenth of a square centimetre in cross-section (an assumption).
            world.add_distance(start + a, start + b, pressure_channel=channel, youngs_modulus=YOUNGS_MODULUS,
                               compliance=length / (YOUNGS_MODULUS * 1e-5), damping=DAMPING)
            rows += 1
    return world, rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mesh", nargs="?", help="tetrahedral mesh file (default: write and use beam.vtu)")
    parser.add_argument("--kpa", type=float, default=20.0, help="actuation pressure [kPa] (default: 20)")
    parser.add_argument("--seconds", type=float, default=1.0, help="simulated time [s] (default: 1)")
    args = parser.parse_args(argv)
    wp.config.log_level = wp.LOG_WARNING
    path = Path(args.mesh) if args.mesh else write_sample_mesh(Path("beam.vtu"))
    vertices, tets = read_tet_mesh(path)
    world, rows = actuated_body(vertices, tets)
    scene = softsnake.ModelBuilder()
    scene.replicate(world, 2, spacing=(0.0, 0.2, 0.0))   # world 0 at 0 kPa, world 1 actuated
    model = scene.finalize("cpu")
    solver = softsnake.Solver(model)
    state, control = model.state(), model.control()
    control.pressure.assign(np.array([0.0, 1e3 * args.kpa], dtype=np.float32))
    dt = 1.0 / 120.0
    for _ in range(int(round(args.seconds / dt))):
        solver.step(state, state, control, dt)
    positions = state.particle_q.numpy()
    tip = vertices[:, 0] > vertices[:, 0].max() - 1e-3 * np.ptp(vertices[:, 0])
    sag = [positions[model.world_slice("particle", w)][tip, 2].mean() - vertices[tip, 2].mean() for w in (0, 1)]
    print(f"{path}: {len(vertices)} vertices, {len(tets)} tetrahedra, {rows} actuation rows on the top surface")
    print(f"free end after {args.seconds:g} s: sag {1e3 * sag[0]:+.2f} mm at 0 kPa, {1e3 * sag[1]:+.2f} mm at "
          f"{args.kpa:g} kPa (the pressure bends it by {1e3 * (sag[1] - sag[0]):+.2f} mm)")
    return sag


if __name__ == "__main__":
    main()
