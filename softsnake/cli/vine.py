"""``softsnake vine SCENE [--vines N] [--seconds T] [--device cpu|cuda] [--workers W] [--out DIR] [--spread-heading RAD]``.

Grows N vine robots of a scene through its obstacles, one world each in one batch (seed 003), with
launch angles spread evenly over ``--spread-heading`` around the scene's heading; on the CPU,
``--workers`` splits the batch over that many processes (softsnake.robots.vine.workers: the same states,
one core each). Writes to DIR:

- ``<scene>.usd``: the tubes (a tube mesh through the pins of each vine) and the obstacles, one
  time sample per simulation step (streamed; ``<scene>.partial.usd`` if the run is interrupted);
- ``<scene>_tips.csv``: time [s], vine, launch heading [rad], tip x, y [m] and length [m] per step;
- ``<scene>_paths.png``: tip paths and final shapes over the obstacles, and length against time.

Exit status 0, or 2 with a one-line message for a bad scene, option or output folder.
"""

import contextlib
import math

import numpy as np
from tqdm import tqdm

from softsnake.errors import ConfigError, ModelError, SimulationError, UsageError
from softsnake.robots.vine.plots import plot_tip_paths
from softsnake.robots.vine.scene import load_scene
from softsnake.robots.vine.simulation import (VineBatch, lengths_of, pin_points, specs_from_scene, tips_of,
                                              write_tips_csv)
from softsnake.robots.vine.usd_scene import VineUsdScene
from softsnake.robots.vine.workers import VineBatchWorkers
from softsnake.usd_writer import UsdRecorder

from .common import check_at_least, check_positive, make_output_folder, safe_file_stem


def add_arguments(parser):
    parser.add_argument("scene", metavar="SCENE", help="vine scene TOML file, or the name of a shipped scene")
    parser.add_argument("--vines", type=int, default=1, metavar="N", help="number of vines in the batch (default 1)")
    parser.add_argument("--seconds", type=float, default=None, metavar="T",
                        help="simulated time [s] (default: the scene's sim.duration)")
    parser.add_argument("--device", default="cpu", help="Warp device, e.g. cpu or cuda (default cpu)")
    parser.add_argument("--workers", type=int, default=1, metavar="W",
                        help="CPU processes that share the batch (default 1; 0: one per CPU core)")
    parser.add_argument("--out", default=".", metavar="DIR", help="output folder (default: current folder)")
    parser.add_argument("--spread-heading", type=float, default=0.0, metavar="RAD",
                        help="spread of the launch angles around the scene's heading [rad] (default 0)")


def _check_options(args):
    check_at_least("--vines", args.vines, 1)
    if args.workers < 0:
        raise UsageError(f"--workers must be 0 (one per CPU core) or a positive number, got {args.workers}")
    if args.workers != 1 and str(args.device) != "cpu":
        raise UsageError(f"--workers splits a batch over CPU processes; with --device {args.device} use --workers 1")
    if args.seconds is not None:
        check_positive("--seconds", args.seconds)
    if not (math.isfinite(args.spread_heading) and args.spread_heading >= 0.0):
        raise UsageError(f"--spread-heading must be a non-negative angle [rad], got {args.spread_heading}")


def run(args):
    _check_options(args)
    try:
        scene = load_scene(args.scene)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    out = make_output_folder(args.out)
    specs = specs_from_scene(scene, vine_count=args.vines, heading_spread=args.spread_heading)
    with contextlib.ExitStack() as stack:
        try:
            if args.workers == 1:
                batch = VineBatch(specs, device=args.device)
            else:
                batch = stack.enter_context(VineBatchWorkers(specs, workers=args.workers or None))
        except (ModelError, ConfigError) as exc:
            raise UsageError(f"{scene.source}: {exc}") from None
        return _simulate(args, scene, specs, batch, out)


def _simulate(args, scene, specs, batch, out):
    """Run the batch, stream the USD scene, then write the CSV and the plot."""
    seconds = scene.sim.duration if args.seconds is None else args.seconds
    dt = scene.sim.dt
    steps = max(1, int(round(seconds / dt)))

    stem = safe_file_stem(scene.name)
    usd_path, csv_path, png_path = out / f"{stem}.usd", out / f"{stem}_tips.csv", out / f"{stem}_paths.png"
    half_length = batch.half_length
    poses = [batch.poses()]
    try:
        with UsdRecorder(usd_path, fps=1.0 / dt) as recorder:
            usd = VineUsdScene(recorder, scene.obstacles, poses[0], half_length, scene.vine.tube_radius)
            usd.write(0, poses[0])
            for frame in tqdm(range(1, steps + 1), desc=f"vine {scene.name}", unit="step", leave=False):
                batch.step(dt)
                poses.append(batch.poses())
                usd.write(frame, poses[-1])
    except SimulationError as exc:
        raise UsageError(f"{scene.source}: the simulation diverged: {exc}") from None
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot write {usd_path.name}: {exc.strerror}") from None
    poses = np.stack(poses)
    times = np.arange(steps + 1) * dt
    tips, lengths = tips_of(poses, half_length), lengths_of(poses, half_length)
    headings = np.array([spec.heading for spec in specs])
    try:
        write_tips_csv(csv_path, times, headings, tips, lengths)
        plot_tip_paths(png_path, scene, times, tips, lengths, pin_points(poses[-1], half_length))
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot write the results: {exc.strerror}") from None
    print(f"{scene.name}: {batch.vine_count} vine(s), {steps} steps of {dt:.6g} s; final length "
          f"{lengths[-1].min():.4f}-{lengths[-1].max():.4f} m")
    for path in (usd_path, csv_path, png_path):
        print(f"wrote {path}")
    return 0
