"""Seed 001's Table II on a GPU, at scale, with its peers in the same run (issue 13).

For every snake count (paper mesh; the paper's budget: h = 1/120 s, 2 substeps, 4 Newton, 20 CR,
every iteration run; ``softsnake.robots.snake.bench.time_case``): ms per frame and per snake-frame,
the assembly / solve split, and memory (the Warp arrays' bytes, and what the case took from the CUDA
memory pool), for the linear solvers of --solvers (batched: one launch per operation over all rows;
block: one thread block per world) on the same model. Then the peers, on the same GPU in the same
run: the same without CUDA graphs (each frame is one graph by default), and the one-thread-per-world
solver.

Writes gpu_table2.csv and gpu_peers.csv into --out and prints both tables with the device.

    python experiments/gpu_benchmarks.py [--device cuda] [--cases 0.25,1,10,32,128,256,1024,4096]
        [--peer-cases 1,32,256|none] [--solvers batched,block] [--frames 10] [--warmup 3] [--out DIR]
"""

import argparse
import math
import sys

import warp as wp

from softsnake.cli.common import make_output_folder, results_folder
from softsnake.output_files import write_dict_csv
from softsnake.robots.snake.bench import (LINK_CASE, MB, PAPER_TABLE_2, case_model, device_name, pool_used,
                                          time_model)
from softsnake.robots.snake.config import load_snake_config

TARGET_ONE_SNAKE_MS = 2.0
"""Issue 13's target: one paper-resolution snake at most this long per frame [ms]."""
TARGET_PER_SNAKE_MS = 0.05
"""Issue 13's target: 1024 snakes at most this long per snake-frame [ms] (200x the paper)."""
TARGET_MB_PER_SNAKE = 16.0
"""Issue 13's target: device memory per snake [MB]."""
PEERS = ((False, "batched"), (False, "block"), (True, "per_world"))
"""(CUDA graph, linear solver) of the peer runs."""


def counts(text):
    values = [float(v) if "." in v else int(v) for v in text.split(",") if v.strip()]
    if not values or min(values) <= 0:
        raise argparse.ArgumentTypeError(f"expected comma-separated snake counts (0.25: one link), got {text!r}")
    return values


def label(snakes):
    return "1 link" if snakes == LINK_CASE else str(snakes)


def table_row(snakes, r, **extra):
    per_snake = snakes if snakes >= 1 else math.nan
    return {"snakes": label(snakes), **extra, "rows": r["rows"], "total_ms": 1e3 * r["total"],
            "per_snake_ms": 1e3 * r["total"] / per_snake, "assembly_ms": 1e3 * r["assembly"],
            "solve_ms": 1e3 * r["solve"], "array_mb_per_snake": r["memory"] / MB / per_snake,
            "pool_mb_per_snake": r["device_memory"] / MB / per_snake, "max_particle_speed": r["max_particle_speed"]}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--cases", type=counts, default=counts("0.25,1,10,32,128,256,1024,4096"))
    parser.add_argument("--peer-cases", type=lambda text: [] if text == "none" else counts(text),
                        default=counts("1,32,256"), help="snake counts of the peer runs, or none")
    parser.add_argument("--solvers", type=lambda text: text.split(","), default=["batched", "block"],
                        help="the table's linear solvers, each timed on every case (default: batched,block)")
    parser.add_argument("--frames", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--out", default=str(results_folder(__file__)))
    args = parser.parse_args(argv)
    out = make_output_folder(args.out)
    config = load_snake_config(resolution="paper")
    print(f"device: {device_name(args.device)}; paper mesh; h = 1/120 s, 2 substeps, 4 Newton, 20 CR; median of "
          f"{args.frames} frames after {args.warmup}", flush=True)
    print(f"{'snakes':>7s} {'solver':>9s} {'rows':>9s} {'total ms':>9s} {'ms/snake':>9s} {'assembly':>9s} {'solve':>9s} "
          f"{'MB/snake':>9s} {'pool MB/sn':>10s} | paper ms, ms/snake", flush=True)
    rows = []
    for snakes in args.cases:
        try:
            pool_before = pool_used(args.device)
            model, handle, count = case_model(snakes, config, "paper", args.device)
            for solver in args.solvers:
                r = time_model(model, handle, count, frames=args.frames, warmup=args.warmup, linear_solver=solver)
                r["device_memory"] = pool_used(args.device) - pool_before
                row = table_row(snakes, r, solver=solver)
                rows.append(row)
                paper = PAPER_TABLE_2.get(snakes)
                paper_text = f"{paper[2]:.2f}, {paper[2] / max(snakes, 1):.2f}" if paper else ""
                print(f"{row['snakes']:>7s} {solver:>9s} {row['rows']:9d} {row['total_ms']:9.3f} "
                      f"{row['per_snake_ms']:9.4f} {row['assembly_ms']:9.3f} {row['solve_ms']:9.3f} "
                      f"{row['array_mb_per_snake']:9.2f} {row['pool_mb_per_snake']:10.2f} | {paper_text}", flush=True)
                write_dict_csv(out / "gpu_table2.csv", rows)
            del model
        except (MemoryError, RuntimeError) as error:  # a batch beyond the device's memory
            print(f"{label(snakes):>7s} did not run: {error}", flush=True)
            break
    print(f"targets: one snake <= {TARGET_ONE_SNAKE_MS} ms per frame; 1024 snakes <= {TARGET_PER_SNAKE_MS} ms per "
          f"snake-frame; <= {TARGET_MB_PER_SNAKE} MB per snake", flush=True)

    print("peers (same GPU): without CUDA graphs, and the one-thread-per-world solver", flush=True)
    print(f"{'snakes':>7s} {'graph':>5s} {'solver':>9s} {'total ms':>9s} {'ms/snake':>9s} {'solve':>9s}", flush=True)
    peers = []
    for snakes in args.peer_cases:
        model, handle, count = case_model(snakes, config, "paper", args.device)
        for graph, solver in PEERS:
            r = time_model(model, handle, count, frames=args.frames, warmup=args.warmup, capture_graph=graph,
                           linear_solver=solver)
            r["device_memory"] = math.nan
            row = table_row(snakes, r, graph=graph, solver=solver)
            peers.append(row)
            print(f"{row['snakes']:>7s} {str(graph):>5s} {solver:>9s} {row['total_ms']:9.3f} "
                  f"{row['per_snake_ms']:9.4f} {row['solve_ms']:9.3f}", flush=True)
            write_dict_csv(out / "gpu_peers.csv", peers)
    wp.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
