"""Does a converged answer depend on the solver's start? Warm against cold, plain iteration against balanced.

A step that converges must land on the step's own solution, whatever it started from: the warm start (the
last substep's multipliers) or a cold one (zero). The plain iteration (seed 001's: the momentum residual
M (x - x~) - J(x)^T lambda taken as zero) ends where its path ends, x~ + sum_k M^-1 J_k^T dlambda_k with
the J of each iterate, and that path depends on the start; the balanced iteration
(``SolverSettings.momentum_balance``) lands on x~ + M^-1 J(x)^T lambda, the implicit-Euler step. Scenes:

* ``pendulum``: a double pendulum of two compliant distance rows (compliance 1e-4 m/N) swinging from 5 m/s,
  30 steps of 1/60 s in one substep (no contact: only the lag);
* ``bodies``: a box on a 20 degree slope, a ball rolling, a capsule and a wheel falling, a hinged arm
  swinging, with friction (tests/engine_scenes.py's ``scene_bodies``), 90 steps of 1/120 s;
* ``bar``: a 1 m bar of 20 x 2 x 2 cells (1 MPa, nu 0) clamped at one end and pulled by 50 N at the other,
  settled by kinetic damping in 6 steps of 0.1 s (omega h >> 1; the blow-up check off, as the damping
  zeroes velocities behind its energy history); the end's stretch against F L / (Y A);
* ``vine``: a 15-link vine of cluttered scene 1 steered hard into a box with friction 0.3 (tests/robots/
  vine/test_dynamics.py), 100 steps of 1/90 s; its bodies' peak spin.

Each runs at budgets N x L (the engine's tolerances stop a world earlier) with the plain and the balanced
iteration, warm and cold; the reference is the balanced iteration, cold, at 64 x 400 with tolerances 1e-7 /
1e-6. Reported: the largest distance [m] between the warm and the cold run's final positions (particles and
body centres), each one's largest distance from the reference, the scene's own measure, and the warm run's
wall time [s] (one run).

Writes start_independence.csv/.md into --out (default experiments/results), after every scene.

Usage: python experiments/start_independence.py [--scenes pendulum,bodies,bar,vine] [--budgets 16x100,32x200]
           [--tag TAG] [--out DIR]
"""

import dataclasses
import math
import platform
import time

import numpy as np
import warp as wp

import softsnake
from softsnake.cli.common import experiment_parser, make_output_folder
from softsnake.kinetic_damping import settle_with_kinetic_damping
from softsnake.meshing import boundary_faces, box_tet_mesh, traction_nodal_forces
from softsnake.spatial import quat_from_axis_angle

from convergence import FAR_PAST_CONVERGED, write_outputs



def positions(state):
    """Final particle positions and body centres, one (n, 3) float64 array [m]."""
    return np.vstack([state.particle_q.numpy().astype(np.float64).reshape(-1, 3),
                      state.body_q.numpy().astype(np.float64).reshape(-1, 7)[:, :3]])


def step_engine(model, options, steps, dt):
    """(final positions, no scene measure) after ``steps`` steps of ``dt`` [s]."""
    solver = softsnake.Solver(model, **options)
    state, control = model.state(), model.control()
    for _ in range(steps):
        solver.step(state, state, control, dt)
    return positions(state), float("nan")


def pendulum(options):
    b = softsnake.ModelBuilder()
    pivot = b.add_particle((0.0, 0.0, 1.0), kinematic=True)
    first = b.add_particle((0.3, 0.0, 1.0), mass=0.2, velocity=(0.0, 5.0, 0.0))
    second = b.add_particle((0.6, 0.0, 1.0), mass=0.1, velocity=(0.0, 5.0, 0.0))
    b.add_distance(pivot, first, compliance=1e-4)
    b.add_distance(first, second, compliance=1e-4)
    return step_engine(b.finalize("cpu"), {**options, "substeps": 1}, 30, 1.0 / 60.0)


def bodies(options):
    b = softsnake.ModelBuilder()
    angle = math.radians(20.0)
    b.add_ground(mu=0.5, normal=(math.sin(angle), 0.0, math.cos(angle)))
    box = b.add_body((0.0, 0.0, 0.06), quat_from_axis_angle((0, 1, 0), angle), velocity=(0.0, 0.2, 0.0))
    b.add_shape_box(box, (0.05, 0.05, 0.05), density=1000.0)
    ball = b.add_body((0.5, 0.0, 0.3), velocity=(0.0, 1.0, 0.0))
    b.add_shape_sphere(ball, 0.05, density=800.0, mu=0.3)
    cap = b.add_body((1.0, 0.0, 0.4), quat_from_axis_angle((0, 1, 0), 0.3))
    b.add_shape_capsule(cap, 0.03, 0.08, density=900.0)
    wheel = b.add_body((1.5, 0.0, 0.4), quat_from_axis_angle((1, 0, 0), -0.5 * math.pi), velocity=(0.5, 0.0, 0.0))
    b.add_shape_cylinder(wheel, 0.05, 0.01, density=1200.0)
    arm = b.add_body((0.0, 2.0, 1.5), mass=0.5, inertia=np.diag([1e-3, 1e-3, 1e-3]))
    b.add_hinge(-1, arm, anchor=(0.0, 2.0, 2.0), axis=(0.0, 1.0, 1.0), compliance=1e-6)
    return step_engine(b.finalize("cpu"), options, 90, 1.0 / 120.0)


def bar(options):
    length, side, youngs, force = 1.0, 0.1, 1.0e6, 50.0
    vertices, tets = box_tet_mesh(size=(length, side, side), cells=(20, 2, 2))
    vertices += [length / 2, 0.0, 0.0]
    b = softsnake.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    first = b.add_soft_mesh(vertices, tets, 1000.0, youngs, 0.0, collide="none")
    wall = b.add_body((0.0, 0.0, 0.0), kinematic=True)
    for i in np.flatnonzero(np.isclose(vertices[:, 0], 0.0)):
        b.add_attachment(wall, first + int(i))
    model = b.finalize("cpu")
    # Kinetic damping zeroes the velocities between steps, behind the blow-up check's energy history.
    solver = softsnake.Solver(model, check_finite=False, **options)
    state, control = model.state(), model.control()
    faces = boundary_faces(tets)
    end = faces[np.all(np.isclose(vertices[faces][:, :, 0], length), axis=1)]
    state.particle_f.assign(traction_nodal_forces(vertices, end, (force / side**2, 0.0, 0.0)).astype(np.float32))
    x = settle_with_kinetic_damping(model, solver, state, control, dt=0.1, steps=6)
    stretch = (x[np.isclose(vertices[:, 0], length), 0].mean() - length) / (force * length / (youngs * side**2))
    return positions(state), stretch


def vine(options):
    from softsnake.robots.vine.scene import load_scene
    from softsnake.robots.vine.simulation import VineBatch, VineSpec

    scene = load_scene("jitosho_cluttered_1")
    params = dataclasses.replace(scene.vine, link_count=15, body_half_length=scene.vine.length / 60)
    batch = VineBatch([VineSpec(params, scene.obstacles, -1.197654629719934)], friction=0.3, solver_options=options)
    spin = 0.0
    for _ in range(100):
        batch.step(scene.sim.dt, -31190.567380952376)
        spin = max(spin, float(np.linalg.norm(batch.state.body_qd.numpy()[:, 3:], axis=1).max()))
    return positions(batch.state), spin


SCENES = {"pendulum": (pendulum, ""), "bodies": (bodies, ""), "bar": (bar, "stretch / (F L / (Y A))"),
          "vine": (vine, "peak spin [rad/s]")}


def main(argv=None):
    parser = experiment_parser(__doc__, __file__)
    parser.add_argument("--scenes", default=",".join(SCENES), help=f"comma-separated, of {', '.join(SCENES)}")
    parser.add_argument("--budgets", default="8x40,16x100,32x200", help="NEWTONxLINEAR,...")
    parser.add_argument("--tag", default=None, help="file name tag")
    args = parser.parse_args(argv)
    scenes = args.scenes.split(",")
    unknown = sorted(set(scenes) - set(SCENES))
    if unknown:
        parser.error(f"unknown scene(s): {', '.join(unknown)}")
    budgets = [tuple(int(n) for n in item.split("x")) for item in args.budgets.split(",")]
    out = make_output_folder(args.out)
    stem = "start_independence" + (f"_{args.tag}" if args.tag else "")
    header = ["# Start independence: warm against cold, plain against balanced (experiments/start_independence.py)",
              "", f"Device: cpu ({platform.machine()}), warp {wp.config.version}. Reference: balanced, cold, 64 x 400, "
              "tolerances 1e-7 / 1e-6. Distances: largest over the final particle positions and body centres [m]."]
    rows = []
    for name in scenes:
        run, measure_name = SCENES[name]
        reference, reference_measure = run(FAR_PAST_CONVERGED)
        print(f"{name}: reference measure {reference_measure:.6g}", flush=True)
        for newton, linear in budgets:
            for balanced in (False, True):
                options = {"newton_iterations": newton, "linear_iterations": linear, "momentum_balance": balanced}
                start = time.perf_counter()
                warm, warm_measure = run(options)
                wall = time.perf_counter() - start
                cold, cold_measure = run({**options, "warm_start": False})
                row = {"scene": name, "budget": f"{newton}x{linear}", "iteration": "balanced" if balanced else "plain",
                       "warm_vs_cold_m": float(np.abs(warm - cold).max()),
                       "warm_vs_reference_m": float(np.abs(warm - reference).max()),
                       "cold_vs_reference_m": float(np.abs(cold - reference).max()),
                       "measure": measure_name, "warm_measure": warm_measure, "cold_measure": cold_measure,
                       "reference_measure": reference_measure, "warm_wall_s": wall}
                rows.append(row)
                print("  " + ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()
                                       if k not in ("scene", "measure", "reference_measure")), flush=True)
        write_outputs(out, stem, rows, header)


if __name__ == "__main__":
    main()
