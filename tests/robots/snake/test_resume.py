"""An interrupted gait run goes on from where it stopped, bit for bit as if it had never stopped.

Two coarse snakes for 10 frames, written to USD every 2nd frame: once straight through, once stopped by a SIGINT
sent during frame 5 (the frame finishes: ``softsnake.interrupts``) and continued by a new simulation from its
``stop_point``, the USD file going on in the partial file. Everything recorded, the engine's final state and every
USD time sample must be equal, not close.
"""

import os
import signal

import numpy as np
import pytest
from pxr import Usd

from softsnake.errors import ConfigError
from softsnake.robots.snake.config import load_snake_config
from softsnake.robots.snake.simulation import RunPoint, SnakeSimulation

FRAMES = 10
DT = 1.0 / 120.0
STOP_FRAME = 5


@pytest.fixture(scope="module")
def coarse():
    return load_snake_config(resolution="coarse")


def simulation(coarse):
    return SnakeSimulation(2, config=coarse, seconds=FRAMES * DT, dt=DT)


def usd_samples(path):
    """{attribute path: [(time code, value as an array)]} of every time-sampled attribute of a USD file."""
    stage = Usd.Stage.Open(str(path))
    samples = {}
    for prim in stage.Traverse():
        for attribute in prim.GetAttributes():
            codes = attribute.GetTimeSamples()
            if codes:
                samples[str(attribute.GetPath())] = [(code, np.asarray(attribute.Get(code))) for code in codes]
    return samples, stage.GetEndTimeCode()


@pytest.fixture(scope="module")
def runs(coarse, tmp_path_factory):
    before = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal (``pytest &`` ignores it)
    try:
        yield _runs(coarse, tmp_path_factory)
    finally:
        signal.signal(signal.SIGINT, before)


def _runs(coarse, tmp_path_factory):
    folder = tmp_path_factory.mktemp("resume")
    straight = simulation(coarse)
    straight_trajectories = straight.run(usd_path=folder / "straight.usdc", usd_fps=60.0, progress=False)

    stopped = simulation(coarse)
    step = stopped.solver.step

    def step_interrupted_in_frame_5(*args):
        if stopped.solver.step_count == STOP_FRAME - 1:  # the signal lands before frame STOP_FRAME's step
            os.kill(os.getpid(), signal.SIGINT)
        step(*args)

    stopped.solver.step = step_interrupted_in_frame_5
    with pytest.raises(KeyboardInterrupt):
        stopped.run(usd_path=folder / "resumed.usdc", usd_fps=60.0, progress=False)
    point = stopped.stop_point
    saved = folder / "point.npz"
    np.savez(saved, **point.arrays())
    with np.load(saved) as arrays:
        point = RunPoint.from_arrays(dict(arrays))
    resumed = simulation(coarse)
    resumed_trajectories = resumed.run(usd_path=folder / "resumed.usdc", usd_fps=60.0, progress=False, start=point)
    return straight, straight_trajectories, stopped, resumed, resumed_trajectories, folder


def test_an_interrupt_stops_at_the_end_of_its_frame(runs):
    _, _, stopped, _, _, _ = runs
    assert stopped.stop_point.frame == STOP_FRAME
    assert len(stopped.trajectories.time) == STOP_FRAME + 1
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handlers are restored


def test_the_resumed_run_is_the_straight_run(runs):
    straight, straight_trajectories, _, resumed, resumed_trajectories, _ = runs
    for name in ("time", "com", "curvature", "yaw", "command", "pressure", "chamber_pressure"):
        assert np.array_equal(getattr(straight_trajectories, name), getattr(resumed_trajectories, name)), name
    for name, value in straight.state.numpy().items():
        assert np.array_equal(value, resumed.state.numpy()[name]), name
    straight_counts, resumed_counts = straight.newton_counts(), resumed.newton_counts()
    for name in ("substeps", "newton_steps", "budget_ends", "unconverged_ends"):
        assert np.array_equal(getattr(straight_counts, name), getattr(resumed_counts, name)), name
    assert resumed_counts.substeps.tolist() == [2 * FRAMES, 2 * FRAMES]


def test_the_resumed_usd_file_is_the_straight_one(runs):
    _, _, _, _, _, folder = runs
    assert not (folder / "resumed.partial.usdc").exists()
    straight, straight_end = usd_samples(folder / "straight.usdc")
    resumed, resumed_end = usd_samples(folder / "resumed.usdc")
    assert straight_end == resumed_end == FRAMES // 2
    assert straight.keys() == resumed.keys()
    for path, samples in straight.items():
        assert [code for code, _ in samples] == [code for code, _ in resumed[path]], path
        for (_, a), (_, b) in zip(samples, resumed[path]):
            assert np.array_equal(a, b), path


def test_a_run_point_of_other_snakes_is_refused(runs, coarse):
    _, _, stopped, _, _, _ = runs
    other = SnakeSimulation(3, config=coarse, seconds=FRAMES * DT, dt=DT)
    with pytest.raises(ConfigError, match="com has shape"):
        other.run(progress=False, start=stopped.stop_point)
    short = SnakeSimulation(2, config=coarse, seconds=STOP_FRAME * DT, dt=DT)
    with pytest.raises(ConfigError, match="frame 5 is not one of this run's 0 .. 4"):
        short.run(progress=False, start=stopped.stop_point)
