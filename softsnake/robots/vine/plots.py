"""The vine's figures: scene obstacles, the planner's candidate plans, and the tip paths and
lengths of a batch of vines."""

import math

import matplotlib
import numpy as np
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from matplotlib.patches import Circle, Rectangle

from softsnake.plotting import new_figure, save, styled

from .scene import ObstacleCircle, ObstacleRectangle


def heading_colors(headings):
    """RGB colour of every vine from its launch heading [rad]: viridis over the batch's range (the
    middle of the map if all are equal), in the paths plot and the animation alike."""
    headings = np.asarray(headings, dtype=np.float64)
    span = np.ptp(headings)
    position = (headings - headings.min()) / span if span > 0 else np.full(headings.shape, 0.5)
    return [tuple(rgba[:3]) for rgba in matplotlib.colormaps["viridis"](position)]


def draw_obstacles(axes, obstacles):
    """Draw scene obstacles on matplotlib ``axes``: circles (with a marker and their label O<k>),
    rectangles and walls."""
    for index, obstacle in enumerate(obstacles):
        if isinstance(obstacle, ObstacleCircle):
            axes.add_patch(Circle(obstacle.center, obstacle.radius, color="tab:red"))
            # The seed 004 obstacles are a few millimetres wide: a marker keeps them visible.
            axes.plot(*obstacle.center, "o", color="tab:red", markersize=5)
            axes.annotate(f"O{index + 1}", obstacle.center, textcoords="offset points", xytext=(4, 4),
                          color="tab:red")
        elif isinstance(obstacle, ObstacleRectangle):
            width, height = obstacle.size
            cos, sin = math.cos(obstacle.angle), math.sin(obstacle.angle)
            corner = (obstacle.center[0] - 0.5 * (cos * width - sin * height),
                      obstacle.center[1] - 0.5 * (sin * width + cos * height))
            axes.add_patch(Rectangle(corner, width, height, angle=math.degrees(obstacle.angle), color="tab:red",
                                     alpha=0.6))
        else:
            axes.plot([obstacle.start[0], obstacle.end[0]], [obstacle.start[1], obstacle.end[1]], color="tab:red",
                      linewidth=2)


def draw_video_snapshot(axes, video, frame, simulated, *, margin=0.05):
    """One frame of a real video (``video.VineVideo``) on ``axes``: its walls, its skeleton as black dots,
    and the simulated backbones ``simulated`` over it, a list of (backbone (n, 2) [m], colour, label), at
    a fixed view of the whole video (every frame's skeleton and the walls, plus ``margin`` [m])."""
    points = np.concatenate([np.concatenate(video.skeletons),
                             np.array([[w.start, w.end] for w in video.walls]).reshape(-1, 2)])
    low, high = points.min(axis=0) - margin, points.max(axis=0) + margin
    draw_obstacles(axes, video.walls)
    observed = video.backbone(frame)
    axes.plot(observed[:, 0], observed[:, 1], ".", color="black", markersize=1.5, label="video skeleton")
    for backbone, colour, label in simulated:
        axes.plot(backbone[:, 0], backbone[:, 1], "-", color=colour, linewidth=1.1, label=label)
        axes.plot(*backbone[-1], "o", color=colour, markersize=2.5)
    axes.set_xlim(low[0], high[0])
    axes.set_ylim(low[1], high[1])
    axes.set_aspect("equal")
    axes.set_title(f"video {video.number}, t = {video.times[frame]:.1f} s", fontsize=8)


def _arrow(axes, x, y, heading, length, **style):
    axes.annotate("", xy=(x + length * math.cos(heading), y + length * math.sin(heading)), xytext=(x, y),
                  arrowprops=dict(arrowstyle="->", **style))


@styled
def plot_plans(scene, result, path):
    """Plot every plan of ``result`` (one panel each) for ``scene`` into the PNG file ``path``
    (complete or absent)."""
    plans = result.plans
    columns = min(3, len(plans))
    rows = math.ceil(len(plans) / columns)
    figure, axes_grid = new_figure(3.6 * columns, 3.2 * rows, rows, columns, squeeze=False)
    extent = [(0.0, 0.0), scene.plan.target]
    extent += [point for obstacle in scene.obstacles for point in _obstacle_corners(obstacle)]
    for plan in plans:
        if plan.sections:
            points = plan.points()
            extent += [tuple(points.min(axis=0)), tuple(points.max(axis=0))]
    xs, ys = zip(*extent)
    arrow_length = 0.12 * max(max(xs) - min(xs), max(ys) - min(ys), 0.1)
    # Keep the orientation arrows (desired, and each plan's tip) inside the panels.
    headings = [scene.plan.orientation] + [plan.tip.heading for plan in plans if plan.tip is not None]
    extent += [(scene.plan.target[0] + arrow_length * math.cos(heading),
                 scene.plan.target[1] + arrow_length * math.sin(heading)) for heading in headings]
    xs, ys = zip(*extent)
    margin = 0.05 * max(max(xs) - min(xs), max(ys) - min(ys), 0.1)
    for axes, plan in zip(axes_grid.flat, plans):
        draw_obstacles(axes, scene.obstacles)
        target_x, target_y = scene.plan.target
        _arrow(axes, target_x, target_y, scene.plan.orientation, arrow_length, color="tab:green", linewidth=2)
        axes.plot(target_x, target_y, "*", color="tab:green", markersize=10)
        if plan.sections:
            points = plan.points()
            style = dict(color="tab:blue", linewidth=2) if plan.feasible else dict(color="0.5", linestyle="--")
            axes.plot(points[:, 0], points[:, 1], **style)
            _arrow(axes, plan.tip.x, plan.tip.y, plan.tip.heading, arrow_length, color=style["color"])
        status = "best" if plan is result.best else ("feasible" if plan.feasible else "infeasible")
        error = "-" if plan.orientation_error is None else f"{plan.orientation_error:.3f} rad"
        axes.set_title(f"{plan.label}: {status}, error {error}")
        axes.set_xlim(min(xs) - margin, max(xs) + margin)
        axes.set_ylim(min(ys) - margin, max(ys) + margin)
        axes.set_aspect("equal")
        axes.set_xlabel("x [m]")
        axes.set_ylabel("y [m]")
    for axes in list(axes_grid.flat)[len(plans):]:
        axes.set_axis_off()
    figure.suptitle(f"{scene.name}: obstacle-interaction plans (blue feasible, grey dashed infeasible; green: target "
                    "and desired orientation)")
    save(figure, path)


def _obstacle_corners(obstacle):
    if isinstance(obstacle, ObstacleCircle):
        (x, y), r = obstacle.center, obstacle.radius
        return [(x - r, y - r), (x + r, y + r)]
    if isinstance(obstacle, ObstacleRectangle):
        half = 0.5 * math.hypot(*obstacle.size)
        (x, y) = obstacle.center
        return [(x - half, y - half), (x + half, y + half)]
    return [obstacle.start, obstacle.end]


@styled
def plot_tip_paths(path, scene, times, tips, lengths, final_backbones, headings=None):
    """Tip paths and final shapes over the obstacles, and length against time (complete or absent).

    headings: (V,) launch heading of every vine [rad] or None; the vines are coloured by it
    (viridis) with a colour bar when it varies, so a batch shows which launch went where. The
    view holds the whole scene: every obstacle, the base and every path.
    """
    vines = tips.shape[1]
    headings = np.zeros(vines) if headings is None else np.asarray(headings, dtype=np.float64)
    figure, (paths_axes, length_axes) = new_figure(11, 4.8, 1, 2)
    draw_obstacles(paths_axes, scene.obstacles)
    colours = heading_colors(headings)
    for vine in range(vines):
        paths_axes.plot(tips[:, vine, 0], tips[:, vine, 1], color=colours[vine], linewidth=0.8)
        paths_axes.plot(final_backbones[vine, :, 0], final_backbones[vine, :, 1], color=colours[vine], linewidth=2.0,
                        alpha=0.6)
        length_axes.plot(times, lengths[:, vine], color=colours[vine], linewidth=0.8)
    corners = [point for obstacle in scene.obstacles for point in _obstacle_corners(obstacle)]
    points = np.concatenate([tips.reshape(-1, 2), final_backbones.reshape(-1, 2), np.zeros((1, 2)),
                             np.asarray(corners, dtype=np.float64).reshape(-1, 2)])
    margin = 0.05 * max(np.ptp(points[:, 0]), np.ptp(points[:, 1]), 0.05)
    paths_axes.set_xlim(points[:, 0].min() - margin, points[:, 0].max() + margin)
    paths_axes.set_ylim(points[:, 1].min() - margin, points[:, 1].max() + margin)
    paths_axes.set_aspect("equal")
    paths_axes.set_xlabel("x [m]")
    paths_axes.set_ylabel("y [m]")
    paths_axes.set_title(f"{scene.name}: tip paths (thin) and final shapes (thick)")
    if np.ptp(headings) > 0:
        mappable = ScalarMappable(norm=Normalize(headings.min(), headings.max()), cmap="viridis")
        figure.colorbar(mappable, ax=paths_axes, label="launch heading [rad]", shrink=0.8)
    length_axes.set_xlabel("time [s]")
    length_axes.set_ylabel("length [m]")
    length_axes.set_title("vine length")
    save(figure, path)
