"""Convergence of the video fits' rollouts (seed 003's real videos) in the Newton budget and the contact regularisation.

Every model is rolled out on the training videos (2, 3, 5; one batch, the fit's 10 links and 1/30 s steps, the
plain iteration of the fits) at a ladder of budgets (Newton x conjugate residual iterations) and with several
proximal contact regularisations (``SolverSettings.contact_regularization``, the engine's 1e-2 first). A row
gives the training rollout loss (rms) [mm], the mean tip error [mm], the substeps that ended unconverged (the
budget ended them above float32's round-off floor: ``NewtonCounts``), the Newton steps per substep and the time.

Why: the wrinkling rollout fit's training loss moved from 18.74 mm at the fit's 30 x 60 to 21.31 mm at 200 x 200,
and its rollouts kept moving beyond (22.21 -> 22.89 mm from 200 x 200 to 400 x 400 at its initial values, with
319 of 1 536 substeps unconverged at 200 x 200). The cause is the regularisation, not the wrinkling curve: a
linear spring at the wrinkling start's body inertia (0.005 kg m^2) leaves as many substeps unconverged, and the
same spring at a fitted linear model's inertia (4e-6 kg m^2) none. A pinned chain of bodies whose rotations are
heavy can only move against a wall through those rotations, so the contact rows' system J M^-1 J^T has
eigenvalues far below its diagonal; the proximal term r diag(J M^-1 J^T) in the matrix (not the residual)
then shortens every Newton step in those directions to a small fraction, and the iteration crawls.

Models: each kind at its initial values ("start"), and the rollout-loss fits in --fits (JSON of ``softsnake
fit``; default experiments/results/video_fits), where present.

Writes video_fit_convergence.csv and video_fit_convergence.md into --out (default experiments/results).

Usage: python experiments/video_fit_convergence.py [--out DIR] [--fits DIR] [--jobs N]
"""

import json
import math
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from softsnake.cli.common import experiment_parser, make_output_folder
from softsnake.console import quiet_warp
from softsnake.output_files import replaced_when_complete, write_dict_csv
from softsnake.robots.vine import video as vv
from softsnake.robots.vine import video_fit

TRAIN = (2, 3, 5)
BUDGETS = ((30, 60), (60, 120), (100, 120), (200, 200), (400, 400))
"""Newton x conjugate residual iterations of the ladder; the last one is the reference."""

REGULARIZATIONS = (1e-2, 1e-3, 1e-4, 1e-5)
"""Proximal contact regularisations tried (the engine's default first)."""

BALANCED_MODEL = "wrinkling start"
"""The model also rolled out with the balanced iteration (``SolverSettings.momentum_balance``), at the first two
regularisations: why the fits keep the plain one."""

MOVE_LIMIT_MM = 0.1
"""A budget counts as converged where the training loss (rms) stays within this of the largest budget's and at
most ``video_fit.UNCONVERGED_LIMIT`` of the substeps end unconverged."""

MM = 1e3

COLUMNS = ("model", "regularization", "budget", "train_rms_mm", "tip_mean_mm", "substeps", "unconverged_substeps",
           "newton_steps_per_substep", "seconds", "failed")


def models(fits_folder):
    """{name: VideoModel}: each kind at its initial values and the rollout fits found in ``fits_folder``."""
    chosen = {f"{kind} start": video_fit.VideoModel.initial(kind) for kind in video_fit.MODELS}
    for kind in video_fit.MODELS:
        path = Path(fits_folder) / f"fit_{kind}_rollout.json"
        if path.exists():
            document = json.loads(path.read_text())
            budget, regularization = video_fit.fit_file_settings(document)
            chosen[f"{kind} rollout fit ({budget['newton_iterations']}x{budget['linear_iterations']}, "
                   f"r {regularization:g})"] = video_fit.model_from_dict(document["model"])
    return chosen


def measure(job):
    """One row: ``job`` = (model name, model dict, regularisation, (newton, linear), balanced[, other solver
    options])."""
    name, document, regularization, (newton, linear), balanced, *other = job
    model = video_fit.model_from_dict(document)
    options = {**video_fit.SOLVER_OPTIONS, "newton_iterations": newton, "linear_iterations": linear,
               "contact_regularization": regularization, "momentum_balance": balanced, **(other[0] if other else {})}
    clock = time.perf_counter()
    row = {"model": name + " (balanced)" * balanced, "regularization": regularization, "budget": f"{newton}x{linear}"}
    try:
        rows, _ = video_fit.evaluate(model, vv.load_videos(TRAIN), solver_options=options)
    except Exception as exc:  # a blow-up is a result of this budget, reported as such
        return {**row, "failed": f"{type(exc).__name__}: {exc}"}
    substeps = sum(r["substeps"] for r in rows)
    return {**row, "train_rms_mm": round(MM * math.sqrt(np.mean([r["rollout_loss_m2"] for r in rows])), 4),
            "tip_mean_mm": round(MM * np.mean([r["tip_mean_m"] for r in rows]), 3), "substeps": substeps,
            "unconverged_substeps": sum(r["unconverged_substeps"] for r in rows),
            "newton_steps_per_substep": round(sum(r["newton_steps"] for r in rows) / substeps, 2),
            "wander_returns": sum(r["wander_returns"] for r in rows),
            "seconds": round(time.perf_counter() - clock, 2), "failed": ""}


def converged_from(rows):
    """The smallest budget of ``rows`` (one model and regularisation, in ladder order) from which every larger one
    is converged (``MOVE_LIMIT_MM``, ``video_fit.UNCONVERGED_LIMIT``), or None."""
    if any(r["failed"] for r in rows):
        return None
    reference = rows[-1]["train_rms_mm"]
    ok = [abs(r["train_rms_mm"] - reference) <= MOVE_LIMIT_MM and r["unconverged_substeps"] <= video_fit.UNCONVERGED_LIMIT * r["substeps"]
          for r in rows]
    if not ok[-1]:
        return None
    first = len(ok) - 1
    while first > 0 and ok[first - 1]:
        first -= 1
    return rows[first]["budget"]


def cell(row):
    if row["failed"]:
        return "failed"
    return f"{row['train_rms_mm']:.2f} ({row['unconverged_substeps']}, {row['newton_steps_per_substep']:.0f})"


def write_page(path, rows, seconds):
    names = list(dict.fromkeys(r["model"] for r in rows))
    lines = [
        "# The video fits' rollouts: convergence in the budget and the contact regularisation",
        "",
        f"Reproduce with `python experiments/video_fit_convergence.py` ({seconds / 60:.0f} min on this 2-core CPU, "
        "device cpu). What and why: the script's docstring.",
        "",
        f"Training videos {', '.join(map(str, TRAIN))} in one batch, 10 links, steps of 1/30 s, the fits' plain "
        "iteration (and the balanced one for the wrinkling start, last). Cells: training rollout loss, rms [mm] (unconverged substeps of "
        f"{rows[0].get('substeps', '?')}, Newton steps per substep). Converged from: the smallest budget from "
        f"which the loss stays within {MOVE_LIMIT_MM} mm of the {BUDGETS[-1][0]} x {BUDGETS[-1][1]} one with at most "
        f"{video_fit.UNCONVERGED_LIMIT:.0%} of substeps unconverged. The fits (`softsnake fit`) run at "
        f"{video_fit.FIT_BUDGET['newton_iterations']} x {video_fit.FIT_BUDGET['linear_iterations']} with r = "
        f"{video_fit.CONTACT_REGULARIZATION:g} (`video_fit.SOLVER_OPTIONS`).",
        "",
    ]
    for name in names:
        tried = [reg for reg in REGULARIZATIONS if any(r["model"] == name and r["regularization"] == reg for r in rows)]
        lines += [f"## {name}", "", "| budget | " + " | ".join(f"r = {r:g}" for r in tried) + " |",
                  "|---|" + "---|" * len(tried)]
        for newton, linear in BUDGETS:
            label = f"{newton}x{linear}"
            cells = [cell(next(r for r in rows if r["model"] == name and r["regularization"] == reg and r["budget"] == label))
                     for reg in tried]
            lines.append(f"| {newton} x {linear} | " + " | ".join(cells) + " |")
        converged = [converged_from([r for r in rows if r["model"] == name and r["regularization"] == reg])
                     for reg in tried]
        lines += ["| converged from | " + " | ".join(c or "not within the ladder" for c in converged) + " |", ""]
    with replaced_when_complete(path) as temporary:
        temporary.write_text("\n".join(lines) + "\n")


def main(argv=None):
    parser = experiment_parser(__doc__, __file__)
    parser.add_argument("--fits", default=None, help="folder of softsnake fit JSON files (default: OUT/video_fits)")
    parser.add_argument("--jobs", type=int, default=1, help="rollouts at once, one process each (default 1)")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    out = make_output_folder(args.out)
    chosen = models(args.fits or out / "video_fits")
    jobs = [(name, video_fit.model_to_dict(model), reg, budget, False)
            for name, model in chosen.items() for reg in REGULARIZATIONS for budget in BUDGETS]
    jobs += [(BALANCED_MODEL, video_fit.model_to_dict(chosen[BALANCED_MODEL]), reg, budget, True)
             for reg in REGULARIZATIONS[:2] for budget in BUDGETS]
    clock = time.perf_counter()
    if args.jobs == 1:
        rows = [measure(job) for job in jobs]
    else:
        with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn"), initializer=quiet_warp) as pool:
            rows = list(pool.map(measure, jobs))
    rows = [{key: row.get(key, "") for key in COLUMNS} for row in rows]
    for row in rows:
        print(row, flush=True)
    write_dict_csv(out / "video_fit_convergence.csv", rows)
    write_page(out / "video_fit_convergence.md", rows, time.perf_counter() - clock)
    print(f"wrote {out / 'video_fit_convergence.md'}")


if __name__ == "__main__":
    main()
