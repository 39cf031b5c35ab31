"""Runtime of the vine simulation: seed 000 Fig. 5 and seed 003 Fig. 5.

Seed 000 Fig. 5: one vine of 20..100 bodies grows at a constant rate for 400 steps of 10 ms past
one circular obstacle, with the runtime example's parameters of the reference README (mass
0.001 kg, inertia 2e-4 kg m^2, stiffness 0.5 N m/rad, damping 3e-5 N m s/rad, tube diameter
24 mm). Seed 000 does not give the robot's length, growth rate or the obstacle's place; here the
vine starts 0.2 m long along +x, grows at 0.1 m/s, and meets a circle of radius 0.05 m centred at
(0.35, 0.04) m after about 1.5 s. Seed 000's reference point: 3.0 ms per step for 30 bodies.

Seed 003 Fig. 5: batches of 1..1024 vines with random launch angles (uniform within +-0.3 rad of
the scene's heading, fixed seed) in the cluttered scene of jitosho_cluttered_1, for 10, 20 and
40 links (seed 003's maximum virtual links) and 15 links (the 30-body vine above), time per step
and per vine and step, in one process (one CPU core: Warp runs a CPU kernel on one thread) and, on
the CPU, for batches of at least ``WORKERS_MIN_VINES`` vines also split over one worker process per
core (softsnake.robots.vine.workers, column ``processes``). Seed 003 runs 100 steps; here every batch is
timed over the same steps, one untimed (kernel loading) and then ``REPEATS`` blocks of ``BATCH_STEPS``
(column ``steps``), the first 61 steps (0.68 s) of growth: a converged step's cost depends on the motion (a vine at rest
stops at its round-off floor after a few Newton iterations), so batches timed over different steps are not
comparable (until the seventeenth session the largest batches ran blocks of 5 steps: 1024 vines of 15 links
then took 0.065 ms per vine and step on one core, 0.26-0.30 over the blocks of 20 of a 256-vine batch).

The machine may be shared, so every time is the median of ``REPEATS`` measurements: whole
400-step rollouts for one vine, consecutive blocks of ``steps`` steps for a batch. The plot marks
the runtime targets (``TARGET_MS_30_BODIES``, ``TARGET_MS_PER_VINE_STEP``).

Prints the device; writes vine_runtime_single.csv, vine_runtime_batch.csv and vine_runtime.png
into --out (default experiments/results).

Usage: python experiments/vine_runtime.py [--out DIR] [--device cpu|cuda] [--quick] [--links 10,15]
       [--sizes 1,64,4096] [--bodies 30,60] [--linear-solvers per_world,block,batched] [--budget default|old]
"""

import argparse
import sys
import time

import numpy as np
import warp as wp

from softsnake.cli.common import experiment_parser, make_output_folder, positive_int_list
from softsnake.machine import usable_cores
from softsnake.output_files import write_dict_csv
from softsnake.plotting import new_figure, save, styled
from softsnake.robots.vine.benchmarks import SINGLE_DT, SINGLE_STEPS, runtime_vine_specs, spread_batch_specs
from softsnake.robots.vine.scene import load_scene
from softsnake.robots.vine.simulation import VineBatch, seed_001_solver_options
from softsnake.robots.vine.workers import VineBatchWorkers
from softsnake.solver_settings import LINEAR_SOLVERS

SEED_000_MS_30_BODIES = 3.0
"""Seed 000's average runtime per 10 ms step for 30 bodies [ms]."""

TARGET_MS_30_BODIES = 1.0
"""Runtime target of one 30-body vine on one CPU core [ms per 10 ms step]."""

TARGET_MS_PER_VINE_STEP = 0.1
"""Runtime target of a batch of 1024 vines on the CPU [ms per vine and step]."""

REPEATS = 3
"""Measurements per time; the median is reported."""

SINGLE_BODY_COUNTS = (20, 30, 40, 50, 60, 70, 80, 90, 100)

BATCH_SIZES = (1, 4, 16, 64, 256, 1024)
BATCH_LINKS = (10, 15, 20, 40)
WORKERS_MIN_VINES = 64
"""Smallest batch also timed split over worker processes (CPU)."""

BATCH_STEPS = 20
"""Steps of each timed block of a batch, whatever its size (the same steps for every batch)."""

BUDGETS = ("default", "old")
"""``--budget``: the vines' own (converged; ``simulation.SOLVER_DEFAULTS``), or ``old``, seed 001's 4 x 20, plain
(``simulation.seed_001_solver_options``), the vines' budget until the sixteenth session, for comparison with the
timings taken then (vine.md, gpu.md section 3)."""


def budget_options(budget, links):
    """Solver options of a ``--budget`` name for vines of ``links`` links."""
    return seed_001_solver_options(links) if budget == "old" else {}


def linear_solvers(text):
    """Comma-separated SolverSettings.linear_solver values."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in LINEAR_SOLVERS]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"expected comma-separated linear solvers of {', '.join(LINEAR_SOLVERS)}, "
                                         f"got {text!r}")
    return names


def synchronize(batch):
    """Wait for a batch's device (a batch split over CPU processes has finished when its step returns)."""
    if isinstance(batch, VineBatch):
        wp.synchronize_device(batch.model.device)


def timed_steps(batch, steps, dt):
    """Median over REPEATS consecutive blocks of ``steps`` steps of the seconds per step, after one
    untimed step (kernel loading)."""
    batch.step(dt)
    synchronize(batch)
    seconds = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        for _ in range(steps):
            batch.step(dt)
        synchronize(batch)
        seconds.append((time.perf_counter() - start) / steps)
    return float(np.median(seconds))


def single_vine(device, body_counts, linear_solver="auto", budget="default", steps=SINGLE_STEPS):
    rows = []
    for bodies in body_counts:
        seconds = []
        for _ in range(REPEATS):
            batch = VineBatch(runtime_vine_specs(bodies), device=device,
                              solver_options={"linear_solver": linear_solver, **budget_options(budget, bodies // 2)})
            batch.step(SINGLE_DT)
            wp.synchronize_device(batch.model.device)
            start = time.perf_counter()
            for _ in range(steps - 1):
                batch.step(SINGLE_DT)
            wp.synchronize_device(batch.model.device)
            seconds.append((time.perf_counter() - start) / (steps - 1))
        seconds = float(np.median(seconds))
        tip = batch.poses()[0, -1, :2]
        rows.append({"bodies": bodies, "linear_solver": linear_solver, "budget": budget, "steps": steps,
                     "ms_per_step": 1e3 * seconds,
                     "realtime_factor": SINGLE_DT / seconds, "final_tip_x_m": float(tip[0]), "final_tip_y_m": float(tip[1])})
        print(f"  {bodies:3d} bodies, {linear_solver}, {budget} budget: {1e3 * seconds:7.3f} ms per 10 ms step ({SINGLE_DT / seconds:5.2f} x real time)")
    return rows


def batched(device, sizes, link_counts, processes, linear_solver="auto", budget="default"):
    """Time per step of batches with ``linear_solver`` (SolverSettings.linear_solver); on the CPU also
    split over ``processes`` worker processes for the batches of at least ``WORKERS_MIN_VINES`` vines."""
    scene = load_scene("jitosho_cluttered_1")
    rng = np.random.default_rng(0)
    rows = []
    for links in link_counts:
        for vines in sizes:
            specs = spread_batch_specs(scene, links, vines, rng)
            splits = (1, processes) if processes > 1 and vines >= WORKERS_MIN_VINES else (1,)
            for workers in splits:
                start = time.perf_counter()
                options = budget_options(budget, links)
                batch = (VineBatch(specs, device=device, solver_options={"linear_solver": linear_solver, **options})
                         if workers == 1 else VineBatchWorkers(specs, workers=workers, solver_options=options))
                build = time.perf_counter() - start
                steps = BATCH_STEPS
                try:
                    seconds = timed_steps(batch, steps, scene.sim.dt)
                finally:
                    if workers > 1:
                        batch.close()
                rows.append({"links": links, "vines": vines, "processes": workers, "linear_solver": linear_solver,
                             "budget": budget, "steps": steps,
                             "ms_per_step": 1e3 * seconds, "ms_per_vine_step": 1e3 * seconds / vines, "build_s": build})
                print(f"  {links:2d} links x {vines:4d} vines, {workers} process(es), {linear_solver}, {budget} budget: "
                      f"{1e3 * seconds:9.2f} ms per step, "
                      f"{1e3 * seconds / vines:7.3f} ms per vine and step ({steps} steps; built in {build:.1f} s)")
    return rows


def write_csv(path, rows):
    """Write dict rows as CSV (complete or absent), floats to 6 significant digits."""
    write_dict_csv(path, [{key: f"{value:.6g}" if isinstance(value, float) else value for key, value in row.items()}
                          for row in rows])


@styled
def plot(single, batch, device_name, path):
    figure, (single_axes, batch_axes, vine_axes) = new_figure(14, 3.8, 1, 3)
    for solver in dict.fromkeys(r["linear_solver"] for r in single):
        rows = [r for r in single if r["linear_solver"] == solver]
        single_axes.plot([r["bodies"] for r in rows], [r["ms_per_step"] for r in rows], "o-", label=f"softsnake, {solver}")
    single_axes.plot([30], [SEED_000_MS_30_BODIES], "r*", markersize=12, label="seed 000, 30 bodies")
    single_axes.axhline(1e3 * SINGLE_DT, color="0.5", linestyle=":", label="real time (10 ms steps)")
    single_axes.plot([30], [TARGET_MS_30_BODIES], "gv", markersize=9, label="target, 30 bodies")
    single_axes.set_xlabel("bodies")
    single_axes.set_ylabel("ms per step")
    single_axes.set_title(f"one vine, {single[0]['steps'] if single else SINGLE_STEPS} steps ({device_name})")
    single_axes.legend()
    runs = dict.fromkeys((r["links"], r["processes"], r["linear_solver"]) for r in batch)
    for links, processes, solver in sorted(runs):
        rows = [r for r in batch if (r["links"], r["processes"], r["linear_solver"]) == (links, processes, solver)]
        if rows:
            style = "o-" if processes == 1 else "s--"
            label = f"{links} links, {solver}" + ("" if processes == 1 else f", {processes} processes")
            batch_axes.loglog([r["vines"] for r in rows], [r["ms_per_step"] for r in rows], style, label=label)
            vine_axes.loglog([r["vines"] for r in rows], [r["ms_per_vine_step"] for r in rows], style, label=label)
    batch_axes.set_xlabel("batch size (vines)")
    batch_axes.set_ylabel("ms per step")
    batch_axes.set_title("batch of vines, cluttered scene")
    vine_axes.axhline(TARGET_MS_PER_VINE_STEP, color="g", linestyle="--", label="target, 1024 vines")
    vine_axes.set_xlabel("batch size (vines)")
    vine_axes.set_ylabel("ms per vine and step")
    vine_axes.set_title("time per vine (parallel efficiency)")
    for axes in (batch_axes, vine_axes):
        axes.grid(True, which="both")
    batch_axes.legend()
    vine_axes.legend()
    save(figure, path)


def main(argv=None):
    parser = experiment_parser(__doc__, __file__)
    parser.add_argument("--device", default="cpu", help="Warp device (default cpu)")
    parser.add_argument("--quick", action="store_true", help="fewer sizes (30 and 60 bodies; batches up to 64)")
    parser.add_argument("--links", type=positive_int_list, default=None, help="links of the batch study (default 10,15,20,40)")
    parser.add_argument("--sizes", type=positive_int_list, default=None,
                        help="batch sizes (default 1,4,16,64,256,1024; with --quick up to 64)")
    parser.add_argument("--bodies", type=positive_int_list, default=None,
                        help="bodies of the one-vine study (default 20..100; with --quick 30,60)")
    parser.add_argument("--linear-solvers", type=linear_solvers, default=["auto"],
                        help="SolverSettings.linear_solver values, each timed on every case (default auto; on a GPU "
                             "e.g. per_world,block)")
    parser.add_argument("--budget", choices=BUDGETS, default="default",
                        help="the vines' converged budget (default) or the old 4 x 20, plain, for comparison")
    parser.add_argument("--single-steps", type=int, default=SINGLE_STEPS,
                        help=f"steps of the one-vine study (default {SINGLE_STEPS}, seed 000's run; fewer time the "
                             "first part of the growth only, for a short session)")
    args = parser.parse_args(argv)
    if args.single_steps < 2:
        parser.error(f"--single-steps must be at least 2 (one untimed step, then the timed ones), got {args.single_steps}")
    out = make_output_folder(args.out)
    device = wp.get_device(args.device)
    print(f"device: {device} ({device.name})")
    print(f"seed 000 Fig. 5: one vine, {args.single_steps} steps of 10 ms, one circular obstacle")
    bodies = args.bodies or ((30, 60) if args.quick else SINGLE_BODY_COUNTS)
    single = [row for solver in args.linear_solvers
              for row in single_vine(args.device, bodies, solver, args.budget, args.single_steps)]
    print("seed 003 Fig. 5: batches of vines with random launch angles")
    processes = usable_cores() if device.is_cpu else 1
    sizes = args.sizes or (BATCH_SIZES[:4] if args.quick else BATCH_SIZES)
    batch = [row for k, solver in enumerate(args.linear_solvers)  # worker processes: once, with the first solver
             for row in batched(args.device, sizes, args.links or BATCH_LINKS, processes if k == 0 else 1, solver,
                                args.budget)]
    write_csv(out / "vine_runtime_single.csv", single)
    write_csv(out / "vine_runtime_batch.csv", batch)
    plot(single, batch, f"{device} {device.name}", out / "vine_runtime.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
