"""``softsnake bench``: time per frame for one link and for batches of snakes (seed 001, Table II).

Every case steps a batch of worlds (one link on its stand, or N four-link snakes on the ground)
with the paper's settings: frame h = 1/120 s, 2 substeps, 4 Newton iterations, 20 conjugate
residual iterations. A few warm-up frames run first (kernel compilation, caches); then each
timed frame is bracketed by ``wp.synchronize`` and the median is reported.

Split. "solve" is the time spent in the linear solves (the conjugate residual iterations,
``Solver._solve_conjugate_residual``, timed with a synchronize on each side); "assembly" is the
rest of the frame: prediction, contact detection, row evaluation and preparation, position and
velocity updates. Assembly + solve = total, as in Table II. The chambers are pressurised during
timing (the gait at t = 0.1 s) so that the actuation rows take part.
"""

import math
import os
import platform
import time
from pathlib import Path

import numpy as np
import warp as wp
from matplotlib.figure import Figure
from tqdm import tqdm

from softsnake.builder import ModelBuilder
from softsnake.cli import UsageError
from softsnake.errors import SimulationError
from softsnake.memory import array_bytes
from softsnake.output_files import save_png, write_csv

from .cmd_curvature import check_device
from .config import load_snake_config
from .gait import GaitParams, gait_command
from ..actuation import chamber_targets
from .robot import add_link_stand, add_snake
from .simulation import DT_DEFAULT, snake_solver

PAPER_TABLE_2 = {
    # snakes: (assembly [ms], solve [ms], total [ms]); 0.25 is the single link. GTX 1080 Ti.
    0.25: (0.74, 4.96, 5.70), 1: (1.11, 10.52, 11.63), 2: (1.41, 25.06, 26.47), 3: (2.33, 31.90, 34.23),
    4: (3.41, 43.12, 46.53), 5: (5.59, 50.41, 56.00), 6: (6.19, 58.63, 64.82), 7: (6.45, 66.95, 73.4),
    8: (7.37, 79.73, 87.10), 9: (8.48, 86.89, 95.37), 10: (10.31, 95.57, 105.88),
}
"""The paper's Table II (one soft link = 1/4 snake, then 1..10 snakes)."""

PAPER_CPU_FRAME_S = 8.9
"""The paper's time per frame for one snake on a CPU (Intel Core i7 5820k, 3.3 GHz) [s]."""

GPU_EXTRA_SNAKES = (32, 64, 128, 256, 512, 1024)
"""Larger batches timed on a GPU only."""

CSV_NAME = "bench.csv"
PNG_NAME = "bench.png"
MB = 1024.0 * 1024.0
"""Bytes in a megabyte (MiB) [B]."""
LINK_CASE = 0.25
"""Snake count that stands for the single-link case (a quarter of a snake)."""


class _SolveTimer:
    """Times a solver's linear solves: wraps the solve launches the solver records (its
    ``_solve_commands``) into one command that accumulates their synchronized wall time [s]."""

    def __init__(self, solver):
        self.seconds = 0.0
        record_solve = solver._solve_commands
        solver._solve_commands = lambda: [self._timed(record_solve())]
        # Drop what the warm-up frames recorded, so that the next step records the timed solve.
        solver._recording_key = None

    def _timed(self, commands):
        def run():
            wp.synchronize()
            start = time.perf_counter()
            for command in commands:
                command()
            wp.synchronize()
            self.seconds += time.perf_counter() - start
        return run


def _case_model(snakes, config, resolution, device):
    """(model, world builder, handle) for one bench case: one link on its stand or N snakes."""
    world = ModelBuilder()
    if snakes == LINK_CASE:
        handle = add_link_stand(world, config, resolution)
        count = 1
    else:
        handle = add_snake(world, config, resolution)
        count = int(snakes)
    scene = ModelBuilder()
    scene.add_ground(mu=config.friction)
    scene.replicate(world, count, spacing=(0.0, 1.0, 0.0))
    return scene.finalize(device), handle, count


def time_case(snakes, *, config, resolution, device, frames, warmup, dt=DT_DEFAULT):
    """Median times of one case [s]: dict with assembly, solve, total, rows, worlds, memory, the bytes of
    the case's Warp arrays [B] (see ``softsnake.memory``), and max_particle_speed, the fastest particle
    after the last frame [m/s] (a blown-up frame raises SimulationError instead)."""
    model, handle, count = _case_model(snakes, config, resolution, device)
    # The gait runs' solver: its finite check raises SimulationError if a timed frame blows up, which a
    # bench must neither time nor hide (one small copy per frame, as in every gait run).
    solver = snake_solver(model)
    state, control = model.state(), model.control()
    command = gait_command(GaitParams(snake_count=count), 0.1, handle.link_count)
    channels = model.pressure_channel_world_start[:-1, None, None] + handle.link_channels[None]
    pressure = np.zeros(model.pressure_channel_count, dtype=np.float32)
    pressure[channels.ravel()] = chamber_targets(command).ravel()
    control.pressure.assign(pressure)
    for _ in range(warmup):
        solver.step(state, state, control, dt)
    solve_timer = _SolveTimer(solver)
    totals, solves = [], []
    for _ in range(frames):
        solve_timer.seconds = 0.0
        wp.synchronize()
        start = time.perf_counter()
        solver.step(state, state, control, dt)
        wp.synchronize()
        totals.append(time.perf_counter() - start)
        solves.append(solve_timer.seconds)
    total, solve = float(np.median(totals)), float(np.median(solves))
    speed = float(np.linalg.norm(state.particle_qd.numpy(), axis=1).max()) if model.particle_count else 0.0
    return {"assembly": total - solve, "solve": solve, "total": total, "rows": model.row_count, "worlds": count,
            "memory": array_bytes(model, state, control, solver), "max_particle_speed": speed}


def device_name(device):
    """A readable name of the Warp device (the processor for the CPU)."""
    if device == "cpu":
        return f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"
    return wp.get_device(device).name


def write_bench_csv(path, results):
    """One row per case: our times and the paper's [ms]; written atomically."""
    path = Path(path)
    header = ["snakes", "worlds", "rows", "assembly_ms", "solve_ms", "total_ms", "per_snake_ms", "memory_mb",
              "memory_per_snake_mb", "paper_assembly_ms", "paper_solve_ms", "paper_total_ms"]
    rows = []
    for snakes, r in results.items():
        paper = PAPER_TABLE_2.get(snakes, (math.nan,) * 3)
        per_snake = 1e3 * r["total"] / snakes if snakes >= 1 else math.nan
        memory_per_snake = r["memory"] / MB / snakes if snakes >= 1 else math.nan
        rows.append([snakes, r["worlds"], r["rows"], f"{1e3 * r['assembly']:.3f}", f"{1e3 * r['solve']:.3f}",
                     f"{1e3 * r['total']:.3f}", f"{per_snake:.3f}", f"{r['memory'] / MB:.3f}",
                     f"{memory_per_snake:.3f}", *paper])
    write_csv(path, header, rows)


def plot_bench(path, results, *, title):
    """Time per frame and per snake against the number of snakes, ours beside the paper's."""
    path = Path(path)
    snakes = [s for s in results if s >= 1]
    figure = Figure(figsize=(9, 4), layout="constrained")
    left, right = figure.subplots(1, 2)
    total = [1e3 * results[s]["total"] for s in snakes]
    solve = [1e3 * results[s]["solve"] for s in snakes]
    left.plot(snakes, total, "o-", color="C3", label="total (this run)")
    left.plot(snakes, solve, "s--", color="C3", markersize=4, label="solve (this run)")
    paper = [s for s in snakes if s in PAPER_TABLE_2]
    left.plot(paper, [PAPER_TABLE_2[s][2] for s in paper], "o-", color="C0", label="total (paper, GTX 1080 Ti)")
    left.plot(paper, [PAPER_TABLE_2[s][1] for s in paper], "s--", color="C0", markersize=4, label="solve (paper)")
    left.set_xlabel("snakes")
    left.set_ylabel("time per frame [ms]")
    left.set_yscale("log")
    left.grid(alpha=0.3)
    left.legend(fontsize=8)
    right.plot(snakes, [t / s for t, s in zip(total, snakes)], "o-", color="C3", label="this run")
    right.plot(paper, [PAPER_TABLE_2[s][2] / s for s in paper], "o-", color="C0", label="paper")
    right.set_xlabel("snakes")
    right.set_ylabel("time per frame and snake [ms]")
    right.set_yscale("log")
    right.grid(alpha=0.3)
    right.legend(fontsize=8)
    if len(snakes) > 1 and max(snakes) > 16:
        left.set_xscale("log")
        right.set_xscale("log")
    figure.suptitle(title, fontsize=10)
    save_png(figure, path)


def bench_cases(device, max_snakes):
    """Snake counts to time: the single link, 1..max_snakes, and on a GPU the large batches."""
    cases = [LINK_CASE] + list(range(1, max_snakes + 1))
    if device != "cpu":
        cases += [n for n in GPU_EXTRA_SNAKES if n > max_snakes]
    return cases


def run_bench(*, device="cpu", resolution="paper", max_snakes=10, frames=5, warmup=2, progress=True):
    """Time every case; returns {snakes: times} in the order run (see ``time_case``)."""
    config = load_snake_config(resolution=resolution)
    results = {}
    cases = bench_cases(device, max_snakes)
    for snakes in tqdm(cases, desc="bench", unit="case", disable=None if progress else True, leave=False):
        results[snakes] = time_case(snakes, config=config, resolution=resolution, device=device, frames=frames,
                                    warmup=warmup)
    return results


def add_arguments(parser):
    parser.add_argument("--out", default=".", help="output folder (default: current folder)")
    parser.add_argument("--device", default="cpu", help="Warp device, cpu or cuda (default: %(default)s)")
    parser.add_argument("--resolution", default="paper", choices=("paper", "coarse"),
                        help="link mesh resolution (default: %(default)s, as in Table II)")
    parser.add_argument("--max-snakes", type=int, default=10, help="largest batch of 1..N snakes (default: 10)")
    parser.add_argument("--frames", type=int, default=5, help="timed frames per case (default: 5)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed frames first (default: 2)")


def run(args):
    check_device(args.device)
    for name, value, minimum in (("--max-snakes", args.max_snakes, 1), ("--frames", args.frames, 1),
                                 ("--warmup", args.warmup, 1)):
        if value < minimum:
            raise UsageError(f"{name} must be at least {minimum}, got {value}")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file, not a folder")
    name = device_name(args.device)
    print(f"device: {name}; {args.resolution} mesh; h = 1/120 s, 2 substeps, 4 Newton, 20 CR; "
          f"median of {args.frames} frames after {args.warmup} warm-up")
    try:
        results = run_bench(device=args.device, resolution=args.resolution, max_snakes=args.max_snakes,
                            frames=args.frames, warmup=args.warmup)
    except SimulationError as exc:
        raise UsageError(f"a bench case blew up, so it cannot be timed: {exc}") from None
    out.mkdir(parents=True, exist_ok=True)
    write_bench_csv(out / CSV_NAME, results)
    plot_bench(out / PNG_NAME, results, title=f"Time per frame, {args.resolution} mesh, {name}")
    print("snakes    rows  assembly [ms]  solve [ms]  total [ms]  per snake [ms]  memory [MB]  | paper total [ms]  per snake")
    for snakes, r in results.items():
        label = "1 link" if snakes == LINK_CASE else f"{snakes:6d}"
        per_snake = f"{1e3 * r['total'] / snakes:14.2f}" if snakes >= 1 else " " * 14
        paper = PAPER_TABLE_2.get(snakes)
        paper_text = (f"{paper[2]:16.2f}  {paper[2] / snakes:9.2f}" if paper and snakes >= 1
                      else f"{paper[2]:16.2f}" if paper else "")
        print(f"{label:>6s} {r['rows']:7d}  {1e3 * r['assembly']:13.2f}  {1e3 * r['solve']:10.2f}  "
              f"{1e3 * r['total']:10.2f}  {per_snake}  {r['memory'] / MB:11.2f}  | {paper_text}")
    print(f"paper, one snake on a CPU (i7 5820k): {PAPER_CPU_FRAME_S:g} s per frame")
    print(f"wrote {out / CSV_NAME} and {out / PNG_NAME}")
    return 0
