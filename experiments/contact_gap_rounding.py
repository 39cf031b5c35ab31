"""Contacts at small steps: how steady a resting point's normal force is, and a slide's stopping distance.

A point resting on the ground is pushed up each substep by its weight's impulse, m g h^2 in the engine's units, and
any rounding the gap carries afresh each substep moves that force by (rounding) / (g h^2) of the weight: 1e-9 m is
1e-5 of it at 1/240 s and 6e-2 at 1/15360 s. Part 1 rests a particle (radius 5 cm), a sphere body and a box body (10 cm)
on the ground for 300 substeps of ``--h`` and reports the spread of the normal force (the vertical acceleration of the
height's second differences, in g) and of the height. Part 2 slides a particle from 2 m/s (mu 0.3) at frames of 1/240
to 1/7680 s (2 substeps each, positions as ``--positions``), warm started, cold started (Newton tolerance 1e-8) and
warm 100 m out along x, and compares where it stops with implicit Euler's own stopping distance v0^2 / (2 mu g) -
v0 h / 2 (experiments/results/convergence.md, "Contacts at small steps").

Writes contact_gap_rounding<tag>.md into --out (default experiments/results), rewritten after each case.

Usage: python experiments/contact_gap_rounding.py [--h 0.00026041666] [--positions compensated] [--tag NAME]
           [--out DIR]
"""

import platform
import sys

import numpy as np
import warp as wp

from softsnake.cli.common import experiment_parser, make_output_folder

G = 9.81
POSITIONS = {"float32": False, "compensated": True}


def height(state, body, compensated):
    """The resting point's height [m]: the particle's, or the body's centre, with its remainder if compensated."""
    q = state.body_q.numpy()[0, 2] if body else state.particle_q.numpy()[0, 2]
    low = (state.body_q_low.numpy()[0, 2] if body else state.particle_q_low.numpy()[0, 2]) if compensated else 0.0
    return float(q) + float(low)


def resting(kind, h, compensated):
    """(spread of the vertical acceleration [g], spread of the height [m]) of a point resting on the ground."""
    import softsnake

    b = softsnake.ModelBuilder()
    b.add_ground(mu=0.5)
    if kind == "particle":
        b.add_particle((0.0, 0.0, 0.05), mass=1.0, radius=0.05)
    else:
        body = b.add_body((0.0, 0.0, 0.05))
        if kind == "sphere":
            b.add_shape_sphere(body, 0.05, density=1000.0)
        else:
            b.add_shape_box(body, (0.05, 0.05, 0.05), density=1000.0)
    model = b.finalize()
    solver = softsnake.Solver(model, substeps=1, compensated_positions=compensated)
    state, control = model.state(), model.control()
    z = []
    for _ in range(300):
        solver.step(state, state, control, h)
        z.append(height(state, kind != "particle", compensated))
    z = np.asarray(z[50:])
    if not np.all(np.isfinite(z)):
        raise RuntimeError(f"the resting {kind} blew up")
    return float(np.std(np.diff(z, 2)) / h**2 / G), float(np.ptp(z))


SLIDES = {"warm": ({"warm_start": True}, 0.0), "cold": ({"warm_start": False, "newton_tolerance": 1e-8}, 0.0),
          "warm, 100 m out": ({"warm_start": True}, 100.0)}
"""The slides: solver options and where along x the particle starts [m]."""


def stopping_error(dt, compensated, options, x0):
    """The sliding particle's stopping distance minus v0^2 / (2 mu g) [m], frames of dt in 2 substeps, started at
    x0 [m] with the solver ``options``."""
    import softsnake

    v0, mu = 2.0, 0.3
    b = softsnake.ModelBuilder()
    b.add_ground(mu=mu)
    b.add_particle((x0, 0.0, 0.05), velocity=(v0, 0.0, 0.0), mass=1.0, radius=0.05)
    model = b.finalize()
    solver = softsnake.Solver(model, compensated_positions=compensated, **options)
    state, control = model.state(), model.control()
    for _ in range(int(round(1.2 * v0 / (mu * G) / dt))):
        solver.step(state, state, control, dt)
    x = float(state.particle_q.numpy()[0, 0]) + (float(state.particle_q_low.numpy()[0, 0]) if compensated else 0.0)
    if not np.isfinite(x):
        raise RuntimeError(f"the sliding particle blew up at dt = {dt}")
    return (x - x0) - v0 * v0 / (2 * mu * G)


def write_table(path, rest_rows, slide_rows, args):
    lines = ["# Contacts at small steps: a resting point's normal force, a slide's stopping distance", "",
             f"Device: {wp.get_device()} ({platform.processor() or platform.machine()}), warp {wp.__version__}. "
             f"`python experiments/contact_gap_rounding.py --h {args.h:g} --positions {args.positions}`.", "",
             f"Resting on the ground, substeps of 1/{1.0 / args.h:.0f} s, 250 substeps after 50:", "",
             "| point | normal force's spread (vertical acceleration, std) [g] | height's spread (max - min) [m] |",
             "|---|---:|---:|"]
    lines += [f"| {kind} | {acc:.1e} | {dz:.1e} |" for kind, acc, dz in rest_rows]
    lines += ["", "Sliding from 2 m/s, mu 0.3, frames in 2 substeps: error of the stopping distance against "
              "v0^2 / (2 mu g) [mm], and implicit Euler's own, -v0 h / 2:", "",
              "| frame | " + " | ".join(SLIDES) + " | implicit Euler |", "|---|" + "---:|" * (len(SLIDES) + 1)]
    lines += [f"| 1/{1.0 / row[0]:.0f} s | " + " | ".join(f"{1e3 * e:+.4f}" for e in row[1:]) + " |"
              for row in slide_rows]
    path.write_text("\n".join(lines) + "\n")


def main(argv=None):
    parser = experiment_parser(__doc__, __file__)
    parser.add_argument("--h", type=float, default=1.0 / 3840.0, help="substep of the resting cases [s]")
    parser.add_argument("--positions", default="compensated", choices=sorted(POSITIONS), help="position storage")
    parser.add_argument("--tag", default="", help="file name suffix")
    args = parser.parse_args(argv)
    if not args.h > 0.0:
        parser.error("--h must be positive")
    out = make_output_folder(args.out)
    path = out / f"contact_gap_rounding{'_' + args.tag if args.tag else ''}.md"
    compensated = POSITIONS[args.positions]
    print(f"device: {wp.get_device()} ({platform.processor() or platform.machine()}), warp {wp.__version__}",
          file=sys.stderr)
    rest_rows, slide_rows = [], []
    for kind in ("particle", "sphere", "box"):
        rest_rows.append((kind, *resting(kind, args.h, compensated)))
        write_table(path, rest_rows, slide_rows, args)
        print(f"resting {kind}: normal force spread {rest_rows[-1][1]:.1e} g, height spread {rest_rows[-1][2]:.1e} m",
              flush=True)
    for inverse in (240, 480, 960, 1920, 3840, 7680):
        dt = 1.0 / inverse
        errors = [stopping_error(dt, compensated, options, x0) for options, x0 in SLIDES.values()]
        slide_rows.append((dt, *errors, -2.0 * (dt / 2) / 2))
        write_table(path, rest_rows, slide_rows, args)
        print(f"slide at 1/{inverse} s: " + ", ".join(f"{name} {1e3 * e:+.4f} mm" for name, e in zip(SLIDES, errors))
              + f"; implicit Euler {1e3 * slide_rows[-1][-1]:+.4f} mm", flush=True)


if __name__ == "__main__":
    main()
