"""What compensated positions cost: the coarse snake's gait per frame with float32 positions and with float32 pairs.

``SolverSettings.compensated_positions`` (``softsnake.kernels.compensated``) adds a few vec3 reads and writes per
entity and substep (a body's: spatial_vectors, and its rotation's turns in float64) and one row kernel per assembly, and lowers the round-off floor at which the Newton loop may stop
(the positions' own rounding no longer counts), so a substep that stopped at the floor may now use more of its
budget. This script runs ``--snakes`` coarse snakes under the gait for ``--frames`` frames of 1/120 s at each
``--substeps``, the two settings alternating, ``--repeats`` times each, and prints the median wall time per frame,
the Newton steps per substep, and how far the two settings' centres of mass end apart (the compensated step differs
from the float32 one by rounding only). Writes compensated_positions_cost.csv and .md into --out (default
experiments/results).

Usage: python experiments/compensated_positions_cost.py [--snakes 3] [--frames 60] [--substeps 2,16] [--repeats 5]
           [--out DIR]
"""

import platform
import statistics
import sys
import time

import numpy as np
import warp as wp

from softsnake.cli.common import experiment_parser, make_output_folder
from softsnake.output_files import write_dict_csv


def timed_run(snakes, frames, substeps, compensated):
    """(wall seconds per frame, Newton steps per substep, final centres of mass) of one run."""
    from softsnake.robots.snake.simulation import SnakeSimulation

    sim = SnakeSimulation(snakes, resolution="coarse", seconds=frames / 120.0, substeps=substeps,
                          compensated_positions=compensated)
    sim.run(progress=False)  # the kernels loaded and the launches recorded outside the timing
    sim = SnakeSimulation(snakes, resolution="coarse", seconds=frames / 120.0, substeps=substeps,
                          compensated_positions=compensated)
    start = time.perf_counter()
    trajectories = sim.run(progress=False)
    wall = time.perf_counter() - start
    counts = sim.solver.newton_counts()
    return wall / frames, int(counts.newton_steps.sum()) / max(int(counts.substeps.sum()), 1), trajectories.com[-1]


def main(argv=None):
    parser = experiment_parser(__doc__, __file__)
    parser.add_argument("--snakes", type=int, default=3)
    parser.add_argument("--frames", type=int, default=60)
    parser.add_argument("--substeps", default="2,16", help="substeps per frame, comma-separated")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    try:
        substeps = [int(s) for s in args.substeps.split(",")]
    except ValueError:
        parser.error(f"--substeps: expected integers like 2,16, got {args.substeps!r}")
    for name, value in (("--snakes", args.snakes), ("--frames", args.frames), ("--repeats", args.repeats)):
        if value < 1:
            parser.error(f"{name} must be at least 1")
    if any(s < 1 for s in substeps):
        parser.error("--substeps must be at least 1")
    out = make_output_folder(args.out)
    device = f"{wp.get_device()} ({platform.processor() or platform.machine()}), warp {wp.__version__}"
    print(f"device: {device}", file=sys.stderr)
    rows = []
    for s in substeps:
        walls = {False: [], True: []}
        newton, com = {}, {}
        for _ in range(args.repeats):
            for compensated in (False, True):
                wall, newton[compensated], com[compensated] = timed_run(args.snakes, args.frames, s, compensated)
                walls[compensated].append(wall)
        apart = float(np.max(np.linalg.norm(com[True] - com[False], axis=-1)))
        for compensated in (False, True):
            rows.append({"substeps": s, "positions": "compensated" if compensated else "float32",
                         "ms_per_frame": 1e3 * statistics.median(walls[compensated]),
                         "newton_per_substep": newton[compensated], "com_apart_um": 1e6 * apart})
            r = rows[-1]
            print(f"{s:>3} substeps {r['positions']:>11}: {r['ms_per_frame']:.1f} ms per frame (median of "
                  f"{args.repeats}), {r['newton_per_substep']:.2f} Newton per substep; centres of mass "
                  f"{r['com_apart_um']:.2f} um apart", flush=True)
        write_dict_csv(out / "compensated_positions_cost.csv", rows)
        lines = [f"# What compensated positions cost ({args.snakes} coarse snakes, {args.frames} frames of the gait)", "",
                 f"Device: {device}. `python experiments/compensated_positions_cost.py --snakes {args.snakes} --frames "
                 f"{args.frames} --substeps {args.substeps} --repeats {args.repeats}`: medians of {args.repeats} runs, "
                 "the two settings alternating; 'apart': the largest distance between the two settings' final "
                 "centres of mass.", "",
                 "| substeps | positions | ms per frame | Newton per substep | apart [um] |", "|---:|---|---:|---:|---:|"]
        lines += [f"| {r['substeps']} | {r['positions']} | {r['ms_per_frame']:.1f} | {r['newton_per_substep']:.2f} "
                  f"| {r['com_apart_um']:.2f} |" for r in rows]
        (out / "compensated_positions_cost.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
