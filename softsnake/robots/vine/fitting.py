"""Fitting a vine's parameters to tip positions at video frames, with gradients through the engine.

The loss of the wall scene (seed 000 Fig. 7, ``reference.load_wall_fit``) is the mean squared error
of the tip's x at the video frames, from the first state and velocities of the original fit's
initial guess; ``vine_gradients`` gives its gradient with respect to every VineParams field named.
``fit_wall`` minimises it by L-BFGS-B (SciPy) in the logarithms of the parameters, within bounds.
"""

import dataclasses
import math
import time

import numpy as np
from scipy.optimize import minimize

from .gradients import vine_gradients
from .simulation import VineBatch, VineSpec, tips_of

SOLVER_OPTIONS = {"newton_iterations": 30, "linear_iterations": 60, "momentum_balance": False, "newton_tolerance": 1e-5,
                  "newton_floor": 0.0}
"""The fit's solver budget (the engine's tolerances stop it earlier): the gradient is that of the
converged step, and at seed 001's 4 x 20 (the vines' budget until the sixteenth session) the wall rollout
is not converged; its derivatives then differ from those of the rollout by up to 3x (stiffness, inertia).
The plain iteration (the engine's "auto" would balance momentum at 30 Newton iterations): balanced, 30 x 60 does not converge
a vine pressed on a wall (a one-step loss gradient on real clips 3.9 % from central differences, against
1.0 % plain), and the fits' results were measured so (experiments/results/convergence.md, "Momentum
balance"), at the engine's Newton tolerance (1e-5), without the vines' stop at twice the round-off floor
(``newton_floor``, since the seventeenth session): a rollout stopped there moves with the parameters in steps
of a few times float32's resolution, which central differences see (a wall-contact rollout's gradient 13 %
from them, 0.4-2.9 % with every iteration run)."""

LOG_BOUNDS = {"stiffness": (1e-7, 100.0), "damping": (1e-8, 1e-1), "body_inertia": (1e-8, 1e-2),
              "body_mass": (1e-5, 1e-1)}
"""Bounds of each fitted parameter [SI]; the fit works in their logarithms."""


def wall_tip_error_and_gradient(scene, reference, vine, names):
    """(mean squared tip-x error over the video frames [m^2], {name: its gradient}, tip x at the frames
    (F,) [m]) of ``vine`` (VineParams) in the wall scene."""
    poses, velocities = reference.initial_state()
    batch = VineBatch([VineSpec(vine, scene.obstacles, initial_poses=poses, initial_velocities=velocities)],
                      solver_options=SOLVER_OPTIONS)
    dt = scene.sim.dt
    frames = reference.frame_steps(dt)
    video_x = reference.video_points[:, -1, 0]
    d = float(batch.half_length[0])
    tips = np.full(len(frames), np.nan)
    tips[frames == 0] = tips_of(batch.poses(), batch.half_length)[0, 0]

    def adjoint_at(k, step_poses):
        where = np.flatnonzero(frames == k + 1)
        if not len(where):
            return None
        last = step_poses[0, -1]
        tips[where] = tips_of(step_poses, batch.half_length)[0, 0]
        # d(tip x) = d(x_last) - d sin(angle_last) d(angle_last)
        weight = 2.0 * (tips[where[0]] - video_x[where[0]]) / len(frames) * len(where)
        adjoint = np.zeros((1, batch.body_count, 3))
        adjoint[0, -1, 0] = weight
        adjoint[0, -1, 2] = -weight * d * math.sin(last[2])
        return adjoint

    gradients = vine_gradients(batch, int(frames[-1]), dt, lambda p: np.zeros((1, batch.body_count, 2)),
                               pose_adjoint_at=adjoint_at)[0]
    return float(np.mean((tips - video_x) ** 2)), {name: gradients[name] for name in names}, tips


def fit_wall(scene, reference, names=("stiffness", "damping"), start=None, max_evaluations=60):
    """Fit the named VineParams fields (``LOG_BOUNDS``) to the wall video by L-BFGS-B with gradients.

    start: the VineParams to start from (default the scene's). Returns a dict: "vine" (the fitted
    VineParams), "values" {name: value}, "mae_mm" and "rmse_mm" of the tip x, "tips" (F,) [m],
    "evaluations" (rollouts with their gradient), "seconds" (wall time).
    """
    vine = start or scene.vine
    clock = time.perf_counter()
    evaluations = []

    def vine_of(x):
        return dataclasses.replace(vine, **{n: float(math.exp(v)) for n, v in zip(names, x)})

    def fun(x):
        loss, gradient, _ = wall_tip_error_and_gradient(scene, reference, vine_of(x), names)
        evaluations.append(loss)
        values = np.exp(x)
        # In mm^2 and per log parameter: d/d(log p) = p d/dp.
        return 1e6 * loss, 1e6 * np.array([gradient[n] for n in names]) * values

    x0 = np.log([getattr(vine, n) for n in names])
    result = minimize(fun, x0, jac=True, method="L-BFGS-B", bounds=[tuple(np.log(LOG_BOUNDS[n])) for n in names],
                      options={"maxfun": max_evaluations})
    fitted = vine_of(result.x)
    _, _, tips = wall_tip_error_and_gradient(scene, reference, fitted, names)
    video_x = reference.video_points[:, -1, 0]
    return {"vine": fitted, "values": {n: getattr(fitted, n) for n in names},
            "mae_mm": 1e3 * float(np.mean(np.abs(tips - video_x))), "rmse_mm": 1e3 * float(np.sqrt(np.mean((tips - video_x) ** 2))),
            "tips": tips, "evaluations": len(evaluations), "seconds": time.perf_counter() - clock}
