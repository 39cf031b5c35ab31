"""Warp's console output: quiet by default for the command line and its worker processes.

Warp prints a banner when it starts and one ``Module ... load`` line per kernel module on standard
output, and its native library prints "Warp CUDA warning: Could not find or load the NVIDIA CUDA
driver" on standard error when it starts on a machine without a CUDA driver, whatever device a run
asks for. ``quiet_warp`` turns the first two off (Warp's log level); ``start_warp`` starts Warp with
standard error silenced, so a CPU run shows none of it. ``verbose`` brings everything back.
"""

import contextlib
import os

import warp as wp


@contextlib.contextmanager
def _stderr_silenced():
    """Send the process's standard error (file descriptor 2, which Warp's native library writes to)
    to the null device inside the block."""
    try:
        saved = os.dup(2)
    except OSError:  # no standard error at all: nothing to silence
        yield
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def quiet_warp(verbose=False):
    """Set Warp's console output for a command: quiet by default (no banner, no per-module
    ``Module ... load`` lines), Warp's own messages with ``verbose``. Cheap: it does not start Warp."""
    wp.config.log_level = wp.LOG_INFO if verbose else wp.LOG_WARNING
    wp.config.quiet = not verbose  # the same switch in Warp releases before log_level


def start_warp(verbose=False):
    """Start Warp's runtime now, quietly unless ``verbose``.

    Warp's native library looks for the CUDA driver when it starts and, on a machine without one,
    prints "Warp CUDA warning: Could not find or load the NVIDIA CUDA driver" on standard error,
    whatever the device a run asks for. Started here with standard error silenced, a CPU run shows
    nothing of it; a CUDA run is told by ``check_device`` in one line instead. Python errors of the
    start are raised as usual."""
    quiet_warp(verbose)
    if verbose:
        wp.init()
        return
    with _stderr_silenced():
        wp.init()


def is_verbose():
    """Whether Warp's own messages are on (``quiet_warp(verbose=True)``)."""
    return wp.config.log_level <= wp.LOG_INFO
