"""The gait's CSV: one row per frame and snake, each value in its column's format (the writer fills one format per
row; these rows are written here a value at a time, as f-strings, and must read the same)."""

import numpy as np

from softsnake.robots.actuation import chamber_targets
from softsnake.robots.snake.trajectories import SnakeTrajectories, trajectory_columns, write_trajectories_csv


def _expected_rows(trajectories):
    commanded, actual = chamber_targets(trajectories.command), trajectories.chamber_pressure
    rows = [",".join(trajectory_columns(trajectories.link_count))]
    for k, t in enumerate(trajectories.time):
        for s in range(trajectories.snake_count):
            rows.append(",".join([f"{t:.6f}", str(s), *(f"{v:.10g}" for v in trajectories.com[k, s]),
                                  f"{trajectories.yaw[k, s]:.7g}", *(f"{v:.6g}" for v in trajectories.curvature[k, s]),
                                  *(f"{v:.6g}" for v in commanded[k, s].reshape(-1)),
                                  *(f"{v:.6g}" for v in actual[k, s].reshape(-1))]))
    return rows


def test_rows_hold_each_value_in_its_columns_format(tmp_path):
    rng = np.random.default_rng(3)
    frames, snakes, links = 4, 3, 4
    com = rng.normal(size=(frames, snakes, 3)) * 300.0
    com[1, 2] = (1023.0257918, -0.0, 1e-12)  # a kilometre out at 1 um, a negative zero, a tiny value
    yaw = rng.normal(size=(frames, snakes))
    yaw[2, 0] = np.nan
    curvature = rng.normal(size=(frames, snakes, links)).astype(np.float32)  # float32 input is written as its float64 value
    curvature[3, 1, 2] = np.inf
    command = rng.normal(size=(frames, snakes, links)) * 4e4
    pressure = np.abs(rng.normal(size=(frames, snakes, links, 2))) * 4e4
    trajectories = SnakeTrajectories(np.arange(frames) / 120.0, com, curvature, command, command, 0.0, 0.5, yaw,
                                     pressure)
    write_trajectories_csv(tmp_path / "t.csv", trajectories)
    written = (tmp_path / "t.csv").read_bytes()
    assert written == ("\r\n".join(_expected_rows(trajectories)) + "\r\n").encode()
    assert b",1023.025792," in written and b",-0," in written and b",nan," in written and b",inf," in written
