"""The snake frame by frame from Python (``SnakeSimulation.step``, ``observe``, ``gait_command``): the gait stepped
frame by frame is ``run`` bit for bit, so a controller that changes the commands builds on the same simulation;
bad commands are refused before anything moves."""

import numpy as np
import pytest

from softsnake.errors import ConfigError
from softsnake.robots.snake.config import load_snake_config
from softsnake.robots.snake.gait import GaitParams, gait_command
from softsnake.robots.snake.simulation import SnakeSimulation

FRAMES = 12
DT = 1.0 / 120.0


@pytest.fixture(scope="module")
def coarse():
    return load_snake_config(resolution="coarse")


def simulation(coarse, **options):
    return SnakeSimulation(2, config=coarse, seconds=FRAMES * DT, dt=DT, gait=GaitParams(offset=[-0.3, 0.3]),
                           **options)


def test_the_gait_stepped_frame_by_frame_is_the_run(coarse):
    whole = simulation(coarse)
    trajectories = whole.run(progress=False)
    stepped = simulation(coarse)
    first = stepped.observe()
    assert first.time == 0.0 and np.array_equal(first.com, trajectories.com[0])
    for frame in range(1, FRAMES + 1):
        chambers = stepped.step(stepped.gait_command(frame * DT))
        seen = stepped.observe()
        assert seen.time == pytest.approx(frame * DT, rel=1e-12)
        assert np.array_equal(chambers, trajectories.chamber_pressure[frame])
        assert np.array_equal(seen.chambers, trajectories.chamber_pressure[frame])
        assert np.array_equal(seen.com, trajectories.com[frame]), frame
        assert np.array_equal(seen.curvature, trajectories.curvature[frame]), frame
    assert np.allclose(np.angle(np.exp(1j * (seen.heading - trajectories.yaw[-1]))), 0.0, atol=1e-12)  # mod 2 pi
    for name, value in whole.state.numpy().items():
        assert np.array_equal(value, stepped.state.numpy()[name]), name
    assert whole.frames_done == stepped.frames_done == FRAMES
    assert np.array_equal(whole.observe().chambers, seen.chambers)  # run leaves the chambers where it ended


def test_gait_command_changes_the_named_parameters_only(coarse):
    sim = simulation(coarse)
    changed = sim.gait_command(0.3, offset=[0.5, -0.1], amplitude=2.0e4)
    expected = gait_command(GaitParams(offset=[0.5, -0.1], amplitude=2.0e4), 0.3, coarse.link_count)[:, ::-1]
    assert np.array_equal(changed, expected)
    assert np.array_equal(sim.gait_command(0.3), gait_command(sim.gait, 0.3, coarse.link_count)[:, ::-1])
    with pytest.raises(ConfigError, match="not speed"):
        sim.gait_command(0.3, speed=1.0)
    with pytest.raises(ConfigError, match="offset must lie in"):
        sim.gait_command(0.3, offset=2.0)


def test_bad_commands_are_refused_before_anything_moves(coarse):
    sim = simulation(coarse)
    before = sim.state.numpy()
    for command, message in ((np.zeros((3, 4)), "does not match"), (np.full((2, 4), np.nan), "finite"),
                             (np.full((2, 4), 1.0e5), "exceeds the supply pressure")):
        with pytest.raises(ConfigError, match=message):
            sim.step(command)
    assert sim.frames_done == 0
    for name, value in before.items():
        assert np.array_equal(value, sim.state.numpy()[name]), name


def test_run_after_steps_is_refused(coarse):
    sim = simulation(coarse)
    sim.step(np.zeros((2, 4)))
    with pytest.raises(ConfigError, match="has stepped 1 frames already"):
        sim.run(progress=False)
