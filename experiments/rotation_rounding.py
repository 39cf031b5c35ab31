"""A body's rotation at small substeps: what float32 quaternions round away.

A 0.4 m bar (0.3 kg, 0.4 x 0.04 x 0.02 m box) hangs from a hinge at its end about y, released from rest
``--tilt`` rad off the vertical. Its frame is turned a quarter turn about the hinge, so its quaternion's components lie
near 0.7, where float32's spacing is 6e-8: a float32 quaternion rounds a turn per substep below about that away. From
rest the bar turns by about h^2 g theta / d per substep (3e-9 rad at 1/9600 s); compensated substeps (from 1/600 s on)
keep each rotation's remainder (``State.body_q_low``), so the swing should follow implicit Euler's decay,
exp(-omega^2 h t / 2). For each number of substeps of 1/240 s frames (the engine's default solver, and ``--newton N``
for a shorter budget), over ``--seconds``: the bar centre's largest swing to either side against the release's
(amplitude ratios), and its x at a quarter of the small-amplitude period (0 at the bottom). ``--distances`` builds the bar with its hinge that far out along x [m]
(placement: the swing should not depend on it), ``--cold`` starts every substep's multipliers from zero (warm or cold:
neither should it). Prints the table and writes it to rotation_rounding[_newton<N>][_cold][_far].md in --out.

Usage: python experiments/rotation_rounding.py [--substeps 2,10,20,40] [--tilt 0.02] [--seconds 3] [--newton N]
           [--cold] [--distances 0,100]
"""

import math
import sys
from pathlib import Path

import numpy as np

import softsnake
from softsnake.cli.common import experiment_parser, float_list, make_output_folder, positive_int_list
from softsnake.output_files import replaced_when_complete
from softsnake.spatial import box_inertia

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from engine_scenes import HINGED_BAR_HALF_EXTENTS as HALF, HINGED_BAR_PIVOT, hinged_bar  # noqa: E402

MASS = 0.3
"""[kg]"""
FRAME = 1.0 / 240.0
"""[s]"""


def swing(substeps, tilt, seconds, distance=0.0, **solver_options):
    """The bar centre's x relative to the hinge after every frame [m] (frames,), the hinge ``distance`` [m] out
    along x."""
    pivot = HINGED_BAR_PIVOT + np.array([distance, 0.0, 0.0])
    model = hinged_bar(tilt, "cpu", MASS, pivot)
    solver = softsnake.Solver(model, substeps=substeps, **solver_options)
    state, control = model.state(), model.control()
    xs = []
    for _ in range(round(seconds / FRAME)):
        solver.step(state, state, control, FRAME)
        xs.append(float(state.body_q.numpy()[0, 0]) - pivot[0])
    return np.array(xs)


def main(argv=None):
    parser = experiment_parser(__doc__, __file__)
    parser.add_argument("--substeps", type=positive_int_list, default=[2, 10, 20, 40])
    parser.add_argument("--tilt", type=float, default=0.02, help="release angle from the vertical [rad]")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--newton", type=int, default=None, help="Newton iterations (default: the engine's)")
    parser.add_argument("--cold", action="store_true", help="no warm start (SolverSettings.warm_start=False)")
    parser.add_argument("--distances", type=float_list, default=[0.0], help="hinge distances out along x [m]")
    args = parser.parse_args(argv)
    options = {} if args.newton is None else {"newton_iterations": args.newton}
    if args.cold:
        options["warm_start"] = False
    pivot_inertia = box_inertia(MASS, HALF)[1, 1] + MASS * HALF[0] ** 2
    period = 2.0 * math.pi * math.sqrt(pivot_inertia / (MASS * 9.81 * HALF[0]))
    release = HALF[0] * math.sin(args.tilt)
    quarter = round(0.25 * period / FRAME) - 1
    if args.seconds < 0.25 * period:
        parser.error(f"--seconds {args.seconds:g} ends before a quarter period ({0.25 * period:.3f} s), where the table "
                     "reads the bar's x")
    lines = [f"device: cpu; bar hinged at its end, released {args.tilt:g} rad off the vertical, period {period:.4f} s, "
             f"swing +-{1e3 * release:.3f} mm, {args.seconds:g} s; solver {options or 'default'}", "",
             "| hinge x [m] | substeps | h [s] | largest swing after release / release: -x, +x | "
             "x at a quarter period [mm] |",
             "|---:|---:|---|---|---:|"]
    print("\n".join(lines))
    for distance in args.distances:
        for substeps in args.substeps:
            xs = swing(substeps, args.tilt, args.seconds, distance, **options)
            lines.append(f"| {distance:g} | {substeps} | 1/{240 * substeps} | {-xs.min() / release:.4f}, "
                         f"{xs.max() / release:.4f} | {1e3 * xs[quarter]:+.4f} |")
            print(lines[-1])
    out = make_output_folder(args.out)
    name = ("rotation_rounding" + ("" if args.newton is None else f"_newton{args.newton}") + ("_cold" if args.cold else "")
            + ("_far" if any(args.distances) else "") + ".md")
    with replaced_when_complete(out / name) as path:
        path.write_text("# A body's rotation at small substeps (experiments/rotation_rounding.py)\n\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
