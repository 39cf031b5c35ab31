"""A vine batch split over worker processes, one per CPU core (softsnake.robots.workers: why, and
how Ctrl-C and the processes' start are handled).

The vines of a batch are independent worlds: each share of the batch is a VineBatch in its own
process, and a split batch gives bit for bit the states of the whole batch in one process
(tests/robots/vine/test_workers.py).
"""

import numpy as np

from ...newton_counts import NewtonCounts
from ..workers import WorkerPool, check_cpu_device
from .simulation import VineBatch, batch_link_count


def _share_batch(specs, options):
    """A worker's VineBatch: its share of the vines, on the CPU."""
    return VineBatch(specs, device="cpu", **options)


class VineBatchWorkers(WorkerPool):
    """A VineBatch whose vines are stepped by ``workers`` processes at once (CPU only).

    It has VineBatch's interface for rollouts (``step``, ``poses``, ``set_growth_rate``, ``time``,
    ``vine_count``, ``link_count``, ``body_count``, ``half_length``, ``newton_counts``) and gives the same
    states.
    Close it (or use it as a context manager) to stop the processes.

    specs: list of VineSpec, as for VineBatch
    workers: number of processes (at most one per vine; default: the machine's CPU count)
    batch_options: VineBatch keyword arguments (growth, link_extension_max, friction, stall_force,
        solver_options, steering_latency); the device is the CPU
    """

    def __init__(self, specs, *, workers=None, **batch_options):
        specs = list(specs)
        self.link_count = batch_link_count(specs)
        check_cpu_device(batch_options, "VineBatch")
        self.vine_count = len(specs)
        self.body_count = 2 * self.link_count
        self.time = 0.0
        super().__init__(_share_batch, self.vine_count, workers=workers, item="vine",
                         arguments=lambda begin, end: (specs[begin:end], batch_options))
        try:
            self.half_length = np.concatenate(self.request("half_length"))
        except BaseException:
            self.close()
            raise

    def _split(self, values):
        """``values`` (one row per vine) cut into the shares' rows, one tuple of arguments per share."""
        return [(values[begin:end].copy(),) for begin, end in self.shares]

    def step(self, dt, steering=None):
        """Advance every vine by ``dt`` [s] (VineBatch.step), the shares at the same time."""
        if steering is None:
            commands = [(dt, None)] * len(self.shares)
        else:
            full = np.broadcast_to(np.asarray(steering, dtype=float), (self.vine_count, self.link_count))
            commands = [(dt, *command) for command in self._split(full)]
        self.request("step", commands)
        self.time += dt

    def poses(self):
        """Body centre x, y [m] and angle [rad] of every vine, (V, B, 3) (VineBatch.poses)."""
        return np.concatenate(self.request("poses"))

    def newton_counts(self):
        """How every vine's Newton loops ended so far (VineBatch.newton_counts), the shares joined in order."""
        return NewtonCounts.joined(self.request("newton_counts"))

    def set_growth_rate(self, growth_rate):
        """Change the total growth rate of every vine [m/s] (scalar or (V,)), from the next step on."""
        rate = np.broadcast_to(np.asarray(growth_rate, dtype=float), (self.vine_count,))
        self.request("set_growth_rate", self._split(rate))
