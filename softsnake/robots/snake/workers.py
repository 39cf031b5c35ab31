"""A gait run whose snakes are split over worker processes, one per CPU core (softsnake.robots.workers:
why, and how Ctrl-C and the processes' start are handled).

``SnakeSimulationWorkers`` is a ``SnakeSimulation`` whose engine runs elsewhere: each worker holds a
SnakeSimulation of a contiguous share of the snakes, placed where they stand in the whole row
(``first_snake``), and every frame steps it with the share's chamber pressures and answers with its
snakes' positions in scene coordinates. This process keeps everything else of the run (gait, valve
latency, observations, USD, animation), as in one process. The gait is open loop, so the pressures
of the next ``FRAMES_AHEAD`` frames are sent ahead: a worker that finished a frame goes on with the
next one instead of waiting for the slower share and for this process's observations.

A snake's world computes the same whichever worlds share its model (the per-world solve and
reductions see only its rows) and the workers' models place every snake as the whole row does, so
a split run records bit for bit the trajectories of one process (tests/robots/snake/test_workers.py).
"""

import numpy as np

from ...errors import ConfigError
from ...newton_counts import NewtonCounts
from ..workers import WorkerPool, check_cpu_device
from .simulation import SnakeSimulation

FRAMES_AHEAD = 3
"""Frames a worker may run ahead of the frame this process records (its requests queued in its pipe)."""


class _Share:
    """A worker's part of the run: a SnakeSimulation of snakes [first, first + count) of the row."""

    def __init__(self, count, first, options):
        self._simulation = SnakeSimulation(count, first_snake=first, device="cpu", **options)
        simulation = self._simulation
        self.snake = simulation.snake
        self.masses = (simulation._particle_mass, simulation._body_mass)

    def positions(self):
        return self._simulation._positions()

    def newton_counts(self):
        return self._simulation.newton_counts()

    def step(self, differential):
        """One frame with the share's differential pressures (count, links) [Pa]; then its positions."""
        self._simulation._advance(differential)
        return self._simulation._positions()

    def state(self):
        return self._simulation._state_numpy()

    def load(self, state, newton_counts):
        """Set the share's state and add its earlier Newton counts (``SnakeSimulation._load``); then its positions."""
        self._simulation._load(state, newton_counts)
        return self._simulation._positions()


class SnakeSimulationWorkers(SnakeSimulation):
    """A SnakeSimulation whose snakes are stepped by ``workers`` processes at once (CPU only).

    It takes SnakeSimulation's arguments (the device is the CPU) and ``workers``, the number of
    processes (at most one per snake; default: the machine's CPU count), runs the same way and
    records the same trajectories. It has no ``model``, ``solver``, ``state`` or ``control`` here
    (they are the workers'). Close it (or use it as a context manager) to stop the processes; bad
    ``workers`` or a non-CPU device are refused before any process starts (ConfigError).
    """

    _frames_ahead = FRAMES_AHEAD

    def __init__(self, snake_count, *, workers=None, **options):
        self._workers = workers
        check_cpu_device(options, "SnakeSimulation")
        self._pool = None
        super().__init__(snake_count, **options)

    def _build_worlds(self, resolution, device, budget, first_snake):
        options = {"resolution": resolution, "config": self.config, "dt": self.dt, "spacing": self.spacing,
                   "seconds": self.dt * self.frame_count, **budget}
        self._pool = WorkerPool(_Share, self.snake_count, workers=self._workers, item="snake",
                                arguments=lambda begin, end: (end - begin, first_snake + begin, options))
        try:
            self.snake = self._pool.request("snake")[0]
            masses = self._pool.request("masses")
            self._particle_mass, self._body_mass = (np.concatenate(part) for part in zip(*masses))
            self._particles_per_snake = self._particle_mass.shape[1]
            self._bodies_per_snake = self._body_mass.shape[1]
            self._gathered = self._join(self._pool.request("positions"))
        except BaseException:
            self.close()
            raise

    @property
    def workers(self):
        """The number of worker processes [-]."""
        return len(self._pool.shares)

    @staticmethod
    def _join(positions):
        """The shares' (particles, body poses) joined along the snakes."""
        particles, bodies = zip(*positions)
        return np.concatenate(particles), np.concatenate(bodies)

    def _positions(self):
        return self._gathered

    def _advance(self, differential, upcoming=()):
        """One frame: every share steps its snakes at the same time, the next frames' steps already
        queued (``upcoming``); a SimulationError names the snake of the whole row."""
        sent = self._pool.pending  # steps sent already: this frame's and the next sent - 1 frames'
        for pressures in list(upcoming[sent - 1:]) if sent else [differential, *upcoming]:
            pressures = np.asarray(pressures)
            self._pool.submit("step", [(pressures[begin:end].copy(),) for begin, end in self._pool.shares])
        self._gathered = self._join(self._pool.collect())

    def newton_counts(self):
        """How every snake's Newton loops ended so far, the workers' counts joined in snake order."""
        return NewtonCounts.joined(self._pool.request("newton_counts"))

    def _frames_in_flight(self):
        return self._pool.pending

    def _state_numpy(self):
        """The shares' states joined in snake order: every array of a snake's world has the same length, and
        each share's arrays hold its snakes one after the other, as the whole row's do in one process."""
        parts = self._pool.request("state")
        joined = {name: np.concatenate([part[name] for part in parts]) for name in parts[0] if name != "multiplier_step"}
        joined["multiplier_step"] = parts[0]["multiplier_step"]
        return joined

    def _load(self, state, newton_counts):
        """Hand every share its snakes' slices of a whole row's state and Newton counts."""
        per_snake = {}
        for name, value in state.items():
            if name == "multiplier_step":
                continue
            value = np.asarray(value)
            if len(value) % self.snake_count:
                raise ConfigError(f"state array {name} holds {len(value)} items, not a whole number per snake "
                                  f"({self.snake_count} snakes)")
            per_snake[name] = len(value) // self.snake_count
        arguments = []
        for begin, end in self._pool.shares:
            share = {name: np.asarray(state[name])[begin * n:end * n] for name, n in per_snake.items()}
            share["multiplier_step"] = state["multiplier_step"]
            arguments.append((share, {name: np.asarray(value)[begin:end] for name, value in newton_counts.items()}))
        self._gathered = self._join(self._pool.request("load", arguments))

    def close(self):
        """Stop the worker processes (also done on leaving a ``with`` block)."""
        if self._pool is not None:
            self._pool.close()
