"""The one stop-signal handler: the first Ctrl-C or SIGTERM stops gracefully, a second at once.

Every front end that runs for a while stops the same way: a local run, a
sharded run on Ray, ``interactions serve`` and the CLI entry itself. SIGTERM is
what Slurm, Kubernetes and ``docker stop`` send, so it is handled like Ctrl-C.
:class:`StopSignals` is a context manager that installs the handlers (in the
main thread only: Python forbids it elsewhere) and puts the previous ones back.

It lives at the package root, not in ``runtime``, because the CLI entry uses
it around every command, ``interactions list`` included, which must not pay for
importing the runtime. For the same reason it uses ``_signal``, the C module
behind :mod:`signal` that the interpreter has already loaded (``signal`` itself
imports ``enum``).
"""

from __future__ import annotations

import _signal
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType
    from typing import Any

__all__ = ["StopSignals"]

#: SIGINT (Ctrl-C) and SIGTERM: the signals that ask a program to stop.
STOP_SIGNALS = (_signal.SIGINT, _signal.SIGTERM)
_NAMES = {_signal.SIGINT: "SIGINT", _signal.SIGTERM: "SIGTERM"}


def _default(sig: int) -> Any:
    """The handler Python starts with: ``KeyboardInterrupt`` for SIGINT, else ``SIG_DFL``."""
    return _signal.default_int_handler if sig == _signal.SIGINT else _signal.SIG_DFL


def _defaults_in_a_child() -> None:
    """In a child a plugin forks (``multiprocessing``, ``os.fork``): the stop signals'
    handlers are the program's, not this process's, so they are put back to Python's
    defaults; the child's ``terminate()`` ended nothing, and its Ctrl-C said the
    parent was shutting down."""
    for sig in STOP_SIGNALS:
        handler = _signal.getsignal(sig)
        if isinstance(getattr(handler, "__self__", None), StopSignals):
            _signal.signal(sig, _default(sig))


def _stop_now(signum: int) -> None:
    """The default for a second signal: leave at once, wherever the program is."""
    from .errors import Interrupted

    raise Interrupted()


def _exit_unless_done(seconds: float, code: int) -> None:
    """End the process with ``code`` in ``seconds`` unless it has ended by then.

    A second stop signal must stop the program even when code inside it catches
    every exception (a plugin's bare ``except:`` around a blocking call swallows
    the one the signal raises), so a daemon thread ends it, like ``kill -9``.
    """
    import os
    import threading

    def hard_exit() -> None:
        sys.stderr.write(
            f"interactions: still running {seconds:g} s after the second stop signal (plugin "
            "code still awaiting in a cleanup or finalize, or catching the exceptions that "
            "stop it); exiting now\n"
        )
        sys.stderr.flush()
        os._exit(code)

    timer = threading.Timer(seconds, hard_exit)
    timer.daemon = True
    timer.start()


def _unblock(signals: tuple[int, ...]) -> list[int]:
    """Unblock those of ``signals`` this thread blocks (a plugin's ``pthread_sigmask``): the
    helper threads block them on purpose, so no thread would take them; return which."""
    mask = getattr(_signal, "pthread_sigmask", None)
    if mask is None:
        return []
    blocked = [sig for sig in signals if sig in mask(_signal.SIG_BLOCK, [])]
    if blocked:
        mask(_signal.SIG_UNBLOCK, blocked)
    return blocked


class StopSignals:
    """Calls ``first(signum)`` on the first stop signal and ``second(signum)`` on any later one.

    ``first`` defaults to only recording the request (read :attr:`requested`,
    :attr:`exit_code`); ``second`` defaults to raising
    :class:`~interactions_core.errors.Interrupted` (a ``KeyboardInterrupt``).
    ``stopped[0]``, when given, receives 128 + the first signal's number, the
    exit code of a program stopped by it. With ``exit_after``, a second signal
    also ends the process that many seconds later if it has not ended by then.
    With ``keep_custom=True`` a signal whose handler someone else has already
    replaced is left to that handler.
    Handlers are installed by ``with`` (or :meth:`install`) and removed on the
    way out (or by :meth:`restore`).
    """

    def __init__(
        self,
        first: Callable[[int], Any] | None = None,
        second: Callable[[int], Any] | None = None,
        *,
        signals: tuple[int, ...] = STOP_SIGNALS,
        stopped: list[int] | None = None,
        keep_custom: bool = False,
        exit_after: float | None = None,
    ) -> None:
        self.first = first
        self.second = second or _stop_now
        self.signals = signals
        self.stopped = stopped
        self.keep_custom = keep_custom
        self.exit_after = exit_after
        self.requested = False
        #: The number of the first stop signal received, 0 before one arrives.
        self.signum = 0
        #: The handlers replaced, to put back: signal number -> handler.
        self.previous: dict[int, Any] = {}
        self._timer: Any = None
        self._told = False

    @property
    def exit_code(self) -> int:
        """128 + the first signal's number (130 for Ctrl-C, 143 for SIGTERM), or 0."""
        return 128 + self.signum if self.signum else 0

    def handle(self, signum: int, frame: Any = None) -> None:
        """The signal handler; also callable directly, e.g. to simulate a signal."""
        if self.requested:
            if self.exit_after is not None:
                _exit_unless_done(self.exit_after, 128 + signum)
            self.second(signum)
            return
        self.requested = True
        self.signum = signum
        if self.stopped is not None and not self.stopped[0]:
            self.stopped[0] = 128 + signum
        if self.first is not None:
            self.first(signum)

    def install(self) -> StopSignals:
        """Install the handlers (main thread only); return ``self``."""
        for sig in self.signals:
            try:
                if self.keep_custom and _signal.getsignal(sig) != _default(sig):
                    continue
                self.previous[sig] = _signal.signal(sig, self.handle)
            except (ValueError, OSError):  # not the main thread
                pass
        return self

    def keep(self, loop: Any, every: float = 0.5) -> StopSignals:
        """Until :meth:`restore`, check on ``loop`` every ``every`` seconds that the handlers
        are still this object's, and put back any that code inside the program replaced.

        A plugin that installs its own SIGINT or SIGTERM handler (a library's handler
        that only sets a flag, ``SIG_IGN``), or blocks them in the main thread's signal
        mask, would otherwise leave Ctrl-C and the scheduler's SIGTERM without effect;
        the mask is opened again too. The first time is told on stderr.
        """

        def check() -> None:
            taken = [sig for sig in self.previous if _signal.getsignal(sig) != self.handle]
            for sig in taken:
                _signal.signal(sig, self.handle)
            masked = _unblock(tuple(self.previous))
            if (taken or masked) and not self._told:
                self._told = True
                how = "replaced the handler of" if taken else "blocked"
                how += ", and blocked," if taken and masked else ""
                named = " and ".join(_NAMES.get(s, str(s)) for s in sorted({*taken, *masked}))
                sys.stderr.write(
                    f"interactions: warning: code inside the program (a plugin?) {how} "
                    f"{named}; the program's own handling is back, so Ctrl-C and SIGTERM "
                    "still stop it\n"
                )
            self._timer = loop.call_later(every, check)

        if self.previous:
            self._timer = loop.call_later(every, check)
        return self

    def stop_keeping(self) -> None:
        """Stop :meth:`keep`'s checks, leaving the handlers as they are.

        For a program whose handlers someone else puts back as it ends (uvicorn
        restores the ones from before its run): a check after that would take
        them for a plugin's and say so.
        """
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def restore(self) -> None:
        """Put the previous handlers back (and stop :meth:`keep`)."""
        self.stop_keeping()
        for sig, previous in self.previous.items():
            _signal.signal(sig, previous)
        self.previous = {}

    def __enter__(self) -> StopSignals:
        return self.install()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.restore()


if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(after_in_child=_defaults_in_a_child)
