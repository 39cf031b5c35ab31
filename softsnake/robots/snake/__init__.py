"""The soft snake: pressure latency model, open-loop gait controller, the four-link robot on the
engine, its batched gait simulation and their experiments."""

from .robot import LinkHandle, SnakeHandle, add_link_stand, add_snake, add_soft_link, link_curvature, table_counts
from .simulation import SnakeDivergedError, SnakeSimulation, SnakeSimulationError, SnakeTrajectories

__all__ = [
    "LinkHandle",
    "SnakeHandle",
    "add_link_stand",
    "add_snake",
    "add_soft_link",
    "link_curvature",
    "table_counts",
    "SnakeDivergedError",
    "SnakeSimulation",
    "SnakeSimulationError",
    "SnakeTrajectories",
]
