"""A vine batch split over worker processes, one per CPU core.

Warp runs a CPU kernel on one thread, and its CPU kernels cannot be launched from several Python
threads at once (the thread index of a CPU launch is a static variable). The vines of a batch are
independent worlds, so on the CPU the batch is cut into contiguous shares, each share a VineBatch
in its own process, and every step runs the shares at the same time on different cores.

Each world's arithmetic does not depend on which other worlds share its batch (the per-world solve
and every per-world reduction see only that world's rows), so a split batch gives bit for bit the
states of the whole batch in one process (tests/test_vine_workers.py).

The processes are started with the "spawn" method: each imports Warp afresh (a forked copy of an
initialised Warp runtime is not safe) and loads the kernels from Warp's cache.

Ctrl-C. The workers ignore SIGINT (a terminal sends it to the whole process group): the parent
alone gets the KeyboardInterrupt, and closing the batch stops the workers, so an interrupted batch
ends with one message and no worker tracebacks. They are started with SIGINT ignored, which a
spawned Python keeps, so that no worker is interrupted while it imports either.
"""

import contextlib
import multiprocessing
import os
import signal
import threading

import numpy as np

from softsnake.console import is_verbose, start_warp
from softsnake.errors import ConfigError, ModelError, SimulationError
from softsnake.validation import positive_integer

from .simulation import VineBatch, batch_link_count

FORWARDED_ERRORS = {error.__name__: error for error in (ModelError, ConfigError)}
"""Errors a worker reports that the parent raises as the same class; any other but a
SimulationError (raised with the vine's index in the whole batch) becomes a ConfigError."""


@contextlib.contextmanager
def _sigint_ignored():
    """Ignore SIGINT inside the block (in the main thread; elsewhere signals cannot be set)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _serve(connection, specs, options, verbose):
    """Worker process: hold a VineBatch of its share and answer the parent's requests; Warp as
    quiet as in the parent (``verbose``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and closes the batch
    start_warp(verbose)
    try:
        batch = VineBatch(specs, device="cpu", **options)
    except Exception as error:  # reported to the parent, which raises it there
        connection.send(("error", type(error).__name__, str(error), None))
        return
    connection.send(("ready", batch.half_length))
    while True:
        try:
            request, *arguments = connection.recv()
        except (EOFError, OSError):  # the parent went away
            return
        if request == "close":
            return
        try:
            if request == "step":
                batch.step(*arguments)
                connection.send(("ok", None))
            elif request == "poses":
                connection.send(("ok", batch.poses()))
            elif request == "growth_rate":
                batch.set_growth_rate(*arguments)
                connection.send(("ok", None))
        except SimulationError as error:
            connection.send(("error", "SimulationError", str(error), (error.world, error.step)))
        except Exception as error:
            connection.send(("error", type(error).__name__, str(error), None))


def _shares(count, workers):
    """Contiguous index ranges of ``workers`` nearly equal shares of ``count`` items."""
    bounds = np.linspace(0, count, workers + 1).round().astype(int)
    return list(zip(bounds[:-1], bounds[1:]))


class VineBatchWorkers:
    """A VineBatch whose vines are stepped by ``workers`` processes at once (CPU only).

    It has VineBatch's interface for rollouts (``step``, ``poses``, ``set_growth_rate``, ``time``,
    ``vine_count``, ``link_count``, ``body_count``, ``half_length``) and gives the same states.
    Close it (or use it as a context manager) to stop the processes.

    specs: list of VineSpec, as for VineBatch
    workers: number of processes (at most one per vine; default: the machine's CPU count)
    batch_options: VineBatch keyword arguments (growth, link_extension_max, friction, stall_force,
        solver_options, steering_latency); the device is the CPU
    """

    def __init__(self, specs, *, workers=None, **batch_options):
        self._connections, self._processes = [], []
        specs = list(specs)
        self.link_count = batch_link_count(specs)
        workers = (os.cpu_count() or 1) if workers is None else workers
        positive_integer("workers", workers)
        if "device" in batch_options and str(batch_options.pop("device")) != "cpu":
            raise ConfigError("worker processes run on the CPU: on a GPU, use one VineBatch for the whole batch")
        workers = min(workers, len(specs))
        self.vine_count = len(specs)
        self.body_count = 2 * self.link_count
        self.time = 0.0
        self._shares = _shares(self.vine_count, workers)
        context = multiprocessing.get_context("spawn")
        try:
            for begin, end in self._shares:
                parent, child = context.Pipe()
                process = context.Process(target=_serve, args=(child, specs[begin:end], batch_options, is_verbose()),
                                          daemon=True)
                with _sigint_ignored():
                    process.start()
                child.close()
                self._connections.append(parent)
                self._processes.append(process)
            self.half_length = np.concatenate([reply[0] for reply in self._gather()])
        except BaseException:
            self.close()
            raise

    def _gather(self):
        """Every worker's answer to the last request, in share order. All answers are read before the
        first error is raised, so that no stale answer is left in a pipe."""
        replies = [self._receive(connection) for connection in self._connections]
        for (status, *payload), (begin, _) in zip(replies, self._shares):
            if status != "error":
                continue
            name, message, where = payload
            if name == "SimulationError":
                world, step = where
                raise SimulationError(f"vine {begin + world} (worker share from vine {begin}): {message}",
                                      world=begin + world, step=step)
            raise FORWARDED_ERRORS.get(name, ConfigError)(f"{name}: {message}")
        return [payload for _, *payload in replies]

    @staticmethod
    def _receive(connection):
        try:
            return connection.recv()
        except EOFError:
            return ("error", "RuntimeError", "a vine worker process stopped unexpectedly", None)

    def _request(self, *requests):
        for connection, request in zip(self._connections, requests):
            connection.send(request)
        return [payload for payload, in self._gather()]

    def step(self, dt, steering=None):
        """Advance every vine by ``dt`` [s] (VineBatch.step), the shares at the same time."""
        if steering is None:
            commands = [None] * len(self._shares)
        else:
            full = np.broadcast_to(np.asarray(steering, dtype=float), (self.vine_count, self.link_count))
            commands = [full[begin:end].copy() for begin, end in self._shares]
        self._request(*(("step", dt, command) for command in commands))
        self.time += dt

    def poses(self):
        """Body centre x, y [m] and angle [rad] of every vine, (V, B, 3) (VineBatch.poses)."""
        return np.concatenate(self._request(*(("poses",) for _ in self._shares)))

    def set_growth_rate(self, growth_rate):
        """Change the total growth rate of every vine [m/s] (scalar or (V,)), from the next step on."""
        rate = np.broadcast_to(np.asarray(growth_rate, dtype=float), (self.vine_count,))
        self._request(*(("growth_rate", rate[begin:end].copy()) for begin, end in self._shares))

    def close(self):
        """Stop the worker processes (also done on leaving a ``with`` block)."""
        for connection in self._connections:
            try:
                connection.send(("close",))
            except (BrokenPipeError, OSError):
                pass
            connection.close()
        for process in self._processes:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
        self._connections, self._processes = [], []

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def __del__(self):
        if self._processes:
            self.close()
