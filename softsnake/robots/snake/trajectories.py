"""What a gait run records (``SnakeTrajectories``), the summary ``softsnake gait`` prints, and the
CSV file: one row per frame and snake with the time, the snake, its centre of mass and heading,
and for every link its curvature and its chambers' commanded and actual pressures.

Links are numbered from the head: ``link0_head`` is the link behind the head module, the last
(``link3_tail`` for four links) the one in front of the tail module. A link's chambers are its
``left`` and ``right`` chamber as seen by the snake looking ahead (chamber 0 and 1 of the link
mesh); inflating the right chamber lengthens the right side and bends the link to the left
(positive curvature).

Columns (units in the names): ``time_s``, ``snake``, ``com_x_m``, ``com_y_m``, ``com_z_m``,
``heading_rad`` (mean direction of the modules, from +x about +z, continuous over time), then
per link ``curvature_<link>_per_m``, then per link ``command_<link>_left_pa`` and ``_right_pa``
(the gait's valve commands, eq. 9: one chamber of a link is commanded at a time, the other vented)
and ``pressure_<link>_left_pa`` and ``_right_pa`` (the chamber pressures of the valve latency
model, eqs. 10-12; the same as the commands with ``--no-latency``). Pressures are over-pressures
[Pa]. The engine drives a link with the difference, right minus left, on the right chamber if it
is positive and on the left one if negative."""

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from softsnake.output_files import replaced_when_complete

from ..actuation import chamber_targets

CSV_NAME = "trajectories.csv"
"""Name of the trajectory file ``softsnake gait`` writes into its output folder."""


@dataclass(frozen=True, eq=False)
class SnakeTrajectories:
    """What a gait run recorded, one sample per frame including t = 0.

    time: sample times (frame_count + 1,) [s]
    com: centre of mass of every snake (frame_count + 1, snake_count, 3) [m]
    curvature: curvature of every link (frame_count + 1, snake_count, link_count) [1/m],
        positive when the link bends to the left
    command: gait command of every link, links head first (frame_count + 1, snake_count, link_count) [Pa],
        differential: right chamber (chamber 1) minus left chamber (chamber 0)
    pressure: differential chamber pressure handed to the engine (after the latency model), same
        shape and sign [Pa]
    heading: initial heading of the snakes, angle from +x about +z [rad]
    body_length: length of one snake [m]
    yaw: heading of every snake over time, the mean direction of its modules, continuous (no jumps
        of 2 pi) (frame_count + 1, snake_count) [rad]; None if not recorded
    chamber_pressure: pressures of the (left, right) chambers (chamber 0, chamber 1) of every link
        (frame_count + 1, snake_count, link_count, 2) [Pa]; None: taken from ``pressure``
    """

    time: np.ndarray
    com: np.ndarray
    curvature: np.ndarray
    command: np.ndarray
    pressure: np.ndarray
    heading: float
    body_length: float
    yaw: np.ndarray | None = None
    chamber_pressure: np.ndarray | None = None

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

    def heading_change(self, window):
        """Change of every snake's heading from t = 0 to the mean over the last ``window`` seconds of
        the run (one gait period averages the gait's own sway out) [rad], (snake_count,);
        positive: turned left. NaN if the heading was not recorded."""
        if self.yaw is None:
            return np.full(self.snake_count, np.nan)
        last = self.time >= self.time[-1] - window - 1e-12
        return self.yaw[last].mean(axis=0) - self.yaw[0]

    def summary(self, window):
        """Per snake: forward and lateral travel of the centre of mass [m] (``travel``), its
        straight-line distance [m] and in body lengths [-], and the heading change [rad]
        (``heading_change`` over ``window`` [s]). Returns a dict of (snake_count,) arrays."""
        travel = self.travel()
        distance = np.hypot(travel[:, 0], travel[:, 1])
        return {"forward": travel[:, 0], "lateral": travel[:, 1], "distance": distance,
                "body_lengths": distance / self.body_length, "heading_change": self.heading_change(window)}

    def truncated(self, frame_count):
        """The first ``frame_count`` frames (frame_count + 1 samples)."""
        keep = slice(0, frame_count + 1)
        return SnakeTrajectories(self.time[keep], self.com[keep], self.curvature[keep], self.command[keep],
                                 self.pressure[keep], self.heading, self.body_length,
                                 None if self.yaw is None else self.yaw[keep],
                                 None if self.chamber_pressure is None else self.chamber_pressure[keep])


def link_names(link_count):
    """Names of the links in the CSV columns, head first: link0_head, link1, ..., link<n-1>_tail."""
    names = [f"link{i}" for i in range(link_count)]
    names[0] += "_head"
    if link_count > 1:
        names[-1] += "_tail"
    return names


def trajectory_columns(link_count):
    """The CSV header of ``write_trajectories_csv`` for snakes of ``link_count`` links."""
    links = link_names(link_count)
    return (["time_s", "snake", "com_x_m", "com_y_m", "com_z_m", "heading_rad"]
            + [f"curvature_{name}_per_m" for name in links]
            + [f"command_{name}_{side}_pa" for name in links for side in ("left", "right")]
            + [f"pressure_{name}_{side}_pa" for name in links for side in ("left", "right")])


def write_trajectories_csv(path, trajectories):
    """Write one row per frame and snake (columns: ``trajectory_columns``; atomically). The centres of mass
    are scene coordinates, up to a kilometre from the origin in a row of 1024 snakes: 10 significant digits
    keep 1 um there (7 kept 1 mm: 1000.001)."""
    path = Path(path)
    links = trajectories.link_count
    # (frames, snakes, links, 2): (left, right) = (chamber 0, chamber 1) of every link.
    commanded = chamber_targets(trajectories.command)
    actual = (chamber_targets(trajectories.pressure) if trajectories.chamber_pressure is None
              else trajectories.chamber_pressure)
    yaw = trajectories.yaw if trajectories.yaw is not None else np.full(trajectories.com.shape[:2], np.nan)
    snakes = trajectories.snake_count
    # One format per row, filled from one float array per frame: three times faster than a format per value
    # (1024 snakes x 1200 frames: ~5 s, not ~16), the same text ("%.6g" % v == f"{v:.6g}", nan and -0 too).
    row = ",".join(["%.6f", "%d"] + ["%.10g"] * 3 + ["%.7g"] + ["%.6g"] * (5 * links)) + "\r\n"
    index = np.arange(snakes, dtype=float)[:, None]
    with replaced_when_complete(path) as partial, open(partial, "w", newline="") as stream:
        csv.writer(stream).writerow(trajectory_columns(links))  # the same "\r\n" line ends as the rows
        for k, t in enumerate(trajectories.time):
            values = np.concatenate([np.full((snakes, 1), t), index, trajectories.com[k], yaw[k][:, None],
                                     trajectories.curvature[k], commanded[k].reshape(snakes, -1),
                                     actual[k].reshape(snakes, -1)], axis=1)
            stream.write("".join(row % tuple(values_of_snake) for values_of_snake in values.tolist()))


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
