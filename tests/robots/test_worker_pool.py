"""``WorkerPool.close`` stops busy workers at once: an interrupted run does not wait for the request in flight."""

import threading
import time

from softsnake.robots.workers import WorkerPool


def test_close_with_a_request_in_flight_does_not_wait_for_it():
    """Two workers, each a ``threading.Event`` (a module-level factory the spawned process can import), asked to
    wait 60 s: closing the pool then (as an interrupt does) returns within 5 s and leaves no process alive (it waited
    up to 10 s per worker for the request to end before). A pool with nothing pending closes after its workers
    read "close", as before."""
    pool = WorkerPool(threading.Event, 2, workers=2, arguments=lambda begin, end: (), item="event")
    processes = list(pool._processes)
    assert pool.request("is_set") == [False, False]
    pool.submit("wait", [(60.0,), (60.0,)])
    start = time.perf_counter()
    pool.close()
    assert time.perf_counter() - start < 5.0
    assert not any(process.is_alive() for process in processes)

    idle = WorkerPool(threading.Event, 1, workers=1, arguments=lambda begin, end: (), item="event")
    processes = list(idle._processes)
    idle.close()
    assert [process.exitcode for process in processes] == [0]  # it ended on "close", not killed
