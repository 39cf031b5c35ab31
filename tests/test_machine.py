"""The cores worker and drawing processes are sized by: the process's own (its affinity set), never more than the
machine has."""

import os

import pytest

from softsnake.animation import PICTURES_PER_PROCESS, drawing_processes
from softsnake.machine import usable_cores


def test_usable_cores_are_this_process_s_own():
    cores = usable_cores()
    assert 1 <= cores <= (os.cpu_count() or 1)
    if hasattr(os, "sched_getaffinity"):
        assert cores == len(os.sched_getaffinity(0))


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs sched_setaffinity")
def test_a_process_held_to_one_core_draws_in_one_process():
    """As a job scheduler or a container holds it: one core lent, one drawing process, however many the host has."""
    kept = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, {min(kept)})
        assert usable_cores() == 1
        assert drawing_processes(20 * PICTURES_PER_PROCESS) == 1
    finally:
        os.sched_setaffinity(0, kept)
