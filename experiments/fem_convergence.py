"""Tetrahedral FEM convergence: cantilever tip deflection and bar stretch against beam theory.

Cantilever: 1 m x 0.025 m (wide) x 0.1 m (deep) beam, Y = 1e9 Pa, nu = 0.3, 1000 kg/m^3, clamped at
x = 0 (rigid attachments to a kinematic body), under its own weight; reference: Euler-Bernoulli
q L^4 / (8 Y I) (Timoshenko's shear term, q L^2 / (2 kappa G A) with kappa = 5/6, is listed for
context: a converged 3-D solution lies near it). Meshes of cubic-ish cells, 10 n x 1 x n cells of
five tetrahedra, n the cells through the depth.

Bar: 1 m x 0.1 m x 0.1 m, Y = 1e6 Pa, held at x = 0, pulled by 50 N as a uniform traction on the
far face; reference F L / (Y A). With nu = 0 the linear tetrahedra hold the exact uniform stretch;
with nu = 0.3 the held face also blocks the lateral contraction (a slightly stiffer bar).

Two answers per mesh:
* direct: the mesh's own static solution, K u = f with K = J^T E^-1 J assembled from the
  engine's tetrahedron rows at rest (solved with scipy), i.e. the discretisation error alone;
* stepped: the engine time-stepped to rest with kinetic damping (velocities zeroed whenever the
  kinetic energy drops), i.e. what a simulation reaches, including the bias of a fixed linear
  solver budget (ENGINE.md: 20 conjugate residual iterations per Newton iteration by default).

Writes fem_cantilever_convergence.csv, fem_bar_stretch.csv and fem_convergence.png to --out
(default experiments/results).

Usage: python experiments/fem_convergence.py [--out DIR] [--stepped-max N] [--direct-max N] [--device cpu]
"""

import math
import sys
import time

import numpy as np
import scipy.sparse as sparse
import scipy.sparse.linalg as sparse_linalg
import warp as wp

import softsnake
from softsnake.cli.common import experiment_parser, make_output_folder
from softsnake.constraints import tetrahedron
from softsnake.kinetic_damping import settle_with_kinetic_damping
from softsnake.meshing import boundary_faces, box_tet_mesh, traction_nodal_forces
from softsnake.output_files import write_csv
from softsnake.plotting import new_figure, save, styled

BEAM_LENGTH, BEAM_WIDTH, BEAM_HEIGHT = 1.0, 0.025, 0.1
BEAM_YOUNGS, BEAM_POISSON, BEAM_DENSITY, GRAVITY = 1.0e9, 0.3, 1000.0, 9.81
BEAM_DEPTH_CELLS = (2, 3, 4, 5, 6, 8, 10, 12)
BEAM_SETTLE_TIME = 0.045
"""Simulated time [s] of a stepped cantilever run: about three quarter periods of its first bending mode."""
BEAM_LINEAR_ITERATIONS = 300

BAR_LENGTH, BAR_SIDE, BAR_YOUNGS, BAR_FORCE = 1.0, 0.1, 1.0e6, 50.0
BAR_MESHES = ((10, 1, 1), (20, 2, 2), (40, 4, 4))
BAR_POISSON = (0.0, 0.3)
BAR_DT, BAR_STEPS = 0.01, 60


def clamped_mesh(size, cells, youngs, poisson, density, gravity, device):
    """A box mesh from x = 0 to size[0], its x = 0 vertices attached to a kinematic body."""
    vertices, tets = box_tet_mesh(size=size, cells=cells, tets_per_cell=5)
    vertices += [size[0] / 2, 0.0, 0.0]
    builder = softsnake.ModelBuilder(gravity=(0.0, 0.0, -gravity))
    first = builder.add_soft_mesh(vertices, tets, density, youngs, poisson, collide="none")
    held = np.isclose(vertices[:, 0], 0.0)
    anchor = builder.add_body((0.0, 0.0, 0.0), kinematic=True)
    for i in np.flatnonzero(held):
        builder.add_attachment(anchor, first + int(i))
    return vertices, tets, held, builder.finalize(device)


def direct_static_displacement(model, held, forces):
    """Solve K u = f [m] with K = J^T E^-1 J from the engine's tetrahedron rows at rest; held vertices fixed."""
    device = model.device
    J_values = wp.zeros(model.nnz, dtype=float, device=device)
    c, compliance, coupling, damping = (wp.zeros(model.row_count, dtype=float, device=device) for _ in range(4))
    wp.launch(tetrahedron.eval_tetrahedron_rows, model.tet_count, device=device, inputs=[
        model.particle_q, model.tet_particles, model.tet_inv_rest, model.tet_volume, model.tet_youngs_modulus,
        model.tet_poisson_ratio, model.tet_damping, model.tet_row, 1.0, 1.0, model.row_world,
        wp.zeros(model.world_count, dtype=int, device=device), model.J_offsets, J_values, c, compliance, damping,
        coupling, wp.zeros(model.tet_count, dtype=wp.mat33, device=device)])  # no world held; R unused here
    dofs = 3 * model.particle_count
    rows = (model.tet_row.numpy()[:, None] + np.arange(6)).ravel()
    J = sparse.csr_matrix((J_values.numpy().astype(np.float64), model.J_columns.numpy(), model.J_offsets.numpy()),
                          shape=(model.row_count, dofs + 6 * model.body_count))[rows][:, :dofs]
    diagonal = compliance.numpy()[rows].astype(np.float64).reshape(-1, 6)
    off = coupling.numpy()[rows].astype(np.float64).reshape(-1, 6)[:, 0]
    blocks = np.zeros((model.tet_count, 6, 6))
    blocks[:, np.arange(6), np.arange(6)] = diagonal
    blocks[:, :3, :3] += off[:, None, None] * (np.ones((3, 3)) - np.eye(3))
    K = (J.T @ sparse.block_diag(list(np.linalg.inv(blocks))) @ J).tocsc()
    free = np.flatnonzero(np.repeat(~held, 3))
    u = np.zeros(dofs)
    u[free] = sparse_linalg.spsolve(K[free][:, free], forces.ravel()[free])
    return u.reshape(-1, 3)


def cantilever(depth_cells, stepped, device):
    """Tip deflection [m] on 10 n x 1 x n cells: the direct static solve and, if ``stepped``, the engine at rest."""
    cells = (10 * depth_cells, 1, depth_cells)
    size = (BEAM_LENGTH, BEAM_WIDTH, BEAM_HEIGHT)
    vertices, tets, held, model = clamped_mesh(size, cells, BEAM_YOUNGS, BEAM_POISSON, BEAM_DENSITY, GRAVITY, device)
    tip = np.isclose(vertices[:, 0], BEAM_LENGTH)
    weight = np.zeros((model.particle_count, 3))
    weight[:, 2] = -model.particle_mass_numpy() * GRAVITY
    direct = -direct_static_displacement(model, held, weight)[tip, 2].mean()
    row = {"cells": cells, "tets": len(tets), "direct": direct}
    if stepped:
        # The same omega_max h on every mesh: the step shrinks with the cell.
        dt = 2.5e-3 / depth_cells
        steps = math.ceil(BEAM_SETTLE_TIME / dt)
        solver = softsnake.Solver(model, substeps=1, newton_iterations=1, linear_iterations=BEAM_LINEAR_ITERATIONS)
        start = time.perf_counter()
        x = settle_with_kinetic_damping(model, solver, model.state(), model.control(), dt, steps)
        row.update(stepped=vertices[tip, 2].mean() - x[tip, 2].mean(), dt=dt, steps=steps, wall=time.perf_counter() - start)
    return row


def bar(cells, poisson, device):
    """Elongation [m] of the bar on ``cells`` with Poisson ratio ``poisson``: direct static solve and engine at rest."""
    size = (BAR_LENGTH, BAR_SIDE, BAR_SIDE)
    vertices, tets, held, model = clamped_mesh(size, cells, BAR_YOUNGS, poisson, 1000.0, 0.0, device)
    faces = boundary_faces(tets)
    end = faces[np.all(np.isclose(vertices[faces][:, :, 0], BAR_LENGTH), axis=1)]
    forces = traction_nodal_forces(vertices, end, (BAR_FORCE / BAR_SIDE**2, 0.0, 0.0))
    tip = np.isclose(vertices[:, 0], BAR_LENGTH)
    direct = direct_static_displacement(model, held, forces)[tip, 0].mean()
    solver = softsnake.Solver(model)
    state, control = model.state(), model.control()
    state.particle_f.assign(forces.astype(np.float32))
    start = time.perf_counter()
    x = settle_with_kinetic_damping(model, solver, state, control, BAR_DT, BAR_STEPS)
    return {"cells": cells, "tets": len(tets), "direct": direct, "stepped": x[tip, 0].mean() - BAR_LENGTH,
            "wall": time.perf_counter() - start}


@styled
def write_png(path, beam_rows, eb, bar_rows, expected_stretch):
    """Two panels: cantilever |error| against the cells through the depth, bar error against the mesh."""
    figure, (left, right) = new_figure(11, 4.2, 1, 2)
    depth = np.array([r["cells"][2] for r in beam_rows])
    left.loglog(depth, [abs(r["direct"] / eb - 1) for r in beam_rows], "o-", label="direct static solve of the mesh")
    stepped = [r for r in beam_rows if "stepped" in r]
    left.loglog([r["cells"][2] for r in stepped], [abs(r["stepped"] / eb - 1) for r in stepped], "s--",
                label="engine, stepped to rest")
    left.axhline(0.10, color="grey", lw=0.8, ls=":", label="10 %")
    left.set_xticks(depth, [str(d) for d in depth])
    left.minorticks_off()
    left.set_xlabel("cells through the depth n (mesh 10n x 1 x n)")
    left.set_ylabel("|tip deflection / Euler-Bernoulli - 1|")
    left.set_title("Cantilever under gravity (L/h = 10)")
    left.legend()
    for poisson, marker in zip(BAR_POISSON, ("o", "s")):
        rows = [r for r in bar_rows if r["poisson"] == poisson]
        label = [f"{c[0]}x{c[1]}x{c[2]}" for c in (r["cells"] for r in rows)]
        right.plot(label, [100 * (r["direct"] / expected_stretch - 1) for r in rows], marker + "-",
                   label=f"direct, nu = {poisson}")
        right.plot(label, [100 * (r["stepped"] / expected_stretch - 1) for r in rows], marker + "--",
                   label=f"stepped, nu = {poisson}")
    right.axhline(0.0, color="grey", lw=0.8)
    right.set_xlabel("mesh (cells)")
    right.set_ylabel("elongation / (F L / (Y A)) - 1 [%]")
    right.set_title("Bar pulled by 50 N")
    right.legend()
    save(figure, path)


def main(argv=None):
    parser = experiment_parser(__doc__, __file__)
    parser.add_argument("--stepped-max", type=int, default=6,
                        help="largest cells-through-the-depth count also stepped with the engine (default 6)")
    parser.add_argument("--direct-max", type=int, default=12,
                        help="largest cells-through-the-depth count solved directly (default 12)")
    parser.add_argument("--device", default="cpu", help="Warp device for the engine runs (default cpu)")
    args = parser.parse_args(argv)
    if args.stepped_max < 0 or args.direct_max < 2:
        parser.error("--stepped-max must be >= 0 and --direct-max >= 2")
    out = make_output_folder(args.out)

    inertia = BEAM_WIDTH * BEAM_HEIGHT**3 / 12.0
    load = BEAM_DENSITY * GRAVITY * BEAM_WIDTH * BEAM_HEIGHT
    eb = load * BEAM_LENGTH**4 / (8.0 * BEAM_YOUNGS * inertia)
    shear = load * BEAM_LENGTH**2 / (2.0 * (5.0 / 6.0) * BEAM_YOUNGS / (2 * (1 + BEAM_POISSON)) * BEAM_WIDTH * BEAM_HEIGHT)
    print(f"cantilever: Euler-Bernoulli {eb * 1e3:.5f} mm, Timoshenko {(eb + shear) * 1e3:.5f} mm "
          f"({shear / eb * 100:+.2f} %)")
    print(f"{'cells':>10} {'tets':>6} {'direct mm':>10} {'err %':>7} {'stepped mm':>10} {'err %':>7} {'dt s':>8} "
          f"{'steps':>5} {'wall s':>7}")
    beam_rows = []
    for n in (d for d in BEAM_DEPTH_CELLS if d <= args.direct_max):
        r = cantilever(n, n <= args.stepped_max, args.device)
        beam_rows.append(r)
        cells = "x".join(map(str, r["cells"]))
        line = f"{cells:>10} {r['tets']:>6} {r['direct'] * 1e3:>10.5f} {100 * (r['direct'] / eb - 1):>7.2f}"
        if "stepped" in r:
            line += (f" {r['stepped'] * 1e3:>10.5f} {100 * (r['stepped'] / eb - 1):>7.2f} {r['dt']:>8.2e} "
                     f"{r['steps']:>5} {r['wall']:>7.1f}")
        print(line, flush=True)

    expected_stretch = BAR_FORCE * BAR_LENGTH / (BAR_YOUNGS * BAR_SIDE**2)
    print(f"bar: F L / (Y A) = {expected_stretch * 1e3:.4f} mm")
    print(f"{'nu':>4} {'cells':>8} {'tets':>6} {'direct mm':>10} {'err %':>7} {'stepped mm':>10} {'err %':>7} {'wall s':>7}")
    bar_rows = []
    for poisson in BAR_POISSON:
        for cells in BAR_MESHES:
            r = bar(cells, poisson, args.device)
            r["poisson"] = poisson
            bar_rows.append(r)
            print(f"{poisson:>4} {'x'.join(map(str, cells)):>8} {r['tets']:>6} {r['direct'] * 1e3:>10.5f} "
                  f"{100 * (r['direct'] / expected_stretch - 1):>7.3f} {r['stepped'] * 1e3:>10.5f} "
                  f"{100 * (r['stepped'] / expected_stretch - 1):>7.3f} {r['wall']:>7.1f}", flush=True)

    def optional(r, key, fmt):
        return format(r[key], fmt) if key in r else ""

    write_csv(out / "fem_cantilever_convergence.csv",
              ["cells_x", "cells_y", "cells_z", "tets", "euler_bernoulli_m", "timoshenko_m", "direct_m", "direct_error",
               "stepped_m", "stepped_error", "dt_s", "steps", "linear_iterations", "stepped_wall_s"],
              [[*r["cells"], r["tets"], f"{eb:.9e}", f"{eb + shear:.9e}", f"{r['direct']:.9e}",
                f"{r['direct'] / eb - 1:.6f}", optional(r, "stepped", ".9e"),
                f"{r['stepped'] / eb - 1:.6f}" if "stepped" in r else "", optional(r, "dt", ".6e"),
                optional(r, "steps", "d"), BEAM_LINEAR_ITERATIONS if "stepped" in r else "",
                optional(r, "wall", ".2f")] for r in beam_rows])
    write_csv(out / "fem_bar_stretch.csv",
              ["poisson", "cells_x", "cells_y", "cells_z", "tets", "expected_m", "direct_m", "direct_error", "stepped_m",
               "stepped_error", "dt_s", "steps", "stepped_wall_s"],
              [[r["poisson"], *r["cells"], r["tets"], f"{expected_stretch:.9e}", f"{r['direct']:.9e}",
                f"{r['direct'] / expected_stretch - 1:.6f}", f"{r['stepped']:.9e}",
                f"{r['stepped'] / expected_stretch - 1:.6f}", BAR_DT, BAR_STEPS, f"{r['wall']:.2f}"] for r in bar_rows])
    write_png(out / "fem_convergence.png", beam_rows, eb, bar_rows, expected_stretch)
    print(f"wrote {out / 'fem_cantilever_convergence.csv'}, {out / 'fem_bar_stretch.csv'}, "
          f"{out / 'fem_convergence.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
