"""The one stop-signal handler (interactions_core._stop_signals): first graceful, second at once."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from interactions_core._stop_signals import StopSignals
from interactions_core.errors import Interrupted


def test_the_first_signal_asks_to_stop_and_the_second_interrupts() -> None:
    before = signal.getsignal(signal.SIGTERM)
    stopped = [0]
    seen: list[int] = []
    with StopSignals(seen.append, stopped=stopped) as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.requested and stopped == [128 + signal.SIGTERM] and seen == [signal.SIGTERM]
        with pytest.raises(Interrupted):
            os.kill(os.getpid(), signal.SIGINT)
        assert stopped == [143] and stop.exit_code == 143  # the first signal's code is kept
        assert seen == [signal.SIGTERM]
    assert signal.getsignal(signal.SIGTERM) is before


def test_the_second_signal_can_be_handled_too() -> None:
    calls: list[tuple[str, int]] = []
    stop = StopSignals(lambda s: calls.append(("first", s)), lambda s: calls.append(("again", s)))
    stop.handle(signal.SIGINT)
    stop.handle(signal.SIGTERM)
    assert calls == [("first", signal.SIGINT), ("again", signal.SIGTERM)]
    assert stop.exit_code == 130


def test_a_custom_handler_is_kept_when_asked() -> None:
    def mine(signum: int, frame: object) -> None:
        pass

    previous = signal.signal(signal.SIGINT, mine)
    try:
        with StopSignals(signals=(signal.SIGINT,), keep_custom=True) as stop:
            assert signal.getsignal(signal.SIGINT) is mine and stop.previous == {}
        with StopSignals(signals=(signal.SIGINT,)):
            assert signal.getsignal(signal.SIGINT) is not mine
        assert signal.getsignal(signal.SIGINT) is mine
    finally:
        signal.signal(signal.SIGINT, previous)


def test_outside_the_main_thread_no_handler_is_installed() -> None:
    made: list[StopSignals] = []
    thread = threading.Thread(target=lambda: made.append(StopSignals().install()))
    thread.start()
    thread.join()
    assert made[0].previous == {} and not made[0].requested
