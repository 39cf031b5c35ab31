"""A vine rollout against a reference rollout of the same scene (seed 000's simulator): the tip
error in tube diameters and, per obstacle, whether the two vines pass it on the same side.

Side of an obstacle: the signed angle the backbone (base, body centres, tip) sweeps around the
obstacle's centre; two shapes pass an obstacle on the same side when their angles differ by less
than pi.
"""

import numpy as np

from .reference import rollout_tip


def swept_angles(points, centres):
    """Signed angle [rad] the polyline ``points`` (..., n, 2) sweeps around each centre (k, 2): (..., k)."""
    offsets = points[..., None, :, :] - centres[:, None, :]
    angles = np.unwrap(np.arctan2(offsets[..., 1], offsets[..., 0]), axis=-1)
    return angles[..., -1] - angles[..., 0]


def centre_backbone(poses, half_length):
    """Polyline through the base, the body centres and the tip [m], (..., B + 2, 2).

    poses: (..., B, 3) body centres and angles [m, rad]; half_length: body half-length [m]
    """
    first, last = poses[..., 0, :], poses[..., -1, :]
    base = first[..., :2] - half_length * np.stack([np.cos(first[..., 2]), np.sin(first[..., 2])], axis=-1)
    tip = last[..., :2] + half_length * np.stack([np.cos(last[..., 2]), np.sin(last[..., 2])], axis=-1)
    return np.concatenate([base[..., None, :], poses[..., :2], tip[..., None, :]], axis=-2)


def compare_with_reference(scene, poses, tips, reference):
    """One vine's rollout of ``scene`` against the reference rollout ``reference`` (F, B, 3) [m, rad].

    poses: (F, B, 3) the vine's body poses; tips: (F, 2) its tips [m]
    Returns (tip error (F,) [tube diameters], same side (F, obstacles) [bool]).
    """
    error = np.linalg.norm(tips - rollout_tip(reference), axis=1) / (2.0 * scene.vine.tube_radius)
    centres = np.array([obstacle.center for obstacle in scene.obstacles])
    half_length = scene.vine.body_half_length
    ours = swept_angles(centre_backbone(poses, half_length), centres)
    theirs = swept_angles(centre_backbone(reference, half_length), centres)
    return error, np.abs(ours - theirs) < np.pi
