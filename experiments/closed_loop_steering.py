"""Closed-loop steering with the frame-by-frame API: each snake holds a heading by setting its gait's offset.

Each snake runs the paper's gait (eq. 9, 2 Hz, 8 psi, the valve latency model) with its offset phi set every frame
by a proportional controller on its heading (the mean direction of its modules, ``SnakeSimulation.observe``):
phi = clip(gain (target - heading), -limit, limit); phi > 0 turns a snake left. One snake per target heading, in
one batch (``SnakeSimulation.step``; ``--workers``: worker processes on the CPU, the same bits). Printed and
written: per snake, its heading averaged over each gait period, the time it first came within ``--band`` of its
target (period means), and its mean error and offset over the last ``--window`` seconds. Writes
closed_loop_steering.csv (per frame and snake: time, heading, offset, centre of mass) and closed_loop_steering.png
into --out (default experiments/results).

    python experiments/closed_loop_steering.py [--targets=-0.3,0,0.3] [--seconds 20] [--gain 2] [--limit 0.5]
        [--band 0.05] [--window 5] [--resolution coarse] [--workers 0] [--device cpu] [--out DIR]
"""

import sys

import numpy as np

from softsnake.cli.common import experiment_parser, float_list, make_output_folder
from softsnake.output_files import write_dict_csv
from softsnake.plotting import new_figure, save, styled
from softsnake.robots.snake.plots import top_view
from softsnake.robots.snake.simulation import SnakeSimulation

GAIT_PERIOD = 0.5
"""Period of the paper's gait, f = 2 Hz [s]: headings are averaged over it (the modules swing with the gait)."""


def period_means(time, values, period):
    """(period end times, the mean of ``values`` (frames, ...) over each whole period) [s, values' unit]."""
    frames = int(round(period / (time[1] - time[0])))
    whole = (len(time) - 1) // frames
    blocks = values[1:1 + whole * frames].reshape((whole, frames) + values.shape[1:])
    return time[frames::frames][:whole], blocks.mean(axis=1)


def simulation(args, snakes):
    options = {"resolution": args.resolution, "seconds": args.seconds}
    if args.workers == 1:
        return SnakeSimulation(snakes, device=args.device, **options)
    from softsnake.robots.snake.workers import SnakeSimulationWorkers

    return SnakeSimulationWorkers(snakes, workers=args.workers or None, device=args.device, **options)


@styled
def main(argv):
    parser = experiment_parser(__doc__, __file__)
    parser.add_argument("--targets", type=float_list, default=[-0.3, 0.0, 0.3], help="target headings [rad], one snake each")
    parser.add_argument("--seconds", type=float, default=20.0, help="simulated time [s]")
    parser.add_argument("--gain", type=float, default=2.0, help="offset per radian of heading error [1/rad]")
    parser.add_argument("--limit", type=float, default=0.5, help="largest offset [-]")
    parser.add_argument("--band", type=float, default=0.05, help="'within' the target: this close [rad]")
    parser.add_argument("--window", type=float, default=5.0, help="the last seconds the errors are averaged over [s]")
    parser.add_argument("--resolution", default="coarse", choices=("coarse", "paper"))
    parser.add_argument("--workers", type=int, default=0, help="CPU worker processes (0: one per core; 1: none)")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    if not 0.0 < args.window < args.seconds:
        parser.error(f"--window {args.window:g} s must be positive and shorter than --seconds {args.seconds:g} s, which "
                     "it averages the last part of")
    out = make_output_folder(args.out)
    targets = np.asarray(args.targets)
    snakes = len(targets)
    with simulation(args, snakes) as sim:
        frames = sim.frame_count
        time = np.arange(frames + 1) * sim.dt
        heading, offset = np.zeros((frames + 1, snakes)), np.zeros((frames + 1, snakes))
        com = np.zeros((frames + 1, snakes, 3))
        for frame in range(frames + 1):
            seen = sim.observe()
            # Continuous heading (no jump at +-pi), as the controller's error needs it.
            previous = heading[frame - 1] if frame else 0.0
            heading[frame] = previous + (seen.heading - previous + np.pi) % (2.0 * np.pi) - np.pi
            com[frame] = seen.com
            offset[frame] = np.clip(args.gain * (targets - heading[frame]), -args.limit, args.limit)
            if frame < frames:
                sim.step(sim.gait_command(seen.time + sim.dt, offset=offset[frame]))
        counts = sim.newton_counts()
    ends, mean_heading = period_means(time, heading, GAIT_PERIOD)
    late = ends > args.seconds - args.window
    rows = []
    for s, target in enumerate(targets):
        inside = np.flatnonzero(np.abs(mean_heading[:, s] - target) <= args.band)
        rows.append({"target_rad": target, "first_within_band_s": float(ends[inside[0]]) if inside.size else np.nan,
                     "late_mean_error_rad": float(np.mean(mean_heading[late, s] - target)),
                     "late_largest_error_rad": float(np.max(np.abs(mean_heading[late, s] - target))),
                     "late_mean_offset": float(np.mean(offset[time > args.seconds - args.window, s])),
                     "travel_m": float(np.linalg.norm(com[-1, s, :2] - com[0, s, :2]))})
    write_dict_csv(out / "closed_loop_steering.csv",
                   [{"time_s": f"{time[k]:.6f}", "snake": s, "target_rad": targets[s], "heading_rad": f"{heading[k, s]:.6g}",
                     "offset": f"{offset[k, s]:.6g}", "com_x_m": f"{com[k, s, 0]:.6f}", "com_y_m": f"{com[k, s, 1]:.6f}"}
                    for k in range(frames + 1) for s in range(snakes)])
    figure, (angles, paths) = new_figure(10, 4, 1, 2)
    for s, target in enumerate(targets):
        angles.plot(time, heading[:, s], color=f"C{s}", linewidth=0.5, alpha=0.5)
        angles.plot(ends, mean_heading[:, s], color=f"C{s}", label=f"target {target:+.2f} rad")
        angles.axhline(target, color=f"C{s}", linestyle=":", linewidth=0.8)
        xy = com[:, s, :2] - com[0, s, :2]
        paths.plot(xy[:, 0], xy[:, 1], color=f"C{s}")
    angles.set_xlabel("time [s]")
    angles.set_ylabel("heading [rad] (thin: every frame; thick: per gait period)")
    angles.legend()
    top_view(paths, mark_start=False)
    figure.suptitle(f"Closed-loop steering: offset = clip({args.gain:g} x heading error, +-{args.limit:g}), "
                    f"{args.resolution} mesh, {args.seconds:g} s")
    save(figure, out / "closed_loop_steering.png")
    print(f"closed-loop steering, {snakes} {args.resolution} snakes, {args.seconds:g} s, gain {args.gain:g}, "
          f"limit {args.limit:g}, device {args.device}")
    print(f"{'target [rad]':>12s} {'within +-' + format(args.band, 'g') + ' rad from [s]':>26s} "
          f"{'last ' + format(args.window, 'g') + ' s: mean error':>22s} {'largest':>8s} {'mean offset':>12s} "
          f"{'travel [m]':>10s}")
    for row in rows:
        print(f"{row['target_rad']:+12.2f} {row['first_within_band_s']:26.1f} {row['late_mean_error_rad']:+22.4f} "
              f"{row['late_largest_error_rad']:8.4f} {row['late_mean_offset']:+12.3f} {row['travel_m']:10.3f}")
    print(counts.summary("snake", study='README, "Known limitations"'))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
