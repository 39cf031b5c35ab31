"""``softsnake.interrupts.FrameInterrupts``: SIGINT and SIGTERM ask for a stop that ``check`` raises between frames;
a second signal stops at once; the handlers before it come back."""

import os
import signal

import pytest

from softsnake.interrupts import FrameInterrupts


@pytest.fixture(autouse=True)
def interruptible():
    """SIGINT as in a terminal: a test run started in the background (``pytest &``) has it ignored."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_waits_for_the_check(number):
    before = signal.getsignal(number)
    with pytest.raises(KeyboardInterrupt), FrameInterrupts() as interrupts:
        interrupts.check()  # nothing asked for yet
        os.kill(os.getpid(), number)
        assert interrupts.requested == number  # delivered, and the frame goes on
        interrupts.check()
    assert interrupts.at_frame_end
    assert signal.getsignal(number) is before


def test_a_second_signal_stops_at_once():
    with pytest.raises(KeyboardInterrupt), FrameInterrupts() as interrupts:
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)
        raise AssertionError("the second signal did not stop the frame")
    assert not interrupts.at_frame_end


def test_leaving_without_a_signal_changes_nothing():
    with FrameInterrupts() as interrupts:
        interrupts.check()
    assert interrupts.requested is None and interrupts.at_frame_end
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_ignored_signal_stays_ignored():
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with FrameInterrupts() as interrupts:
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        os.kill(os.getpid(), signal.SIGINT)
        interrupts.check()
    assert interrupts.requested is None
