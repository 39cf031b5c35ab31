"""The USD scene of a batch of vines: the obstacles, and one tube mesh per vine through its pins
with one time sample per written frame.

It draws into a ``softsnake.usd_writer.UsdRecorder`` that the caller opens, so this module does not
need usd-core itself.
"""

import math

import numpy as np

from .scene import ObstacleCircle, ObstacleRectangle
from .simulation import pin_points

TUBE_SIDES = 12
"""Vertices around each ring of the USD tube mesh [-]."""

OBSTACLE_DRAW_HEIGHT_TUBES = 4.0
"""Height of the drawn obstacles in tube diameters [-] (they are infinitely tall in the model)."""

TUBE_COLOR = (0.9, 0.8, 0.2)


def tube_faces(ring_count, sides=TUBE_SIDES):
    """Triangles (k, 3) of a tube of ``ring_count`` rings with ``sides`` vertices each."""
    faces = []
    for ring in range(ring_count - 1):
        for k in range(sides):
            a, b = ring * sides + k, ring * sides + (k + 1) % sides
            c, d = a + sides, b + sides
            faces += [(a, b, d), (a, d, c)]
    return np.asarray(faces, dtype=np.int64)


def tube_points(backbone, radius, sides=TUBE_SIDES):
    """Vertices (rings * sides, 3) of a tube of ``radius`` [m] around a planar backbone (n, 2) [m] at z = 0."""
    tangent = np.gradient(backbone, axis=0)
    tangent /= np.maximum(np.linalg.norm(tangent, axis=1, keepdims=True), 1e-12)
    normal = np.stack([-tangent[:, 1], tangent[:, 0]], axis=1)
    phase = 2.0 * np.pi * np.arange(sides) / sides
    offset_in_plane = radius * np.cos(phase)[None, :, None] * normal[:, None, :]
    points = np.zeros((len(backbone), sides, 3))
    points[..., :2] = backbone[:, None, :] + offset_in_plane
    points[..., 2] = radius * np.sin(phase)[None, :]
    return points.reshape(-1, 3)


WALL_DRAW_THICKNESS = 0.002
"""Thickness of a drawn wall [m] (a wall is a segment in the model)."""


def box_footprint(obstacle):
    """(centre (x, y) [m], size (along, across) [m], angle [rad]) of a rectangle or a wall obstacle
    drawn as a box: a wall becomes a box WALL_DRAW_THICKNESS thick along its segment."""
    if isinstance(obstacle, ObstacleRectangle):
        return obstacle.center, obstacle.size, obstacle.angle
    start, end = np.asarray(obstacle.start), np.asarray(obstacle.end)
    return 0.5 * (start + end), (float(np.linalg.norm(end - start)), WALL_DRAW_THICKNESS), math.atan2(*(end - start)[::-1])


def add_usd_obstacles(recorder, obstacles, height):
    """Add the scene's obstacles to a USD recorder as static shapes ``height`` tall [m]."""
    group = recorder.add_group("obstacles")
    for index, obstacle in enumerate(obstacles):
        name = f"obstacle_{index:02d}"
        if isinstance(obstacle, ObstacleCircle):
            recorder.add_static_cylinder(name, (*obstacle.center, 0.0), obstacle.radius, height, color=(0.8, 0.3, 0.2),
                                         parent=group)
            continue
        center, size, angle = box_footprint(obstacle)
        rotation = (0.0, 0.0, math.sin(0.5 * angle), math.cos(0.5 * angle))
        recorder.add_static_box(name, (*center, 0.0), (0.5 * size[0], 0.5 * size[1], 0.5 * height), rotation,
                                color=(0.8, 0.3, 0.2), parent=group)


class VineUsdScene:
    """The obstacles and the tubes of a batch of vines in an open USD recorder.

    recorder: the ``UsdRecorder`` to draw into
    obstacles: the scene's obstacles
    poses: (V, B, 3) body centres and angles of every vine at the start [m, rad]
    half_length: (V,) body half-length of every vine [m]
    radius: tube radius [m]
    """

    def __init__(self, recorder, obstacles, poses, half_length, radius):
        self.recorder = recorder
        self.half_length = half_length
        self.radius = radius
        add_usd_obstacles(recorder, obstacles, OBSTACLE_DRAW_HEIGHT_TUBES * 2.0 * radius)
        faces = tube_faces(poses.shape[-2] // 2 + 1)
        self.meshes = []
        for vine, vine_poses in enumerate(poses):
            group = recorder.add_group(f"vine_{vine:03d}")
            self.meshes.append(recorder.add_mesh("tube", faces, self._tube(vine, vine_poses), color=TUBE_COLOR,
                                                 parent=group))

    def _tube(self, vine, vine_poses):
        return tube_points(pin_points(vine_poses, self.half_length[vine]), self.radius)

    def write(self, frame, poses):
        """Write the tubes of the vines at ``poses`` (V, B, 3) as time sample ``frame``."""
        self.recorder.write_frame(frame=frame, mesh_points={
            mesh: self._tube(vine, poses[vine]) for vine, mesh in enumerate(self.meshes)})
