"""Why the snake's gait approaches its time-step limit slowly: variants of the coarse snake at 2 to 32 substeps.

``time_step_convergence.py --compensated`` finds the coarse snake's 10 s travel at the gait's budget (8 Newton x 40
conjugate residual iterations) changing by +9.4, +7.1, +4.3, +3.0, +1.8 mm with each halving of h from 2 to 64
substeps per 1/120 s frame: shrinking, but at an observed order of about 0.75 instead of an implicit-Euler step's 1.
This script changes one thing at a time and runs each variant for ``--seconds`` (default 1 s: the snake gathers
speed at a constant rate, so the differences between steps grow with the run as t^2 and a short run shows their
order as well as a long one, at a tenth of the cost) at ``--substeps`` substeps per frame, every position kept as a
float32 pair (``compensated_positions=True``, so that float32's rounding is not what is measured):

- ``gait``: the gait's 8 x 40, as ``softsnake gait --substeps S`` runs it;
- ``converged``: the converged reference budget, 16 x 160 with every entity's momentum balanced (the
  implicit-Euler step, ``softsnake gait --budget 16x160``);
- ``converged_x2``: twice that in each, 32 x 320 (what the converged budget's own ends change at the finest h);
- ``friction_x10``: 8 x 40 with mu = 10 instead of 1 (if the wheels slipped sideways at times, the stick-slip
  events would change);
- ``fb_epsilon``: 8 x 40 with the Fischer-Burmeister smoothing length at 1e-13 m instead of 1e-9 m;
- ``no_latency``: 8 x 40 with the valves switching at once (pressure steps of the whole amplitude).

Per variant and h: the forward travel of the centre of mass [mm], its change from the next coarser h, the order
the last two changes show (log2 of their ratio; a first-order method's is 1), and the share of substeps the budget
ended unconverged. Cases run in ``--jobs`` processes at once (default: the usable cores); snake_time_step_causes.csv
and .md (with ``--tag``'s suffix, into --out, default experiments/results) are rewritten after each case, so an
interrupted run keeps what it finished.

Usage: python experiments/snake_time_step_causes.py [--seconds 1] [--substeps 2,4,8,16,32] [--variants NAME,...]
           [--jobs N] [--tag NAME] [--out DIR]
"""

import platform
import sys
import time

import warp as wp

from softsnake.cli.common import chosen_variants, experiment_parser, make_output_folder, positive_int_list
from softsnake.output_files import write_dict_csv

from time_step_convergence import add_changes, in_processes, job_count

VARIANTS = {
    "gait": ("the gait's 8 x 40", {}),
    "converged": ("converged budget 16 x 160, all balanced", {"newton_iterations": 16, "linear_iterations": 160}),
    "converged_x2": ("twice the converged budget, 32 x 320, all balanced",
                     {"newton_iterations": 32, "linear_iterations": 320}),
    "friction_x10": ("8 x 40, mu 10 instead of 1", {"friction": 10.0}),
    "fb_epsilon": ("8 x 40, fb_epsilon 1e-13 m instead of 1e-9", {"fb_epsilon": 1.0e-13}),
    "no_latency": ("8 x 40, valves without latency", {"latency": False}),
}
"""{name: (description, changes)}: the changes a variant makes to the gait's run (``run_case``)."""


def run_case(name, seconds, substeps):
    """Variant ``name`` of the coarse snake's gait at ``substeps`` per frame: a dict of the results (in a worker
    process)."""
    import dataclasses

    from softsnake.console import quiet_warp
    from softsnake.robots.snake.config import load_snake_config
    from softsnake.robots.snake.simulation import SnakeSimulation

    quiet_warp()
    changes = dict(VARIANTS[name][1])
    config = load_snake_config(resolution="coarse")
    if "friction" in changes:
        config = dataclasses.replace(config, friction=changes.pop("friction"))
    fb_epsilon = changes.pop("fb_epsilon", None)
    sim = SnakeSimulation(1, resolution="coarse", seconds=seconds, substeps=substeps, config=config,
                          compensated_positions=True, **{"newton_iterations": 8, "linear_iterations": 40, **changes})
    if fb_epsilon is not None:
        sim.solver.fb_epsilon = fb_epsilon
    start = time.perf_counter()
    trajectories = sim.run(progress=False)
    counts = sim.solver.newton_counts()
    return {"variant": name, "substeps": substeps, "forward_m": float(trajectories.travel()[0][0]),
            "unconverged_pct": float(100.0 * counts.unconverged_ends.sum() / max(counts.substeps.sum(), 1)),
            "wall_s": time.perf_counter() - start}


def write_files(out, rows, args, device):
    add_changes(rows, "variant")
    ordered = sorted(rows, key=lambda row: (list(VARIANTS).index(row["variant"]), row["substeps"]))
    keys = ["variant", "substeps", "forward_m", "change_mm", "order", "unconverged_pct", "wall_s"]
    name = f"snake_time_step_causes{'_' + args.tag if args.tag else ''}"
    write_dict_csv(out / f"{name}.csv", [{key: row.get(key, "") for key in keys} for row in ordered])
    lines = [f"# Why the snake's gait approaches its time-step limit slowly: variants ({args.seconds:g} s)", "",
             f"`python experiments/snake_time_step_causes.py --seconds {args.seconds:g} --substeps "
             f"{','.join(str(s) for s in sorted(args.substeps))}"
             f"{' --variants ' + args.variants if args.variants else ''}{' --tag ' + args.tag if args.tag else ''}` "
             "(coarse snake, offset 0, positions kept as float32 "
             f"pairs); device {device}. Frames of 1/120 s in `substeps` substeps; forward: the centre of mass's "
             "travel; change: from the next coarser h; order: log2 of the last two changes' ratio (first order: 1).",
             "", "| variant | substeps | forward [mm] | change [mm] | order | unconverged substeps [%] | wall [s] |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for row in ordered:
        change = f"{row['change_mm']:+.4f}" if "change_mm" in row else ""
        order = f"{row['order']:.2f}" if "order" in row else ""
        lines.append(f"| {VARIANTS[row['variant']][0]} | {row['substeps']} | {1e3 * row['forward_m']:.4f} | {change} | "
                     f"{order} | {row['unconverged_pct']:.1f} | {row['wall_s']:.0f} |")
    (out / f"{name}.md").write_text("\n".join(lines) + "\n")


def main(argv=None):
    parser = experiment_parser(__doc__, __file__)
    parser.add_argument("--seconds", type=float, default=1.0, help="simulated time [s]")
    parser.add_argument("--substeps", type=positive_int_list, default=[2, 4, 8, 16, 32],
                        help="substeps per 1/120 s frame, comma-separated (at least two)")
    parser.add_argument("--variants", default=None,
                        help=f"comma-separated names (default: all of {', '.join(VARIANTS)})")
    parser.add_argument("--jobs", type=int, default=None, help="cases run at once (default: the usable cores)")
    parser.add_argument("--tag", default="", help="file name suffix")
    args = parser.parse_args(argv)
    names = chosen_variants(parser, args.variants, VARIANTS)
    if len(args.substeps) < 2:
        parser.error("--substeps needs at least two values to compare")
    if not args.seconds > 0.0:
        parser.error("--seconds must be positive")
    jobs = job_count(parser, args.jobs)
    out = make_output_folder(args.out)
    device = f"{wp.get_device()} ({platform.processor() or platform.machine()}), warp {wp.__version__}"
    cases = sorted(((name, args.seconds, s) for name in names for s in args.substeps),
                   key=lambda case: -case[2] * {"converged": 4, "converged_x2": 16}.get(case[0], 1))
    print(f"device: {device}; {len(cases)} cases in {jobs} process(es)", flush=True)
    rows = []
    for row in in_processes(jobs, run_case, cases):
        rows.append(row)
        print(f"{row['variant']:>13s} x {row['substeps']:2d} substeps: forward {1e3 * row['forward_m']:.4f} mm, "
              f"unconverged {row['unconverged_pct']:.1f} %, wall {row['wall_s']:.0f} s", flush=True)
        write_files(out, rows, args, device)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
