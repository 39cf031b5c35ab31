"""Engine throughput: a soft tetrahedral block resting on the ground, 1, 8 and 64 worlds.

Each world is a 0.2 m cube of Ecoflex-like material (Y = 1e5 Pa, nu = 0.45, 1070 kg/m^3) meshed
with cells^3 hexahedra of five tetrahedra (cells = 10: 5000 tetrahedra, 1331 particles), resting on
a ground with mu = 0.8; the worlds are replicated side by side. For every world count the script
steps a warm-up (kernel compilation, first contacts), then times --runs runs of --steps steps
(device synchronised before and after each run) and prints the medians:

* per step [ms]: one ``Solver.step`` at --dt, all worlds;
* per Newton iteration [ms]: per step / (substeps * Newton iterations) (prediction and contact
  detection included, a few per cent);
* per world [ms]: per step / worlds.

The finite-state check (one device-to-host copy per step) is off while timing; the state is
checked once at the end.

Usage: python experiments/bench_engine.py [--device cpu|cuda] [--worlds 1,8,64] [--steps N] [--runs N]
       [--cells N] [--dt S] [--substeps N] [--newton N] [--linear N] [--csv PATH]
"""

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import warp as wp

import softsnake
from softsnake.cli.common import positive_int_list
from softsnake.meshing import box_tet_mesh
from softsnake.output_files import write_csv

BLOCK_SIDE = 0.2
"""Edge of the cubic block [m]."""
BLOCK_YOUNGS, BLOCK_POISSON, BLOCK_DENSITY, GROUND_MU = 1.0e5, 0.45, 1070.0, 0.8
WORLD_SPACING = (0.5, 0.0, 0.0)
"""Offset between neighbouring worlds [m] (the worlds are independent; this only keeps them apart)."""


def world_builder(cells):
    """One world: the block resting on the ground."""
    builder = softsnake.ModelBuilder()
    builder.add_ground(mu=GROUND_MU)
    vertices, tets = box_tet_mesh(size=(BLOCK_SIDE,) * 3, cells=(cells,) * 3, tets_per_cell=5)
    builder.add_soft_mesh(vertices, tets, BLOCK_DENSITY, BLOCK_YOUNGS, BLOCK_POISSON, position=(0.0, 0.0, BLOCK_SIDE / 2))
    return builder, len(tets)


def positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def positive_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not (value > 0.0 and np.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def device_description(device):
    d = wp.get_device(device)
    if d.is_cpu:
        return f"{d.name} ({platform.processor() or platform.machine()}, {os.cpu_count()} logical cores, Warp CPU kernels)"
    return d.name


def bench(worlds, args):
    """Median seconds per step, and whether the final state is finite, for ``worlds`` copies of the block."""
    world, tet_count = world_builder(args.cells)
    builder = softsnake.ModelBuilder()
    builder.replicate(world, worlds, spacing=WORLD_SPACING)
    model = builder.finalize(args.device)
    solver = softsnake.Solver(model, substeps=args.substeps, newton_iterations=args.newton,
                              linear_iterations=args.linear, check_finite=False)
    state, control = model.state(), model.control()
    for _ in range(args.warmup):
        solver.step(state, state, control, args.dt)
    times = []
    for _ in range(args.runs):
        wp.synchronize_device(model.device)
        start = time.perf_counter()
        for _ in range(args.steps):
            solver.step(state, state, control, args.dt)
        wp.synchronize_device(model.device)
        times.append((time.perf_counter() - start) / args.steps)
    finite = bool(np.all(np.isfinite(state.particle_q.numpy())))
    return statistics.median(times), finite, tet_count, model.particle_count, model.row_count


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    default_device = "cuda" if wp.is_cuda_available() else "cpu"
    parser.add_argument("--device", default=default_device, help=f"Warp device (default {default_device})")
    parser.add_argument("--worlds", type=positive_int_list, default=[1, 8, 64], help="world counts (default 1,8,64)")
    parser.add_argument("--steps", type=positive_int, default=5, help="steps per timed run (default 5)")
    parser.add_argument("--runs", type=positive_int, default=5, help="timed runs; the median is reported (default 5)")
    parser.add_argument("--warmup", type=positive_int, default=2, help="untimed steps first (default 2)")
    parser.add_argument("--cells", type=positive_int, default=10, help="hexahedra per block edge (default 10: 5000 tets)")
    parser.add_argument("--dt", type=positive_float, default=1.0 / 60.0, help="step [s] (default 1/60)")
    parser.add_argument("--substeps", type=positive_int, default=2, help="substeps per step (default 2)")
    parser.add_argument("--newton", type=positive_int, default=4, help="Newton iterations per substep (default 4)")
    parser.add_argument("--linear", type=positive_int, default=20, help="linear iterations per Newton iteration (default 20)")
    parser.add_argument("--csv", type=Path, help="also write the table to this CSV file")
    args = parser.parse_args(argv)
    wp.config.quiet = True
    try:
        description = device_description(args.device)
    except Exception:
        parser.error(f"unknown device {args.device!r}; available: {', '.join(str(d) for d in wp.get_devices())}")

    print(f"device: {description}")
    print(f"solver: dt {args.dt:.5f} s, {args.substeps} substeps x {args.newton} Newton x {args.linear} linear iterations; "
          f"median of {args.runs} runs of {args.steps} steps after {args.warmup} warm-up steps")
    header = ["worlds", "tets", "particles", "rows", "step_ms", "newton_iteration_ms", "per_world_ms", "finite"]
    print(f"{'worlds':>6} {'tets':>8} {'particles':>9} {'rows':>8} {'step ms':>10} {'Newton it ms':>12} "
          f"{'per world ms':>12} {'finite':>6}")
    rows = []
    for worlds in args.worlds:
        seconds, finite, tet_count, particles, row_count = bench(worlds, args)
        step_ms = 1e3 * seconds
        newton_ms = step_ms / (args.substeps * args.newton)
        row = [worlds, tet_count * worlds, particles, row_count, f"{step_ms:.3f}", f"{newton_ms:.3f}",
               f"{step_ms / worlds:.3f}", finite]
        rows.append(row)
        print(f"{worlds:>6} {tet_count * worlds:>8} {particles:>9} {row_count:>8} {step_ms:>10.2f} {newton_ms:>12.3f} "
              f"{step_ms / worlds:>12.3f} {'yes' if finite else 'NO':>6}", flush=True)
    if args.csv is not None:
        args.csv.parent.mkdir(parents=True, exist_ok=True)
        write_csv(args.csv, header, rows)
        print(f"wrote {args.csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
