"""A gait run split over worker processes records bit for bit what one process records."""

import numpy as np
import pytest

from softsnake.errors import ConfigError, SimulationError
from softsnake.robots.snake.config import load_snake_config
from softsnake.robots.snake.gait import GaitParams
from softsnake.robots.snake.simulation import SnakeSimulation
from softsnake.robots.snake.workers import SnakeSimulationWorkers
from softsnake.newton_counts import NewtonCounts

DT = 1.0 / 120.0
FIELDS = ("time", "com", "curvature", "command", "pressure", "yaw", "chamber_pressure")


@pytest.fixture(scope="module")
def coarse():
    return load_snake_config(resolution="coarse")


def _run(simulation):
    """The run's trajectories and the positions handed to ``on_frame`` (USD and the animation see
    the same) at every frame."""
    positions = []
    trajectories = simulation.run(progress=False, on_frame=lambda time, particles, bodies: positions.append(
        (time, particles.copy(), bodies.copy())))
    return trajectories, positions


def test_split_run_is_bit_identical_to_one_process(coarse):
    """Bit for bit (tolerance 0), 0.1 s: three snakes of different gaits, split unevenly (snakes 0-1 and
    snake 2) over two workers, so that a worker's first snake stands away from the origin. Every
    recorded array and the scene positions of every frame are equal, and so are the Newton counts."""
    gait = GaitParams(offset=np.array([-0.3, 0.0, 0.3]), frequency=np.array([2.0, 2.5, 3.0]), snake_count=3)
    options = {"config": coarse, "gait": gait, "seconds": 12 * DT, "dt": DT, "device": "cpu"}
    one = SnakeSimulation(3, **options)
    whole, whole_positions = _run(one)
    with SnakeSimulationWorkers(3, workers=2, **options) as split:
        assert split.workers == 2
        shares, share_positions = _run(split)
        split_counts = split.newton_counts()
    whole_counts = one.newton_counts()
    for name in NewtonCounts.COUNTS:
        assert np.array_equal(getattr(whole_counts, name), getattr(split_counts, name)), name
    assert whole_counts.substeps.tolist() == [12 * one.solver.substeps] * 3
    for field in FIELDS:
        assert np.array_equal(getattr(whole, field), getattr(shares, field)), field
    assert len(whole_positions) == len(share_positions) == 13
    for (time, particles, bodies), (share_time, share_particles, share_bodies) in zip(whole_positions, share_positions):
        assert time == share_time
        assert np.array_equal(particles, share_particles) and np.array_equal(bodies, share_bodies)
    assert np.ptp(whole.com[-1, :, 1]) > 1.5  # the snakes stand 1 m apart
    assert np.abs(whole.curvature[-1]).min() > 0.0  # and moved


def test_blow_up_in_a_worker_names_the_snake_of_the_whole_row(coarse):
    """A non-finite chamber pressure for snake 2 (the second worker's first snake) stops the frame
    with a SimulationError that names snake 2 of the whole row; the two next frames, sent ahead, are
    answered before it is raised, so that the workers answer the next request with no stale answer."""
    with SnakeSimulationWorkers(3, workers=2, config=coarse, seconds=DT, dt=DT) as split:
        differential = np.zeros((3, coarse.link_count))
        differential[2, 0] = np.nan
        with pytest.raises(SimulationError, match=r"snake 2 \(worker share from snake 2\)") as raised:
            split._advance(differential, [np.zeros_like(differential)] * 2)
        assert split._pool.pending == 0
        particles, bodies = zip(*split._pool.request("positions"))
        assert [len(share) for share in particles] == [len(share) for share in bodies] == [2, 1]
    assert raised.value.world == 2


@pytest.mark.parametrize("options, message", [
    ({"workers": 0}, "workers must be a positive integer"),
    ({"workers": 1.5}, "workers must be a positive integer"),
    ({"workers": 2, "device": "cuda"}, "worker processes run on the CPU"),
])
def test_bad_options_are_named_before_any_process_starts(coarse, options, message, monkeypatch):
    monkeypatch.setattr("multiprocessing.context.SpawnProcess.start", lambda self: pytest.fail("a process started"))
    with pytest.raises(ConfigError, match=message):
        SnakeSimulationWorkers(2, config=coarse, seconds=DT, dt=DT, **options)


def test_bad_simulation_option_is_named_before_any_process_starts(coarse, monkeypatch):
    monkeypatch.setattr("multiprocessing.context.SpawnProcess.start", lambda self: pytest.fail("a process started"))
    with pytest.raises(ConfigError, match="dt"):
        SnakeSimulationWorkers(2, workers=2, config=coarse, seconds=DT, dt=2 * DT)
