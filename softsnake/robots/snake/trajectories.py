"""What a gait run records (``SnakeTrajectories``) and its CSV file: one row per frame and snake
with the time, the snake, its centre of mass and its links' curvatures."""

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from softsnake.output_files import replaced_when_complete

CSV_NAME = "trajectories.csv"
"""Name of the trajectory file ``softsnake gait`` writes into its output folder."""


@dataclass(frozen=True, eq=False)
class SnakeTrajectories:
    """What a gait run recorded, one sample per frame including t = 0.

    time: sample times (frame_count + 1,) [s]
    com: centre of mass of every snake (frame_count + 1, snake_count, 3) [m]
    curvature: curvature of every link (frame_count + 1, snake_count, link_count) [1/m],
        positive when the link bends to the left
    command: gait command of every link, links head first (frame_count + 1, snake_count, link_count) [Pa]
    pressure: differential chamber pressure handed to the engine, chamber 1 minus chamber 0,
        same shape [Pa]
    heading: initial heading of the snakes, angle from +x about +z [rad]
    body_length: length of one snake [m]
    """

    time: np.ndarray
    com: np.ndarray
    curvature: np.ndarray
    command: np.ndarray
    pressure: np.ndarray
    heading: float
    body_length: float

    @property
    def snake_count(self):
        return self.com.shape[1]

    @property
    def link_count(self):
        return self.curvature.shape[2]

    def travel(self):
        """Displacement of every snake's centre of mass from t = 0 to the last sample, split into
        (forward along the initial heading, lateral to its left) [m], shape (snake_count, 2)."""
        displacement = self.com[-1, :, :2] - self.com[0, :, :2]
        forward = np.array([math.cos(self.heading), math.sin(self.heading)])
        left = np.array([-forward[1], forward[0]])
        return np.column_stack([displacement @ forward, displacement @ left])

    def truncated(self, frame_count):
        """The first ``frame_count`` frames (frame_count + 1 samples)."""
        keep = slice(0, frame_count + 1)
        return SnakeTrajectories(self.time[keep], self.com[keep], self.curvature[keep], self.command[keep],
                                 self.pressure[keep], self.heading, self.body_length)


def write_trajectories_csv(path, trajectories):
    """Write time, snake, centre of mass and link curvatures, one row per frame and snake (atomically)."""
    path = Path(path)
    links = trajectories.link_count
    with replaced_when_complete(path) as partial, open(partial, "w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["time_s", "snake", "com_x_m", "com_y_m", "com_z_m"]
                        + [f"curvature_link{i}_per_m" for i in range(links)])
        for k, t in enumerate(trajectories.time):
            for s in range(trajectories.snake_count):
                writer.writerow([f"{t:.6f}", s, *(f"{v:.7g}" for v in trajectories.com[k, s]),
                                 *(f"{v:.6g}" for v in trajectories.curvature[k, s])])


def read_trajectories_csv(path):
    """Read a file written by ``write_trajectories_csv``: (time (F,) [s], com (F, S, 3) [m],
    curvature (F, S, L) [1/m])."""
    data = np.genfromtxt(path, delimiter=",", names=True)
    snakes = int(data["snake"].max()) + 1
    time = data["time_s"][::snakes]
    com = np.column_stack([data["com_x_m"], data["com_y_m"], data["com_z_m"]]).reshape(len(time), snakes, 3)
    links = [name for name in data.dtype.names if name.startswith("curvature_link")]
    curvature = np.column_stack([data[name] for name in links]).reshape(len(time), snakes, len(links))
    return time, com, curvature
