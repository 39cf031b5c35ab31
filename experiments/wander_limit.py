"""The Newton loop's wander limit (``SolverSettings.wander_limit``): where it acts, what it changes, what it costs.

A substep whose Newton loop has not converged and ends with a merit more than ``wander_limit`` times the least merit
it visited goes back to that point. The case that asks for it: the wrinkling model's start (10-link vines of heavy
rotations, 0.005 kg m^2) rolled out on the training videos 2, 3, 5 with the balanced iteration, which wanders there
(experiments/results/convergence.md, "Where Newton stalls, and where it wanders"). Tried: the limit off (0), always
the least point (1), 10 and 1000 (the default), at the video fits' ladder of budgets and two contact
regularisations (the engine's 1e-2 and the fits' 1e-3). Then the fits' own setting (plain iteration, 200 x 200,
r 1e-3) with the limit off and on, where the default limit acts in the shipped scenes (the README's main job for
2 s, the vine scenes at their durations: how many substeps went back, ``NewtonCounts.wander_returns``), and the cost
on the snake (2 coarse snakes, 8 x 40, ms per frame, median of 3 alternated runs of 30 frames on this CPU) and on
the vines (cluttered scene 1, 1 and 64 vines, ms per vine-step, medians of 3 alternated runs of 200 steps).

Writes wander_limit.csv and wander_limit.md into --out (default experiments/results).

Usage: python experiments/wander_limit.py [--out DIR]
"""

import re
import subprocess
import sys
import tempfile
import time

import numpy as np

from softsnake.cli.common import experiment_parser, make_output_folder
from softsnake.output_files import replaced_when_complete, write_dict_csv
from softsnake.robots.snake.simulation import SnakeSimulation
from softsnake.robots.vine import video_fit
from softsnake.solver_settings import SolverSettings

from video_fit_convergence import BUDGETS, COLUMNS, TRAIN, cell, measure

LIMITS = (0.0, 1.0, 10.0, 1000.0)
SCENES = (("gait", "--seconds", "2"), ("vine", "jitosho_wall"), ("vine", "jitosho_cluttered_1"),
          ("vine", "jitosho_cluttered_2"), ("vine", "jitosho_cluttered_1", "--vines", "8"))
"""The shipped scenes whose Newton summaries say whether any substep went back (the commands' defaults)."""
ROW_COLUMNS = COLUMNS + ("wander_returns",)
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


def vine_cost(vine_counts=(1, 64), limits=(0.0, SolverSettings().wander_limit), steps=200, repeats=3):
    """{(vines, limit): median ms per vine-step} of cluttered scene 1's vines at their defaults, the runs
    alternated (each a new batch, stepped 5 steps first: kernels loaded, graphs captured)."""
    from softsnake.robots.vine.scene import load_scene
    from softsnake.robots.vine.simulation import VineBatch, rollout, specs_from_scene

    scene = load_scene("jitosho_cluttered_1")
    times = {(vines, limit): [] for vines in vine_counts for limit in limits}
    for _ in range(repeats):
        for vines, limit in times:
            specs = specs_from_scene(scene, vine_count=vines, heading_spread=0.2 if vines > 1 else 0.0)
            batch = VineBatch(specs, solver_options={"wander_limit": limit})
            rollout(batch, 5, scene.sim.dt)
            clock = time.perf_counter()
            rollout(batch, steps, scene.sim.dt)
            times[(vines, limit)].append(1e3 * (time.perf_counter() - clock) / steps / vines)
    return {key: float(np.median(values)) for key, values in times.items()}


def wander_cell(row):
    """``video_fit_convergence.cell``, and how many substeps went back where any did."""
    text = cell(row)
    return text if row["failed"] or not row["wander_returns"] else f"{text[:-1]}; {row['wander_returns']} back)"


def returns_in(arguments):
    """(substeps that went back, the command's Newton line) of ``softsnake ARGUMENTS --no-video`` (0 where its line
    names none)."""
    with tempfile.TemporaryDirectory() as folder:
        done = subprocess.run([sys.executable, "-m", "softsnake", *arguments, "--no-video", "--out", folder],
                              capture_output=True, text=True, check=True)
    line = next(text for text in done.stdout.splitlines() if text.startswith("Newton"))
    found = re.search(r"; (\d+) substeps? wandered", line)
    return (int(found.group(1)) if found else 0), line


def main(argv=None):
    out = make_output_folder(experiment_parser(__doc__, __file__).parse_args(argv).out)
    model = video_fit.model_to_dict(video_fit.VideoModel.initial("wrinkling"))
    clock = time.perf_counter()
    rows = []
    for limit in LIMITS:
        for regularization in REGULARIZATIONS:
            for budget in BUDGETS:
                row = measure((MODEL, model, regularization, budget, True, {"wander_limit": limit}))
                rows.append({"wander_limit": limit, **{key: row.get(key, "") for key in ROW_COLUMNS}})
                print(rows[-1], flush=True)
    fits = []
    for limit in (0.0, SolverSettings().wander_limit):
        budget = (video_fit.FIT_BUDGET["newton_iterations"], video_fit.FIT_BUDGET["linear_iterations"])
        row = measure((MODEL, model, video_fit.CONTACT_REGULARIZATION, budget, False, {"wander_limit": limit}))
        fits.append({"wander_limit": limit, **{key: row.get(key, "") for key in ROW_COLUMNS}})
        print(fits[-1], flush=True)
    scenes = [(" ".join(arguments), *returns_in(arguments)) for arguments in SCENES]
    for scene in scenes:
        print(scene, flush=True)
    cost = snake_cost()
    vines = vine_cost()
    write_dict_csv(out / "wander_limit.csv", rows + fits)
    lines = ["# The Newton loop's wander limit", "",
             f"Reproduce with `python experiments/wander_limit.py` ({(time.perf_counter() - clock) / 60:.0f} min on "
             "this 2-core CPU, device cpu). What and why: the script's docstring.", "",
             f"{MODEL}, training videos {', '.join(map(str, TRAIN))} in one batch, the balanced iteration. Cells: "
             f"training rollout loss, rms [mm] (unconverged substeps of {rows[0].get('substeps', '?')}, Newton steps "
             "per substep; substeps that went back to their least merit, where any did).", ""]
    for regularization in REGULARIZATIONS:
        lines += [f"## Contact regularisation {regularization:g}", "",
                  "| budget | " + " | ".join(f"limit {limit:g}" for limit in LIMITS) + " |", "|---|" + "---|" * len(LIMITS)]
        for newton, linear in BUDGETS:
            label = f"{newton}x{linear}"
            lines.append(f"| {newton} x {linear} | " + " | ".join(
                wander_cell(next(r for r in rows if r["wander_limit"] == limit and r["regularization"] == regularization
                          and r["budget"] == label)) for limit in LIMITS) + " |")
        lines.append("")
    lines += ["## The video fits' setting (plain iteration)", "",
              "| wander limit | budget | r | training loss rms [mm] (unconverged, Newton steps per substep) |",
              "|---|---|---|---|"]
    lines += [f"| {r['wander_limit']:g} | {r['budget']} | {r['regularization']:g} | {wander_cell(r)} |" for r in fits]
    lines += ["", f"## Where the default limit ({SolverSettings().wander_limit:g}) acts in the shipped scenes", "",
              "| command (`softsnake ...`, no video) | substeps that went back | its Newton line |", "|---|---|---|"]
    lines += [f"| `{command}` | {returns} | {line} |" for command, returns, line in scenes]
    lines += ["", "## Cost on the snake (2 coarse snakes, 8 x 40, this CPU)", "", "| wander limit | ms per frame |",
              "|---|---|"] + [f"| {limit:g} | {ms:.1f} |" for limit, ms in cost.items()]
    lines += ["", "## Cost on the vines (cluttered scene 1 at its defaults, 200 steps, medians of 3 alternated, this CPU)",
              "", "| vines | wander limit | ms per vine-step |", "|---|---|---|"]
    lines += [f"| {count} | {limit:g} | {ms:.4f} |" for (count, limit), ms in vines.items()] + [""]
    with replaced_when_complete(out / "wander_limit.md") as temporary:
        temporary.write_text("\n".join(lines))
    print(f"wrote {out / 'wander_limit.md'}")


if __name__ == "__main__":
    main()
