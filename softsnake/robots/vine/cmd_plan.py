"""``softsnake plan SCENE_FILE [--json] [--out DIR]``: obstacle-interaction plans for a vine scene.

Runs the seed 004 planner on the scene's ``[plan]`` problem, prints every candidate plan as a
table (or, with ``--json``, exactly one JSON document on stdout) and writes a PNG of the planned
robot shapes to ``DIR/<scene name>_plans.png``. Exit status 0 whether or not a plan is feasible;
2 with a one-line message for a bad scene, a scene without ``[plan]`` or an unusable ``--out``.
"""

import json
import math
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
from matplotlib.patches import Circle, Rectangle  # noqa: E402

from softsnake.cli import UsageError  # noqa: E402
from softsnake.output_files import save_png  # noqa: E402
from softsnake.robots.vine.planner import PlannerError, plan_paths  # noqa: E402
from softsnake.robots.vine.scene import ObstacleCircle, ObstacleRectangle, SceneError, load_scene  # noqa: E402


def add_arguments(parser):
    parser.add_argument("scene", metavar="SCENE_FILE",
                        help="vine scene TOML file with a [plan] table, or the name of a shipped scene")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON document with every plan on stdout instead of the table")
    parser.add_argument("--out", default=".", metavar="DIR",
                        help="folder for the PNG plot <scene>_plans.png (default: current folder)")


def _draw_obstacles(axes, obstacles):
    for index, obstacle in enumerate(obstacles):
        if isinstance(obstacle, ObstacleCircle):
            axes.add_patch(Circle(obstacle.center, obstacle.radius, color="tab:red"))
            # The seed 004 obstacles are a few millimetres wide: a marker keeps them visible.
            axes.plot(*obstacle.center, "o", color="tab:red", markersize=5)
            axes.annotate(f"O{index + 1}", obstacle.center, textcoords="offset points", xytext=(4, 4),
                          fontsize=7, color="tab:red")
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


def _arrow(axes, x, y, heading, length, **style):
    axes.annotate("", xy=(x + length * math.cos(heading), y + length * math.sin(heading)), xytext=(x, y),
                  arrowprops=dict(arrowstyle="->", **style))


def write_plans_png(scene, result, path):
    """Plot every plan of ``result`` (one panel each) for ``scene`` into the PNG file ``path``.

    The file is written under a temporary name and renamed, so it is complete or absent.
    """
    path = Path(path)
    plans = result.plans
    columns = min(3, len(plans))
    rows = math.ceil(len(plans) / columns)
    figure, axes_grid = plt.subplots(rows, columns, figsize=(3.6 * columns, 3.2 * rows), squeeze=False)
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
        _draw_obstacles(axes, scene.obstacles)
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
        axes.set_title(f"{plan.label}: {status}, error {error}", fontsize=8)
        axes.set_xlim(min(xs) - margin, max(xs) + margin)
        axes.set_ylim(min(ys) - margin, max(ys) + margin)
        axes.set_aspect("equal")
        axes.tick_params(labelsize=7)
        axes.set_xlabel("x [m]", fontsize=7)
        axes.set_ylabel("y [m]", fontsize=7)
    for axes in list(axes_grid.flat)[len(plans):]:
        axes.set_axis_off()
    figure.suptitle(f"{scene.name}: obstacle-interaction plans (blue feasible, grey dashed infeasible; green: target "
                    "and desired orientation)", fontsize=9)
    figure.tight_layout()
    try:
        save_png(figure, path)
    finally:
        plt.close(figure)


def _obstacle_corners(obstacle):
    if isinstance(obstacle, ObstacleCircle):
        (x, y), r = obstacle.center, obstacle.radius
        return [(x - r, y - r), (x + r, y + r)]
    if isinstance(obstacle, ObstacleRectangle):
        half = 0.5 * math.hypot(*obstacle.size)
        (x, y) = obstacle.center
        return [(x - half, y - half), (x + half, y + half)]
    return [obstacle.start, obstacle.end]


def plans_document(scene, result, plot_path):
    """The JSON document of ``softsnake plan --json`` (plain data, SI units, angles in rad)."""
    plan = scene.plan
    return {
        "scene": scene.name,
        "source": scene.source,
        "target": list(plan.target),
        "orientation": plan.orientation,
        "base_heading": scene.vine.heading,
        "length_range": list(plan.length_range),
        "curvature_range": list(plan.curvature_range),
        "total_length_max": plan.total_length_max,
        "flexural_rigidity": plan.flexural_rigidity,
        "critical_moment": plan.critical_moment,
        "plans": [candidate.to_dict() for candidate in result.plans],
        "best": None if result.best is None else result.best.label,
        "plot": str(plot_path),
    }


def _section_text(section):
    if section.interaction is None:
        return f"tip l={section.length:.3f} k={section.curvature:+.3f}"
    mode = "wrinkle" if section.interaction.wrinkled else "bend"
    return f"O{section.obstacle + 1} l={section.length:.3f} {mode} {section.rotation:+.3f}"


def format_table(scene, result):
    """Every plan as a readable text table (one line per plan)."""
    plan = scene.plan
    best = "none feasible" if result.best is None else (
        f"{result.best.label} (error {result.best.orientation_error:.4f} rad)")
    lines = [f"scene {scene.name}: target ({plan.target[0]:g}, {plan.target[1]:g}) m, orientation "
             f"{plan.orientation:g} rad, {len(result.plans)} candidate plans, best: {best}",
             "sections: passive 'O<k> l=<length m> bend|wrinkle <rotation rad>', actuated 'tip l=<length m> "
             "k=<curvature 1/m>'"]
    header = ("plan", "feasible", "tip heading [rad]", "error [rad]", "length [m]", "sections", "why infeasible")
    rows = []
    for candidate in result.plans:
        rows.append((
            candidate.label + (" *" if candidate is result.best else ""),
            "yes" if candidate.feasible else "no",
            "-" if candidate.tip is None else f"{candidate.tip.heading:+.4f}",
            "-" if candidate.orientation_error is None else f"{candidate.orientation_error:.4f}",
            f"{candidate.total_length:.3f}",
            "; ".join(_section_text(section) for section in candidate.sections) or "-",
            "; ".join(candidate.reasons) or "-",
        ))
    widths = [max(len(row[column]) for row in rows + [header]) for column in range(len(header))]
    for row in [header] + rows:
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    return "\n".join(lines)


def run(args):
    try:
        scene = load_scene(args.scene)
    except SceneError as exc:
        raise UsageError(str(exc)) from None
    if scene.plan is None:
        raise UsageError(f"{scene.source}: no [plan] table; the planner needs at least plan.target and "
                         "plan.orientation")
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot create the folder: {exc.strerror}") from None
    try:
        result = plan_paths(scene.plan, scene.obstacles, base_heading=scene.vine.heading)
    except PlannerError as exc:
        raise UsageError(f"{scene.source}: {exc}") from None
    # The scene name becomes a file name: keep it to safe characters.
    plot_path = out / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', scene.name)}_plans.png"
    try:
        write_plans_png(scene, result, plot_path)
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot write {plot_path.name}: {exc.strerror}") from None
    if args.json:
        print(json.dumps(plans_document(scene, result, plot_path), indent=2, allow_nan=False))
    else:
        print(format_table(scene, result))
        print(f"wrote {plot_path}")
    return 0
