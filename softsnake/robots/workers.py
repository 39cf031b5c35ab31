"""A batch of independent worlds split over worker processes, one per CPU core (CPU only).

Warp runs a CPU kernel on one thread, and its CPU kernels cannot be launched from several Python
threads at once (the thread index of a CPU launch is a static variable). The worlds of a batch are
independent, so on the CPU the batch is cut into contiguous shares, each share a batch of its own
in its own process, and every request (a step) runs the shares at the same time on different cores.
A robot's batch class builds on ``WorkerPool`` (softsnake.robots.vine.workers,
softsnake.robots.snake.workers); the pool knows nothing of robots.

Each world's arithmetic does not depend on which other worlds share its batch (the per-world solve
and every per-world reduction see only that world's rows), so a split batch gives bit for bit the
states of the whole batch in one process (tests/robots/vine/test_workers.py,
tests/robots/snake/test_workers.py).

The processes are started with the "spawn" method: each imports Warp afresh (a forked copy of an
initialised Warp runtime is not safe) and loads the kernels from Warp's cache.

Ctrl-C. The workers ignore SIGINT (a terminal sends it to the whole process group) and SIGTERM (a job
scheduler sends it to every process of the job): the parent alone gets the KeyboardInterrupt, and closing the
pool stops the workers, so an interrupted batch ends with one message and no worker tracebacks (a gait run first
collects the frames it sent ahead: softsnake.robots.snake.simulation). They are started with both ignored, which
a spawned Python keeps, so that no worker is interrupted while it imports either. A worker whose parent went away
(its pipe closed, as when the parent is killed) ends at its next request or reply, so none is left behind.
"""

import multiprocessing
import multiprocessing.reduction
import signal
from types import MappingProxyType

import numpy as np

from softsnake.console import is_verbose, start_warp
from softsnake.errors import ConfigError, ModelError, SimulationError
from softsnake.interrupts import signal_handlers
from softsnake.machine import usable_cores
from softsnake.validation import positive_integer

FORWARDED_ERRORS = {error.__name__: error for error in (ModelError, ConfigError)}
"""Errors a worker reports that the parent raises as the same class; any other but a
SimulationError (raised with the world's index in the whole batch) becomes a ConfigError."""


def _mapping_proxy(items):
    return MappingProxyType(items)


# Read-only mappings (a frozen config holds them) cannot be pickled: they travel to and from the
# workers as dicts, read-only again on arrival.
multiprocessing.reduction.ForkingPickler.register(MappingProxyType, lambda proxy: (_mapping_proxy, (dict(proxy),)))


WORKER_IGNORED = (signal.SIGINT, signal.SIGTERM)
"""The signals a worker ignores (the parent handles them and closes the pool)."""


def _error_reply(error):
    """The reply that reports ``error`` to the parent: ("error", class name, message, where)."""
    if isinstance(error, SimulationError):
        return ("error", "SimulationError", str(error), (error.world, error.step, error.reason))
    return ("error", type(error).__name__, str(error), None)


def _serve(connection, factory, arguments, verbose):
    """Worker process: build ``factory(*arguments)``, the batch of its share, and answer the parent's
    requests (name, *arguments) with that attribute of the batch: called with the arguments if it
    is a method, else its value. Warp is as quiet as in the parent (``verbose``). Ends on "close",
    or when the parent went away (its end of the pipe closed)."""
    for number in WORKER_IGNORED:  # the parent handles Ctrl-C and SIGTERM and closes the pool
        signal.signal(number, signal.SIG_IGN)
    start_warp(verbose)
    try:
        try:
            batch = factory(*arguments)
        except Exception as error:  # reported to the parent, which raises it there
            connection.send(_error_reply(error))
            return
        connection.send(("ok", None))
        while True:
            name, *arguments = connection.recv()
            if name == "close":
                return
            try:
                value = getattr(batch, name)
                reply = ("ok", value(*arguments) if callable(value) else value)
            except Exception as error:
                reply = _error_reply(error)
            connection.send(reply)
    except (EOFError, OSError):  # the parent went away
        return


def shares(count, workers):
    """Contiguous index ranges (begin, end) of ``workers`` nearly equal shares of ``count`` items."""
    bounds = np.linspace(0, count, workers + 1).round().astype(int)
    return [(int(begin), int(end)) for begin, end in zip(bounds[:-1], bounds[1:])]


def check_cpu_device(options, whole):
    """ConfigError unless the batch options ``options`` (a dict; its "device" is taken out) ask for the
    CPU (or name no device); ``whole`` names what to use on a GPU instead (e.g. "VineBatch")."""
    device = options.pop("device", None)
    if device is not None and str(device) != "cpu":
        raise ConfigError(f"worker processes run on the CPU: on a GPU, use one {whole} for the whole batch")


class WorkerPool:
    """Worker processes, each holding one contiguous share of a batch of ``count`` worlds.

    factory: a module-level callable (it is pickled) that builds a share's batch in its process
    count: number of worlds of the whole batch [-]
    workers: number of processes (at most one per world; default: the machine's CPU count)
    arguments: a function of a share's (begin, end) that gives ``factory``'s arguments, a tuple
    item: what a world is called in messages ("vine", "snake")

    ``request`` sends every worker a request and returns the answers in share order; ``submit`` sends
    one without waiting and ``collect`` gives the answers to the oldest request not yet collected
    (a worker answers its requests in order, so a caller that knows its next requests keeps every
    worker busy without waiting for the others). A SimulationError in a worker is raised here with
    its world counted in the whole batch. Close the pool (or use it as a context manager) to stop
    the processes. Bad ``workers`` are refused before any process starts (ConfigError).
    """

    def __init__(self, factory, count, *, workers=None, arguments, item):
        self._connections, self._processes = [], []
        workers = usable_cores() if workers is None else workers
        positive_integer("workers", workers)
        self.item = item
        self.shares = shares(count, min(workers, count))
        self.pending = 1
        """Requests sent and not yet collected; at first, the workers' word that their batches are built."""
        context = multiprocessing.get_context("spawn")
        try:
            for begin, end in self.shares:
                parent, child = context.Pipe()
                process = context.Process(target=_serve, args=(child, factory, arguments(begin, end), is_verbose()),
                                          daemon=True)
                with signal_handlers(WORKER_IGNORED, signal.SIG_IGN):
                    process.start()
                child.close()
                self._connections.append(parent)
                self._processes.append(process)
            self.collect()
        except BaseException:
            self.close()
            raise

    def collect(self):
        """Every worker's answer to the oldest request not yet collected, in share order. On an error,
        every pending request is answered before the first error is raised, so that no stale answer
        is left in a pipe."""
        replies = [self._receive(connection) for connection in self._connections]
        self.pending -= 1
        errors = [(payload, begin) for (status, *payload), (begin, _) in zip(replies, self.shares) if status == "error"]
        if not errors:
            return [payload for _, payload in replies]
        while self.pending:
            for connection in self._connections:
                self._receive(connection)
            self.pending -= 1
        (name, message, where), begin = errors[0]
        if name == "SimulationError":
            world, step, reason = where
            world = None if world is None else begin + world
            raise SimulationError(f"{self.item} {world} (worker share from {self.item} {begin}): {message}",
                                  world=world, step=step, reason=reason)
        raise FORWARDED_ERRORS.get(name, ConfigError)(f"{name}: {message}")

    def _receive(self, connection):
        try:
            return connection.recv()
        except EOFError:
            return ("error", "RuntimeError", f"a {self.item} worker process stopped unexpectedly", None)

    def submit(self, name, arguments=None):
        """Ask every worker for attribute ``name`` of its batch (a method is called, with the share's
        tuple of ``arguments``, one per share, None: no arguments), without waiting for the answers."""
        for connection, share_arguments in zip(self._connections, arguments or [()] * len(self.shares)):
            connection.send((name, *share_arguments))
        self.pending += 1

    def request(self, name, arguments=None):
        """``submit`` a request and wait for its answers, in share order (``collect``); none may be
        pending before (an interrupted ``collect`` leaves some: close the pool then)."""
        if self.pending:
            raise RuntimeError(f"{self.pending} earlier request(s) of the {self.item} workers are not collected")
        self.submit(name, arguments)
        return self.collect()

    def close(self):
        """Stop the worker processes (also done on leaving a ``with`` block): at once where a request is still pending
        (an interrupt, an error: its answers are not wanted, and a worker reads "close" only after its current request,
        which kept an interrupted video fit waiting 6 s), else once each has read "close"."""
        busy = self.pending > 0
        for connection in self._connections:
            if not busy:
                try:
                    connection.send(("close",))
                except (BrokenPipeError, OSError):
                    pass
            connection.close()
        for process in self._processes:
            if busy:
                process.kill()
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
                process.join()
        self._connections, self._processes = [], []

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def __del__(self):
        if getattr(self, "_processes", None):
            self.close()
