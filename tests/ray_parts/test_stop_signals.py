"""Stopping a sharded run (interactions_core.ray._stop_signals) on SIGTERM or Ctrl-C."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from interactions_core.ray._stop_signals import StopOnSignal


def test_the_first_signal_asks_to_stop_and_the_second_interrupts() -> None:
    before = signal.getsignal(signal.SIGTERM)
    stopped = [0]
    stop = StopOnSignal(stopped)
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.requested and stopped == [128 + signal.SIGTERM]
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
        assert stopped == [143]  # the first signal's code is kept
    finally:
        stop.restore()
    assert signal.getsignal(signal.SIGTERM) is before


def test_outside_the_main_thread_no_handler_is_installed() -> None:
    made: list[StopOnSignal] = []
    thread = threading.Thread(target=lambda: made.append(StopOnSignal()))
    thread.start()
    thread.join()
    assert made[0].previous == {} and not made[0].requested
