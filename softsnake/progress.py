"""Progress of a long loop, on standard error only: a tqdm bar on a terminal, a one-line note every
``NOTE_INTERVAL`` seconds otherwise (a log file, a pipe, CI), so that standard output holds only
a command's results."""

import sys
import time

from tqdm import tqdm

NOTE_INTERVAL = 30.0
"""Time between two progress notes when standard error is not a terminal [s]."""


def _minutes(seconds):
    return f"{seconds:.0f} s" if seconds < 120.0 else f"{seconds / 60.0:.1f} min"


def progress(iterable, *, desc, unit, total=None, enabled=True, interval=NOTE_INTERVAL, stream=None):
    """Iterate over ``iterable`` and report progress on ``stream`` (standard error).

    desc: what runs ("gait"); unit: what one item is ("frame"); total: number of items (None:
    ``len(iterable)``); enabled: False reports nothing; interval: seconds between notes when the
    stream is not a terminal.
    """
    if not enabled:
        yield from iterable
        return
    stream = sys.stderr if stream is None else stream
    total = len(iterable) if total is None else total
    if stream.isatty():
        yield from tqdm(iterable, total=total, desc=desc, unit=unit, leave=False, file=stream)
        return
    start = last = time.monotonic()
    for done, item in enumerate(iterable, 1):
        yield item
        now = time.monotonic()
        if now - last >= interval and done < total:
            last = now
            elapsed = now - start
            left = elapsed * (total - done) / done
            print(f"{desc}: {done}/{total} {unit}s ({100.0 * done / total:.0f} %), {_minutes(elapsed)} so far, "
                  f"about {_minutes(left)} to go", file=stream, flush=True)
