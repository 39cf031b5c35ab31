"""Seed 004 planner experiments: the navigation plans (Fig. 9) and the workspaces (Fig. 4).

Writes into --out (default experiments/results):

* ``planner_navigation_plans.csv`` / ``.png``: every plan of the navigation scene with its
  sections, tip orientation, orientation error and why it is infeasible.
* ``planner_navigation_sensitivity.csv``: the best plan and the two-obstacle plan's needed tip
  curvature against m_c / EI, the only combination of EI and m_c the plans depend on (how robust
  the ranking is to the identified stiffness), and the ratio below which the two-obstacle plan
  fits the curvature limit.
* ``planner_workspace_plans.png``: the plans of the Fig. 4 scene's target.
* ``planner_workspace.png`` / ``planner_workspace_areas.csv``: W^1, W^2 and W^3 of the Fig. 4
  scene (eq. 7) on a 5 mm raster, with their areas, and the free workspace's area against the
  analytic integral of the kinematics' Jacobian.

Usage: python experiments/planner_experiments.py [--out DIR]
"""

import math
import sys
from dataclasses import replace

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch
from scipy.integrate import quad
from scipy.optimize import brentq

from softsnake.cli.common import experiment_output_folder
from softsnake.output_files import write_csv
from softsnake.plotting import new_figure, save, styled
from softsnake.robots.vine.planner import plan_paths, reach_mask, workspace_levels
from softsnake.robots.vine.plots import plot_plans
from softsnake.robots.vine.scene import load_scene

RASTER_SPACING = 0.005
"""Workspace raster cell size [m]."""


def plan_rows(result):
    rows = []
    for plan in result.plans:
        sections = " | ".join(
            f"O{section.obstacle + 1} l={section.length:.4f} rot={section.rotation:+.4f}"
            + (" wrinkle" if section.interaction.wrinkled else " bend")
            if section.interaction is not None else f"tip l={section.length:.4f} k={section.curvature:+.4f}"
            for section in plan.sections)
        rows.append([plan.label, plan.feasible, plan is result.best,
                     "" if plan.tip is None else f"{plan.tip.heading:.6f}",
                     "" if plan.orientation_error is None else f"{plan.orientation_error:.6f}",
                     f"{plan.total_length:.6f}", sections, "; ".join(plan.reasons)])
    return rows


PLAN_HEADER = ["plan", "feasible", "best", "tip_heading_rad", "orientation_error_rad", "total_length_m",
               "sections", "why_infeasible"]


def navigation(out):
    scene = load_scene("planner_navigation")
    result = plan_paths(scene.plan, scene.obstacles, base_heading=scene.vine.heading)
    write_csv(out / "planner_navigation_plans.csv", PLAN_HEADER, plan_rows(result))
    plot_plans(scene, result, out / "planner_navigation_plans.png")
    for row in plan_rows(result):
        print("navigation", *row, sep=" , ")
    # EI and m_c enter the plans only through m_c / EI: the bending rotation 3 d / (2 a) holds
    # neither, and t_c = (m_c / EI) a^2 / 3 and m_c a / (2 EI) hold only the ratio.
    def two_obstacle_plan(ratio):
        problem = replace(scene.plan, critical_moment=ratio * scene.plan.flexural_rigidity)
        varied = plan_paths(problem, scene.obstacles, base_heading=scene.vine.heading)
        return varied, next(plan for plan in varied.plans if plan.label == "O1 > O2")

    paper_ratio = scene.plan.critical_moment / scene.plan.flexural_rigidity
    curvature_max = scene.plan.curvature_range[1]
    threshold = brentq(lambda ratio: two_obstacle_plan(ratio)[1].sections[-1].curvature - curvature_max,
                       1.0, paper_ratio, xtol=1e-10)
    rows = []
    # The threshold rounded down, so that its row shows the last feasible ratio.
    for ratio in sorted(set(np.round(np.arange(1.0, 5.01, 0.4), 2)) | {paper_ratio, math.floor(threshold * 1e4) / 1e4}):
        varied, both = two_obstacle_plan(ratio)
        rows.append([f"{ratio:g}", "none" if varied.best is None else varied.best.label,
                     "" if varied.best is None else f"{varied.best.orientation_error:.4f}",
                     f"{both.sections[-1].curvature:.4f}", f"{both.orientation_error:.4f}",
                     " ".join(plan.label.replace(" ", "") for plan in varied.plans if plan.feasible)])
    write_csv(out / "planner_navigation_sensitivity.csv",
              ["critical_moment_over_flexural_rigidity_per_m", "best", "best_error_rad", "o1_o2_tip_curvature_per_m",
               "o1_o2_error_rad", "feasible_plans"], rows)
    print(f"navigation , O1 > O2 needs kappa <= {curvature_max:g} 1/m for m_c / EI <= {threshold:.4f} 1/m "
          f"(paper: {paper_ratio:g} 1/m)")


def free_workspace_area(problem):
    """Area of {FK(kappa, l)} over the limits from |det dFK/d(kappa, l)| = 2 sin^2(kappa l/2)/kappa^2 [m^2]
    (one-to-one while |kappa l| < 2 pi, which the shipped limits keep)."""
    (_, length), (low, high) = problem.length_range, problem.curvature_range
    def inner(kappa):
        if abs(kappa) < 1e-4:
            return length**3 / 6.0
        return (length - math.sin(kappa * length) / kappa) / kappa**2
    return quad(inner, low, high, points=[0.0] if low < 0.0 < high else None, epsabs=1e-12)[0]


def workspace(out):
    scene = load_scene("planner_workspace")
    result = plan_paths(scene.plan, scene.obstacles, base_heading=scene.vine.heading)
    plot_plans(scene, result, out / "planner_workspace_plans.png")
    write_csv(out / "planner_workspace_plans.csv", PLAN_HEADER, plan_rows(result))
    reach = scene.plan.length_range[1] + 0.1
    axis = np.arange(-reach, reach, RASTER_SPACING) + RASTER_SPACING / 2
    x, y = np.meshgrid(axis, axis)
    levels = workspace_levels(scene.plan, scene.obstacles, x, y, base_heading=scene.vine.heading)
    cell = RASTER_SPACING**2
    free = reach_mask(scene.plan, scene.obstacles, (), x, y, base_heading=scene.vine.heading)
    singles = [reach_mask(scene.plan, scene.obstacles, (index,), x, y, base_heading=scene.vine.heading)
               for index in range(len(scene.obstacles))]
    rows = [["W (free, raster)", f"{free.sum() * cell:.4f}"],
            ["W (free, Jacobian integral)", f"{free_workspace_area(scene.plan):.4f}"]]
    rows += [[f"W_{index + 1} (via O{index + 1})", f"{mask.sum() * cell:.4f}"] for index, mask in enumerate(singles)]
    rows += [[f"W^{p}", f"{level.sum() * cell:.4f}"] for p, level in enumerate(levels, start=1)]
    write_csv(out / "planner_workspace_areas.csv", ["set", "area_m2"], rows)
    for row in rows:
        print("workspace", *row, sep=" , ")
    plot_workspace(out / "planner_workspace.png", scene, axis, levels, cell)


@styled
def plot_workspace(path, scene, axis, levels, cell):
    """W^1 (left) and W^2, W^3 (right) of the raster ``axis`` x ``axis`` of cells of area ``cell`` [m^2]."""
    figure, (left, right) = new_figure(9.0, 4.4, 1, 2)
    extent = (axis[0], axis[-1], axis[0], axis[-1])
    left.imshow(levels[0], origin="lower", extent=extent, cmap=ListedColormap(["white", "#9ecae1"]))
    left.set_title(f"(a) W^1: one orientation, {levels[0].sum() * cell:.2f} m^2")
    count = np.sum(levels[1:], axis=0)  # 1 in W^2 only, 2 in W^3
    right.imshow(np.where(levels[0], 1 + count, 0), origin="lower", extent=extent,
                 cmap=ListedColormap(["white", "#deebf7", "#6baed6", "#08519c"]), vmin=0, vmax=3)
    right.set_title("(b) with one-obstacle interactions")
    right.legend(handles=[Patch(color=colour, label=label) for colour, label in [
        ("#deebf7", "W^1 only"), ("#6baed6", f"W^2: 2 orientations, {levels[1].sum() * cell:.2f} m^2"),
        ("#08519c", f"W^3: 3 orientations, {levels[2].sum() * cell:.2f} m^2")]], loc="lower left")
    for axes in (left, right):
        for obstacle in scene.obstacles:
            axes.plot(*obstacle.center, "o", color="tab:red", markersize=5)
        axes.plot(0.0, 0.0, "k^", markersize=6)
        axes.set_xlabel("x [m]")
        axes.set_ylabel("y [m]")
        axes.set_aspect("equal")
        axes.grid(False)
    figure.suptitle("Fig. 4 scene: l in [0, 2] m, kappa in [-2, 2] 1/m, obstacles at (0.4, 0.1) and "
                    "(0.85, -0.2) m")
    save(figure, path, dpi=80)


def main(argv=None):
    out = experiment_output_folder(__doc__, __file__, argv)
    navigation(out)
    workspace(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
