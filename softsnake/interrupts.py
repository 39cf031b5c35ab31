"""Interrupts that wait for the end of a frame.

A long run stopped by Ctrl-C (SIGINT) or by a job scheduler's SIGTERM keeps what it computed. For it to be
continued later bit for bit, the state it keeps must be a whole frame's: a KeyboardInterrupt raised between two
of a step's kernel launches would leave positions of one substep beside multipliers of another. Inside
``FrameInterrupts`` both signals only ask for a stop, which ``check`` (called between frames) turns into a
KeyboardInterrupt; a second signal stops at once, mid-frame (``at_frame_end`` is then False).

Signal handlers can only be set in the main thread; elsewhere ``FrameInterrupts`` changes nothing and a Ctrl-C
interrupts where it lands, as without it. A signal the process ignores (SIGINT in a job started with ``nohup`` or
``&`` from a script) stays ignored.
"""

import contextlib
import signal
import threading

SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def signal_handlers(numbers, handler, *, replaces=lambda current: True):
    """Inside the block, ``handler`` (a function of (signal number, frame), or ``signal.SIG_IGN``) handles each
    signal of ``numbers`` whose current handler ``replaces(current)`` accepts; the handlers before come back after.
    Only the main thread can set handlers: elsewhere nothing changes. Yields the signals it took over."""
    if threading.current_thread() is not threading.main_thread():
        yield ()
        return
    previous = {number: signal.getsignal(number) for number in numbers if replaces(signal.getsignal(number))}
    for number in previous:
        signal.signal(number, handler)
    try:
        yield tuple(previous)
    finally:
        for number, before in previous.items():
            signal.signal(number, before)


class FrameInterrupts:
    """Context manager: SIGINT and SIGTERM ask for a stop at the next ``check``; a second one stops at once.

    ``at_frame_end``: False once a KeyboardInterrupt was raised mid-frame (a second signal, or outside the
    main thread, where the handlers are not set), True otherwise.
    """

    def __init__(self):
        self.requested = None
        """The signal number of the first interrupt asked for, or None."""
        self.at_frame_end = True
        self._handlers = None

    def __enter__(self):
        self._handlers = signal_handlers(SIGNALS, self._ask, replaces=lambda current: current is not signal.SIG_IGN)
        self._handlers.__enter__()
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        self._handlers.__exit__(None, None, None)
        if exc_type is KeyboardInterrupt and self.requested is None:
            self.at_frame_end = False  # a Ctrl-C that no handler of ours saw (not the main thread)
        return False

    def _ask(self, number, _frame):
        if self.requested is not None:
            self.at_frame_end = False
            raise KeyboardInterrupt
        self.requested = number

    def check(self):
        """Raise KeyboardInterrupt if a stop was asked for (call between frames)."""
        if self.requested is not None:
            raise KeyboardInterrupt
