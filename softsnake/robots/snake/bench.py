"""Time per frame for one link and for batches of snakes (seed 001, Table II; ``softsnake bench``).

Every case steps a batch of worlds (one link on its stand, or N four-link snakes on the ground)
with the paper's budget (``PAPER_BUDGET``): frame h = 1/120 s, 2 substeps, 4 Newton iterations, 20
conjugate residual iterations, all of them run (the engine's converged default stops early where it
can and runs more where it must, so it is no peer of Table II). A few warm-up frames run first (kernel compilation, caches); then each
timed frame is bracketed by ``wp.synchronize`` and the median is reported.

Split. "solve" is the time spent in the linear solves (the conjugate residual iterations), as the
solver times them itself (``Solver(profile=True)``, its ``profile_seconds["solve"]``, each phase
bracketed by a synchronize) in frames after the timed ones, as a share of the frame applied to the
timed total (the timed frames run as graphs, CUDA or CPU, which have no phases to time); "assembly"
is the rest of the frame: prediction, contact detection, row evaluation and preparation, position
and velocity updates. Assembly + solve = total, as in Table II. The chambers are pressurised during
timing (the gait at t = 0.1 s) so that the actuation rows take part.
"""

import math
import os
import platform
import time
from pathlib import Path

import numpy as np
import warp as wp

from softsnake.builder import ModelBuilder
from softsnake.memory import array_bytes
from softsnake.output_files import write_csv
from softsnake.progress import progress as progress_notes

from .config import load_snake_config
from .gait import GaitParams, gait_command
from .robot import add_link_stand, add_snake, chamber_pressures
from .simulation import DT_DEFAULT, PAPER_BUDGET, snake_solver

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

MB = 1024.0 * 1024.0
"""Bytes in a megabyte (MiB) [B]."""
LINK_CASE = 0.25
"""Snake count that stands for the single-link case (a quarter of a snake)."""


def case_model(snakes, config, resolution, device):
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


def time_case(snakes, *, config, resolution, device, frames, warmup, dt=DT_DEFAULT, **solver_options):
    """Median times of one case [s]: dict with assembly, solve, total, rows, worlds, memory, the bytes of
    the case's Warp arrays [B] (see ``softsnake.memory``), device_memory, what the case took from the
    CUDA memory pool [B] (NaN on the CPU), solve_share, and max_particle_speed, the
    fastest particle after the last frame [m/s] (a blown-up frame raises SimulationError instead).

    ``total`` is the median of ``frames`` frames run as in a gait run (each frame one graph, CUDA or CPU:
    ``SolverSettings.capture_graph``); then ``frames`` more frames run with the solver's phase
    timing (every phase bracketed by a synchronize, no graph), whose share of the linear solves
    (``solve_share``) splits ``total`` into solve and assembly. ``solver_options``: any
    ``SolverSettings`` field over the paper's budget (``linear_solver="batched"``, ``capture_graph=False``)."""
    pool_before = pool_used(device)
    model, handle, count = case_model(snakes, config, resolution, device)
    result = time_model(model, handle, count, frames=frames, warmup=warmup, dt=dt, **solver_options)
    result["device_memory"] = pool_used(device) - pool_before
    return result


def pool_used(device):
    """Bytes in use in the device's CUDA memory pool [B] (NaN on the CPU, which has none)."""
    return wp.get_mempool_used_mem_current(device) if wp.get_device(device).is_cuda else math.nan


def time_model(model, handle, count, *, frames, warmup, dt=DT_DEFAULT, **solver_options):
    """``time_case`` on a built case (``case_model``), so that several solvers can time one model
    (without ``device_memory``)."""
    # The gait runs' solver: its finite check raises SimulationError if a timed frame blows up, which a
    # bench must neither time nor hide (one small copy per frame, as in every gait run).
    solver = snake_solver(model, **{**PAPER_BUDGET, **solver_options})
    state, control = model.state(), model.control()
    command = gait_command(GaitParams(snake_count=count), 0.1, handle.link_count)
    control.pressure.assign(chamber_pressures(model, handle.link_channels, command))
    for _ in range(warmup):
        solver.step(state, state, control, dt)
    totals = []
    for _ in range(frames):
        wp.synchronize()
        start = time.perf_counter()
        solver.step(state, state, control, dt)
        wp.synchronize()
        totals.append(time.perf_counter() - start)
    solver.profile = True
    solver.reset_profile()
    for _ in range(frames):
        solver.step(state, state, control, dt)
    share = solver.profile_seconds["solve"] / max(sum(solver.profile_seconds.values()), 1e-30)
    total = float(np.median(totals))
    speed = float(np.linalg.norm(state.particle_qd.numpy(), axis=1).max()) if model.particle_count else 0.0
    return {"assembly": total * (1.0 - share), "solve": total * share, "total": total, "solve_share": share,
            "rows": model.row_count, "worlds": count, "memory": array_bytes(model, state, control, solver),
            "max_particle_speed": speed}


def device_name(device):
    """A readable name of the Warp device (the processor for the CPU)."""
    if wp.get_device(device).is_cpu:
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


def bench_cases(device, max_snakes):
    """Snake counts to time: the single link, 1..max_snakes, and on a GPU the large batches."""
    cases = [LINK_CASE] + list(range(1, max_snakes + 1))
    if not wp.get_device(device).is_cpu:
        cases += [n for n in GPU_EXTRA_SNAKES if n > max_snakes]
    return cases


def run_bench(*, device=None, resolution="paper", max_snakes=10, frames=5, warmup=2, progress=True, config=None,
              cases=None, **solver_options):
    """Time every case; returns {snakes: times} in the order run (see ``time_case``). ``config``: the
    ``SnakeConfig`` (None: the shipped snake.toml); ``cases``: the snake counts (None:
    ``bench_cases(device, max_snakes)``); ``solver_options``: passed to ``time_case``."""
    config = load_snake_config(resolution=resolution) if config is None else config
    results = {}
    cases = bench_cases(device, max_snakes) if cases is None else cases
    for snakes in progress_notes(cases, desc="bench", unit="case", enabled=progress):
        results[snakes] = time_case(snakes, config=config, resolution=resolution, device=device, frames=frames,
                                    warmup=warmup, **solver_options)
    return results
