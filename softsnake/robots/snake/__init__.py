"""The soft snake: its parameter file, link mesh, open-loop gait controller, the four-link robot
on the engine, its batched gait simulation, and the computations and figures of its experiments
(curvature, step response, bench). The chambers' pressure latency model is
``softsnake.robots.actuation``."""

from .robot import LinkHandle, SnakeHandle, add_link_stand, add_snake, add_soft_link, link_curvature, table_counts
from .simulation import SnakeSimulation
from .trajectories import SnakeTrajectories

__all__ = [
    "LinkHandle",
    "SnakeHandle",
    "add_link_stand",
    "add_snake",
    "add_soft_link",
    "link_curvature",
    "table_counts",
    "SnakeSimulation",
    "SnakeTrajectories",
]
