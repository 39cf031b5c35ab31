"""Backbones as polylines (arc length, resampling) and the errors and losses of simulated backbones
against observed ones: a vine's video (seed 003, ``softsnake.robots.vine.video``) or any other.

Errors (:func:`video_errors`), per frame, in metres and in tube diameters:

* tip error: distance between the simulated backbone's end and the skeleton's last point;
* shape error: both backbones (the simulated one through base, pins and tip; the video's from
  the base through the skeleton) are resampled to ``SHAPE_SAMPLES`` points evenly spaced in
  arc length, from the base (fraction 0) to the tip (fraction 1) of each; the error is the mean
  distance between corresponding points. It counts a length difference as well as a bend.

Losses (plain NumPy of simulated and video backbones, for the fitting to come): the mean squared
distance between corresponding resampled points, averaged over frames, in m^2.

* :func:`one_step_loss` is seed 003's (sec. IV-C): ``sum_i || q_hat_{i+1} - f(q_i, v_i) ||^2``
  where each prediction ``f(q_i, v_i)`` starts from the video's state of frame i (positions only
  are compared). Here it is divided by the number of frames and points (the same minimiser).
  ``video.one_step_predictions`` computes the predictions with the engine.
* :func:`rollout_loss`: the same distance over one rollout from the first frame, what a user who
  predicts the robot needs.
"""

from dataclasses import dataclass

import numpy as np

from softsnake.errors import ConfigError
from softsnake.validation import positive_integer

SHAPE_SAMPLES = 50
"""Points of the arc-length resampling of the shape error and the losses [-]."""


def polyline_length(points):
    """Length of the polyline through ``points`` (n, 2) [m or px]."""
    points = np.asarray(points, dtype=float)
    return float(np.linalg.norm(np.diff(points, axis=0), axis=1).sum())


def resample_polyline(points, count):
    """``count`` points evenly spaced in arc length along the polyline ``points`` (n, 2), from its first
    point to its last, both included: (count, 2). A polyline of zero length gives its first point."""
    points = np.asarray(points, dtype=float)
    count = positive_integer("resampling count", count)
    if points.ndim != 2 or points.shape[1] != 2 or len(points) == 0:
        raise ConfigError(f"a polyline needs an array of shape (n >= 1, 2), got shape {points.shape}")
    arc = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(points, axis=0), axis=1))])
    if arc[-1] <= 0.0:
        return np.repeat(points[:1], count, axis=0)
    targets = np.linspace(0.0, arc[-1], count)
    return np.stack([np.interp(targets, arc, points[:, 0]), np.interp(targets, arc, points[:, 1])], axis=1)


def tip_error(simulated, observed):
    """Distance between the ends of two backbones (n, 2) and (m, 2) [m]."""
    return float(np.linalg.norm(np.asarray(simulated, dtype=float)[-1] - np.asarray(observed, dtype=float)[-1]))


def shape_error(simulated, observed, *, samples=SHAPE_SAMPLES):
    """Mean distance between two backbones resampled evenly in arc length, base to tip [m] (module
    docstring)."""
    offsets = resample_polyline(simulated, samples) - resample_polyline(observed, samples)
    return float(np.linalg.norm(offsets, axis=1).mean())


@dataclass(frozen=True, eq=False)
class VideoErrors:
    """Per-frame errors of a rollout against its video.

    times: (T,) [s]; tip, shape: (T,) tip and shape errors [m]; tube_diameter: [m]
    """

    times: np.ndarray
    tip: np.ndarray
    shape: np.ndarray
    tube_diameter: float

    def summary(self):
        """Mean and max over the frames of the tip and shape errors, in m and in tube diameters (dict)."""
        table = {}
        for name, values in (("tip", self.tip), ("shape", self.shape)):
            for statistic, value in (("mean", values.mean()), ("max", values.max())):
                table[f"{name}_{statistic}_m"] = float(value)
                table[f"{name}_{statistic}_diameters"] = float(value / self.tube_diameter)
        return table


def video_errors(backbones, video, *, samples=SHAPE_SAMPLES):
    """Tip and shape errors of simulated ``backbones`` (one per frame of ``video``, each (n, 2)) [m]."""
    if len(backbones) != video.frame_count:
        raise ConfigError(f"video {video.number} has {video.frame_count} frames, got {len(backbones)} backbones")
    observed = video.backbones()
    tip = np.array([tip_error(s, o) for s, o in zip(backbones, observed)])
    shape = np.array([shape_error(s, o, samples=samples) for s, o in zip(backbones, observed)])
    return VideoErrors(times=video.times, tip=tip, shape=shape, tube_diameter=2.0 * video.tube_radius)


def _mean_squared_distance(simulated, observed, samples):
    """Mean over pairs of backbones of the mean squared distance of their resampled points [m^2]."""
    if len(simulated) != len(observed) or len(simulated) == 0:
        raise ConfigError(f"a loss needs as many simulated as video backbones (and one at least), got "
                          f"{len(simulated)} and {len(observed)}")
    return float(np.mean([np.mean(np.sum((resample_polyline(s, samples) - resample_polyline(o, samples)) ** 2, axis=1))
                          for s, o in zip(simulated, observed)]))


def one_step_loss(predicted, observed, *, samples=SHAPE_SAMPLES):
    """Seed 003's one-step loss [m^2]: ``predicted[i]`` is the backbone simulated over one frame interval
    from the video's state at a frame, ``observed[i]`` the video's backbone at the next frame; the mean
    over i of the mean squared distance of their arc-length-resampled points."""
    return _mean_squared_distance(predicted, observed, samples)


def rollout_loss(simulated, observed, *, samples=SHAPE_SAMPLES):
    """Full-rollout loss [m^2]: ``simulated[t]`` the backbone of one rollout at frame t (started from the
    video's first frame), ``observed[t]`` the video's; the mean over frames of the mean squared distance
    of their arc-length-resampled points."""
    return _mean_squared_distance(simulated, observed, samples)


def resampled_squared_distance(points, target, *, samples=SHAPE_SAMPLES):
    """Mean squared distance between the polyline ``points`` (n, 2) resampled to ``samples`` points evenly
    in arc length and ``target`` (samples, 2) (an observed backbone already resampled) [m^2], and its
    gradient with respect to ``points`` (n, 2) [1/m].

    The resampled point i lies at arc length s_i = f_i L (f_i = i / (samples - 1), L the length) on
    segment k: Q_i = P_k + t_i (P_{k+1} - P_k), t_i = (s_i - a_k) / l_k, with a_k the arc length before
    segment k and l_k its length. Then dQ_i = (1 - t_i) dP_k + t_i dP_{k+1} + e_k (f_i dL - da_k - t_i
    dl_k), e_k the segment's unit vector, and dl_m = e_m . (dP_{m+1} - dP_m): the points move along
    their segment as the lengths before them change. Exact where no resampled point sits on a joint of
    the polyline (the function is continuous there, its derivative one-sided). Zero-length segments
    hold no resampled point and contribute nothing.
    """
    points = np.asarray(points, dtype=float)
    target = np.asarray(target, dtype=float)
    chords = np.diff(points, axis=0)
    lengths = np.linalg.norm(chords, axis=1)
    arc = np.concatenate([[0.0], np.cumsum(lengths)])
    if arc[-1] <= 0.0:
        raise ConfigError("a backbone of zero length has no arc-length resampling to differentiate")
    fractions = np.linspace(0.0, 1.0, samples)
    s = fractions * arc[-1]
    k = np.clip(np.searchsorted(arc, s, side="right") - 1, 0, len(lengths) - 1)
    while np.any(lengths[k] <= 0.0):  # a point on a zero-length segment: take the next segment
        k = np.where(lengths[k] <= 0.0, np.minimum(k + 1, len(lengths) - 1), k)
    safe = np.where(lengths > 0.0, lengths, 1.0)
    units = chords / safe[:, None]
    t = np.clip((s - arc[k]) / safe[k], 0.0, 1.0)
    resampled = points[k] + t[:, None] * chords[k]
    offsets = resampled - target
    loss = float(np.mean(np.sum(offsets ** 2, axis=1)))
    g = 2.0 * offsets / samples  # dL/dQ_i
    grad = np.zeros_like(points)
    np.add.at(grad, k, (1.0 - t)[:, None] * g)
    np.add.at(grad, k + 1, t[:, None] * g)
    along = np.sum(g * units[k], axis=1)  # g_i . e_k
    segment = np.arange(len(lengths))
    weights = fractions[:, None] - (segment[None, :] < k[:, None]) - t[:, None] * (segment[None, :] == k[:, None])
    length_adjoint = along @ weights  # dL/dl_m
    grad[1:] += length_adjoint[:, None] * units
    grad[:-1] -= length_adjoint[:, None] * units
    return loss, grad
