"""Turning with the gait offset phi (seed 001, section V-A): one batch of snakes, phi from -0.5 to 0.5.

Runs ``softsnake gait --sweep offset=-0.5:0.5`` for 10 s into <out>/turning/, then writes
<out>/turning_sweep.csv (per snake: offset, forward and lateral travel, change of the direction of
travel, mean path length and path curvature = turn / length) and <out>/turning_sweep.png; <out> is
``--out`` (default experiments/results). Other options (e.g. ``--snakes 9``, ``--resolution paper``)
go to the run.

    python experiments/turning_sweep.py [--out DIR] [gait options]
"""

import math
import sys

import numpy as np

from softsnake import cli
from softsnake.cli.common import experiment_parser, make_output_folder
from softsnake.output_files import write_dict_csv
from softsnake.plotting import new_figure, save, styled
from softsnake.robots.snake.plots import top_view
from softsnake.robots.snake.trajectories import CSV_NAME, read_trajectories_csv

SNAKES = 5
OFFSETS = (-0.5, 0.5)
SECONDS = 10.0
GAIT_PERIOD = 0.5
"""Period of the paper's gait, f = 2 Hz [s]."""
DIRECTION_WINDOW = 2.0
"""Time over which the direction of travel is taken at the start and at the end of a run [s]."""


def travel_direction(time, xy, start, stop):
    """Direction of the centre of mass's displacement between times start and stop [rad]."""
    a, b = np.searchsorted(time, start), np.searchsorted(time, stop) - 1
    d = xy[b] - xy[a]
    return math.atan2(d[1], d[0])


def path_length(time, xy, period):
    """Length of the centre of mass's path sampled once per gait period [m]: the sampling skips the
    sideways wiggle within each period, so the length is that of the mean path."""
    samples = xy[np.searchsorted(time, np.arange(0.0, time[-1] + 1e-9, period))]
    return float(np.linalg.norm(np.diff(samples, axis=0), axis=1).sum())


@styled
def main(argv):
    # --out is this script's (the tables and the figure go there, the run into its turning/), so that
    # the summary is always computed from the run just made.
    args, extra = experiment_parser(__doc__, __file__).parse_known_args(argv)
    results = make_output_folder(args.out)
    out = results / "turning"
    status = cli.main(["gait", "--snakes", str(SNAKES), "--seconds", str(SECONDS), "--no-usd", "--no-video",
                       "--sweep", f"offset={OFFSETS[0]}:{OFFSETS[1]}", "--out", str(out), *extra])
    if status != 0:
        print(f"softsnake gait failed (status {status}); see {out}")
        return status
    time, com, _ = read_trajectories_csv(out / CSV_NAME)
    snakes = com.shape[1]
    offsets = np.linspace(OFFSETS[0], OFFSETS[1], snakes)
    rows = []
    for s, offset in enumerate(offsets):
        xy = com[:, s, :2] - com[0, s, :2]
        first = travel_direction(time, xy, 0.0, DIRECTION_WINDOW)
        last = travel_direction(time, xy, time[-1] - DIRECTION_WINDOW, time[-1])
        turn = (last - first + math.pi) % (2.0 * math.pi) - math.pi
        length = path_length(time, xy, GAIT_PERIOD)
        rows.append({"offset": offset, "forward_m": xy[-1, 0], "lateral_m": xy[-1, 1], "turn_rad": turn,
                     "path_length_m": length, "path_curvature_1_per_m": turn / length if length > 0.0 else math.nan})
    figure, (paths, summary) = new_figure(9, 4, 1, 2)
    for s, row in enumerate(rows):
        xy = com[:, s, :2] - com[0, s, :2]
        paths.plot(xy[:, 0], xy[:, 1], color=f"C{s % 10}", label=f"phi = {row['offset']:+.2f}")
    top_view(paths, mark_start=False)
    paths.legend()
    summary.plot(offsets, [r["lateral_m"] for r in rows], "o-", label="lateral travel [m]")
    summary.plot(offsets, [r["turn_rad"] for r in rows], "s--", label="turn of travel direction [rad]")
    summary.plot(offsets, [r["path_curvature_1_per_m"] for r in rows], "^:", label="path curvature [1/m]")
    summary.axhline(0.0, color="0.4", linewidth=0.8)
    summary.set_xlabel("offset phi [-]")
    summary.legend()
    figure.suptitle(f"Turning with the gait offset, {SECONDS:g} s, paper gait otherwise")
    save(figure, results / "turning_sweep.png")
    write_dict_csv(results / "turning_sweep.csv", rows)
    for row in rows:
        print(f"phi {row['offset']:+.2f}: forward {row['forward_m']:+.3f} m, lateral {row['lateral_m']:+.3f} m, "
              f"turn {row['turn_rad']:+.3f} rad, path curvature {row['path_curvature_1_per_m']:+.3f} 1/m")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
