"""The tetrahedra's rows stored or matrix-free (``SolverSettings.tetrahedron_operator``): cost and agreement.

The linear solve's products with J and J^T read, for every tetrahedron, 6 x 12 stored entries of J and as many of
J^T (a value and an index each) where the matrix-free operator reads the tetrahedron's rotation, inverse rest shape
and four indices and computes the entries again (``constraints.tetrahedron.TetrahedronOperator``). Which is faster
depends on whether the solve is bound by memory or by arithmetic, so it is measured, on the device it runs on:

1. Cost: seed 001's Table II frame (paper mesh, h = 1/120 s, 2 substeps x 4 Newton x 20 CR, every iteration run;
   ``softsnake.robots.snake.bench.time_model``; --resolution coarse --budget 8x40 times the gait's system at its
   budget, every iteration run) for each snake count of --cases and each linear solver of --solvers, the two operators alternated --repeats times on one model, each time the median of --frames frames
   after --warmup; the table gives the median over the repeats.
2. Agreement: one snake's gait (--agree-resolution, --agree-seconds) run with each operator at each budget of
   --agree-budgets (the gait's 8 x 40 and the converged 16 x 160 by default): the forward travel of each and
   how far apart the two runs end. The two operators differ only by float round-off, so they should end as far
   apart as two runs that differ by round-off do (a micrometre's change of the start: the gait's sensitivity,
   experiments/results/gait_sensitivity_*.md).

Writes tetrahedron_operator_cost.csv and tetrahedron_operator_agreement.csv into --out (each rewritten after every
row, so an interrupted run keeps what it measured) and prints both tables with the device.

    python experiments/tetrahedron_operator.py [--device cpu|cuda] [--cases 1,8] [--solvers per_world,batched]
        [--resolution paper|coarse] [--budget 4x20] [--frames 5] [--warmup 2] [--repeats 2] [--agree-seconds 2] [--agree-budgets 8x40,16x160]
        [--agree-resolution coarse] [--skip-agreement] [--out DIR]
"""

import sys
import time

import numpy as np
import warp as wp

from softsnake.cli.common import experiment_parser, make_output_folder, parse_budget
from softsnake.errors import UsageError
from softsnake.output_files import write_dict_csv
from softsnake.robots.snake.bench import case_model, device_name, time_model
from softsnake.robots.snake.config import load_snake_config
from softsnake.solver_settings import TETRAHEDRON_OPERATORS


def comma_list(kind):
    def parse(text):
        return [kind(v) for v in text.split(",") if v.strip()]
    return parse


def time_cases(args, out):
    config = load_snake_config(resolution=args.resolution)
    newton, linear = args.budget["newton_iterations"], args.budget["linear_iterations"]
    rows = []
    print(f"device: {device_name(args.device)}; {args.resolution} mesh; h = 1/120 s, 2 substeps x {newton} Newton x "
          f"{linear} CR, every iteration run; median of {args.frames} frames after {args.warmup}, median of "
          f"{args.repeats} alternated repeats", flush=True)
    print(f"{'snakes':>6s} {'solver':>9s} | {'stored ms':>9s} {'solve':>7s} | {'free ms':>9s} {'solve':>7s} | "
          f"{'free/stored':>11s} {'solve':>6s}", flush=True)
    for snakes in args.cases:
        model, handle, count = case_model(snakes, config, args.resolution, args.device)
        for solver in args.solvers:
            runs = {op: [] for op in TETRAHEDRON_OPERATORS}
            for _ in range(args.repeats):
                for op in TETRAHEDRON_OPERATORS:
                    runs[op].append(time_model(model, handle, count, frames=args.frames, warmup=args.warmup,
                                               linear_solver=solver, tetrahedron_operator=op, **args.budget))
            total = {op: float(np.median([r["total"] for r in runs[op]])) for op in runs}
            solve = {op: float(np.median([r["solve"] for r in runs[op]])) for op in runs}
            rows.append({"device": device_name(args.device), "resolution": args.resolution,
                         "budget": f"{newton}x{linear}", "snakes": snakes, "solver": solver,
                         "rows": model.row_count, "stored_ms": 1e3 * total["stored"],
                         "stored_solve_ms": 1e3 * solve["stored"], "matrix_free_ms": 1e3 * total["matrix_free"],
                         "matrix_free_solve_ms": 1e3 * solve["matrix_free"],
                         "stored_runs_ms": " ".join(f"{1e3 * r['total']:.2f}" for r in runs["stored"]),
                         "matrix_free_runs_ms": " ".join(f"{1e3 * r['total']:.2f}" for r in runs["matrix_free"])})
            write_dict_csv(out / "tetrahedron_operator_cost.csv", rows)
            r = rows[-1]
            print(f"{snakes:>6d} {solver:>9s} | {r['stored_ms']:9.2f} {r['stored_solve_ms']:7.2f} | "
                  f"{r['matrix_free_ms']:9.2f} {r['matrix_free_solve_ms']:7.2f} | "
                  f"{r['matrix_free_ms'] / r['stored_ms']:11.3f} {r['matrix_free_solve_ms'] / r['stored_solve_ms']:6.3f}",
                  flush=True)
        del model


def agreement(args, out):
    from softsnake.robots.snake.simulation import SnakeSimulation

    rows = []
    print(f"\nagreement: one {args.agree_resolution} snake, {args.agree_seconds:g} s of the gait; device "
          f"{device_name(args.device)}", flush=True)
    print(f"{'budget':>8s} | {'stored mm':>10s} {'free mm':>10s} {'diff mm':>9s} | {'end apart mm':>12s} | "
          f"{'stored s':>8s} {'free s':>8s}", flush=True)
    for budget in args.agree_budgets:
        ends, travel, wall = {}, {}, {}
        for op in TETRAHEDRON_OPERATORS:
            sim = SnakeSimulation(1, resolution=args.agree_resolution, seconds=args.agree_seconds, device=args.device,
                                  **budget)
            sim.solver.tetrahedron_operator = op
            start = time.perf_counter()
            trajectories = sim.run(progress=False)
            wall[op] = time.perf_counter() - start
            travel[op] = float(trajectories.travel()[0, 0])
            ends[op] = sim.state.particle_q.numpy().astype(np.float64)
            sim.close()
        apart = float(np.linalg.norm(ends["matrix_free"] - ends["stored"], axis=1).max())
        rows.append({"device": device_name(args.device), "resolution": args.agree_resolution,
                     "seconds": args.agree_seconds,
                     "budget": f"{budget['newton_iterations']}x{budget['linear_iterations']}",
                     "stored_travel_mm": 1e3 * travel["stored"], "matrix_free_travel_mm": 1e3 * travel["matrix_free"],
                     "travel_difference_mm": 1e3 * (travel["matrix_free"] - travel["stored"]),
                     "largest_end_distance_mm": 1e3 * apart, "stored_wall_s": wall["stored"],
                     "matrix_free_wall_s": wall["matrix_free"]})
        write_dict_csv(out / "tetrahedron_operator_agreement.csv", rows)
        r = rows[-1]
        print(f"{r['budget']:>8s} | {r['stored_travel_mm']:10.3f} {r['matrix_free_travel_mm']:10.3f} "
              f"{r['travel_difference_mm']:9.4f} | {r['largest_end_distance_mm']:12.4f} | {wall['stored']:8.1f} "
              f"{wall['matrix_free']:8.1f}", flush=True)


def main(argv=None):
    parser = experiment_parser(__doc__, __file__)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--cases", type=comma_list(int), default=None,
                        help="snakes per case (default: 1,8 on the CPU, 1,256,1024 on a GPU)")
    parser.add_argument("--solvers", type=comma_list(str), default=None,
                        help="linear solvers (default: per_world,batched on the CPU, block,batched on a GPU)")
    parser.add_argument("--resolution", choices=("paper", "coarse"), default="paper", help="the timed snakes' mesh")
    parser.add_argument("--budget", default="4x20",
                        help="Newton x CR iterations of the timed frames (default 4x20, the paper's)")
    parser.add_argument("--frames", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--agree-seconds", type=float, default=2.0)
    parser.add_argument("--agree-budgets", default="8x40,16x160", help="NxL,... of the agreement runs")
    parser.add_argument("--agree-resolution", choices=("coarse", "paper"), default="coarse")
    parser.add_argument("--skip-agreement", action="store_true")
    args = parser.parse_args(argv)
    try:
        args.budget = parse_budget(args.budget, None)
        args.agree_budgets = [parse_budget(text, None) for text in args.agree_budgets.split(",") if text.strip()]
    except UsageError as error:
        parser.error(str(error))
    try:
        cpu = wp.get_device(args.device).is_cpu
    except (RuntimeError, ValueError) as error:
        parser.error(f"--device {args.device}: {error}")
    args.cases = args.cases or ([1, 8] if cpu else [1, 256, 1024])
    args.solvers = args.solvers or (["per_world", "batched"] if cpu else ["block", "batched"])
    if min(args.cases) < 1 or min(args.frames, args.repeats) < 1 or args.warmup < 0 or not args.agree_seconds > 0:
        parser.error("--cases, --frames, --repeats and --agree-seconds must be positive, --warmup not negative")
    out = make_output_folder(args.out)
    time_cases(args, out)
    if not args.skip_agreement:
        agreement(args, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
