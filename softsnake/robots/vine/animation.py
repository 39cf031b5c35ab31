"""The animation of a vine batch (``softsnake vine``'s GIF): the vines' tubes growing among the
scene's obstacles, seen from above and in perspective. Each vine has the colour of its launch
heading in the paths plot (viridis, the colour bar of ``<scene>_paths.png``)."""

import math

import numpy as np

from softsnake.animation import Part, box_mesh, cylinder_mesh, frame_stride, posed, write_gif

from .plots import heading_colors
from .scene import ObstacleCircle
from .simulation import pin_points
from .usd_scene import OBSTACLE_DRAW_HEIGHT_TUBES, box_footprint, tube_faces, tube_points

OBSTACLE_COLOR = (0.8, 0.3, 0.2)
TUBE_SIDES = 8
"""Vertices around each ring of an animated tube [-]."""


def obstacle_parts(obstacles, height):
    """The scene's obstacles as ``Part`` meshes ``height`` tall [m], standing on z = 0."""
    parts = []
    for obstacle in obstacles:
        if isinstance(obstacle, ObstacleCircle):
            mesh = cylinder_mesh(obstacle.radius, 0.5 * height, sides=16)
            center, angle = obstacle.center, 0.0
        else:
            center, size, angle = box_footprint(obstacle)
            mesh = box_mesh((0.5 * size[0], 0.5 * size[1], 0.5 * height))
        rotation = (0.0, 0.0, math.sin(0.5 * angle), math.cos(0.5 * angle))
        parts.append(posed(mesh, (center[0], center[1], 0.5 * height), rotation, OBSTACLE_COLOR))
    return parts


def write_vine_gif(path, scene, times, poses, half_length, headings, *, title=""):
    """Write the animation of a vine batch (complete or absent); returns the path.

    times: (F,) [s]; poses: (F, V, B, 3) body centres and angles [m, rad]; half_length: (V,) [m];
    headings: (V,) launch headings [rad], for the colours. Pictures are taken at the animation's
    rate (``softsnake.animation.frame_stride``).
    """
    times = np.asarray(times)
    dt = float(times[1] - times[0]) if len(times) > 1 else 1.0
    stride = frame_stride(len(times) - 1, dt)
    radius = scene.vine.tube_radius
    colors = heading_colors(headings)
    faces = tube_faces(poses.shape[-2] // 2 + 1, TUBE_SIDES)
    # Tubes lie on the ground plane, not through it: lift them by their radius.
    lift = np.array([0.0, 0.0, radius])
    frames = []
    picked = list(range(0, len(times), stride))
    if picked[-1] != len(times) - 1:
        picked.append(len(times) - 1)
    for k in picked:
        frames.append([Part(tube_points(pin_points(poses[k, v], half_length[v]), radius, TUBE_SIDES) + lift, faces,
                            colors[v]) for v in range(poses.shape[1])])
    static = obstacle_parts(scene.obstacles, OBSTACLE_DRAW_HEIGHT_TUBES * 2.0 * radius)
    return write_gif(path, frames, times[picked], title=title, static=static, fps=1.0 / (stride * dt))
