"""Seed 004 planner: kinematics, the obstacle-interaction model, workspaces, plans and the CLI."""

import json
import math
from dataclasses import replace

import numpy as np
import pytest
from scipy.integrate import quad, solve_ivp

from softsnake.cli import main
from softsnake.errors import ConfigError
from softsnake.robots.vine.kinematics import (Pose, bend_or_wrinkle, cantilever_deflection, forward_kinematics,
                                              inverse_kinematics, obstacle_interaction, required_wrap,
                                              wrapped_angle_error)
from softsnake.robots.vine.planner import plan_paths, polyline_self_intersects, reach_mask, workspace_levels
from softsnake.robots.vine.scene import ObstacleCircle, ObstacleRectangle, PlanProblem, load_scene

EI = 0.1
MC = 0.32


# --- kinematics (eqs. 1-2) ---------------------------------------------------------------------

def test_ik_inverts_fk_to_1e_9():
    rng = np.random.default_rng(0)
    length = rng.uniform(1e-3, 3.0, 20_000)
    curvature = rng.uniform(-2.0, 2.0, 20_000)
    # Straight and nearly straight arcs, where eq. (2) as printed divides by y = 0.
    curvature[:8] = [0.0, 1e-15, -1e-15, 1e-12, -1e-9, 1e-7, -1e-5, 1e-3]
    keep = np.abs(curvature * length) < 1.9 * np.pi  # n = 0: arcs that turn by less than 2 pi
    x, y, heading = forward_kinematics(curvature[keep], length[keep])
    curvature_back, length_back = inverse_kinematics(x, y)
    assert np.max(np.abs(curvature_back - curvature[keep])) < 1e-9
    assert np.max(np.abs(length_back - length[keep])) < 1e-9
    assert np.allclose(heading, curvature[keep] * length[keep], rtol=0, atol=1e-15)
    assert inverse_kinematics(0.0, 0.0) == (0.0, 0.0)


@pytest.mark.parametrize("curvature, length", [(0.0, 1.3), (1e-8, 0.7), (-1.7, 2.0), (2.0, 2.9), (0.4, -0.5)])
def test_fk_matches_integrated_arc(curvature, length):
    # The tip of an arc is the integral of its unit tangent (cos kappa s, sin kappa s).
    x_ref = quad(lambda s: math.cos(curvature * s), 0.0, length, epsabs=1e-14)[0]
    y_ref = quad(lambda s: math.sin(curvature * s), 0.0, length, epsabs=1e-14)[0]
    x, y, _ = forward_kinematics(curvature, length)
    assert abs(x - x_ref) < 1e-12 and abs(y - y_ref) < 1e-12


def test_ik_equals_printed_eq_2_away_from_y_0():
    rng = np.random.default_rng(1)
    x, y = rng.uniform(-2.0, 2.0, (2, 5000))
    keep = np.abs(y) > 1e-3
    x, y = x[keep], y[keep]
    curvature, length = inverse_kinematics(x, y)
    squared = x**2 + y**2
    assert np.allclose(curvature, 2.0 * y / squared, rtol=1e-12, atol=0.0)
    assert np.allclose(length, squared * np.arctan2(y, x) / y, rtol=1e-12, atol=0.0)


# --- obstacle interaction (eqs. 3-4, Sect. II-B) -------------------------------------------------

@pytest.mark.parametrize("load_abscissa", [0.3, 0.9])
def test_cantilever_matches_beam_equation(load_abscissa):
    # EI w'' = M(s) = f (a - s) for s < a, 0 beyond; clamped: w(0) = w'(0) = 0. Integrated
    # numerically and compared with eqs. (3)-(4) to 1e-9 (relative to the tip values).
    force = 0.37
    def rhs(s, state):
        return [state[1], force * max(load_abscissa - s, 0.0) / EI]
    abscissa = np.linspace(0.0, 1.2, 25)
    numeric = solve_ivp(rhs, (0.0, 1.2), [0.0, 0.0], t_eval=abscissa, rtol=1e-12, atol=1e-14,
                        max_step=0.01)
    deflection, rotation = cantilever_deflection(force, load_abscissa, abscissa, flexural_rigidity=EI)
    assert np.allclose(deflection, numeric.y[0], rtol=0, atol=1e-9 * np.max(np.abs(deflection)))
    assert np.allclose(rotation, numeric.y[1], rtol=0, atol=1e-9 * np.max(np.abs(rotation)))
    # Textbook end values of the end-loaded cantilever: P L^3 / (3 EI) and P L^2 / (2 EI).
    end_deflection, end_rotation = cantilever_deflection(force, 1.2, 1.2, flexural_rigidity=EI)
    assert end_deflection == pytest.approx(force * 1.2**3 / (3 * EI), rel=1e-14)
    assert end_rotation == pytest.approx(force * 1.2**2 / (2 * EI), rel=1e-14)


def test_bending_below_critical_moment():
    a = 0.5
    critical = MC * a**2 / (3 * EI)  # t_c = deflection of f_c = m_c / a at s = a (eq. 3)
    assert cantilever_deflection(MC / a, a, a, flexural_rigidity=EI)[0] == pytest.approx(critical, rel=1e-14)
    for d in (0.2 * critical, 0.999 * critical, -0.6 * critical):
        deformation = bend_or_wrinkle(a, d, flexural_rigidity=EI, critical_moment=MC)
        assert deformation.wrinkle_angle == 0.0
        assert abs(deformation.base_moment) < MC
        assert deformation.force == pytest.approx(3 * EI * d / a**3, rel=1e-12)
        assert deformation.bend_angle == pytest.approx(1.5 * d / a, rel=1e-12)
        # The bent section passes through the contact: w(a) = d.
        assert cantilever_deflection(deformation.force, a, a, flexural_rigidity=EI)[0] == pytest.approx(d, rel=1e-12)


def test_wrinkling_above_critical_moment_uses_the_paper_angle():
    a = 0.5
    critical = MC * a**2 / (3 * EI)
    for d in (1.001 * critical, 2.0 * critical, -3.0 * critical):
        deformation = bend_or_wrinkle(a, d, flexural_rigidity=EI, critical_moment=MC)
        assert abs(deformation.base_moment) == pytest.approx(MC, rel=1e-12)
        assert deformation.critical_deflection == pytest.approx(critical, rel=1e-12)
        assert deformation.bend_angle == pytest.approx(math.copysign(MC * a / (2 * EI), d), rel=1e-12)
        assert deformation.wrinkle_angle == pytest.approx(math.copysign(math.atan((abs(d) - critical) / a), d),
                                                          rel=1e-12)
    # The total rotation is continuous across the threshold (|jump| < 1e-8 rad for a 1e-9 step).
    below, above = (bend_or_wrinkle(a, critical * factor, flexural_rigidity=EI, critical_moment=MC)
                    for factor in (1 - 1e-9, 1 + 1e-9))
    assert abs(below.bend_angle + below.wrinkle_angle - above.bend_angle - above.wrinkle_angle) < 1e-8


@pytest.mark.parametrize("lateral", [0.05, -0.4, 0.9])
def test_interaction_reaches_the_obstacle_in_any_frame(lateral):
    obstacle = (0.6, lateral)
    reference = obstacle_interaction(Pose(0.0, 0.0, 0.0), obstacle, flexural_rigidity=EI, critical_moment=MC)
    start = Pose(0.3, -1.1, 2.2)
    world = start.to_world(*obstacle)
    moved = obstacle_interaction(start, world, flexural_rigidity=EI, critical_moment=MC)
    assert moved.contact_abscissa == pytest.approx(0.6, abs=1e-12)
    assert moved.deflection == pytest.approx(lateral, abs=1e-12)
    assert moved.contact.heading - start.heading == pytest.approx(reference.contact.heading, abs=1e-12)
    # The deformed section (bent, and wrinkled when |d| > t_c = 0.384 m) ends on the obstacle.
    assert np.allclose(moved.shape(moved.contact_abscissa), world, atol=1e-12)
    assert moved.wrinkled == (abs(lateral) > MC * 0.6**2 / (3 * EI))
    assert moved.wrap == ("cw" if lateral > 0 else "ccw")
    behind = obstacle_interaction(start, start.to_world(-0.2, 0.1), flexural_rigidity=EI, critical_moment=MC)
    assert behind is None


def test_deformed_section_length():
    start = Pose(0.2, 0.1, 0.4)
    a = 0.8
    # Small deflection: length = a + (3/5) d^2 / a + O(d^4) for the bent section
    # (the integral of w'^2 / 2 with w' = 3 d s (2a - s) / (2 a^3)).
    small = obstacle_interaction(start, start.to_world(a, 0.008), flexural_rigidity=EI, critical_moment=MC)
    assert small.length == pytest.approx(a + 0.6 * 0.008**2 / a, rel=1e-8)
    for lateral in (0.3, -0.7):  # bent, and wrinkled (t_c = 0.683 m)
        interaction = obstacle_interaction(start, start.to_world(a, lateral), flexural_rigidity=EI,
                                           critical_moment=MC)
        points = np.stack(interaction.shape(np.linspace(0.0, a, 200_001)), axis=1)
        polyline = np.sum(np.linalg.norm(np.diff(points, axis=0), axis=1))
        assert interaction.length == pytest.approx(polyline, rel=1e-9)
        assert interaction.length >= math.hypot(a, lateral)  # never shorter than the chord


def test_wrap_direction_follows_fig_6():
    start = Pose(0.0, 0.0, 0.0)
    obstacle = (1.0, 0.2)
    # The next point needs less curvature than the obstacle: clockwise; more: counterclockwise.
    assert required_wrap(start, obstacle, 2.0, -0.5) == -1
    assert required_wrap(start, obstacle, 1.0, 0.8) == 1


def test_wrapped_angle_error():
    assert wrapped_angle_error(0.1, -0.1) == pytest.approx(0.2)
    assert wrapped_angle_error(3.0, -3.0) == pytest.approx(2 * math.pi - 6.0)
    assert wrapped_angle_error(7.0, 0.0) == pytest.approx(7.0 - 2 * math.pi)


def test_self_intersection():
    t = np.linspace(0.0, 2 * np.pi, 200)
    assert polyline_self_intersects(np.stack([np.sin(t), np.sin(2 * t) / 2], axis=1))  # figure eight
    assert not polyline_self_intersects(np.stack([np.cos(t[:150]), np.sin(t[:150])], axis=1))  # 3/4 circle
    spiral = np.stack([t * np.cos(3 * t), t * np.sin(3 * t)], axis=1)
    assert not polyline_self_intersects(spiral)


# --- planner (Algorithms 1-2) on the seed 004 scenes ------------------------------------------

def chord_heading(start, target):
    """Tip heading of the CCD arc from ``start`` to ``target``: twice the chord angle (eq. 2)."""
    local_x, local_y = start.to_local(*target)
    return start.heading + 2.0 * math.atan2(local_y, local_x)


def test_navigation_scene_plans():
    scene = load_scene("planner_navigation")
    result = plan_paths(scene.plan, scene.obstacles, base_heading=scene.vine.heading)
    plans = {plan.label: plan for plan in result.plans}
    assert list(plans) == ["base", "O1", "O2", "O1 > O2", "O2 > O1"]
    # Base solution: IK straight to the target.
    assert plans["base"].feasible
    assert plans["base"].orientation_error == pytest.approx(2 * math.atan2(0.7, 1.7), abs=1e-12)
    # O2 alone: a = 1.2, d = -0.4 < t_c = 1.536 m: bending only, rotation 3 d / (2 a) = -0.5 rad.
    o2 = plans["O2"]
    assert o2.feasible and not o2.sections[0].interaction.wrinkled
    assert o2.sections[0].rotation == pytest.approx(-0.5, abs=1e-12)
    assert o2.tip.heading == pytest.approx(chord_heading(Pose(1.2, -0.4, -0.5), (1.7, -0.7)), abs=1e-12)
    # O1 alone: feasible per section, but 2.44 m in all.
    assert plans["O1"].feasible and plans["O1"].total_length == pytest.approx(2.436, abs=1e-3)
    # O1 > O2 wrinkles at O1 and reaches the target nearly level, but needs kappa = 2.07 > 2 1/m.
    both = plans["O1 > O2"]
    assert both.sections[1].interaction.wrinkled
    assert both.orientation_error == pytest.approx(0.108, abs=1e-3)
    assert len(both.reasons) == 1 and "curvature 2.071" in both.reasons[0]
    assert plans["O2 > O1"].reasons == ("O1: not ahead of the robot",)
    assert result.best is plans["O2"]
    assert result.best.orientation_error == pytest.approx(0.5808, abs=1e-4)


def test_navigation_scene_with_slightly_wider_curvature_gives_the_paper_ranking():
    scene = load_scene("planner_navigation")
    problem = replace(scene.plan, curvature_range=(-2.1, 2.1))
    result = plan_paths(problem, scene.obstacles)
    assert [plan.label for plan in result.plans if plan.feasible] == ["base", "O1", "O2", "O1 > O2"]
    assert result.best.label == "O1 > O2"


def test_total_length_limit_rules_out_obstacle_1():
    # |O1| + |target - O1| = 0.728 + 1.345 = 2.07 m > 2 m: no plan through O1 fits a 2 m robot.
    scene = load_scene("planner_navigation")
    assert math.hypot(0.7, 0.2) + math.hypot(1.0, 0.9) > 2.0
    result = plan_paths(replace(scene.plan, total_length_max=2.0), scene.obstacles)
    plans = {plan.label: plan for plan in result.plans}
    assert not plans["O1"].feasible and "total length" in plans["O1"].reasons[0]
    assert plans["base"].feasible and plans["O2"].feasible


def test_workspace_scene_has_the_paper_pattern():
    scene = load_scene("planner_workspace")
    result = plan_paths(scene.plan, scene.obstacles, base_heading=scene.vine.heading)
    assert [plan.label for plan in result.plans if plan.feasible] == ["base", "O1", "O2", "O1 > O2"]
    assert result.best.label == "O1 > O2"
    errors = sorted(plan.orientation_error for plan in result.plans if plan.feasible)
    assert errors[0] == result.best.orientation_error < errors[1]


def test_wrong_side_and_collisions_make_plans_infeasible():
    obstacles = (ObstacleCircle(center=(0.8, 0.1), radius=0.005),)
    # Target far to the left: wrapping ccw around O1 would need it to push the robot right, but
    # it lies left of the robot's straight line.
    problem = PlanProblem(target=(1.0, 1.0), orientation=0.0)
    plan = plan_paths(problem, obstacles).plans[1]
    assert any("wrong side to wrap ccw" in reason for reason in plan.reasons)
    # A box across the straight path blocks the base plan.
    blocked = plan_paths(PlanProblem(target=(1.5, 0.0), orientation=0.0),
                         obstacles + (ObstacleRectangle(center=(0.4, 0.0), size=(0.1, 0.3)),))
    assert "enters O2" in blocked.plans[0].reasons
    assert "enters O2" not in plan_paths(PlanProblem(target=(1.5, 0.0), orientation=0.0), obstacles).plans[0].reasons


def test_planner_refuses_bad_input():
    problem = PlanProblem(target=(1.0, 0.0), orientation=0.0)
    with pytest.raises(ConfigError, match="sample_spacing"):
        plan_paths(problem, (), sample_spacing=0.0)
    with pytest.raises(ConfigError, match="sequence_length_max"):
        plan_paths(problem, (), sequence_length_max=-1)
    many = tuple(ObstacleCircle(center=(0.1 * k, 0.5), radius=0.01) for k in range(1, 8))
    with pytest.raises(ConfigError, match="13700 sequences"):
        plan_paths(problem, many)
    assert len(plan_paths(problem, many, sequence_length_max=1).plans) == 8
    with pytest.raises(ConfigError, match="sequence: 9 is not the index of a circle obstacle"):
        reach_mask(problem, many, (0, 9), np.zeros(3), np.zeros(3))


# --- workspaces (eqs. 5-7) ------------------------------------------------------------------------

def test_free_workspace_area_matches_the_jacobian_integral():
    # Area of {FK(kappa, l)}: the map is one-to-one for |kappa l| < 2 pi and
    # |det dFK/d(kappa, l)| = 2 sin^2(kappa l / 2) / kappa^2, so the area is
    # int_{-K}^{K} (L - sin(kappa L) / kappa) / kappa^2 dkappa.
    problem = PlanProblem(target=(1.0, 0.0), orientation=0.0)
    def inner(kappa):
        return (2.0 - math.sin(2.0 * kappa) / kappa) / kappa**2 if abs(kappa) > 1e-3 else 2.0**3 / 6.0
    area = quad(inner, -2.0, 2.0, epsabs=1e-12)[0]
    spacing = 0.005
    axis = np.arange(-2.1, 2.1, spacing) + spacing / 2
    x, y = np.meshgrid(axis, axis)
    raster = reach_mask(problem, (), (), x, y).sum() * spacing**2
    assert raster == pytest.approx(area, rel=0.005)  # the raster's error is its boundary cells


def test_reach_mask_agrees_with_the_planner():
    scene = load_scene("planner_workspace")
    rng = np.random.default_rng(3)
    targets = rng.uniform([-0.5, -1.5], [2.0, 1.5], size=(80, 2))
    geometric = ("enters", "crosses itself")
    masks = {sequence: reach_mask(scene.plan, scene.obstacles, sequence, targets[:, 0], targets[:, 1])
             for sequence in [(), (0,), (1,), (0, 1), (1, 0)]}
    reached_count = 0
    for position, target in enumerate(targets):
        for plan in plan_paths(replace(scene.plan, target=tuple(target)), scene.obstacles).plans:
            limits_ok = plan.tip is not None and not [r for r in plan.reasons if not r.startswith(geometric)]
            assert masks[plan.sequence][position] == limits_ok, (plan.label, target, plan.reasons)
            reached_count += limits_ok
    assert reached_count > 80  # the comparison covers reached and unreached targets


def test_workspace_levels_count_orientations():
    # Eq. (7) is equivalent to: W^p = W^1 and at least p - 1 of the one-obstacle sets W_i.
    problem = PlanProblem(target=(1.0, 0.0), orientation=0.0)
    obstacles = (ObstacleCircle(center=(0.4, 0.1), radius=0.01), ObstacleCircle(center=(0.85, -0.2), radius=0.01),
                 ObstacleCircle(center=(0.6, -0.5), radius=0.01))
    axis = np.linspace(-1.0, 2.0, 121)
    x, y = np.meshgrid(axis, axis)
    levels = workspace_levels(problem, obstacles, x, y)
    assert len(levels) == 4
    count = sum(reach_mask(problem, obstacles, (index,), x, y).astype(int) for index in range(3))
    for p, level in enumerate(levels, start=1):
        assert np.array_equal(level, levels[0] & (count >= p - 1))
    assert levels[3].any()  # some positions are reached with four orientations
    inside = (np.hypot(x - 0.4, y - 0.1) < 0.01)
    assert not levels[0][inside].any()  # W^1 = W minus the obstacles


# --- command line ---------------------------------------------------------------------------------

def test_cli_json_has_every_plan(tmp_path, capsys):
    assert main(["plan", "planner_navigation", "--json", "--out", str(tmp_path)]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [plan["label"] for plan in document["plans"]] == ["base", "O1", "O2", "O1 > O2", "O2 > O1"]
    assert document["best"] == "O2"
    assert document["plans"][3]["sections"][1]["wrinkled"] is True
    png = tmp_path / "planner_navigation_plans.png"
    assert document["plot"] == str(png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size < 200_000


def test_cli_table(tmp_path, capsys):
    assert main(["plan", "planner_workspace", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "best: O1 > O2" in out and "O2 > O1" in out and "not ahead" in out


def test_cli_errors_are_one_line(tmp_path, capsys):
    no_plan = tmp_path / "room.toml"
    no_plan.write_text("[vine]\n[[obstacles]]\ntype = \"circle\"\ncenter = [1.0, 0.0]\nradius = 0.1\n")
    assert main(["plan", str(no_plan), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no [plan] table" in err and err.count("\n") == 1
    bad = tmp_path / "bad.toml"
    bad.write_text("[plan]\ntarget = [1.0]\norientation = 0.0\n")
    assert main(["plan", str(bad), "--json", "--out", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "plan.target: expected a pair" in captured.err and captured.err.count("\n") == 1
