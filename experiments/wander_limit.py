"""The Newton loop's wander limit (``SolverSettings.wander_limit``): where it acts, what it changes, what it costs.

A substep whose Newton loop has not converged and ends with a merit more than ``wander_limit`` times the least merit
it visited goes back to that point. The case that asks for it: the wrinkling model's start (10-link vines of heavy
rotations, 0.005 kg m^2) rolled out on the training videos 2, 3, 5 with the balanced iteration, which wanders there
(experiments/results/convergence.md, "Where Newton stalls, and where it wanders"). Tried: the limit off (0), always
the least point (1), 10 and 1000 (the default), at the video fits' ladder of budgets and two contact
regularisations (the engine's 1e-2 and the fits' 1e-3). Then the fits' own setting (plain iteration, 200 x 200,
r 1e-3) with the limit off and on, and the cost on the snake (2 coarse snakes, 8 x 40, ms per frame, median of 3
alternated runs of 30 frames on this CPU).

Writes wander_limit.csv and wander_limit.md into --out (default experiments/results).

Usage: python experiments/wander_limit.py [--out DIR]
"""

import time

import numpy as np

from softsnake.cli.common import experiment_parser, make_output_folder
from softsnake.output_files import replaced_when_complete, write_dict_csv
from softsnake.robots.snake.simulation import SnakeSimulation
from softsnake.robots.vine import video_fit
from softsnake.solver_settings import SolverSettings

from video_fit_convergence import BUDGETS, COLUMNS, TRAIN, cell, measure

LIMITS = (0.0, 1.0, 10.0, 1000.0)
REGULARIZATIONS = (1e-2, 1e-3)
MODEL = "wrinkling start"


def snake_cost(limits=(0.0, SolverSettings().wander_limit), frames=30, repeats=3):
    """{limit: median ms per frame} of 2 coarse snakes at the snake's budget, the runs alternated."""
    simulations = {limit: SnakeSimulation(2, seconds=10.0) for limit in limits}
    for limit, simulation in simulations.items():
        simulation.solver.wander_limit = limit
        for _ in range(5):  # kernels loaded, graphs captured
            simulation.step(np.zeros((2, 4)))
    times = {limit: [] for limit in limits}
    for _ in range(repeats):
        for limit, simulation in simulations.items():
            clock = time.perf_counter()
            for _ in range(frames):
                simulation.step(np.full((2, 4), 2e4))
            times[limit].append(1e3 * (time.perf_counter() - clock) / frames)
    return {limit: float(np.median(values)) for limit, values in times.items()}


def main(argv=None):
    out = make_output_folder(experiment_parser(__doc__, __file__).parse_args(argv).out)
    model = video_fit.model_to_dict(video_fit.VideoModel.initial("wrinkling"))
    clock = time.perf_counter()
    rows = []
    for limit in LIMITS:
        for regularization in REGULARIZATIONS:
            for budget in BUDGETS:
                row = measure((MODEL, model, regularization, budget, True, {"wander_limit": limit}))
                rows.append({"wander_limit": limit, **{key: row.get(key, "") for key in COLUMNS}})
                print(rows[-1], flush=True)
    fits = []
    for limit in (0.0, SolverSettings().wander_limit):
        budget = (video_fit.FIT_BUDGET["newton_iterations"], video_fit.FIT_BUDGET["linear_iterations"])
        row = measure((MODEL, model, video_fit.CONTACT_REGULARIZATION, budget, False, {"wander_limit": limit}))
        fits.append({"wander_limit": limit, **{key: row.get(key, "") for key in COLUMNS}})
        print(fits[-1], flush=True)
    cost = snake_cost()
    write_dict_csv(out / "wander_limit.csv", rows + fits)
    lines = ["# The Newton loop's wander limit", "",
             f"Reproduce with `python experiments/wander_limit.py` ({(time.perf_counter() - clock) / 60:.0f} min on "
             "this 2-core CPU, device cpu). What and why: the script's docstring.", "",
             f"{MODEL}, training videos {', '.join(map(str, TRAIN))} in one batch, the balanced iteration. Cells: "
             f"training rollout loss, rms [mm] (unconverged substeps of {rows[0].get('substeps', '?')}, Newton steps "
             "per substep).", ""]
    for regularization in REGULARIZATIONS:
        lines += [f"## Contact regularisation {regularization:g}", "",
                  "| budget | " + " | ".join(f"limit {limit:g}" for limit in LIMITS) + " |", "|---|" + "---|" * len(LIMITS)]
        for newton, linear in BUDGETS:
            label = f"{newton}x{linear}"
            lines.append(f"| {newton} x {linear} | " + " | ".join(
                cell(next(r for r in rows if r["wander_limit"] == limit and r["regularization"] == regularization
                          and r["budget"] == label)) for limit in LIMITS) + " |")
        lines.append("")
    lines += ["## The video fits' setting (plain iteration)", "",
              "| wander limit | budget | r | training loss rms [mm] (unconverged, Newton steps per substep) |",
              "|---|---|---|---|"]
    lines += [f"| {r['wander_limit']:g} | {r['budget']} | {r['regularization']:g} | {cell(r)} |" for r in fits]
    lines += ["", "## Cost on the snake (2 coarse snakes, 8 x 40, this CPU)", "", "| wander limit | ms per frame |",
              "|---|---|"] + [f"| {limit:g} | {ms:.1f} |" for limit, ms in cost.items()] + [""]
    with replaced_when_complete(out / "wander_limit.md") as temporary:
        temporary.write_text("\n".join(lines))
    print(f"wrote {out / 'wander_limit.md'}")


if __name__ == "__main__":
    main()
