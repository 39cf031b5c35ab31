"""``softsnake fit MODEL [--loss rollout|one_step] [--train 2,3,5] [--test 1,4,6] [--start FIT.json] [--optimizer adam|lbfgs] [--evaluations N] [--budget NxL] [--workers W] [--out DIR]``.

Fits a vine stiffness model (linear, mlp or wrinkling: softsnake.robots.vine.video_fit) to Chen et
al.'s real videos (seed 003; shared/reference/vine/chen_real_video) by Adam or L-BFGS-B with gradients
through the engine, on the training videos, then rolls the fitted model out on the training and
the test videos (by default a fixed split: trained on videos 2, 3 and 5, tested on 1, 4 and 6).
On the CPU every evaluation's videos are shared among worker processes, one per core this process may use
(``--workers``; softsnake.robots.vine.fit_workers), with the same losses and gradients bit for bit as one process.
Prints the loss after every evaluation. Writes to DIR:

- ``fit_<model>_<loss>.json``: the fitted model (SI units), the loss [m^2] and the model at every
  evaluation, the wall time, the settings (links, dt, videos), and the errors per video;
- ``fit_<model>_<loss>_errors.csv``: per video (train or test): tip and shape errors, mean and
  max, in mm and in tube diameters (67 mm), and the rollout loss [mm^2].

An interrupted fit (Ctrl-C) writes the best model met so far as ``fit_<model>_<loss>.partial.json``
(no errors: nothing is rolled out) and names it. Exit status 0, or 2 with a one-line message for a
bad option, a missing video folder or an unusable output folder.
"""

import json
import math
import time
from pathlib import Path

from softsnake.errors import ConfigError, UsageError
from softsnake.output_files import replaced_when_complete, write_dict_csv

from .common import add_budget_option, check_at_least, make_output_folder, parse_budget
from .workers import add_workers_option, check_workers, worker_count, worker_processes


def add_arguments(parser):
    from softsnake.robots.vine.video_fit import LOSSES, MODELS

    parser.add_argument("model", choices=MODELS, help="stiffness model to fit")
    parser.add_argument("--loss", choices=LOSSES, default="rollout",
                        help="rollout: whole rollouts against the videos; one_step: seed 003's one-frame predictions "
                             "(default rollout)")
    parser.add_argument("--train", default="2,3,5", metavar="K,K,...", help="training videos (default 2,3,5)")
    parser.add_argument("--test", default="1,4,6", metavar="K,K,...", help="test videos (default 1,4,6; '' for none)")
    parser.add_argument("--optimizer", choices=("adam", "lbfgs"), default="adam",
                        help="adam (seed 003's choice; robust on rough losses) or lbfgs (L-BFGS-B) (default adam)")
    parser.add_argument("--evaluations", type=int, default=300, metavar="N",
                        help="most loss-and-gradient evaluations of the fit; Adam stops before once converged "
                             "(default 300)")
    add_budget_option(parser, "of every rollout step",
                      "the fit's 200x200, where every model's rollouts of the training videos converge; a short "
                      "budget leaves the wrinkling model's rollouts unconverged, and the fit then fits the budget")
    parser.add_argument("--start", default=None, metavar="FIT.json",
                        help="start from the model of an earlier fit's JSON file (default: the model's initial values)")
    add_workers_option(parser, "training video")
    parser.add_argument("--out", default=".", metavar="DIR", help="output folder (default: current folder)")


def _video_numbers(option, text, available):
    try:
        numbers = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"{option} takes video numbers separated by commas, got {text!r}") from None
    missing = sorted(set(numbers) - set(available))
    if missing:
        raise UsageError(f"{option}: no video {missing[0]} (the reference has {', '.join(map(str, available))})")
    return numbers


def _write_json(path, document):
    with replaced_when_complete(path) as temporary:
        temporary.write_text(json.dumps(document, indent=2, allow_nan=False))


def error_rows(rows, split):
    """Per-video error rows in mm and tube diameters, and how many of the rollout's substeps ended unconverged, for
    the CSV (``video_fit.evaluate``'s rows)."""
    table = []
    for row in rows:
        entry = {"video": row["video"], "split": split}
        for name in ("tip_mean", "tip_max", "shape_mean", "shape_max"):
            entry[f"{name}_mm"] = round(1e3 * row[f"{name}_m"], 3)
            entry[f"{name}_diameters"] = round(row[f"{name}_diameters"], 4)
        entry["rollout_loss_mm2"] = round(1e6 * row["rollout_loss_m2"], 3)
        entry["substeps"] = row["substeps"]
        entry["unconverged_substeps"] = row["unconverged_substeps"]
        table.append(entry)
    return table


def run(args):
    from softsnake.robots.vine import video_fit
    from softsnake.robots.vine.reference import chen_video_ids
    from softsnake.robots.vine.video import load_videos

    check_at_least("--evaluations", args.evaluations, 1)
    budget = parse_budget(args.budget, video_fit.FIT_BUDGET)
    solver_options = {**video_fit.SOLVER_OPTIONS, **budget}
    try:
        available = chen_video_ids()
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    train = _video_numbers("--train", args.train, available)
    test = _video_numbers("--test", args.test, available)
    if not train:
        raise UsageError("--train needs at least one video")
    import warp as wp

    args.device = "cpu" if wp.get_device().is_cpu else str(wp.get_device())  # the fit runs on Warp's default device
    check_workers(args, len(train))
    start = None
    if args.start is not None:
        try:
            start = video_fit.model_from_dict(json.loads(Path(args.start).read_text())["model"])
        except (OSError, ValueError, KeyError, ConfigError) as exc:
            raise UsageError(f"--start {args.start}: not a fit's JSON file ({exc})") from None
        if start.kind != args.model:
            raise UsageError(f"--start {args.start} holds a {start.kind} model, not a {args.model} one")
    out = make_output_folder(args.out)
    stem = f"fit_{args.model}_{args.loss}"
    train_videos, test_videos = load_videos(train), load_videos(test)
    settings = {"start": args.start, "optimizer": args.optimizer, "evaluations": args.evaluations,
                "budget": budget, "contact_regularization": solver_options["contact_regularization"], "links": video_fit.FIT_LINKS, "dt_s": video_fit.FIT_DT, "loss": args.loss, "train": train,
                "test": test, "one_step_stride": video_fit.ONE_STEP_STRIDE}
    best = {}

    def progress(evaluation, loss, model):
        if loss < best.get("loss", float("inf")):
            best.update(loss=loss, model=model)
        shown = f"loss {1e6 * loss:.4g} mm^2" if math.isfinite(loss) else "failed (why: after the fit)"
        print(f"evaluation {evaluation}: {shown} ({model.describe()})", flush=True)

    processes = f", {worker_count(args, len(train))} worker processes" if args.workers != 1 else ""
    print(f"fitting the {args.model} model to videos {args.train} ({args.loss} loss, at most {args.evaluations} "
          f"evaluations{processes})", flush=True)
    try:
        fit = video_fit.fit_videos(args.model, train_videos, loss=args.loss, max_evaluations=args.evaluations,
                                   optimizer=args.optimizer, start=start, progress=progress,
                                   solver_options=solver_options, workers=worker_processes(args))
    except KeyboardInterrupt:
        if "model" in best:
            partial = out / f"{stem}.partial.json"
            _write_json(partial, {"model": video_fit.model_to_dict(best["model"]), "loss_m2": best["loss"],
                                  "settings": settings, "partial": True})
            print(f"interrupted: the best model so far is in {partial}")
        raise
    clock = time.perf_counter()
    rows = error_rows(video_fit.evaluate(fit.model, train_videos, solver_options=solver_options)[0], "train")
    if test_videos:
        rows += error_rows(video_fit.evaluate(fit.model, test_videos, solver_options=solver_options)[0], "test")
    # A failed evaluation (a blow-up) has no loss: null in the file.
    losses = [loss if math.isfinite(loss) else None for loss in fit.losses]
    document = {"model": video_fit.model_to_dict(fit.model), "losses_m2": losses,
                "models": [video_fit.model_to_dict(m) for m in fit.models], "fit_seconds": fit.seconds,
                "evaluations": fit.evaluations, "message": fit.message,
                "failures": [{"evaluation": n, "error": text} for n, text in fit.failures], "settings": settings,
                "evaluation_seconds": time.perf_counter() - clock, "errors": rows}
    _write_json(out / f"{stem}.json", document)
    write_dict_csv(out / f"{stem}_errors.csv", rows)
    print(f"{fit.model.describe()}; {fit.evaluations} evaluations in {fit.seconds:.0f} s ({fit.message})")
    for evaluation, error in fit.failures:
        print(f"evaluation {evaluation} failed (no gradient; Adam went back to its best point at half its rate): {error}")
    for row in rows:
        unconverged = ""
        if row["unconverged_substeps"]:
            unconverged = f"; {row['unconverged_substeps']} of its {row['substeps']} substeps ended unconverged"
            if row["unconverged_substeps"] > video_fit.UNCONVERGED_LIMIT * row["substeps"]:
                unconverged += (f", more than {video_fit.UNCONVERGED_LIMIT:.0%}: the budget's answer there, not a converged "
                                "one (try a larger --budget)")
        print(f"video {row['video']} ({row['split']}): tip mean {row['tip_mean_mm']:.1f} mm, shape mean "
              f"{row['shape_mean_mm']:.1f} mm{unconverged}")
    print(f"wrote {out / (stem + '.json')} and {out / (stem + '_errors.csv')}")
    return 0
