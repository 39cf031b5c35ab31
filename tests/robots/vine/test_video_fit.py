"""Fitting vine stiffness models to videos (``robots.vine.video_fit``): the loss's derivative with respect to
a backbone and to body poses (exact, against central differences), the video losses' gradients through
the engine against central differences of whole rollouts (linear and MLP pins, one-step loss on a real
clip, rollout loss on a synthetic video with a wall), a 3-evaluation fit that lowers the loss, and the
model's file round trip."""

import math

import numpy as np
import pytest

from softsnake.errors import ConfigError, SimulationError
from softsnake.robots.vine import reference as ref
from softsnake.robots.vine import stiffness as st
from softsnake.robots.vine import video as vv
from softsnake.robots.vine import video_fit as vf
from softsnake.robots.vine.backbones import resample_polyline, resampled_squared_distance
from softsnake.robots.vine.robot import wrinkling_moment_curve
from softsnake.robots.vine.scene import ObstacleWall
from softsnake.robots.vine.simulation import pin_points, pin_points_adjoint

from synthetic_videos import straight_video

needs_data = pytest.mark.skipif(not ref.reference_available(), reason="vine reference data not present")


def central(f, x, step):
    gradient = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[index] = step
        gradient[index] = (f(x + e) - f(x - e)) / (2.0 * step)
    return gradient


def test_resampled_loss_gradient_through_pins_and_poses():
    """The arc-length-resampled loss of a bent 4-link backbone against a random target: its gradient with
    respect to the body poses (through ``pin_points``) matches central differences to 1e-7 of the largest
    entry (measured 4e-11: it is exact where no resampled point sits on a joint)."""
    rng = np.random.default_rng(1)
    poses = np.zeros((8, 3))
    poses[:, 0] = np.arange(8) * 0.03
    poses[:, 2] = rng.normal(0.0, 0.3, 8)
    poses[:, :2] += rng.normal(0.0, 0.005, (8, 2))
    target = resample_polyline(rng.normal(size=(5, 2)) * 0.05, 50)
    loss, gradient = resampled_squared_distance(pin_points(poses, 0.01), target)
    adjoint = pin_points_adjoint(gradient, poses, 0.01)
    differences = central(lambda p: resampled_squared_distance(pin_points(p, 0.01), target)[0], poses, 1e-6)
    assert loss > 0.0
    assert np.abs(adjoint - differences).max() <= 1e-7 * np.abs(differences).max()


def test_resampled_loss_of_the_target_itself_is_zero():
    points = np.array([[0.0, 0.0], [0.1, 0.0], [0.1, 0.1]])
    loss, gradient = resampled_squared_distance(points, resample_polyline(points, 50))
    assert loss == pytest.approx(0.0, abs=1e-30) and np.abs(gradient).max() < 1e-15
    with pytest.raises(ConfigError, match="zero length"):
        resampled_squared_distance(np.zeros((3, 2)), np.zeros((50, 2)))


def _check_gradient(loss_function, model, videos, tolerance, *, of_largest=0.0, step=0.02):
    """The adjoint's gradient against Richardson-extrapolated central differences along each log parameter
    and one random direction: each within ``tolerance`` of itself plus ``of_largest`` of the largest."""
    value, gradient, _ = loss_function(model, videos)
    x = model.vector()
    directions = [np.eye(len(x))[i] for i in range(4 if model.mlp is None else 3)]
    directions.append(np.random.default_rng(0).normal(size=len(x)))
    differences = []
    for direction in directions:
        def along(t, d=direction):
            return loss_function(model.with_vector(x + t * d), videos)[0]

        def slope(e):
            return (along(e) - along(-e)) / (2.0 * e)

        differences.append((4.0 * slope(step / 2) - slope(step)) / 3.0)
    largest = max(abs(d) for d in differences)
    for direction, difference in zip(directions, differences):
        assert abs(difference) > 1e-6 * value, "the loss does not depend on this direction here"
        assert abs(gradient @ direction - difference) <= tolerance * abs(difference) + of_largest * largest, (
            f"{model.kind}: adjoint {gradient @ direction:.6g}, central differences {difference:.6g}")


@needs_data
@pytest.mark.parametrize("kind", ["linear", "mlp"])
def test_one_step_loss_gradient_on_real_clips(kind):
    """Seed 003's one-step loss on the first 15 frames of videos 2 and 5 (start frames 0, 5, 10 of each):
    the gradient with respect to the log mass, inertia, damping (and K) and a random direction against
    central differences (steps 2 % and 1 %). Measured: within 1.0 %; allowed 3 %."""
    videos = [vv.load_video(n).clip(15) for n in (2, 5)]
    _check_gradient(vf.one_step_loss_and_gradient, vf.VideoModel.initial(kind), videos, 0.03)


def test_rollout_loss_gradient_with_wall_contact():
    """A straight synthetic video at 0.3 rad, 15 frames, with a wall across its path that the simulated
    vine (the initial linear model) meets with its tip from the 28th step on and bends against, so the
    rollout loss depends on every parameter: its gradient against central differences. The solves
    balance momentum (``SolverSettings.momentum_balance``, converged at 60 x 120 iterations): the
    adjoint is that of the implicit-Euler step, which they then solve. Measured (eighteenth session):
    mass 0.19 %, inertia 0.13 %, K 0.13 %, a random direction 0.29 %; allowed 5 %. The damping derivative
    is 1.1 % of the largest, and the converged rollout's float32 round-off moves each central difference
    by about 2e-6 at steps of 1-2 % (its slopes at 8, 4, 2 and 1 %: -1.214, -1.204, -1.186, -1.393e-5,
    the adjoint -1.226e-5: Richardson from 2 % is 16 % off, from 8 % 2.2 %); so every direction is
    allowed 0.2 % of the largest derivative on top of its 5 % (the damping then within 2.0e-6 of 2.9e-6). Without momentum balance
    the mass derivative is 36 % off (the lag of bodies that turn within a step). The wall sits where no
    contact starts at exactly the end of a step with no load: there the loss has a kink (a wall at
    0.13 m meets the tip at the end of step 26 with a normal force of 3e-4 N, and the two agree to
    only 40 %)."""
    wall = ObstacleWall((0.14, -0.2), (0.14, 0.3))
    video = straight_video(frames=15, speed=0.1, heading=0.3, walls=[wall])
    options = {**vf.SOLVER_OPTIONS, "momentum_balance": True, "newton_iterations": 60, "linear_iterations": 120,
               "newton_tolerance": 0.0, "linear_tolerance": 0.0}

    def loss_function(model, videos):
        return vf.rollout_loss_and_gradient(model, videos, solver_options=options)

    _check_gradient(loss_function, vf.VideoModel.initial("linear"), [video], 0.05, of_largest=0.002)


@needs_data
def test_the_fits_rollouts_converge_where_the_engines_contact_regularisation_does_not():
    """The wrinkling model at its initial values (heavy body rotations: 0.005 kg m^2 on 2 g bodies) grown along
    video 2's walls. At the fit's solver options (200 x 200, contact regularisation 1e-3) at most 1 % of the
    substeps end unconverged (measured 0 of 489) and the rollout loss lies within 0.05 mm rms of 400 x 400's
    (measured 0.006 mm); at the same budget with the engine's regularisation (1e-2) more than 5 % end
    unconverged (measured 75 of 489): the proximal term, not the wrinkling curve, is what stalls Newton there
    (experiments/results/video_fit_convergence.md)."""
    videos = [vv.load_video(2)]
    model = vf.VideoModel.initial("wrinkling")

    def rollout(**options):
        row = vf.evaluate(model, videos, solver_options={**vf.SOLVER_OPTIONS, **options})[0][0]
        return 1e3 * math.sqrt(row["rollout_loss_m2"]), row["unconverged_substeps"], row["substeps"]

    rms, unconverged, substeps = rollout()
    assert unconverged <= vf.UNCONVERGED_LIMIT * substeps
    assert abs(rms - rollout(newton_iterations=400, linear_iterations=400)[0]) <= 0.05
    _, unconverged, substeps = rollout(contact_regularization=1e-2)
    assert unconverged > 0.05 * substeps


def test_a_fit_files_settings_and_the_legacy_ones():
    """``fit_file_settings``: a file records its budget and regularisation; one written before it did ran at 30 x 60
    with the engine's 1e-2."""
    recorded = {"settings": {"budget": {"newton_iterations": 200, "linear_iterations": 200},
                             "contact_regularization": 1e-3, "loss": "rollout"}}
    assert vf.fit_file_settings(recorded) == ({"newton_iterations": 200, "linear_iterations": 200}, 1e-3)
    assert vf.fit_file_settings({"settings": {"loss": "rollout"}}) == (
        {"newton_iterations": 30, "linear_iterations": 60}, 1e-2)


def test_three_evaluation_fit_lowers_the_loss():
    """L-BFGS-B, three evaluations of the one-step loss on a 15-frame clip of video 3: the best loss met is
    below the first."""
    fit = vf.fit_videos("linear", [vv.load_video(3).clip(15)], loss="one_step", max_evaluations=3)
    assert fit.evaluations <= 4 and all(math.isfinite(x) for x in fit.losses)
    assert min(fit.losses) < fit.losses[0]


def test_model_file_round_trip_and_bad_input():
    for kind in vf.MODELS:
        model = vf.VideoModel.initial(kind)
        again = vf.model_from_dict(vf.model_to_dict(model))
        np.testing.assert_array_equal(again.vector(), model.vector())
        assert again.with_vector(again.vector()).values == pytest.approx(model.values, rel=1e-12)
    with pytest.raises(ConfigError, match="stiffness model"):
        vf.VideoModel("cubic", {})
    with pytest.raises(ConfigError, match="needs values for stiffness"):
        vf.VideoModel("linear", {"body_mass": 1.0, "body_inertia": 1.0, "damping": 1.0})
    with pytest.raises(ConfigError, match="missing"):
        vf.model_from_dict({"kind": "linear"})
    with pytest.raises(ConfigError, match="the loss must be"):
        vf.fit_videos("linear", [straight_video()], loss="two_step")


def test_adam_converges_on_a_quadratic_within_bounds_and_steps_back_from_failures():
    """The fits' Adam on f(x) = |x - (1, -2)|^2 from 0. Free, from the fits' rate 0.1: after its 40 evaluations at that
    rate it refines and stops converged (its rate halved to ``ADAM_FINAL_RATE``) with its best point within 0.005 of
    the minimum (a fixed rate circles it at about the rate's distance); with x_1 bounded by 0.5 within 0.01 of the constrained minimum (0.5, -2); cut at
    10 evaluations it says it did not converge; a point where the evaluation fails (x_0 > 0.45) is never kept:
    it goes back to the best point with half the rate, and says so where that was its smallest."""
    visited = []

    def quadratic(x, fail_above=np.inf):
        if x[0] > fail_above:
            return None
        offset = x - np.array([1.0, -2.0])
        visited.append((float(offset @ offset), x.copy()))
        return float(offset @ offset), 2.0 * offset

    def best_point():
        return min(visited, key=lambda pair: pair[0])[1]

    message = vf._adam(quadratic, np.zeros(2), [(None, None), (None, None)], 400, vf.ADAM_RATE)
    assert message.startswith("Adam: converged") and len(visited) < 400
    assert np.linalg.norm(best_point() - [1.0, -2.0]) < 0.005
    visited.clear()
    assert "converged" in vf._adam(quadratic, np.zeros(2), [(None, 0.5), (None, None)], 400, vf.ADAM_RATE)
    assert np.linalg.norm(best_point() - [0.5, -2.0]) < 0.01
    assert "not converged" in vf._adam(quadratic, np.zeros(2), [(None, None), (None, None)], 10, vf.ADAM_RATE)
    visited.clear()
    message = vf._adam(lambda x: quadratic(x, fail_above=0.45), np.zeros(2), [(None, 0.5), (None, None)], 400,
                       vf.ADAM_RATE)
    assert "failed at its smallest rate" in message
    assert max(x[0] for _, x in visited) <= 0.45


def test_the_wrinkling_pressure_bound_keeps_the_moment_curve_differentiable():
    """At the fit's upper bound of the wrinkling pressure (its log, as Adam clips to it) a vine's moment curve builds,
    its wrinkling onset is one of its samples, and the curve keeps its samples at +-1e-4 of the pressure (the step
    of its pressure derivative, ``gradients.curve_parameter_gradient``). With the old bound of 1e5 Pa rollout fits
    stepped to 44 kPa, beyond the eps_crit cubic's end (43.2 kPa), and to 43.2 kPa, where the onset leaves the
    sampled curve and the derivative does not exist: both stopped the fit with an error."""
    model = vf.VideoModel.initial("wrinkling")
    x, index = model.vector(), model.positive_names().index("pressure")
    x[index] = model.bounds()[index][1]
    top = model.with_vector(x)
    pressure = top.values["pressure"]
    assert 0.99 * st.EPS_CRIT_PRESSURE_LIMIT < pressure < st.EPS_CRIT_PRESSURE_LIMIT
    radius = top.vine(straight_video()).tube_radius
    angles, moments = wrinkling_moment_curve(pressure, radius)
    assert np.all(np.isfinite(moments)) and np.all(np.diff(moments) > 0.0)
    assert np.isclose(angles, float(st.wrinkling_onset_angle(pressure)), rtol=1e-12, atol=0.0).any()
    for shifted in (pressure * (1.0 + 1e-4), pressure * (1.0 - 1e-4)):
        assert len(wrinkling_moment_curve(shifted, radius)[0]) == len(angles)
    with pytest.raises(ConfigError, match="beyond the eps_crit fit"):
        wrinkling_moment_curve(44e3, radius)


def test_a_failed_evaluation_is_recorded_with_its_reason(monkeypatch):
    """A fit whose second evaluation fails (here the loss function raises the SimulationError an adjoint
    that blew up raises, ``gradients.rollout_gradient``) goes on from the best point and records the
    failure with its evaluation number and message; the failed evaluation's loss is inf (null in the file)."""
    calls = []

    def flaky(model, videos, **options):
        calls.append(1)
        if len(calls) == 2:
            raise SimulationError("the gradient blew up: the adjoint of world 0 is not finite at substep 7")
        return float(np.sum(model.vector() ** 2)), 2.0 * model.vector(), None

    monkeypatch.setitem(vf.LOSS_FUNCTIONS, "rollout", flaky)
    fit = vf.fit_videos("linear", [straight_video()], loss="rollout", max_evaluations=4)
    assert fit.evaluations == 4 and fit.losses[1] == math.inf and all(math.isfinite(x) for x in fit.losses[2:])
    assert fit.failures == [(2, "the gradient blew up: the adjoint of world 0 is not finite at substep 7")]


@needs_data
def test_fit_command_runs_at_the_budget_it_is_given(tmp_path, capsys):
    """``softsnake fit --budget NxL``: the fit and its error rows run at N x L, not the default 200 x 200. One
    evaluation of the linear model on video 3 at 2 x 4 iterations: the file records the budget and the contact
    regularisation, its rollout loss is the one ``evaluate`` gives at 2 x 4 (to 1e-3 mm^2, the CSV's rounding), which
    differs from the default's, and the command says that the short budget left the rollout unconverged (its CSV
    row counts the substeps)."""
    import json

    from softsnake.cli import main

    assert main(["fit", "linear", "--train", "3", "--test", "", "--evaluations", "1", "--budget", "2x4",
                 "--out", str(tmp_path)]) == 0
    document = json.loads((tmp_path / "fit_linear_rollout.json").read_text())
    assert document["settings"]["budget"] == {"newton_iterations": 2, "linear_iterations": 4}
    assert document["settings"]["contact_regularization"] == vf.CONTACT_REGULARIZATION
    row = document["errors"][0]
    assert row["unconverged_substeps"] > vf.UNCONVERGED_LIMIT * row["substeps"] > 0
    assert "the budget's answer there, not a converged one (try a larger --budget)" in capsys.readouterr().out
    video, model = vv.load_video(3), vf.model_from_dict(document["model"])
    short = {**vf.SOLVER_OPTIONS, "newton_iterations": 2, "linear_iterations": 4}
    at_budget = 1e6 * vf.evaluate(model, [video], solver_options=short)[0][0]["rollout_loss_m2"]
    at_default = 1e6 * vf.evaluate(model, [video])[0][0]["rollout_loss_m2"]
    assert document["errors"][0]["rollout_loss_mm2"] == pytest.approx(at_budget, abs=1e-3)
    assert abs(at_budget - at_default) > 1.0
