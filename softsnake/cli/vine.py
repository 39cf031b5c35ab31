"""``softsnake vine SCENE [--vines N] [--seconds T] [--device cpu|cuda] [--workers W] [--out DIR] [--spread-heading RAD]``.

Grows N vine robots of a scene through its obstacles, one world each in one batch (seed 003), with
launch angles spread evenly over ``--spread-heading`` around the scene's heading (by default 0.3 rad
for a batch, so that its vines differ; 0 makes them identical); on the CPU, ``--workers`` splits
the batch over that many processes (softsnake.robots.vine.workers: the same states, one core each; by default one
per CPU core, at most one per vine).
Writes to DIR, every file named after the scene file (``my_scene.toml`` -> ``my_scene...``):

- ``<scene>.usdc``: the tubes (a tube mesh through the pins of each vine) and the obstacles, one
  time sample per simulation step (streamed);
- ``<scene>_tips.csv``: time [s], vine, launch heading [rad], tip x, y [m] and length [m] per step;
- ``<scene>_paths.png``: tip paths and final shapes over the obstacles, coloured by launch heading
  (colour bar), and length against time;
- ``<scene>.gif``: the vines from above and in perspective (``--no-video``: none).

Printed: the final lengths, and whether the solver's substeps converged within the vines' budget or
ended at it (``softsnake.newton_counts``).
An interrupted run (Ctrl-C) keeps what it computed as ``<scene>.partial.usdc``,
``<scene>_tips.partial.csv`` and ``<scene>_paths.partial.png``, and names them.
Exit status 0, or 2 with a one-line message for a bad scene, option or output folder.
"""

import argparse
import contextlib
import math
import sys
from pathlib import Path

import numpy as np

from softsnake.errors import ConfigError, ModelError, SimulationError, UsageError
from softsnake.progress import progress
from softsnake.robots.vine.plots import plot_tip_paths
from softsnake.robots.vine.scene import load_scene
from softsnake.robots.vine.simulation import (CPU_SECONDS_PER_BODY_STEP, VineBatch, lengths_of, pin_points,
                                              specs_from_scene, tips_of, write_tips_csv)

from .common import check_at_least, check_device, check_positive, check_run_size, make_output_folder, safe_file_stem
from .workers import add_workers_option, check_workers, parallel_speedup, worker_processes

SPREAD_DEFAULT = 0.3
"""Spread of the launch headings of a batch when --spread-heading is not given [rad]."""

USD_EXTENSION = ".usdc"
"""The USD files of every command are binary crate files."""


def add_arguments(parser):
    parser.add_argument("scene", metavar="SCENE", help="vine scene TOML file, or the name of a shipped scene")
    parser.add_argument("--vines", type=int, default=1, metavar="N", help="number of vines in the batch (default 1)")
    parser.add_argument("--seconds", type=float, default=None, metavar="T",
                        help="simulated time [s] (default: the scene's sim.duration)")
    parser.add_argument("--device", default="cpu", help="Warp device, cpu or cuda (default cpu)")
    add_workers_option(parser, "vine")
    parser.add_argument("--out", default=".", metavar="DIR", help="output folder (default: current folder)")
    parser.add_argument("--spread-heading", type=float, default=None, metavar="RAD",
                        help=f"spread of the launch angles around the scene's heading [rad] (default: {SPREAD_DEFAULT:g} "
                             "for a batch of several vines, 0 for one)")
    parser.add_argument("--video", action=argparse.BooleanOptionalAction, default=True,
                        help="write DIR/<scene>.gif, the vines from above and in perspective (default: on)")


def _check_options(args):
    check_at_least("--vines", args.vines, 1)
    check_workers(args, args.vines)
    if args.seconds is not None:
        check_positive("--seconds", args.seconds)
    if args.spread_heading is not None and not (math.isfinite(args.spread_heading) and args.spread_heading >= 0.0):
        raise UsageError(f"--spread-heading must be a non-negative angle [rad], got {args.spread_heading}")


def _spread(args):
    """The launch-heading spread [rad]: as given, else SPREAD_DEFAULT for a batch; a note on
    standard error when a batch's vines are all the same."""
    if args.spread_heading is None:
        return SPREAD_DEFAULT if args.vines > 1 else 0.0
    if args.vines > 1 and args.spread_heading == 0.0:
        print(f"softsnake vine: note: --spread-heading 0: all {args.vines} vines are identical", file=sys.stderr)
    return args.spread_heading


def run(args):
    _check_options(args)
    try:
        scene = load_scene(args.scene)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    seconds = scene.sim.duration if args.seconds is None else args.seconds
    steps = max(1, int(round(seconds / scene.sim.dt)))
    bodies = args.vines * scene.vine.body_count
    speedup = parallel_speedup(args, args.vines)
    check_run_size(f"--seconds {seconds:g} with --vines {args.vines}", (steps + 1) * bodies * 3 * 8 * 2,
                   steps * bodies * CPU_SECONDS_PER_BODY_STEP / speedup if args.device == "cpu" else None)
    check_device(args.device, getattr(args, "verbose", False))
    out = make_output_folder(args.out)
    specs = specs_from_scene(scene, vine_count=args.vines, heading_spread=_spread(args))
    with contextlib.ExitStack() as stack:
        try:
            if args.workers == 1:
                batch = VineBatch(specs, device=args.device)
            else:
                from softsnake.robots.vine.workers import VineBatchWorkers

                batch = stack.enter_context(VineBatchWorkers(specs, workers=worker_processes(args)))
        except (ModelError, ConfigError) as exc:
            raise UsageError(f"{scene.source}: {exc}") from None
        return _simulate(args, scene, specs, batch, out, steps)


def _results(times, poses, half_length):
    poses = np.stack(poses)
    return poses, tips_of(poses, half_length), lengths_of(poses, half_length)


def _simulate(args, scene, specs, batch, out, steps):
    """Run the batch, stream the USD scene, then write the CSV, the plot and the animation."""
    # usd-core is imported only when the vine command runs.
    from softsnake.robots.vine.usd_scene import VineUsdScene
    from softsnake.usd_writer import UsdRecorder

    dt = scene.sim.dt
    stem = safe_file_stem(Path(scene.source).stem if scene.source != "<dict>" else scene.name)
    usd_path, csv_path = out / f"{stem}{USD_EXTENSION}", out / f"{stem}_tips.csv"
    png_path, gif_path = out / f"{stem}_paths.png", out / f"{stem}.gif"
    half_length = batch.half_length
    headings = np.array([spec.heading for spec in specs])
    spread = f", launch headings {headings.min():+.3f}..{headings.max():+.3f} rad" if batch.vine_count > 1 else ""
    processes = f", {len(batch.shares)} worker processes" if args.workers != 1 else ""
    print(f"{stem}: {batch.vine_count} vine(s), {steps} steps of {dt:.6g} s{spread}{processes}", flush=True)
    poses = [batch.poses()]
    try:
        with UsdRecorder(usd_path, fps=1.0 / dt) as recorder:
            usd = VineUsdScene(recorder, scene.obstacles, poses[0], half_length, scene.vine.tube_radius)
            usd.write(0, poses[0])
            for frame in progress(range(1, steps + 1), desc=f"vine {stem}", unit="step"):
                batch.step(dt)
                poses.append(batch.poses())
                usd.write(frame, poses[-1])
    except KeyboardInterrupt:
        kept = [Path(recorder.partial_path)] if Path(recorder.partial_path).exists() else []
        if len(poses) > 1:
            times = np.arange(len(poses)) * dt
            all_poses, tips, lengths = _results(times, poses, half_length)
            partial_csv, partial_png = out / f"{stem}_tips.partial.csv", out / f"{stem}_paths.partial.png"
            write_tips_csv(partial_csv, times, headings, tips, lengths)
            plot_tip_paths(partial_png, scene, times, tips, lengths, pin_points(all_poses[-1], half_length), headings)
            kept += [partial_csv, partial_png]
        reached = (len(poses) - 1) * dt
        files = ", ".join(str(path) for path in kept) if kept else "nothing"
        print(f"softsnake vine: interrupted at t = {reached:.3f} s; kept the run up to then in {files}", file=sys.stderr)
        return 130
    except SimulationError as exc:
        raise UsageError(f"{scene.source}: the simulation diverged: {exc}") from None
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot write {usd_path.name}: {exc.strerror}") from None
    times = np.arange(steps + 1) * dt
    all_poses, tips, lengths = _results(times, poses, half_length)
    written = [usd_path, csv_path, png_path]
    try:
        write_tips_csv(csv_path, times, headings, tips, lengths)
        plot_tip_paths(png_path, scene, times, tips, lengths, pin_points(all_poses[-1], half_length), headings)
        if args.video:
            from softsnake.robots.vine.animation import write_vine_gif

            written.append(write_vine_gif(gif_path, scene, times, all_poses, half_length, headings,
                                          title=f"{stem}: {batch.vine_count} vine(s)"))
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot write the results: {exc.strerror}") from None
    print(f"final length {lengths[-1].min():.4f}-{lengths[-1].max():.4f} m")
    print(batch.newton_counts().summary("vine", study="experiments/results/vine.md"))
    for path in written:
        print(f"wrote {path}")
    return 0
