"""Gradients of a vine rollout's loss with respect to the vine's parameters, through the engine.

``vine_gradients`` records a rollout of a VineBatch (uniform growth at the vines' rates, no
steering: the setting of the video and reference rollouts) and runs the engine's adjoint
(``softsnake.gradients.rollout_gradient``) backwards from the loss's gradient with respect to the
final poses. The engine's gradients with respect to its arrays are then mapped to the parameters of
each vine (``VineParams``), by the chain rule through how ``robot.add_vine`` builds them:

- stiffness K [N m/rad], damping C [N m s/rad]: every pin's spring carries the vine's K and C
  (linear stiffness model), so dL/dK is the sum over the vine's springs;
- growth_rate [m/s]: each link's drive runs at growth_rate / link_count;
- body_mass [kg] and body_inertia [kg m^2]: every body's mass and (isotropic) inertia; the engine
  holds 1/m, the inertia matrix and its inverse;
- heading [rad]: the straight vine and its base spring's rest orientation turn with it about the
  base (z): d(position)/d(heading) = z x position, d(q)/d(heading) = (z/2, 0) q;
- moment_curve: dL/d(the samples' moments) [1/(N m)] of each vine's springs, for stiffness models
  given as a sampled curve (the wrinkling model, an MLP): their parameters follow by the chain rule
  through the curve (``stiffness``).
"""

import numpy as np

from softsnake.errors import ConfigError
from softsnake.gradients import record_rollout, rollout_gradient

PARAMETERS = ("stiffness", "damping", "growth_rate", "body_mass", "body_inertia", "heading")
"""The VineParams whose gradients ``vine_gradients`` returns (and "moment_curve" for sampled curves)."""


def _turn_about_z(q):
    """d/d(heading) of body poses (n, 7) turned about the world z axis through the origin."""
    d = np.zeros_like(q)
    d[:, 0], d[:, 1] = -q[:, 1], q[:, 0]
    x, y, z, w = q[:, 3], q[:, 4], q[:, 5], q[:, 6]
    # (0, 0, 1/2, 0) * (x, y, z, w): the quaternion product with the half z axis on the left.
    d[:, 3], d[:, 4], d[:, 5], d[:, 6] = -0.5 * y, 0.5 * x, 0.5 * w, -0.5 * z
    return d


def _turn_quaternions(q):
    """d/d(heading) of quaternions (n, 4) turned about z."""
    poses = np.zeros((len(q), 7))
    poses[:, 3:] = q
    return _turn_about_z(poses)[:, 3:]


def vine_gradients(batch, steps, dt, pose_adjoint):
    """Step ``batch`` (a VineBatch at its start) ``steps`` times by ``dt`` [s] and return the gradient of
    a loss of its final poses with respect to each vine's parameters.

    pose_adjoint(poses): dL/d(final body centres), (V, B, 2) [1/m], given the final poses (V, B, 3)
    (``VineBatch.poses``: body centre x, y and angle).
    Returns a list (one dict per vine) of {parameter: dL/d(parameter)} for ``PARAMETERS``, and
    "moment_curve" (dL/d(moments of the vine's curve samples), per pin) where the vine's springs
    follow a sampled curve.
    """
    model, solver = batch.model, batch.solver
    if batch.growth != "uniform":
        raise ConfigError("vine gradients follow uniform growth (tip growth sets the drives on the host every step)")
    if np.any(batch.muscles.pressure != 0.0):
        raise ConfigError("vine gradients need the steering at rest (no muscle pressure)")
    heading_q = batch.state.body_q.numpy().astype(np.float64)
    rest = model.spring_rest_rotation.numpy().astype(np.float64)
    records = record_rollout(solver, batch.state, batch.control, dt, steps)
    batch.time += steps * dt
    batch.extension += steps * dt * batch._rates(dt)
    poses = batch.poses()
    xy = np.asarray(pose_adjoint(poses), dtype=np.float64).reshape(batch.vine_count, batch.body_count, 2)
    adjoint_end = {"body_q": np.zeros((model.body_count, 7))}
    adjoint_end["body_q"][:, :2] = xy.reshape(-1, 2)
    parameters = {"stiffness": model.spring_stiffness, "damping": model.spring_damping,
                  "rest_rotation": model.spring_rest_rotation, "rate": "prismatic_rate",
                  "inv_mass": model.body_inv_mass, "inertia": model.body_inertia,
                  "inv_inertia": model.body_inv_inertia, "moments": model.spring_curve_moment}
    start, grads = rollout_gradient(solver, records, dt, adjoint_end, parameters)
    inv_mass = model.body_inv_mass.numpy().astype(np.float64)
    inertia = model.body_inertia.numpy().astype(np.float64)
    counts = model.spring_curve_count.numpy()
    curve_start = model.spring_curve_start.numpy()
    result = []
    for w in range(batch.vine_count):
        springs, bodies = model.world_slice("spring", w), model.world_slice("body", w)
        links = model.world_slice("prismatic", w)
        base = springs.start + batch.handles[w].springs[0]
        I = inertia[bodies, 2, 2]
        out = {
            "stiffness": float(grads["stiffness"][springs].sum()),
            "damping": float(grads["damping"][springs].sum()),
            "growth_rate": float(grads["rate"][links].sum()) / (links.stop - links.start),
            "body_mass": float(-(grads["inv_mass"][bodies] * inv_mass[bodies] ** 2).sum()),
            "body_inertia": float((np.trace(grads["inertia"][bodies], axis1=1, axis2=2)
                                   - np.trace(grads["inv_inertia"][bodies], axis1=1, axis2=2) / I ** 2).sum()),
            "heading": float((start["body_q"][bodies] * _turn_about_z(heading_q[bodies])).sum()
                             + grads["rest_rotation"][base] @ _turn_quaternions(rest[base:base + 1])[0]),
        }
        if np.any(counts[springs] > 0):
            out["moment_curve"] = np.stack([grads["moments"][curve_start[k]:curve_start[k] + counts[k]]
                                            for k in range(springs.start, springs.stop)])
        result.append(out)
    return result
