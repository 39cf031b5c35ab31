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
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
import numpy as np  # noqa: E402
from tqdm import tqdm  # noqa: E402

from softsnake.cli import UsageError  # noqa: E402
from softsnake.errors import ModelError, SimulationError  # noqa: E402
from softsnake.output_files import replaced_when_complete, save_png  # noqa: E402
from softsnake.usd_writer import UsdRecorder  # noqa: E402
from softsnake.robots.vine.cmd_plan import _draw_obstacles  # noqa: E402
from softsnake.robots.vine.robot import VineBuildError  # noqa: E402
from softsnake.robots.vine.scene import ObstacleCircle, ObstacleRectangle, SceneError, load_scene  # noqa: E402
from softsnake.robots.vine.simulation import VineBatch, VineSimulationError, lengths_of, specs_from_scene, tips_of  # noqa: E402
from softsnake.robots.vine.workers import VineBatchWorkers  # noqa: E402

TUBE_SIDES = 12
"""Vertices around each ring of the USD tube mesh [-]."""

OBSTACLE_DRAW_HEIGHT_TUBES = 4.0
"""Height of the drawn obstacles in tube diameters [-] (they are infinitely tall in the model)."""


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


def pin_points(poses, half_length):
    """Backbone polyline through the base, every pin and the tip [m], (..., links + 1, 2).

    poses: (..., B, 3) body centres and angles [m, rad]; half_length: body half-length [m],
    broadcastable to poses.shape[:-2]
    """
    d = np.asarray(half_length, dtype=float)[..., None, None]
    ends = poses[..., [*range(0, poses.shape[-2], 2), poses.shape[-2] - 1], :]
    sign = np.ones(ends.shape[-2])
    sign[:-1] = -1.0
    direction = np.stack([np.cos(ends[..., 2]), np.sin(ends[..., 2])], axis=-1)
    return ends[..., :2] + d * sign[:, None] * direction


def tube_faces(ring_count, sides=TUBE_SIDES):
    """Triangles (k, 3) of a tube of ``ring_count`` rings with ``sides`` vertices each."""
    faces = []
    for ring in range(ring_count - 1):
        for k in range(sides):
            a, b = ring * sides + k, ring * sides + (k + 1) % sides
            c, d = a + sides, b + sides
            faces += [(a, b, d), (a, d, c)]
    return np.asarray(faces, dtype=np.int64)


def tube_points(backbone, radius, sides=TUBE_SIDES):
    """Vertices (rings * sides, 3) of a tube of ``radius`` [m] around a planar backbone (n, 2) [m] at z = 0."""
    tangent = np.gradient(backbone, axis=0)
    tangent /= np.maximum(np.linalg.norm(tangent, axis=1, keepdims=True), 1e-12)
    normal = np.stack([-tangent[:, 1], tangent[:, 0]], axis=1)
    phase = 2.0 * np.pi * np.arange(sides) / sides
    offset_in_plane = radius * np.cos(phase)[None, :, None] * normal[:, None, :]
    points = np.zeros((len(backbone), sides, 3))
    points[..., :2] = backbone[:, None, :] + offset_in_plane
    points[..., 2] = radius * np.sin(phase)[None, :]
    return points.reshape(-1, 3)


def _add_usd_obstacles(recorder, obstacles, height):
    group = recorder.add_group("obstacles")
    for index, obstacle in enumerate(obstacles):
        name = f"obstacle_{index:02d}"
        if isinstance(obstacle, ObstacleCircle):
            recorder.add_static_cylinder(name, (*obstacle.center, 0.0), obstacle.radius, height, color=(0.8, 0.3, 0.2),
                                         parent=group)
            continue
        if isinstance(obstacle, ObstacleRectangle):
            center, size, angle = obstacle.center, obstacle.size, obstacle.angle
        else:
            start, end = np.asarray(obstacle.start), np.asarray(obstacle.end)
            center, angle = 0.5 * (start + end), math.atan2(*(end - start)[::-1])
            size = (float(np.linalg.norm(end - start)), 0.002)
        rotation = (0.0, 0.0, math.sin(0.5 * angle), math.cos(0.5 * angle))
        recorder.add_static_box(name, (*center, 0.0), (0.5 * size[0], 0.5 * size[1], 0.5 * height), rotation,
                                color=(0.8, 0.3, 0.2), parent=group)


def write_csv(path, times, headings, tips, lengths):
    """Tip paths as CSV (one row per recorded time and vine), written atomically."""
    frames, vines = tips.shape[:2]
    table = np.column_stack([
        np.repeat(times, vines), np.tile(np.arange(vines), frames), np.tile(headings, frames),
        tips.reshape(-1, 2), lengths.reshape(-1)])
    with replaced_when_complete(path) as temporary:
        np.savetxt(temporary, table, delimiter=",", fmt=["%.6f", "%d", "%.6f", "%.6f", "%.6f", "%.6f"],
                   header="time_s,vine,heading_rad,tip_x_m,tip_y_m,length_m", comments="")


def write_png(path, scene, times, tips, lengths, final_backbones):
    """Tip paths and final shapes over the obstacles, and length against time, written atomically."""
    figure, (paths_axes, length_axes) = plt.subplots(1, 2, figsize=(11, 4.8))
    _draw_obstacles(paths_axes, scene.obstacles)
    colours = plt.cm.viridis(np.linspace(0.0, 1.0, tips.shape[1]))
    for vine in range(tips.shape[1]):
        paths_axes.plot(tips[:, vine, 0], tips[:, vine, 1], color=colours[vine], linewidth=0.8)
        paths_axes.plot(final_backbones[vine, :, 0], final_backbones[vine, :, 1], color=colours[vine], linewidth=2.0,
                        alpha=0.6)
        length_axes.plot(times, lengths[:, vine], color=colours[vine], linewidth=0.8)
    points = np.concatenate([tips.reshape(-1, 2), final_backbones.reshape(-1, 2), np.zeros((1, 2))])
    margin = 0.1 * max(np.ptp(points[:, 0]), np.ptp(points[:, 1]), 0.05)
    paths_axes.set_xlim(points[:, 0].min() - margin, points[:, 0].max() + margin)
    paths_axes.set_ylim(points[:, 1].min() - margin, points[:, 1].max() + margin)
    paths_axes.set_aspect("equal")
    paths_axes.set_xlabel("x [m]")
    paths_axes.set_ylabel("y [m]")
    paths_axes.set_title(f"{scene.name}: tip paths (thin) and final shapes (thick)", fontsize=9)
    length_axes.set_xlabel("time [s]")
    length_axes.set_ylabel("length [m]")
    length_axes.set_title("vine length", fontsize=9)
    length_axes.grid(alpha=0.3)
    figure.tight_layout()
    try:
        save_png(figure, path)
    finally:
        plt.close(figure)


def _check_options(args):
    if args.vines < 1:
        raise UsageError(f"--vines must be at least 1, got {args.vines}")
    if args.workers < 0:
        raise UsageError(f"--workers must be 0 (one per CPU core) or a positive number, got {args.workers}")
    if args.workers != 1 and str(args.device) != "cpu":
        raise UsageError(f"--workers splits a batch over CPU processes; with --device {args.device} use --workers 1")
    if args.seconds is not None and not (math.isfinite(args.seconds) and args.seconds > 0.0):
        raise UsageError(f"--seconds must be a positive number of seconds, got {args.seconds}")
    if not (math.isfinite(args.spread_heading) and args.spread_heading >= 0.0):
        raise UsageError(f"--spread-heading must be a non-negative angle [rad], got {args.spread_heading}")


def run(args):
    _check_options(args)
    try:
        scene = load_scene(args.scene)
    except SceneError as exc:
        raise UsageError(str(exc)) from None
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot create the folder: {exc.strerror}") from None
    specs = specs_from_scene(scene, vine_count=args.vines, heading_spread=args.spread_heading)
    with contextlib.ExitStack() as stack:
        try:
            if args.workers == 1:
                batch = VineBatch(specs, device=args.device)
            else:
                batch = stack.enter_context(VineBatchWorkers(specs, workers=args.workers or None))
        except (ModelError, VineBuildError, VineSimulationError) as exc:
            raise UsageError(f"{scene.source}: {exc}") from None
        return _simulate(args, scene, specs, batch, out)


def _simulate(args, scene, specs, batch, out):
    """Run the batch, stream the USD scene, then write the CSV and the plot."""
    seconds = scene.sim.duration if args.seconds is None else args.seconds
    dt = scene.sim.dt
    steps = max(1, int(round(seconds / dt)))

    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", scene.name)
    usd_path, csv_path, png_path = out / f"{stem}.usd", out / f"{stem}_tips.csv", out / f"{stem}_paths.png"
    radius, half_length = scene.vine.tube_radius, batch.half_length
    poses = [batch.poses()]
    faces = tube_faces(batch.link_count + 1)
    try:
        with UsdRecorder(usd_path, fps=1.0 / dt) as recorder:
            _add_usd_obstacles(recorder, scene.obstacles, OBSTACLE_DRAW_HEIGHT_TUBES * 2.0 * radius)
            meshes = []
            for vine in range(batch.vine_count):
                group = recorder.add_group(f"vine_{vine:03d}")
                backbone = pin_points(poses[0][vine], half_length[vine])
                meshes.append(recorder.add_mesh("tube", faces, tube_points(backbone, radius), color=(0.9, 0.8, 0.2),
                                                parent=group))

            def write_frame(frame, frame_poses):
                recorder.write_frame(frame=frame, mesh_points={
                    mesh: tube_points(pin_points(frame_poses[v], half_length[v]), radius) for v, mesh in enumerate(meshes)})

            write_frame(0, poses[0])
            for frame in tqdm(range(1, steps + 1), desc=f"vine {scene.name}", unit="step", leave=False):
                batch.step(dt)
                poses.append(batch.poses())
                write_frame(frame, poses[-1])
    except SimulationError as exc:
        raise UsageError(f"{scene.source}: the simulation diverged: {exc}") from None
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot write {usd_path.name}: {exc.strerror}") from None
    poses = np.stack(poses)
    times = np.arange(steps + 1) * dt
    tips, lengths = tips_of(poses, half_length), lengths_of(poses, half_length)
    headings = np.array([spec.heading for spec in specs])
    try:
        write_csv(csv_path, times, headings, tips, lengths)
        write_png(png_path, scene, times, tips, lengths, pin_points(poses[-1], half_length))
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot write the results: {exc.strerror}") from None
    print(f"{scene.name}: {batch.vine_count} vine(s), {steps} steps of {dt:.6g} s; final length "
          f"{lengths[-1].min():.4f}-{lengths[-1].max():.4f} m")
    for path in (usd_path, csv_path, png_path):
        print(f"wrote {path}")
    return 0
