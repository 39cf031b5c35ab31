"""How precisely the snake's gait travel is defined: the spread of an ensemble of snakes started a micrometre apart.

A budget's result can only be compared with another budget's, or another start's, to within the spread that
the trajectory itself has: a snake whose travel changes by 1 % when its nodes start a micrometre elsewhere has
no travel better defined than that, whatever the solver does. This script runs ``--members`` + 1 snakes side
by side (one world each, the same gait, ``SnakeSimulation``): snake 0 as built, snake k >= 1 with every
particle of its soft links moved by a random offset of standard deviation ``--noise`` [m] per axis (seed k)
before the first frame. It reports the forward travel of each after ``--seconds``, their mean, standard
deviation and spread (largest minus smallest), for each budget and start asked for.

Worlds are independent (each converges on its own; a world's answer does not depend on its neighbours), so
snake 0 travels what a run of one snake travels, to the digit.

Writes gait_sensitivity_<tag>.csv (one row per snake and run) and .md (one row per run) into --out (default
experiments/results), rewritten after each run, so an interrupted sweep keeps what it finished.

Usage: python experiments/gait_sensitivity.py [--resolution coarse|paper] [--seconds 10] [--budgets 8x40,16x160]
           [--starts plain,elastic] [--members 5] [--noise 1e-6] [--momentum-balance snake|on|off|bodies]
           [--substeps S] [--compensated|--float32] [--tag NAME] [--out DIR]

``--substeps`` splits each 1/120 s frame into S substeps (default: the gait's 2): the trajectory's own sensitivity
at a smaller time step, against which the time-step study (time_step_convergence.py) compares its changes.
``--compensated`` / ``--float32`` keep every position as a float32 pair, or none, instead of the engine's "auto"
(``SolverSettings.compensated_positions``: pairs from substeps of 1/600 s): below about 1/1000 s float32 positions
round the velocity, and the sensitivity they measure is partly theirs.

Until the twenty-seventh session the script forced the plain iteration unless --momentum-balance was given; the
files of earlier sessions say which they ran.
"""

import platform
import sys
import time

import numpy as np
import warp as wp

from softsnake.cli.common import (POSITION_SETTINGS, add_positions_option, experiment_parser, make_output_folder,
                                  positions_suffix)
from softsnake.output_files import write_dict_csv

STARTS = {"plain": False, "elastic": True}
"""``--starts``: the value of ``SolverSettings.elastic_warm_start`` of each (the gait's own is plain)."""
BALANCES = {"snake": None, "on": True, "off": False, "bodies": "bodies"}
"""``--momentum-balance``: the value of ``SolverSettings.momentum_balance`` (None: the snake's own, ``snake_solver``)."""
BALANCE_SUFFIXES = {"snake": "", "on": "_balanced", "off": "_plain_iteration", "bodies": "_bodies"}
"""The file name ending of each ``--momentum-balance``."""


def perturbed_run(resolution, seconds, newton, linear, elastic, members, noise, balance=None, substeps=None,
                  positions="auto"):
    """Forward travel [m] of members + 1 snakes (snake 0 unperturbed) and the wall time [s]; ``balance``:
    ``SolverSettings.momentum_balance``, or None for the snake's own (``snake_solver``: its bodies balanced below 16
    Newton iterations, everything from 16); ``substeps`` per frame (None: the gait's)."""
    from softsnake.robots.snake.simulation import SnakeSimulation

    sim = SnakeSimulation(members + 1, resolution=resolution, seconds=seconds, newton_iterations=newton,
                          linear_iterations=linear, substeps=substeps)
    sim.solver.elastic_warm_start = elastic
    sim.solver.compensated_positions = POSITION_SETTINGS[positions]
    if balance is not None:
        sim.solver.momentum_balance = balance
    q = sim.state.particle_q.numpy().reshape(members + 1, -1, 3)
    for k in range(1, members + 1):
        q[k] += np.random.default_rng(k).normal(0.0, noise, size=q[k].shape)
    sim.state.particle_q.assign(q.reshape(-1, 3))
    start = time.perf_counter()
    trajectories = sim.run(progress=False)
    wall = time.perf_counter() - start
    return trajectories.travel()[:, 0], wall


def parse_budgets(text):
    return [tuple(int(n) for n in item.split("x")) for item in text.split(",")]


def main(argv=None):
    parser = experiment_parser(__doc__, __file__)
    parser.add_argument("--resolution", default="coarse", choices=("coarse", "paper"))
    parser.add_argument("--seconds", type=float, default=10.0, help="simulated time [s]")
    parser.add_argument("--budgets", default="8x40,16x160", help="NEWTONxLINEAR,...")
    parser.add_argument("--starts", default="plain,elastic", help=f"comma-separated, of {sorted(STARTS)}")
    parser.add_argument("--members", type=int, default=5, help="perturbed snakes besides the unperturbed one")
    parser.add_argument("--noise", type=float, default=1.0e-6, help="standard deviation of the offsets [m]")
    parser.add_argument("--momentum-balance", choices=sorted(BALANCES), default="snake",
                        help="SolverSettings.momentum_balance: the snake's own (default), on, off or bodies")
    parser.add_argument("--substeps", type=int, default=None, help="substeps per 1/120 s frame (default: the gait's)")
    add_positions_option(parser)
    parser.add_argument("--tag", default=None, help="file name tag (default <resolution>_<seconds>s[_<S>substeps])")
    args = parser.parse_args(argv)
    starts = args.starts.split(",")
    unknown = [s for s in starts if s not in STARTS]
    if unknown:
        parser.error(f"--starts: unknown {unknown}, choose from {sorted(STARTS)}")
    if args.members < 1:
        parser.error("--members must be at least 1")
    if not args.noise > 0.0:
        parser.error("--noise must be positive")
    if args.substeps is not None and args.substeps < 1:
        parser.error("--substeps must be at least 1")
    try:
        budgets = parse_budgets(args.budgets)
    except ValueError:
        parser.error(f"--budgets: expected NEWTONxLINEAR,... (e.g. 8x40,16x160), got {args.budgets!r}")
    if any(newton < 1 or linear < 1 for newton, linear in budgets):
        parser.error(f"--budgets: iteration counts must be at least 1, got {args.budgets!r}")
    out = make_output_folder(args.out)
    balance = BALANCES[args.momentum_balance]
    tag = args.tag or (f"{args.resolution}_{args.seconds:g}s" + BALANCE_SUFFIXES[args.momentum_balance]
                       + (f"_{args.substeps}substeps" if args.substeps else "")
                       + positions_suffix(args)[0])
    print(f"device: {wp.get_device()} ({platform.processor() or platform.machine()}), warp {wp.__version__}; "
          f"{args.resolution} snake, {args.seconds:g} s, {args.members} snakes offset by N(0, {args.noise:g} m) "
          "per node and axis beside an unperturbed one", file=sys.stderr)

    rows, summary = [], []
    for newton, linear in sorted(budgets, key=lambda b: b[0] * b[1]):
        for start in starts:
            travel, wall = perturbed_run(args.resolution, args.seconds, newton, linear, STARTS[start], args.members,
                                         args.noise, balance, args.substeps, args.positions)
            for k, forward in enumerate(travel):
                rows.append({"budget": f"{newton}x{linear}", "start": start, "snake": k,
                             "noise_m": 0.0 if k == 0 else args.noise, "forward_m": float(forward)})
            perturbed = travel[1:]
            summary.append({"budget": f"{newton}x{linear}", "start": start, "unperturbed_m": float(travel[0]),
                            "mean_m": float(travel.mean()), "std_m": float(travel.std(ddof=1)),
                            "spread_m": float(travel.max() - travel.min()),
                            "spread_percent": float(100.0 * (travel.max() - travel.min()) / abs(travel.mean())),
                            "perturbed_min_m": float(perturbed.min()), "perturbed_max_m": float(perturbed.max()),
                            "wall_s": wall})
            write_dict_csv(out / f"gait_sensitivity_{tag}.csv", rows)
            write_table(out / f"gait_sensitivity_{tag}.md", summary, args)
            s = summary[-1]
            print(f"{s['budget']:>7} {start:>8}: unperturbed {1e3 * s['unperturbed_m']:.2f} mm, mean "
                  f"{1e3 * s['mean_m']:.2f}, std {1e3 * s['std_m']:.2f}, spread {1e3 * s['spread_m']:.2f} mm "
                  f"({s['spread_percent']:.2f} %), "
                  f"wall {wall:.0f} s", flush=True)


def write_table(path, summary, args):
    lines = [f"# Gait travel of {args.members + 1} snakes a micrometre apart ({args.resolution} mesh, "
             f"{args.seconds:g} s" + (f", {args.substeps} substeps per 1/120 s frame" if args.substeps else "")
             + (f", {args.positions} positions" if positions_suffix(args)[0] else "") + ")", "",
             f"Snake 0 as built; snakes 1-{args.members} with every node offset by N(0, {args.noise:g} m) per axis "
             "(seed = snake). Forward travel of the centre of mass [mm]. Device: "
             f"{wp.get_device()}, warp {wp.__version__}. `python experiments/gait_sensitivity.py` "
             f"--resolution {args.resolution} --seconds {args.seconds:g} --members {args.members} "
             f"--noise {args.noise:g} --momentum-balance {args.momentum_balance}"
             + (f" --substeps {args.substeps}" if args.substeps else "")
             + positions_suffix(args)[1] + ".", "",
             "| budget | start | unperturbed | mean | std | smallest / largest perturbed | spread | spread [%] | wall [s] |",
             "|---|---|---:|---:|---:|---|---:|---:|---:|"]
    for s in summary:
        mm = {key: 1.0e3 * value for key, value in s.items() if key.endswith("_m")}
        lines.append(f"| {s['budget']} | {s['start']} | {mm['unperturbed_m']:.2f} | {mm['mean_m']:.2f} | "
                     f"{mm['std_m']:.2f} | {mm['perturbed_min_m']:.2f} / {mm['perturbed_max_m']:.2f} | "
                     f"{mm['spread_m']:.2f} | {s['spread_percent']:.2f} | {s['wall_s']:.0f} |")
    path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
