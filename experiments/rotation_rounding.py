"""A body's rotation at small substeps: what float32 quaternions round away.

A 0.4 m bar (0.3 kg, 0.4 x 0.04 x 0.02 m box) hangs from a hinge at its end about y, released from rest
``--tilt`` rad off the vertical. Its frame is turned a quarter turn about the hinge, so its quaternion's components lie
near 0.7, where float32's spacing is 6e-8: a turn per substep below about that is rounded away. From rest the bar turns
by about h^2 g theta / d per substep (3e-9 rad at 1/9600 s), so at small substeps it may never start. For each number of
substeps of 1/240 s frames (the engine's default solver, and ``--newton N`` for a shorter budget), over ``--seconds``:
the bar centre's largest swing to either side against the release's (amplitude ratios), and its x at a quarter of the
small-amplitude period (0 at the bottom). Prints the table and writes it to rotation_rounding[_newton<N>].md in --out.

Usage: python experiments/rotation_rounding.py [--substeps 2,10,20,40] [--tilt 0.02] [--seconds 3] [--newton N]
"""

import math
import sys
from pathlib import Path

import numpy as np

import softsnake
from softsnake.cli.common import experiment_parser, make_output_folder, positive_int_list
from softsnake.output_files import replaced_when_complete
from softsnake.spatial import box_inertia

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from engine_scenes import HINGED_BAR_HALF_EXTENTS as HALF, HINGED_BAR_PIVOT, hinged_bar  # noqa: E402

MASS = 0.3
"""[kg]"""
FRAME = 1.0 / 240.0
"""[s]"""


def swing(substeps, tilt, seconds, **solver_options):
    """The bar centre's x relative to the hinge after every frame [m] (frames,)."""
    model = hinged_bar(tilt, "cpu", MASS)
    solver = softsnake.Solver(model, substeps=substeps, **solver_options)
    state, control = model.state(), model.control()
    xs = []
    for _ in range(round(seconds / FRAME)):
        solver.step(state, state, control, FRAME)
        xs.append(float(state.body_q.numpy()[0, 0]) - HINGED_BAR_PIVOT[0])
    return np.array(xs)


def main(argv=None):
    parser = experiment_parser(__doc__, __file__)
    parser.add_argument("--substeps", type=positive_int_list, default=[2, 10, 20, 40])
    parser.add_argument("--tilt", type=float, default=0.02, help="release angle from the vertical [rad]")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--newton", type=int, default=None, help="Newton iterations (default: the engine's)")
    args = parser.parse_args(argv)
    options = {} if args.newton is None else {"newton_iterations": args.newton}
    pivot_inertia = box_inertia(MASS, HALF)[1, 1] + MASS * HALF[0] ** 2
    period = 2.0 * math.pi * math.sqrt(pivot_inertia / (MASS * 9.81 * HALF[0]))
    release = HALF[0] * math.sin(args.tilt)
    quarter = round(0.25 * period / FRAME) - 1
    lines = [f"device: cpu; bar hinged at its end, released {args.tilt:g} rad off the vertical, period {period:.4f} s, "
             f"swing +-{1e3 * release:.3f} mm, {args.seconds:g} s; solver {options or 'default'}", "",
             "| substeps | h [s] | largest swing after release / release: -x, +x | x at a quarter period [mm] |",
             "|---:|---|---|---:|"]
    print("\n".join(lines))
    for substeps in args.substeps:
        xs = swing(substeps, args.tilt, args.seconds, **options)
        lines.append(f"| {substeps} | 1/{240 * substeps} | {-xs.min() / release:.3f}, {xs.max() / release:.3f} | "
                     f"{1e3 * xs[quarter]:+.4f} |")
        print(lines[-1])
    out = make_output_folder(args.out)
    name = "rotation_rounding" + ("" if args.newton is None else f"_newton{args.newton}") + ".md"
    with replaced_when_complete(out / name) as path:
        path.write_text("# A body's rotation at small substeps (experiments/rotation_rounding.py)\n\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
