"""``softsnake plan SCENE_FILE [--json] [--out DIR]``: obstacle-interaction plans for a vine scene.

Runs the seed 004 planner on the scene's ``[plan]`` problem, prints every candidate plan as a
table (or, with ``--json``, exactly one JSON document on stdout) and writes a PNG of the planned
robot shapes to ``DIR/<scene name>_plans.png``. Exit status 0 whether or not a plan is feasible;
2 with a one-line message for a bad scene, a scene without ``[plan]`` or an unusable ``--out``.
"""

import json

from softsnake.errors import ConfigError, UsageError
from softsnake.robots.vine.planner import plan_paths
from softsnake.robots.vine.plots import plot_plans
from softsnake.robots.vine.scene import load_scene

from .common import make_output_folder, safe_file_stem


def add_arguments(parser):
    parser.add_argument("scene", metavar="SCENE_FILE",
                        help="vine scene TOML file with a [plan] table, or the name of a shipped scene")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON document with every plan on stdout instead of the table")
    parser.add_argument("--out", default=".", metavar="DIR",
                        help="folder for the PNG plot <scene>_plans.png (default: current folder)")


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
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    if scene.plan is None:
        raise UsageError(f"{scene.source}: no [plan] table; the planner needs at least plan.target and "
                         "plan.orientation")
    out = make_output_folder(args.out)
    try:
        result = plan_paths(scene.plan, scene.obstacles, base_heading=scene.vine.heading)
    except ConfigError as exc:
        raise UsageError(f"{scene.source}: {exc}") from None
    plot_path = out / f"{safe_file_stem(scene.name)}_plans.png"
    try:
        plot_plans(scene, result, plot_path)
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot write {plot_path.name}: {exc.strerror}") from None
    if args.json:
        print(json.dumps(plans_document(scene, result, plot_path), indent=2, allow_nan=False))
    else:
        print(format_table(scene, result))
        print(f"wrote {plot_path}")
    return 0
