"""Coulomb friction against analytic answers, warm and cold started: the numbers behind tests/test_friction.py.

Cases (mu, sizes and tolerances as in the tests, which assert them):
* onset: a flat 10 x 10 x 2 cm block on a plane tilted from 0 deg at 2 deg/s (gravity turned in the
  plane's frame); the angle at which it has slid 1 mm, against atan(mu);
* landing: a 10 cm cube dropped from 1 cm while sliding at 2 m/s (mu 0.5): where it stops against
  v0^2 / (2 mu g) = 0.408 m, and its largest tilt;
* soft stop: a soft tet block (10 cm, 2x2x2 cells, Y = 1e5 Pa) sliding at 1 m/s (mu 0.5): its centre's
  stopping distance against 0.102 m;
* creep: a rigid and a soft cube on 10 and 20 deg slopes (mu 0.5, friction angle 26.6 deg): how far
  it moves along the fall line in 10 s (after 0.5 s to settle).

Writes friction_checks.csv to --out (default experiments/results) and prints the table.

Usage: python experiments/friction_checks.py [--out DIR]
"""

import math
import sys

import numpy as np
import warp as wp

import softsnake
from softsnake.cli.common import experiment_parser, make_output_folder
from softsnake.meshing import box_tet_mesh
from softsnake.output_files import write_csv
from softsnake.spatial import quat_from_axis_angle

G = 9.81
STARTS = {"warm": True, "cold": False}


def stepped(model, seconds, dt, record, warm):
    solver = softsnake.Solver(model, warm_start=warm)
    state, control = model.state(), model.control()
    out = []
    for _ in range(int(round(seconds / dt))):
        solver.step(state, state, control, dt)
        out.append(record(state))
    return np.asarray(out, dtype=np.float64)


def onset_degrees(mu, warm):
    b = softsnake.ModelBuilder()
    b.add_ground(mu=mu)
    block = b.add_body((0.0, 0.0, 0.01))
    b.add_shape_box(block, (0.05, 0.05, 0.01), density=1000.0)
    model = b.finalize("cpu")
    solver = softsnake.Solver(model, warm_start=warm)
    state, control = model.state(), model.control()
    dt, rate, angle = 1.0 / 60.0, math.radians(2.0), 0.0
    while angle < math.atan(mu) + math.radians(3.0):
        angle += rate * dt
        model.gravity = wp.vec3(G * math.sin(angle), 0.0, -G * math.cos(angle))
        solver.step(state, state, control, dt)
        if state.body_q.numpy()[0, 0] > 1e-3:
            return math.degrees(angle)
    return math.nan


def landing(warm):
    b = softsnake.ModelBuilder()
    b.add_ground(mu=0.5)
    cube = b.add_body((0.0, 0.0, 0.06), velocity=(2.0, 0.0, 0.0))
    b.add_shape_box(cube, (0.05, 0.05, 0.05), density=1000.0)
    q = stepped(b.finalize("cpu"), 1.0, 1.0 / 120.0, lambda s: s.body_q.numpy()[0], warm)
    tilt = np.degrees(np.arccos(np.minimum(1.0, np.abs(1.0 - 2.0 * (q[:, 3] ** 2 + q[:, 4] ** 2)))))
    return q[-1, 0], tilt.max()


def soft_block(b, position, rotation=(0.0, 0.0, 0.0, 1.0), velocity=(0.0, 0.0, 0.0)):
    vertices, tets = box_tet_mesh((0.1, 0.1, 0.1), (2, 2, 2))
    b.add_soft_mesh(vertices, tets, 1000.0, 1.0e5, 0.3, position=position, rotation=rotation, velocity=velocity,
                    damping=0.002)
    return np.flatnonzero(vertices[:, 2] < -0.05 + 1e-9)


def soft_stop(warm):
    b = softsnake.ModelBuilder()
    b.add_ground(mu=0.5)
    soft_block(b, (0.0, 0.0, 0.05), velocity=(1.0, 0.0, 0.0))
    x = stepped(b.finalize("cpu"), 3.0 / (0.5 * G), 1.0 / 120.0, lambda s: s.particle_q.numpy().mean(axis=0), warm)
    return x[-1, 0]


def creep(degrees, soft, warm):
    angle = math.radians(degrees)
    normal = np.array([math.sin(angle), 0.0, math.cos(angle)])
    rotation = quat_from_axis_angle((0, 1, 0), angle)
    b = softsnake.ModelBuilder()
    b.add_ground(mu=0.5, normal=normal)
    if soft:
        bottom = soft_block(b, normal * 0.05, rotation)
        record = lambda s: s.particle_q.numpy()[bottom].mean(axis=0)  # noqa: E731
    else:
        cube = b.add_body(normal * 0.05, rotation)
        b.add_shape_box(cube, (0.05, 0.05, 0.05), density=1000.0)
        record = lambda s: s.body_q.numpy()[0, :3]  # noqa: E731
    dt = 1.0 / 60.0
    along = stepped(b.finalize("cpu"), 10.5, dt, record, warm) @ np.array([math.cos(angle), 0.0, -math.sin(angle)])
    settled = int(round(0.5 / dt)) - 1
    return np.abs(along[settled:] - along[settled]).max()


def main(argv=None):
    parser = experiment_parser(__doc__, __file__)
    args = parser.parse_args(argv)
    out = make_output_folder(args.out)
    rows = []
    for start, warm in STARTS.items():
        for mu in (0.2, 0.5, 1.0):
            rows.append(("onset", f"mu {mu}", start, onset_degrees(mu, warm), math.degrees(math.atan(mu)), "deg"))
        stop, tilt = landing(warm)
        rows.append(("landing stop", "cube, mu 0.5", start, stop, 2.0**2 / (2 * 0.5 * G), "m"))
        rows.append(("landing tilt", "cube, mu 0.5", start, tilt, 0.0, "deg"))
        rows.append(("soft stop", "tet block, mu 0.5", start, soft_stop(warm), 1.0 / (2 * 0.5 * G), "m"))
        for degrees in (10, 20):
            for soft in (False, True):
                rows.append(("creep in 10 s", f"{'soft' if soft else 'rigid'} cube, {degrees} deg", start,
                             creep(degrees, soft, warm), 0.0, "m"))
    print(f"device: cpu; Solver defaults ({softsnake.SolverSettings().newton_iterations} Newton x "
          f"{softsnake.SolverSettings().linear_iterations} CR at most, tolerances)")
    print(f"{'case':16s} {'what':22s} {'start':5s} {'measured':>12s} {'expected':>10s} unit")
    for case, what, start, measured, expected, unit in rows:
        print(f"{case:16s} {what:22s} {start:5s} {measured:12.5g} {expected:10.5g} {unit}")
    write_csv(out / "friction_checks.csv", ("case", "what", "start", "measured", "expected", "unit"), rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
