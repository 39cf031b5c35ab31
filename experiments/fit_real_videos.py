"""Fitting seed 003's three stiffness models to Chen et al.'s real vine videos with gradients through the engine.

For each model (linear, mlp, wrinkling: softsnake/robots/vine/video_fit.py) it runs
`softsnake fit MODEL --loss one_step` (seed 003's loss) and `softsnake fit MODEL --loss rollout`
(whole rollouts against the videos), both from the model's initial values, on the training videos 2,
3 and 5; the fits' JSON files go to DIR/video_fits and are reused when present (--refit runs them again). Every fitted
model is then rolled out on all six videos, at the fit's step (1/30 s) and at the papers' 1/90 s, and
measured against them: tip and shape errors, mean and max, in mm and tube diameters (67 mm); and once
more at the fit's step with twice the fit's budget (``CHECK_BUDGET``, 400 x 400: the check that the fit's
budget converged): the held-out errors and every fitted model's training loss there. Also timed:
one batched gradient of the training videos' rollout loss against one forward rollout of the same
batch (medians of 3).

Writes into --out (default experiments/results): fit_real_videos.md (the results page),
fit_real_videos.csv (per model, loss, video and step: the errors), fit_real_videos.png (the test
videos' rollouts of the three rollout-loss fits over the video points, as seed 003 Fig. 6) and
fit_real_videos_errors.png (the distribution of per-frame shape errors on the test videos, as Fig. 7).

--budget NxL runs the fits, and the rows at the fit's step, at that solver budget instead of the fit's 200 x 200
(``softsnake fit --budget``); fits found in DIR/video_fits at another budget or contact regularisation are refused
(give --refit or another --out).

Usage: python experiments/fit_real_videos.py [--out DIR] [--evaluations N] [--budget NxL] [--refit]
"""

import json
import math
import statistics
import time

import numpy as np

from softsnake.cli import main as softsnake_main
from softsnake.cli.common import experiment_parser, make_output_folder, parse_budget
from softsnake.cli.fit import error_rows
from softsnake.errors import UsageError
from softsnake.output_files import replaced_when_complete, write_dict_csv
from softsnake.plotting import new_figure, save, styled
from softsnake.robots.vine import video as vv
from softsnake.robots.vine import video_fit
from softsnake.robots.vine.backbones import video_errors
from softsnake.robots.vine.plots import draw_video_snapshot

TRAIN, TEST = (2, 3, 5), (1, 4, 6)
"""The fixed split (the `softsnake fit` default)."""

PAPER_DT = 1.0 / 90.0
"""The papers' step [s], at which the fitted models are re-evaluated."""

CHECK_BUDGET = {"newton_iterations": 400, "linear_iterations": 400}
"""Iterations of the convergence check, twice the fit's (``video_fit.FIT_BUDGET``): the training loss of every
model of experiments/results/video_fit_convergence.md moves by at most 0.04 mm rms between the two."""

SNAPSHOT_FRACTIONS = (0.33, 0.67, 1.0)
"""Instants of the rollout figure, as fractions of each video's duration."""

MODEL_COLOURS = {"linear": "tab:blue", "mlp": "tab:green", "wrinkling": "tab:red"}

MM = 1e3

EVALUATIONS = 300
"""Most loss-and-gradient evaluations per fit (--evaluations); a fit stops before, converged (``video_fit._adam``)."""


def budget_label(budget):
    return f"{budget['newton_iterations']} x {budget['linear_iterations']}"


def run_fits(folder, evaluations, refit, budget):
    """Run (or reuse) the six fits at ``budget``; returns {(model, loss): the fit's JSON document}."""
    fits = {}
    for model in video_fit.MODELS:
        for loss in ("one_step", "rollout"):
            path = folder / f"fit_{model}_{loss}.json"
            if refit or not path.exists():
                argv = ["fit", model, "--loss", loss, "--evaluations", str(evaluations), "--out", str(folder),
                        "--train", ",".join(map(str, TRAIN)), "--test", ",".join(map(str, TEST)),
                        "--budget", f"{budget['newton_iterations']}x{budget['linear_iterations']}"]
                if softsnake_main(argv) != 0:
                    raise SystemExit(f"softsnake {' '.join(argv)} failed")
            fits[model, loss] = json.loads(path.read_text())
            ran_at, regularization = video_fit.fit_file_settings(fits[model, loss])
            if ran_at != budget or regularization != video_fit.CONTACT_REGULARIZATION:
                raise SystemExit(f"{path} was fitted at {budget_label(ran_at)} with contact regularisation "
                                 f"{regularization:g}, not at {budget_label(budget)} with "
                                 f"{video_fit.CONTACT_REGULARIZATION:g}: give --refit or another --out")
    return fits


def gradient_cost(options, repeats=3):
    """Median wall time [s] of one batched rollout-loss gradient of the training videos and of one forward
    rollout of the same batch (the initial linear model, the fit's settings, the solver ``options``)."""
    videos = vv.load_videos(TRAIN)
    model = video_fit.VideoModel.initial("linear")
    forward, gradient = [], []
    for _ in range(repeats):
        clock = time.perf_counter()
        video_fit.evaluate(model, videos, solver_options=options)
        forward.append(time.perf_counter() - clock)
        clock = time.perf_counter()
        video_fit.rollout_loss_and_gradient(model, videos, solver_options=options)
        gradient.append(time.perf_counter() - clock)
    return statistics.median(forward), statistics.median(gradient)


def evaluate_all(fits, videos, fit_options):
    """Every fit, and every model at its initial values (loss "start"), rolled out on every video at the
    fit's dt and at PAPER_DT with the fits' solver options ``fit_options``, and once more at the fit's dt with ``CHECK_BUDGET`` (rows with budget
    "check"): (CSV rows, {(model, loss): rollouts at the fit's dt}, {(model, loss): per-frame
    shape errors on the test videos [m]})."""
    rows, rollouts, shape_errors = [], {}, {}
    starts = {(kind, "start"): {"model": video_fit.model_to_dict(video_fit.VideoModel.initial(kind))}
              for kind in video_fit.MODELS}
    check = {**fit_options, **CHECK_BUDGET}
    for (model_name, loss), document in {**starts, **fits}.items():
        model = video_fit.model_from_dict(document["model"])
        for dt, budget, chosen, options in ((video_fit.FIT_DT, "fit", videos, fit_options),
                                            (PAPER_DT, "fit", videos, fit_options),
                                            (video_fit.FIT_DT, "check", videos, check)):
            try:
                errors, results = video_fit.evaluate(model, chosen, dt=dt, solver_options=options)
            except Exception as exc:  # a blow-up at the other step is a result, reported as such
                rows.append({"model": model_name, "loss": loss, "dt_s": round(dt, 6), "budget": budget, "video": "all",
                             "split": "-", "failed": f"{type(exc).__name__}: {exc}"})
                continue
            for row in error_rows(errors, "-"):
                row.update(model=model_name, loss=loss, dt_s=round(dt, 6), budget=budget,
                           split="train" if row["video"] in TRAIN else "test", failed="")
                rows.append(row)
            if dt == video_fit.FIT_DT and budget == "fit":
                rollouts[model_name, loss] = results
                shape_errors[model_name, loss] = np.concatenate(
                    [video_errors(list(r.backbones), v).shape for r, v in zip(results, chosen) if v.number in TEST])
    return rows, rollouts, shape_errors


def plot_rollouts(videos, rollouts, path):
    tests = [v for v in videos if v.number in TEST]
    columns = len(SNAPSHOT_FRACTIONS)
    figure, grid = new_figure(2.8 * columns, 2.6 * len(tests), len(tests), columns, squeeze=False)
    for row, video in zip(grid, tests):
        index = videos.index(video)
        for axes, fraction in zip(row, SNAPSHOT_FRACTIONS):
            frame = int(round(fraction * (video.frame_count - 1)))
            draw_video_snapshot(axes, video, frame, [(rollouts[model, "rollout"][index].backbones[frame],
                                                      MODEL_COLOURS[model], model) for model in video_fit.MODELS])
    grid[0, 0].legend(loc="lower left", fontsize=6)
    save(figure, path, dpi=70)


@styled
def plot_error_distributions(shape_errors, path):
    figure, axes_row = new_figure(10, 3.4, 1, 2)
    bins = np.linspace(0.0, max(float(np.max(e)) for e in shape_errors.values()) * MM, 40)
    for axes, loss in zip(axes_row, ("rollout", "one_step")):
        for model in video_fit.MODELS:
            axes.hist(shape_errors[model, loss] * MM, bins=bins, histtype="step", density=True,
                      color=MODEL_COLOURS[model], label=model)
        axes.set_xlabel("shape error per frame, test videos [mm]")
        axes.set_ylabel("density [1/mm]")
        axes.set_title(f"fitted with the {loss.replace('_', '-')} loss", fontsize=9)
    axes_row[0].legend()
    save(figure, path)


def _mean(rows, key):
    return float(np.mean([row[key] for row in rows]))


def bound_lines(fits):
    """Limit lines naming the fitted parameters that ended within 1 % of a bound (``video_fit.LOG_BOUNDS``): there
    the fit's minimum is the bound's, not the loss's."""
    found = []
    for (model, loss), document in fits.items():
        for name, value in document["model"]["values"].items():
            low, high = video_fit.LOG_BOUNDS[name]
            for end, bound in (("lower", low), ("upper", high)):
                if abs(math.log(value / bound)) < 0.01:
                    found.append(f"{model} {loss.replace('_', '-')}: {name} at its {end} bound {bound:.4g}")
    if not found:
        return []
    lines = ["- Fits that ended at a bound of a parameter (SI): " + "; ".join(found) + "."]
    if any("pressure at its upper bound" in item for item in found):
        lines.append("  The wrinkling pressure's upper bound is the model's end (the eps_crit cubic, `video_fit.LOG_BOUNDS`): "
                     "there the wrinkling onset lies at 2.9 rad, so that fit's moment is linear below 166 degrees of "
                     "bend at a joint: the converged fit turns the wrinkling model into the linear one.")
    return lines


def write_page(path, fits, rows, cost, seconds, evaluations, budget):
    check_label = budget_label(CHECK_BUDGET)
    lines = [
        "# Fitting the stiffness models to Chen et al.'s real videos with gradients (seed 003 sec. IV-C)",
        "",
        f"Reproduce with `python experiments/fit_real_videos.py` ({seconds / 60:.0f} min on this 2-core CPU with the",
        "fits present; the fits themselves are `softsnake fit` runs, timed below). Data in metres, scale and",
        "baseline: [vine_videos.md](vine_videos.md). Library: `softsnake/robots/vine/video_fit.py`.",
        "",
        "## Set-up",
        "",
        f"- Split (fixed): trained on videos {', '.join(map(str, TRAIN))}, tested on {', '.join(map(str, TEST))}.",
        f"- Vine: {video_fit.FIT_LINKS} links, steps of 1/{round(1 / video_fit.FIT_DT)} s (three per video frame),",
        f"  solves of at most {budget['newton_iterations']} Newton x {budget['linear_iterations']} linear iterations "
        "(the engine's tolerances stop them earlier), the proximal contact",
        f"  regularisation {video_fit.CONTACT_REGULARIZATION:g} (the engine's 1e-2 leaves the wrinkling rollouts "
        "unconverged: [video_fit_convergence.md](video_fit_convergence.md)); geometry,",
        "  heading and growth (the length schedule) from each video.",
        "- Fitted: body mass, body inertia, damping (all models) and the stiffness: K (linear), the pressure",
        "  (wrinkling, seed 003 eqs. 1-2), the 30 weights of the 10-unit MLP. Starts (SI; why:",
        "  `video_fit.START`): " + "; ".join(f"{model} " + ", ".join(f"{k} {v:g}" for k, v in values.items())
                                           for model, values in video_fit.START.items()) + ".",
        "- Losses: seed 003's one-step loss (every 5th frame's video state, with backward-difference",
        "  velocities, one frame ahead) and the rollout loss (whole rollouts from the first frame); both the",
        "  mean squared distance of 50 arc-length-resampled backbone points. Both fits of a model start from",
        "  its initial values (a one-step fit is no start for a rollout fit: the MLP and wrinkling ones make",
        "  the vine heavy and still, which the one-step loss rewards).",
        f"- Optimiser: Adam (seed 003 uses AdamW), steps of {video_fit.ADAM_RATE:g} per coordinate of the fitted vector",
        "  (logs of the positive parameters) at first; whenever "
        f"{video_fit.ADAM_PATIENCE} evaluations in a row lower the best loss by less",
        f"  than {video_fit.ADAM_IMPROVEMENT:.1%}, back to the best point at half the rate; converged where the rate "
        f"would fall below {video_fit.ADAM_FINAL_RATE:g}",
        f"  (at most {evaluations} evaluations). Every evaluation is one batched rollout of the three training videos",
        "  and its gradient (the adjoint of every converged step, `softsnake.gradients`). L-BFGS-B",
        "  (`--optimizer lbfgs`) stalled on these rough losses.",
        "",
        "## Fitted models",
        "",
        f"| model | loss | evaluations | fit time [s] | training loss start -> end (rms) [mm] | the end's rollout loss "
        f"at {check_label} (rms) [mm] | fitted values (SI) |",
        "|---|---|---|---|---|---|---|",
    ]
    for (model, loss), document in fits.items():
        losses = [x for x in document["losses_m2"] if x is not None]
        values = ", ".join(f"{k} {v:.3g}" for k, v in document["model"]["values"].items())
        check_rows = [r for r in rows if r["model"] == model and r["loss"] == loss and r["split"] == "train"
                      and r["budget"] == "check" and r["dt_s"] == round(video_fit.FIT_DT, 6)]
        check_loss = (f"{math.sqrt(_mean(check_rows, 'rollout_loss_mm2')):.2f}"
                      if len(check_rows) == len(TRAIN) else "failed")
        lines.append(f"| {model} | {loss} | {document['evaluations']} | {document['fit_seconds']:.0f} | "
                     f"{MM * math.sqrt(losses[0]):.2f} -> {MM * math.sqrt(min(losses)):.2f} | {check_loss} | {values} |")
    lines += ["", "How each fit ended: " + "; ".join(
        f"{model} {loss.replace('_', '-')}: {document['message'].removeprefix('Adam: ')}"
        for (model, loss), document in fits.items()) + ".",
              "", "## Held-out videos", "",
              f"Tip and shape errors on the test videos {', '.join(map(str, TEST))}, rolled out at the fit's step, "
              "mean over the test videos of each video's mean and max over its frames, in mm (tube diameters); "
              f"then the same at 1/90 s, and at the fit's step with {check_label} iterations (the convergence check):", "",
              "| model | loss | tip mean | tip max | shape mean | shape max | at 1/90 s: tip mean | shape mean "
              f"| at {check_label}: tip mean | shape mean |",
              "|---|---|---|---|---|---|---|---|---|---|"]

    def chosen_rows(model, loss, dt, budget_name):
        return [r for r in rows if r["model"] == model and r["loss"] == loss and r.get("split") == "test"
                and r["dt_s"] == round(dt, 6) and r.get("budget") == budget_name]

    for (model, loss) in [(kind, "start") for kind in video_fit.MODELS] + list(fits):
        cells = []
        for dt, budget_name in ((video_fit.FIT_DT, "fit"), (PAPER_DT, "fit"), (video_fit.FIT_DT, "check")):
            chosen = chosen_rows(model, loss, dt, budget_name)
            keys = ("tip_mean", "tip_max", "shape_mean", "shape_max") if (dt, budget_name) == (video_fit.FIT_DT, "fit") \
                else ("tip_mean", "shape_mean")
            if not chosen:
                cells += ["failed"] * len(keys)
                continue
            cells += [f"{_mean(chosen, k + '_mm'):.0f} ({_mean(chosen, k + '_diameters'):.2f})" for k in keys]
        lines.append(f"| {model} | {loss} | " + " | ".join(cells) + " |")

    def test_mean(model, loss, key, budget_name="fit", dt=video_fit.FIT_DT):
        chosen = chosen_rows(model, loss, dt, budget_name)
        return _mean(chosen, key) if chosen else math.inf

    def best_fit(budget_name):
        return min(fits, key=lambda k: test_mean(*k, "shape_mean_mm", budget_name))

    def verdict(budget_name):
        best = best_fit(budget_name)
        wrinkling = test_mean("wrinkling", "rollout", "shape_mean_mm", budget_name)
        agreement = ("as seed 003 reports" if best == ("wrinkling", "rollout") else
                     f"not the wrinkling model with the rollout loss ({wrinkling:.1f} mm), which seed 003 reports best")
        return (f"{best[0]} with the {best[1].replace('_', '-')} loss, "
                f"{test_mean(*best, 'shape_mean_mm', budget_name):.1f} mm, {agreement}")

    def moved(other):
        shifts = [(model, loss, abs(test_mean(model, loss, "shape_mean_mm") - test_mean(model, loss, "shape_mean_mm", *other)))
                  for model, loss in [(kind, "start") for kind in video_fit.MODELS] + list(fits)]
        return ", ".join(f"{model} {loss.replace('_', '-')} ({shift:.0f} mm)" for model, loss, shift in shifts
                         if shift > 2.0) or "none"

    lines += ["", "Rows \"start\": each model at its initial values, not fitted. Best fitted model on the held-out "
              f"videos (mean shape error) at the fit's budget: {verdict('fit')}; at {check_label}: "
              f"{verdict('check')}. Held-out shape errors that change by more than 2 mm at {check_label}: "
              f"{moved(('check', video_fit.FIT_DT))}; at 1/90 s: {moved(('fit', PAPER_DT))}.", "",
              "Progress of the fits (best training loss, rms, after the first rate's "
              f"{video_fit.ADAM_EXPLORATION} evaluations, where the fits stopped until the twenty-fourth session, and "
              "after all of their evaluations):", ""]
    explored = video_fit.ADAM_EXPLORATION
    for (model, loss), document in fits.items():
        losses = np.array([np.inf if x is None else x for x in document["losses_m2"]])
        lines.append(f"- {model}, {loss.replace('_', '-')}: {MM * math.sqrt(losses[:explored].min()):.2f} mm after "
                     f"{explored}, {MM * math.sqrt(losses.min()):.2f} mm after {len(losses)} "
                     f"({100 * (1 - losses.min() / losses[:explored].min()):.1f} % lower in the loss)")
    lines += ["", "Per video (test and training), at the fit's step:", "",
              "| model | loss | video | split | tip mean [mm] | tip max [mm] | shape mean [mm] | shape max [mm] |",
              "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        if row["dt_s"] == round(video_fit.FIT_DT, 6) and row.get("budget") == "fit" and not row.get("failed"):
            lines.append(f"| {row['model']} | {row['loss']} | {row['video']} | {row['split']} | {row['tip_mean_mm']:.0f} | "
                         f"{row['tip_max_mm']:.0f} | {row['shape_mean_mm']:.0f} | {row['shape_max_mm']:.0f} |")
    forward, gradient = cost
    lines += ["", "![test rollouts of the rollout-loss fits](fit_real_videos.png)", "",
              "![shape error distributions on the test videos](fit_real_videos_errors.png)", "",
              "## Cost of a gradient", "",
              f"One rollout-loss gradient of the three training videos in one batch: {gradient:.1f} s; one forward",
              f"rollout of the same batch at the same settings: {forward:.1f} s; ratio {gradient / forward:.1f}x (medians",
              "of 3, this 2-core CPU, device cpu). Memory: the records of the steps (start and end state,",
              "forces, control and multipliers; no Newton or linear iteration), about 3 KB per vine-step at 10",
              "links, plus one step's arrays.",
              "",
              "## Limits",
              "",
              "- A fit converges to a local minimum at its final rate's resolution (steps of 0.6 % of a positive",
              "  parameter), not to the global one: the rollout losses are rough (a vine slips past a wall's end or",
              "  not; the wrinkled curve's flat part), and another start may end elsewhere (not tried here).",
              "- The fits' solves do not balance momentum (the engine's default), so their gradients along walls",
              "  carry the momentum lag (a vine bending along a wall: the mass derivative 36 % off), and their end",
              "  depends a little on the iterations they took; with `momentum_balance` and a converged budget the",
              "  same check agrees within 3 % (tests/robots/vine/test_video_fit.py), but the balanced iteration",
              "  does not converge the wrinkling model pressed on these walls (at its initial values, regularisation",
              "  1e-3: 146, 53 and 50 of 1 536 substeps unconverged at 100 x 120, 200 x 200 and 400 x 400, the",
              "  training loss 22.5, 412 and 23.3 mm rms): not used.",
              "- Until the twenty-fifth session the fits ran at 30 x 60 with the engine's contact regularisation",
              "  (1e-2), which left the wrinkling rollouts unconverged (the wrinkling rollout fit's training",
              "  rollouts: 1 044 of 1 536 substeps; 18.74 mm rms there, 21.31 at 200 x 200): a fit found what the",
              "  unconverged rollouts rewarded. Until the twenty-fourth they stopped after 40 evaluations at the",
              "  first rate.",
              *bound_lines(fits),
              "- One fixed split of six videos; the link count (10) and the step (1/30 s) are the fit's, re-checked",
              "  at 1/90 s above but not at other link counts."]
    if budget != video_fit.FIT_BUDGET:
        last = next(i for i, line in enumerate(lines) if line.startswith("- One fixed split"))
        lines[last:last] = [f"- The fits ran at {budget_label(budget)} (the fit's own budget is "
                            f"{budget_label(video_fit.FIT_BUDGET)}); the columns at {check_label} re-check them."]
    with replaced_when_complete(path) as temporary:
        temporary.write_text("\n".join(lines) + "\n")


def main(argv=None):
    parser = experiment_parser(__doc__, __file__)
    parser.add_argument("--evaluations", type=int, default=EVALUATIONS,
                        help=f"most evaluations per fit (default {EVALUATIONS})")
    parser.add_argument("--budget", default=None, metavar="NxL",
                        help="solver budget of the fits and of the rows at the fit's step (default: the fit's 30x60)")
    parser.add_argument("--refit", action="store_true", help="run the fits again even where their files exist")
    args = parser.parse_args(argv)
    try:
        budget = parse_budget(args.budget, video_fit.FIT_BUDGET)
    except UsageError as exc:
        parser.error(str(exc))
    out = make_output_folder(args.out)
    clock = time.perf_counter()
    fit_options = {**video_fit.SOLVER_OPTIONS, **budget}
    fits = run_fits(make_output_folder(out / "video_fits"), args.evaluations, args.refit, budget)
    videos = vv.load_videos()
    rows, rollouts, shape_errors = evaluate_all(fits, videos, fit_options)
    write_dict_csv(out / "fit_real_videos.csv", [{k: row.get(k, "") for k in (
        "model", "loss", "dt_s", "budget", "video", "split", "tip_mean_mm", "tip_max_mm", "shape_mean_mm", "shape_max_mm",
        "tip_mean_diameters", "shape_mean_diameters", "rollout_loss_mm2", "failed")} for row in rows])
    plot_rollouts(videos, rollouts, out / "fit_real_videos.png")
    plot_error_distributions(shape_errors, out / "fit_real_videos_errors.png")
    cost = gradient_cost(fit_options)
    write_page(out / "fit_real_videos.md", fits, rows, cost, time.perf_counter() - clock, args.evaluations, budget)
    print(f"wrote {out / 'fit_real_videos.md'}")


if __name__ == "__main__":
    main()
