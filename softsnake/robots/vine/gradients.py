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
- moment_curve (and moment_curve_angles): dL/d(the samples' moments) [1/(N m)] (and angles [1/rad])
  of each vine's springs, for stiffness models given as a sampled curve; their parameters follow by
  the chain rule through the curve: ``mlp_weight_gradient`` (an MLP's weights,
  ``stiffness.MlpMoment.weight_jacobian``), ``wrinkling_pressure_gradient`` (the wrinkling model's
  pressure, whose curve moves its samples' moments, its onset sample's angle and the springs' K).
  Central differences of rollouts check both (tests/robots/vine/test_vine_gradients.py) where the
  rollout is a smooth function of the parameter; a vine whose pins bend far into the wrinkled
  curve's flat part at low pressure is not: its loss jumps between pressures 0.5 % apart (measured
  at 300 and 2000 Pa on the test vine), and no derivative exists to check.
"""

import numpy as np

from softsnake.errors import ConfigError
from softsnake.gradients import record_rollout, rollout_gradient

from .robot import wrinkling_moment_curve
from .simulation import poses_of

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


def pose_adjoint_to_body_q(pose_adjoint, body_q):
    """dL/d(body_q) (n, 7) from dL/d(poses) (n, 3) (x, y, angle) at body poses (n, 7) of the plane:
    angle = 2 atan2(q_z, q_w)."""
    a = np.asarray(pose_adjoint, dtype=np.float64).reshape(-1, 3)
    qz, qw = body_q[:, 5], body_q[:, 6]
    norm = qz * qz + qw * qw
    out = np.zeros((len(a), 7))
    out[:, :2] = a[:, :2]
    out[:, 5] = a[:, 2] * 2.0 * qw / norm
    out[:, 6] = -a[:, 2] * 2.0 * qz / norm
    return out


def vine_gradients(batch, steps, dt, pose_adjoint, *, pose_adjoint_at=None, growth_rates=None):
    """Step ``batch`` (a VineBatch) ``steps`` times by ``dt`` [s] and return the gradient of a loss of its
    poses with respect to each vine's parameters.

    pose_adjoint(poses): dL/d(final poses) (V, B, 3) [1/m, 1/rad], or (V, B, 2) for the body centres
        only, given the final poses (V, B, 3) (``VineBatch.poses``: body centre x, y and angle)
    pose_adjoint_at(k, poses): optional, the same for the poses after step k (k = 0 .. steps - 1; a
        loss over a whole trajectory), or None where the loss does not look
    growth_rates: optional (steps, V) total growth rate of every vine during each step [m/s] (a video's
        length schedule); default: the batch's rates throughout. "growth_rate" is then the derivative
        with respect to a rate added to every step's.
    Returns a list (one dict per vine) of {parameter: dL/d(parameter)} for ``PARAMETERS``, and
    "moment_curve" (dL/d(moments of the vine's curve samples), per pin) where the vine's springs
    follow a sampled curve. "heading" is only given for vines that started straight (a vine started
    from given poses does not turn with its heading).
    """
    model, solver = batch.model, batch.solver
    if batch.growth != "uniform":
        raise ConfigError("vine gradients follow uniform growth (tip growth sets the drives on the host every step)")
    if np.any(batch.muscles.pressure != 0.0):
        raise ConfigError("vine gradients need the steering at rest (no muscle pressure)")
    V, B = batch.vine_count, batch.body_count
    start_q = batch.state.body_q.numpy().astype(np.float64)
    rest = model.spring_rest_rotation.numpy().astype(np.float64)
    offsets = model.scene_body_q(batch.state)[:, :3] - start_q[:, :3]

    def body_q_adjoint(adjoint, body_q):
        a = np.asarray(adjoint, dtype=np.float64).reshape(V, B, -1)
        if a.shape[-1] == 2:
            a = np.concatenate([a, np.zeros((V, B, 1))], axis=-1)
        return pose_adjoint_to_body_q(a.reshape(-1, 3), body_q)

    def scene_poses(body_q):
        scene = body_q.astype(np.float64).copy()
        scene[:, :3] += offsets
        return poses_of(scene.reshape(V, B, 7))

    schedule = None
    if growth_rates is not None:
        schedule = np.asarray(growth_rates, dtype=float)
        if schedule.shape != (steps, V):
            raise ConfigError(f"growth_rates must have shape (steps, vines) = ({steps}, {V}), got {schedule.shape}")

    def before_step(k, control):
        batch.set_growth_rate(schedule[k])
        batch.extension += dt * batch._rates(dt)

    records = record_rollout(solver, batch.state, batch.control, dt, steps,
                             before_step=before_step if schedule is not None else None)
    batch.time += steps * dt
    if schedule is None:
        batch.extension += steps * dt * batch._rates(dt)
    step_ends = {record.step: record for record in records}  # each step's last substep
    end_q = batch.state.body_q.numpy().astype(np.float64)
    adjoint_end = {"body_q": body_q_adjoint(pose_adjoint(batch.poses()), end_q)}

    def after_step(k):
        if pose_adjoint_at is None:
            return None
        body_q = step_ends[k].end["body_q"].astype(np.float64)
        adjoint = pose_adjoint_at(k, scene_poses(body_q))
        return None if adjoint is None else {"body_q": body_q_adjoint(adjoint, body_q)}

    parameters = {"stiffness": model.spring_stiffness, "damping": model.spring_damping,
                  "rest_rotation": model.spring_rest_rotation, "rate": "prismatic_rate",
                  "inv_mass": model.body_inv_mass, "inertia": model.body_inertia,
                  "inv_inertia": model.body_inv_inertia, "moments": model.spring_curve_moment,
                  "angles": model.spring_curve_angle}
    start, grads = rollout_gradient(solver, records, adjoint_end, parameters,
                                    adjoint_after_step=after_step if pose_adjoint_at is not None else None)
    inv_mass = model.body_inv_mass.numpy().astype(np.float64)
    inertia = model.body_inertia.numpy().astype(np.float64)
    counts = model.spring_curve_count.numpy()
    curve_start = model.spring_curve_start.numpy()
    result = []
    for w in range(V):
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
        }
        if batch.specs[w].initial_poses is None:
            out["heading"] = float((start["body_q"][bodies] * _turn_about_z(start_q[bodies])).sum()
                                   + grads["rest_rotation"][base] @ _turn_quaternions(rest[base:base + 1])[0])
        if np.any(counts[springs] > 0):
            for key, name in (("moment_curve", "moments"), ("moment_curve_angles", "angles")):
                out[key] = np.stack([grads[name][curve_start[k]:curve_start[k] + counts[k]]
                                     for k in range(springs.start, springs.stop)])
        result.append(out)
    return result


def mlp_weight_gradient(gradients, mlp, angles):
    """dL/d(MLP weights) (3 H,) in the order of ``MlpMoment.as_vector``, from a ``vine_gradients`` entry of
    a vine whose pins follow ``mlp`` sampled at ``angles`` (``robot.mlp_moment_curve``: the angles do
    not depend on the weights). The springs' stiffness K is the curve's steepest segment slope
    (``add_angular_spring``), the floor of their tangent stiffness, so its gradient adds through
    that segment."""
    jacobian = mlp.weight_jacobian(angles)
    moments = mlp(angles)
    slopes = np.diff(moments) / np.diff(angles)
    j = int(np.argmax(slopes))
    steepest = (jacobian[j + 1] - jacobian[j]) / (angles[j + 1] - angles[j])
    return gradients["moment_curve"].sum(axis=0) @ jacobian + gradients["stiffness"] * steepest


def curve_parameter_gradient(gradients, curve_of, value, *, relative_step=1e-4):
    """dL/d(a scalar parameter of a sampled moment curve), from a ``vine_gradients`` entry of a vine whose
    pins follow ``curve_of(value)`` (angles, moments): the chain rule through the samples' moments and
    angles and the springs' K (the curve's steepest segment slope, ``add_angular_spring``), with the
    curve's derivative taken by central differences of the closed-form curve (not of a rollout) at a
    step of ``relative_step`` of the value. ConfigError if the step changes the number of samples."""
    step = relative_step * abs(value)
    up, down = curve_of(value + step), curve_of(value - step)
    if len(up[0]) != len(down[0]) or len(up[0]) != gradients["moment_curve"].shape[1]:
        raise ConfigError("the moment curve's samples change in number around this value: no derivative")

    def steepest(curve):
        return float(np.max(np.diff(curve[1]) / np.diff(curve[0])))

    d_moments = (np.asarray(up[1]) - np.asarray(down[1])) / (2.0 * step)
    d_angles = (np.asarray(up[0]) - np.asarray(down[0])) / (2.0 * step)
    d_stiffness = (steepest(up) - steepest(down)) / (2.0 * step)
    return float(gradients["moment_curve"].sum(axis=0) @ d_moments
                 + gradients["moment_curve_angles"].sum(axis=0) @ d_angles + gradients["stiffness"] * d_stiffness)


def wrinkling_pressure_gradient(gradients, vine):
    """dL/d(pressure) [1/Pa] of a vine (VineParams, stiffness_model "wrinkling") from its
    ``vine_gradients`` entry (``curve_parameter_gradient`` through ``robot.wrinkling_moment_curve``)."""
    return curve_parameter_gradient(gradients, lambda p: wrinkling_moment_curve(p, vine.tube_radius), vine.pressure)
