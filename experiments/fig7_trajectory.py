"""Seed 001, Fig. 7: centre-of-mass trajectory under the paper's gait, with and without latency.

Runs ``softsnake gait`` twice (valve latency on and off) for 10 s with one snake under the paper's
gait (f = 2 Hz, alpha = pi/2, phi = 0, A = 8 psi; eq. 9's links numbered from the tail, so the wave
runs head to tail and the snake moves head first). Writes the runs' own outputs to
<out>/fig7_latency/ and <out>/fig7_no_latency/, then <out>/fig7_trajectory.png (both paths) and
<out>/fig7_travel.csv (forward and lateral travel, also in body lengths); <out> is ``--out``
(default experiments/results). Other options (e.g. ``--resolution paper``) go to both runs.

    python experiments/fig7_trajectory.py [--out DIR] [gait options]
"""

import math
import sys

from softsnake import cli
from softsnake.cli.common import experiment_parser, make_output_folder
from softsnake.output_files import write_dict_csv
from softsnake.plotting import new_figure, save, styled
from softsnake.robots.snake.config import load_snake_config
from softsnake.robots.snake.plots import top_view
from softsnake.robots.snake.robot import snake_length
from softsnake.robots.snake.trajectories import CSV_NAME, read_trajectories_csv

SECONDS = 10.0
PHASE_SHIFTS = (math.pi / 2.0,)
RUNS = {"fig7_latency": "--latency", "fig7_no_latency": "--no-latency"}


@styled
def main(argv):
    # --out is this script's (the runs go into folders inside it), so that the figure and the table
    # are always computed from the runs just made.
    args, extra = experiment_parser(__doc__, __file__).parse_known_args(argv)
    results = make_output_folder(args.out)
    body_length = snake_length(load_snake_config())
    rows = []
    figure, ax = new_figure(6.4, 5.0)
    for (name, latency), color in zip(RUNS.items(), ("C3", "C2")):
        out = results / name
        status = cli.main(["gait", "--snakes", str(len(PHASE_SHIFTS)), "--seconds", str(SECONDS), latency, "--no-usd", "--no-video",
                           "--phase-shift", ",".join(repr(a) for a in PHASE_SHIFTS), "--out", str(out), *extra])
        if status != 0:
            print(f"{name}: softsnake gait failed (status {status}); see {out}")
            continue
        time, com, _ = read_trajectories_csv(out / CSV_NAME)
        for s, (alpha, style) in enumerate(zip(PHASE_SHIFTS, ("-", "--"))):
            xy = com[:, s, :2] - com[0, s, :2]
            ax.plot(xy[:, 0], xy[:, 1], style, color=color, label=f"{name[5:]}, alpha = {alpha:+.3f} rad")
            forward, lateral = xy[-1]
            rows.append({"run": name, "phase_shift_rad": alpha, "seconds": time[-1], "forward_m": forward,
                         "lateral_m": lateral, "forward_body_lengths": forward / body_length,
                         "lateral_over_forward": abs(lateral) / abs(forward) if forward else math.nan})
    top_view(ax)
    ax.legend()
    ax.set_title(f"Centre of mass, paper gait (f 2 Hz, phi 0, A 8 psi), {SECONDS:g} s")
    save(figure, results / "fig7_trajectory.png")
    if rows:
        write_dict_csv(results / "fig7_travel.csv", rows)
    for row in rows:
        print(f"{row['run']:16s} alpha {row['phase_shift_rad']:+.3f}: forward {row['forward_m']:+.3f} m "
              f"({row['forward_body_lengths']:+.2f} body lengths), lateral {row['lateral_m']:+.3f} m")
    return 0 if len(rows) == len(PHASE_SHIFTS) * len(RUNS) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
