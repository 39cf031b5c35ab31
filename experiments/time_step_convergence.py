"""Do the robots' results converge with the time step? The snake's gait travel and the vine's growth at 1, 2, 4, ... substeps.

The engine steps by first-order implicit Euler, so every result it gives carries an error of the order of the
substep h, whatever the solver's budget. The gait runs frames of 1/120 s in 2 substeps (seed 001's h = 1/240 s);
this script runs one snake under the gait (``SnakeSimulation``, the middle snake of the main job: offset 0) for
``--seconds`` at ``--substeps`` substeps per frame (h = 1/120 s divided by each) and each ``--budgets`` (Newton x
conjugate residual iterations per substep; the snake's own iteration, ``snake_solver``: its bodies balanced below 16
Newton iterations, everything from 16, so 16x160 is the converged reference of the other studies). The frames, the
gait's commands and the valves' latency model stay those of 1/120 s frames: only the substep changes.

Reported per case: the forward and lateral travel of the centre of mass [m], the heading's change over the last
gait period [rad], the share of substeps the budget ended unconverged (the Newton line), and the wall time. Per budget,
the change of the forward travel from each h to the next and the travel at h -> 0 with its uncertainty
(``add_extrapolation``: Richardson's where the changes shrink at a fair order, else the finest run's), with each run's
distance from it: how far the gait's own h lies from the limit of the model.

``--robot vine``: the cluttered reference scenes of seed 000 (``jitosho_cluttered_1`` and ``_2``: 449 steps of 1/90 s,
the vine's own settings, converged in every step) at ``--substeps`` substeps per step (default 1,2,4,8,16,32): per run
the tip's error against the original simulator's rollout (median and largest over the steps [tube diameters]), the
largest and the final distance of its tip from the finest run's, and from the next finer run's (whose ratios give the
observed order) [tube diameters], and how far three vines started a micrometre away from it end up (``VINE_MEMBERS``,
``VINE_NOISE``: the trajectory's own sensitivity at that step, below which differences between runs mean nothing).

Cases run in ``--jobs`` processes at once (default: the usable cores); after each one the CSV and the Markdown table
are rewritten, so an interrupted run keeps what it finished; the snake's files keep the cases of earlier runs that
this one does not repeat (so that a finer substep can be added later). Files (into --out, default experiments/results):
time_step_convergence_<resolution>_<seconds>s[_compensated|_float32].csv/.md for the snake (``--compensated`` /
``--float32``: every position kept as a float32 pair, or none, instead of the engine's "auto" of
``SolverSettings.compensated_positions``, which pairs them from substeps of 1/600 s),

time_step_convergence_vine[_compensated|_float32].csv/.md for the vine.

Usage: python experiments/time_step_convergence.py [--robot snake|vine] [--resolution coarse|paper] [--seconds 10]
           [--substeps 1,2,4,8] [--budgets 8x40,16x160] [--compensated|--float32] [--jobs N] [--report-only] [--out DIR]
"""

import argparse
import concurrent.futures
import math
import multiprocessing
import platform
import sys
import time

import warp as wp

from softsnake.cli.common import (POSITION_SETTINGS, add_positions_option, experiment_parser, make_output_folder, parse_budget,
                                  positions_suffix, positive_int_list)
from softsnake.errors import UsageError
from softsnake.machine import usable_cores
from softsnake.output_files import write_dict_csv

VINE_MEMBERS = 3
"""Vines beside each vine run, their bodies' start moved by ``VINE_NOISE`` [m] per axis (a batch of independent worlds:
the unperturbed vine steps as it would alone)."""

VINE_NOISE = 1.0e-6
"""Standard deviation of the perturbed vines' start offsets [m]."""

MIN_ORDER = 0.5
"""The least observed order at which the travel's changes are extrapolated to h -> 0 (below it, half the step gains
too little for three points to pin a limit)."""

MAX_ORDER = 2.0
"""The largest: implicit Euler is first order, so a larger observed order means the changes collapsed (the finer runs
meet within their own scatter) rather than an asymptotic rate to extrapolate with."""

def run_case(resolution, seconds, substeps, newton, linear, positions="auto"):
    """One snake's gait at ``substeps`` per frame and the budget (``positions``: a key of ``POSITION_SETTINGS``):
    a dict of the results (in a worker process)."""
    from softsnake.console import quiet_warp
    from softsnake.robots.snake.simulation import SnakeSimulation

    quiet_warp()
    sim = SnakeSimulation(1, resolution=resolution, seconds=seconds, substeps=substeps, newton_iterations=newton,
                          linear_iterations=linear)
    sim.solver.compensated_positions = POSITION_SETTINGS[positions]
    start = time.perf_counter()
    trajectories = sim.run(progress=False)
    wall = time.perf_counter() - start
    counts = sim.solver.newton_counts()
    forward, lateral = trajectories.travel()[0]
    return {"budget": f"{newton}x{linear}", "substeps": substeps, "h_s": sim.dt / substeps,
            "balanced": str(counts.balanced), "forward_m": float(forward), "lateral_m": float(lateral),
            "heading_change_rad": float(trajectories.heading_change(1.0)[0]),
            "unconverged_pct": float(100.0 * counts.unconverged_ends.sum() / max(counts.substeps.sum(), 1)),
            "wall_s": wall}


def run_vine_case(number, substeps, positions="auto"):
    """Cluttered scene ``number`` at ``substeps`` per step (``positions``: a key of ``POSITION_SETTINGS``): its tips
    (steps + 1, 2) [m] and a dict of results (in a worker process)."""
    import numpy as np

    from softsnake.console import quiet_warp
    from softsnake.robots.vine.comparison import compare_with_reference
    from softsnake.robots.vine.reference import load_jitosho_rollout
    from softsnake.robots.vine.scene import load_scene
    from softsnake.robots.vine.simulation import VineBatch, rollout, specs_from_scene

    quiet_warp()
    scene = load_scene(f"jitosho_cluttered_{number}")
    times, reference, _ = load_jitosho_rollout(number)
    start = time.perf_counter()
    batch = VineBatch(specs_from_scene(scene) * (1 + VINE_MEMBERS), solver_options={"substeps": substeps,
                                                                                   "compensated_positions": POSITION_SETTINGS[positions]})
    body_q = batch.state.body_q.numpy()
    per_vine = body_q.shape[0] // (1 + VINE_MEMBERS)
    for k in range(1, 1 + VINE_MEMBERS):
        body_q[k * per_vine:(k + 1) * per_vine, :2] += np.random.default_rng(k).normal(0.0, VINE_NOISE, (per_vine, 2))
    batch.state.body_q.assign(body_q)
    result = rollout(batch, len(times) - 1, scene.sim.dt)
    wall = time.perf_counter() - start
    diameter = 2 * scene.vine.tube_radius
    error, same_side = compare_with_reference(scene, result.poses[:, 0], result.tips[:, 0], reference)
    spread = np.linalg.norm(result.tips[:, 1:] - result.tips[:, :1], axis=2) / diameter
    counts = batch.solver.newton_counts()
    return result.tips[:, 0], {
        "scene": scene.name, "substeps": substeps, "h_s": scene.sim.dt / substeps, "diameter_m": diameter,
        "reference_median_diameters": float(np.median(error)), "reference_max_diameters": float(error.max()),
        "same_side_every_step": bool(same_side.all()), "perturbed_max_diameters": float(spread.max()),
        "unconverged_pct": float(100.0 * counts.unconverged_ends.sum() / max(counts.substeps.sum(), 1)),
        "wall_s": wall}


def add_vine_distances(results):
    """Per scene: every run's largest and final tip distance from the finest run's and from the next finer run's
    [tube diameters]. ``results``: (tips, row) pairs."""
    import numpy as np

    for scene in dict.fromkeys(row["scene"] for _, row in results):
        mine = sorted(((tips, row) for tips, row in results if row["scene"] == scene), key=lambda r: r[1]["substeps"])
        finest_tips = mine[-1][0]
        for k, (tips, row) in enumerate(mine):
            gap = np.linalg.norm(tips - finest_tips, axis=1) / row["diameter_m"]
            row["from_finest_max_diameters"], row["from_finest_final_diameters"] = float(gap.max()), float(gap[-1])
            if k + 1 < len(mine):
                step = np.linalg.norm(tips - mine[k + 1][0], axis=1) / row["diameter_m"]
                row["from_next_finer_max_diameters"] = float(step.max())


def write_vine_files(out, rows, args):
    keys = ["scene", "substeps", "h_s", "reference_median_diameters", "reference_max_diameters", "same_side_every_step",
            "from_next_finer_max_diameters", "from_finest_max_diameters", "from_finest_final_diameters",
            "perturbed_max_diameters", "unconverged_pct", "wall_s"]
    ordered = sorted(rows, key=lambda row: (row["scene"], row["substeps"]))
    suffix, option = positions_suffix(args)
    stem = "time_step_convergence_vine" + suffix
    write_dict_csv(out / f"{stem}.csv", [{key: row.get(key, "") for key in keys} for row in ordered])

    def cell(row, key):
        return f"{row[key]:.4f}" if key in row else ""

    lines = ["# The vine against the time step (seed 000's cluttered scenes, 449 steps of 1/90 s"
             + (f", {args.positions} positions" if suffix else "") + ")", "",
             f"`python experiments/time_step_convergence.py --robot vine --substeps {args.substeps}{option}`; device "
             f"{wp.get_device()} ({platform.processor() or platform.machine()}), warp {wp.__version__}. Each step of "
             "1/90 s in `substeps` substeps of h, the vine's own solver settings. Tip distances in tube diameters: from "
             "the original simulator's rollout (its own step, 1/90 s), from the next finer run and from the finest; "
             f"perturbed: the largest distance of {VINE_MEMBERS} vines started with their bodies moved by "
             f"N(0, {VINE_NOISE:g} m) per axis from the unperturbed one's, over the run (differences between runs below it "
             "are not resolved).", "",
             "| scene | substeps | h [s] | reference: median / max | same side | from next finer: max | from finest: "
             "max / final | perturbed: max | unconverged substeps [%] | wall [s] |",
             "|---|---:|---|---|---|---:|---|---:|---:|---:|"]
    for row in ordered:
        lines.append(f"| {row['scene']} | {row['substeps']} | 1/{round(1.0 / row['h_s'])} | "
                     f"{row['reference_median_diameters']:.3f} / {row['reference_max_diameters']:.2f} | "
                     f"{'yes' if row['same_side_every_step'] else 'no'} | {cell(row, 'from_next_finer_max_diameters')} | "
                     f"{cell(row, 'from_finest_max_diameters')} / {cell(row, 'from_finest_final_diameters')} | "
                     f"{row['perturbed_max_diameters']:.4f} | {row['unconverged_pct']:.1f} | {row['wall_s']:.1f} |")
    (out / f"{stem}.md").write_text("\n".join(lines) + "\n")


def add_changes(rows, group):
    """Per value of ``group`` (a row key: the budget, a variant): each row's change of the forward travel from the next
    coarser h (``change_mm``) and, where that h was half the one before it too and the two changes have one sign, the
    order they show (``order``: log2 of their ratio; a first-order method's is 1). Returns the groups' rows, each
    sorted by substeps."""
    groups = []
    for value in dict.fromkeys(row[group] for row in rows):
        mine = sorted((row for row in rows if row[group] == value), key=lambda row: row["substeps"])
        for coarser, finer in zip(mine, mine[1:]):
            finer["change_mm"] = 1.0e3 * (finer["forward_m"] - coarser["forward_m"])
        for a, b, c in zip(mine, mine[1:], mine[2:]):
            if b["substeps"] == 2 * a["substeps"] and c["substeps"] == 2 * b["substeps"] \
                    and b["change_mm"] * c["change_mm"] > 0.0:
                c["order"] = math.log2(b["change_mm"] / c["change_mm"])
        groups.append((value, mine))
    return groups


def add_extrapolation(rows):
    """Per budget: each row's change from the next coarser h and the order of the last two (``add_changes``); over
    the three finest h (each half the last), the travel at h -> 0 with its uncertainty, and each row's distance from
    it [%] (``from_limit_pct``).

    Where the two last changes d1, d2 have one sign and shrink at an order p = log2(d1 / d2) from ``MIN_ORDER`` to
    ``MAX_ORDER``, the Richardson estimate T_finest + d2 / (2^p - 1), uncertain by that correction; otherwise (the
    changes stop shrinking, turn round or collapse: the finer runs meet within their own scatter) the finest run's
    travel, uncertain by |d2|."""
    summary = []
    for budget, mine in add_changes(rows, "budget"):
        last = mine[-3:]
        if len(last) < 3 or any(b["substeps"] != 2 * a["substeps"] for a, b in zip(last, last[1:])):
            continue
        d1 = last[1]["forward_m"] - last[0]["forward_m"]
        d2 = last[2]["forward_m"] - last[1]["forward_m"]
        order = math.log2(d1 / d2) if d1 * d2 > 0.0 and abs(d1) > abs(d2) else math.nan
        if MIN_ORDER <= order <= MAX_ORDER:
            correction = d2 / (2.0 ** order - 1.0)
            limit, uncertainty, how = last[2]["forward_m"] + correction, abs(correction), "Richardson"
        else:
            why = ("the last change turned round" if d1 * d2 <= 0.0 else "the changes do not shrink"
                   if abs(d2) >= abs(d1) else "the changes shrink too slowly to extrapolate" if order < MIN_ORDER
                   else "the changes collapse faster than a first-order method's: no asymptotic order to use")
            limit, uncertainty, how = last[2]["forward_m"], abs(d2), f"finest h ({why})"
        for row in mine:
            row["from_limit_pct"] = 100.0 * (row["forward_m"] / limit - 1.0)
        summary.append({"budget": budget, "order": order, "limit_m": limit, "uncertainty_m": uncertainty, "how": how})
    return summary


def write_files(out, stem, rows, summary, args):
    keys = ["budget", "substeps", "h_s", "balanced", "forward_m", "change_mm", "order", "from_limit_pct", "lateral_m",
            "heading_change_rad", "unconverged_pct", "wall_s"]
    ordered = sorted(rows, key=lambda row: (row["budget"], row["substeps"]))
    write_dict_csv(out / f"{stem}.csv", [{key: row.get(key, "") for key in keys} for row in ordered])
    lines = [f"# The snake's gait against the time step ({args.resolution} mesh, {args.seconds:g} s, offset 0"
             + (f", {args.positions} positions" if positions_suffix(args)[0] else "") + ")", "",
             f"`python experiments/time_step_convergence.py --resolution {args.resolution} --seconds {args.seconds:g} "
             f"--substeps {','.join(str(n) for n in sorted({row['substeps'] for row in rows}))} "
             f"--budgets {','.join(sorted({row['budget'] for row in rows}))}"
             + positions_suffix(args)[1] + "` (cases of several runs kept together: the "
             f"wall times are each run's, beside other jobs); device {wp.get_device()} "
             f"({platform.processor() or platform.machine()}), warp {wp.__version__}. Frames of 1/120 s in "
             "`substeps` substeps of h; forward and lateral travel of the centre of mass; change: from the next coarser "
             "h; order: log2 of the last two changes' ratio (1 for a first-order method); from limit: from the "
             "budget's travel at h -> 0 in the last table.", "",
             "| budget | substeps | h [s] | balanced | forward [mm] | change [mm] | order | from limit [%] | "
             "lateral [mm] | heading change [rad] | unconverged substeps [%] | wall [s] |",
             "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in ordered:
        change = f"{row['change_mm']:+.2f}" if "change_mm" in row else ""
        order = f"{row['order']:.2f}" if "order" in row else ""
        limit = f"{row['from_limit_pct']:+.2f}" if "from_limit_pct" in row else ""
        lines.append(f"| {row['budget']} | {row['substeps']} | 1/{round(1.0 / row['h_s'])} | {row['balanced']} | "
                     f"{1e3 * row['forward_m']:.2f} | {change} | {order} | {limit} | {1e3 * row['lateral_m']:.1f} | "
                     f"{row['heading_change_rad']:+.4f} | {row['unconverged_pct']:.1f} | {row['wall_s']:.0f} |")
    if summary:
        lines += ["", "| budget | observed order p (three finest h) | travel at h -> 0 [mm] | uncertainty [mm] | from |",
                  "|---|---:|---:|---:|---|"]
        lines += [f"| {s['budget']} | {s['order']:.2f} | {1e3 * s['limit_m']:.2f} | {1e3 * s['uncertainty_m']:.2f} | "
                  f"{s['how']} |" for s in summary]
    (out / f"{stem}.md").write_text("\n".join(lines) + "\n")


def earlier_rows(path, rerun):
    """The snake rows of an earlier run in ``path`` (its CSV) other than the (budget, substeps) cases in ``rerun``:
    a run adds its cases to the file's instead of dropping them (the Markdown table says nothing of which run
    measured which row; the wall times are each run's own)."""
    if not path.exists():
        return []
    import csv

    rows = []
    with path.open() as file:
        for row in csv.DictReader(file):
            if (row["budget"], int(row["substeps"])) in rerun:
                continue
            rows.append({"budget": row["budget"], "substeps": int(row["substeps"]), "h_s": float(row["h_s"]),
                         "balanced": row["balanced"], **{key: float(row[key]) for key in (
                             "forward_m", "lateral_m", "heading_change_rad", "unconverged_pct", "wall_s")}})
    return rows


def job_count(parser, jobs):
    """The processes a ``--jobs`` option asks for: ``jobs``, or where it is None the usable cores; fewer than one is
    the parser's one-line error."""
    jobs = jobs if jobs is not None else usable_cores()
    if jobs < 1:
        parser.error("--jobs must be at least 1")
    return jobs


def in_processes(jobs, function, cases):
    """``function(*case)`` of every case in ``jobs`` spawned processes at once, each result as it finishes."""
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        for future in concurrent.futures.as_completed([pool.submit(function, *case) for case in cases]):
            yield future.result()


def main(argv=None):
    parser = experiment_parser(__doc__, __file__)
    parser.add_argument("--robot", default="snake", choices=("snake", "vine"))
    parser.add_argument("--resolution", default="coarse", choices=("coarse", "paper"), help="the snake's mesh")
    parser.add_argument("--seconds", type=float, default=10.0, help="simulated time [s]")
    parser.add_argument("--substeps", default=None,
                        help="substeps per step (the snake's 1/120 s frame, the vine's 1/90 s step), comma-separated "
                             "(default 1,2,4,8; the vine 1,2,4,8,16,32)")
    parser.add_argument("--budgets", default="8x40,16x160", help="NEWTONxLINEAR,...")
    add_positions_option(parser)
    parser.add_argument("--jobs", type=int, default=None, help="cases run at once (default: the usable cores)")
    parser.add_argument("--report-only", action="store_true",
                        help="run nothing: rewrite the snake's Markdown table from its CSV")
    args = parser.parse_args(argv)
    if args.substeps is None:
        args.substeps = "1,2,4,8" if args.robot == "snake" else "1,2,4,8,16,32"
    try:
        substeps = positive_int_list(args.substeps)
    except argparse.ArgumentTypeError:
        parser.error(f"--substeps: expected positive integers, e.g. 1,2,4,8, got {args.substeps!r}")
    try:
        budgets = [parse_budget(item, None) for item in args.budgets.split(",")]
    except UsageError as exc:
        parser.error(f"--budgets {args.budgets}: {exc}")
    if not args.seconds > 0.0:
        parser.error("--seconds must be positive")
    jobs = job_count(parser, args.jobs)
    out = make_output_folder(args.out)
    stem = f"time_step_convergence_{args.resolution}_{args.seconds:g}s" + positions_suffix(args)[0]
    if args.robot == "snake" and args.report_only:
        every = earlier_rows(out / f"{stem}.csv", set())
        if not every:
            parser.error(f"--report-only: no rows in {out / f'{stem}.csv'}")
        return write_files(out, stem, every, add_extrapolation(every), args)
    # The costliest first, so that the processes end together.
    if args.robot == "vine":
        cases = sorted(((number, s, args.positions) for number in (1, 2) for s in substeps), key=lambda c: -c[1])
    else:
        cases = sorted(((args.resolution, args.seconds, s, b["newton_iterations"], b["linear_iterations"], args.positions)
                        for s in substeps for b in budgets), key=lambda c: -c[2] * c[3] * c[4])
    print(f"device: {wp.get_device()} ({platform.processor() or platform.machine()}), warp {wp.__version__}; "
          f"{len(cases)} {args.robot} cases in {jobs} process(es)", file=sys.stderr)
    if args.robot == "vine":
        return vine_main(out, cases, jobs, args)
    mine = {(f"{n}x{lin}", s) for _, _, s, n, lin, _ in cases}
    rows = []
    for row in in_processes(jobs, run_case, cases):
        rows.append(row)
        every = earlier_rows(out / f"{stem}.csv", mine) + rows  # read again: another run may have added some
        write_files(out, stem, every, add_extrapolation(every), args)
        print(f"{row['budget']:>7} x {row['substeps']} substeps: forward {1e3 * row['forward_m']:.1f} mm, lateral "
              f"{1e3 * row['lateral_m']:.1f} mm, unconverged {row['unconverged_pct']:.1f} %, wall "
              f"{row['wall_s']:.0f} s", flush=True)


def vine_main(out, cases, jobs, args):
    results = []
    for result in in_processes(jobs, run_vine_case, cases):
        results.append(result)
        add_vine_distances(results)
        write_vine_files(out, [row for _, row in results], args)
        row = result[1]
        print(f"{row['scene']} x {row['substeps']} substeps: against the reference median "
              f"{row['reference_median_diameters']:.3f}, max {row['reference_max_diameters']:.2f} tube diameters; "
              f"perturbed by {VINE_NOISE:g} m: {row['perturbed_max_diameters']:.4f}; wall {row['wall_s']:.1f} s",
              flush=True)


if __name__ == "__main__":
    main()
