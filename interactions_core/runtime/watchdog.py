"""Watching the event loop: a plugin call that blocks it is named and, if asked, broken.

Interaction methods are coroutines. One that makes a synchronous call (a
blocking HTTP client, ``time.sleep``, a long sympy computation) holds the whole
event loop: no other episode moves, ``--timeout`` (a timer on the loop) cannot
fire and a Ctrl-C handler scheduled on the loop waits. :class:`LoopWatchdog`
runs a thread that checks a heartbeat the loop updates every ``interval``
seconds. While the loop is stuck it reads the main thread's stack to find the
call holding it; one that has held it for ``report_after`` seconds is named
(``module.Class.method``) and counted in :attr:`LoopWatchdog.blocks`. A block is
one call: a loop held by the runtime's own code, or by many short plugin calls in a row (a run of
episodes that never wait: a replayed policy, a judge that only computes), is no
plugin's doing and is neither reported nor broken. When one call has held it for
``limit`` seconds (the run's ``--timeout``), or for ``report_after`` seconds once
``should_break()`` says the run is stopping, it sends the main thread a signal
whose handler raises :class:`LoopBlocked` inside the blocking call: the episode
then ends as an error, exactly like a call that timed out.

:class:`LoopBlocked` derives from :class:`BaseException`, so a plugin's broad
``except Exception`` around its slow call does not swallow it. Code that never
returns to Python (a C extension holding the GIL) cannot be broken this way;
it is still reported.
"""

from __future__ import annotations

import contextlib
import gc
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

__all__ = ["BLOCKING_ADVICE", "Call", "LoopBlocked", "LoopWatchdog", "tracked", "watching"]

#: What to tell the author of a plugin that blocks the loop.
BLOCKING_ADVICE = (
    "a synchronous call inside an async method stops every other episode, --timeout and "
    "Ctrl-C while it runs; use an async client, or run the call with "
    "`await asyncio.to_thread(...)`"
)
_METHODS = frozenset(
    (
        "start_interaction",
        "generate_response",
        "calculate_score",
        "finalize_interaction",
        "reply",  # a policy's
        # A SessionInteraction's: its lifecycle methods are the base class's, in the runtime
        "new_session",
        "respond",
        "score",
        "end_session",
    )
)
_SIGNAL = getattr(signal, "SIGUSR2", None)
_SIGNAL_NAME = "SIGUSR2"


def keep_signals_off_this_thread() -> None:
    """Block stop signals in a helper thread, so the kernel delivers them to the main one.

    A process-directed signal (Ctrl-C, ``kill``) may land on any thread that does
    not block it; landing on a helper thread, it would not interrupt a blocking
    call in the main thread, and its handler would wait for that call to end.
    """
    mask = getattr(signal, "pthread_sigmask", None)
    if mask is None:
        return
    wanted = {signal.SIGINT, signal.SIGTERM}
    if _SIGNAL is not None:
        wanted.add(_SIGNAL)
    try:
        mask(signal.SIG_BLOCK, wanted)
    except (OSError, ValueError):
        pass


class LoopBlocked(BaseException):
    """Raised inside a call that held the event loop past the allowed time."""


class _QuietBreaks:
    """``sys.unraisablehook`` while a watchdog runs, for what Python cannot raise (an
    exception leaving a plugin's ``__del__``): a :class:`LoopBlocked` that broke it is
    not told again, since the watchdog has named the block in one line; any other is
    told in one escaped line with the plugin's ``file:line``, as a run tells a plugin's
    errors (Python printed a traceback, and the plugin's text raw). With
    ``INTERACTIONS_DEBUG=1`` it goes to the hook that was there before."""

    def __init__(self) -> None:
        self.previous: Any = sys.__unraisablehook__

    def __call__(self, unraisable: Any) -> None:
        import os

        kind = unraisable.exc_type
        if kind is not None and issubclass(kind, LoopBlocked):
            return
        exc = unraisable.exc_value
        if exc is None or os.environ.get("INTERACTIONS_DEBUG", "").strip() not in ("", "0"):
            self.previous(unraisable)
            return
        from .._classes import describe
        from ..errors import printable, shown

        where = unraisable.err_msg or "Exception ignored in"
        told = f"{where} {shown(unraisable.object, 200)}: {describe(exc)}"
        try:
            sys.stderr.write(f"interactions: warning: {printable(told)}\n")
        except (OSError, ValueError):  # stderr closed: nothing to tell it on
            pass


_quiet_breaks = _QuietBreaks()


class Call:
    """One plugin call under a timeout, as the watchdog knows it: how long its own blocks
    (in its own coroutines, not in tasks it starts) have held the loop."""

    __slots__ = ("held", "timed_out")

    def __init__(self) -> None:
        self.held = 0.0
        #: Whether one of its blocks was broken for holding the loop its whole timeout:
        #: the call has then timed out, however little it ran before the block (a block
        #: is timed from the loop's last turn, which may come before the call began).
        self.timed_out = False


#: The watchdogs started and not stopped yet (one per watched loop).
_WATCHING: list[LoopWatchdog] = []


def watching(loop: Any) -> LoopWatchdog | None:
    """The watchdog watching ``loop``, or ``None``."""
    for watchdog in _WATCHING:
        if watchdog.loop is loop:
            return watchdog
    return None


#: Top-level packages whose frames are the runtime's own (with the standard library):
#: a loop held by them alone is the runtime playing episodes that never wait.
_RUNTIME = frozenset({"interactions_core", "pluggy", "attr", "attrs", "yaml", "packaging"})
_STDLIB = getattr(sys, "stdlib_module_names", frozenset({"asyncio", "json", "selectors"}))
#: The web server ``interactions serve`` runs in, between the runtime's own frames (its
#: ASGI wrappers outside, the environment inside): never a plugin's code.
_SERVER = frozenset(
    {"uvicorn", "starlette", "fastapi", "openenv", "anyio", "websockets", "h11", "pydantic"}
)


@contextlib.contextmanager
def tracked(frame: Any) -> Iterator[None]:
    """Time the code that runs in ``frame`` (the caller's own, ``inspect.currentframe()``,
    passed straight in) as one call of the running loop's watchdog, if one watches.

    For what the runtime runs between plugin calls on an episode's behalf (the
    policy's reply, hooks, a record written out, a served step's bookkeeping): a
    block there is that episode's, named and broken as a call's are, and the
    calls awaiting beside it are not charged its time. The frame is held here, not
    in a local of the caller's, which would make it hold itself until the collector
    runs, and with it every object of the episode.
    """
    import asyncio

    try:
        watch = watching(asyncio.get_running_loop())
    except RuntimeError:  # no loop running: nothing watches
        watch = None
    if watch is None:
        yield
        return
    watch.begin_call(frame)
    try:
        yield
    finally:  # (a frame's id may be another's once it is gone)
        watch.end_call(frame)


def _name(frame: Any) -> str:
    code = frame.f_code
    module = frame.f_globals.get("__name__", "?")
    return f"{module}.{getattr(code, 'co_qualname', code.co_name)}"


def _called_by_us(frame: Any) -> bool:
    """Whether ``frame`` was called by the runtime: a lifecycle method, not a plugin's own
    helper that happens to be named ``score`` (a new frame at every call, which would
    have the block timed piece by piece, never named nor broken)."""
    caller = frame.f_back
    return caller is not None and caller.f_globals.get("__name__", "").startswith(
        "interactions_core."
    )


def _blocker(frame: Any, calls: Mapping[int, Call]) -> tuple[Any, Any]:
    """``(key, named)``: the frame that keys the block holding the loop, and the frame of
    plugin or policy code that names it; ``(None, None)`` when no plugin code holds it.

    The innermost lifecycle method of a plugin or policy on ``frame``'s stack (one
    the runtime called) is both. Failing that, the block is named by the first
    frame of code that is neither the runtime's nor the standard library's inside
    the outermost runtime frame (a decorated method's wrapper, a score's
    ``__float__``; never the web server around the runtime), or without one by the
    outermost such frame (a plugin's coroutine in a task of its own); it is keyed
    by the innermost frame of a tracked call around it (``calls``: a bounded call,
    an episode), when there is one. So a block stays one for as long as the call
    holds the loop, whatever helpers and callbacks it runs, each a new frame, and
    whatever plugin code the runtime calls back one piece at a time for it (every
    value of a turn's ``extra`` made text). With no plugin code on the stack it is
    the runtime itself playing episodes that never wait, which is no plugin's
    doing, or the server's own work (parsing a huge reset), keyed and named by its
    innermost frame; inside a tracked call (writing a record out), keyed by it and
    named by nothing: charged to that call, never reported nor broken. The walk stops
    at the loop's own frame (``Handle._run``); what lies outside is the loop's caller.
    """
    stack = []  # from the innermost frame to the loop's own
    tracked = None  # the innermost frame of a tracked call
    while frame is not None:
        code = frame.f_code
        module = frame.f_globals.get("__name__", "?")
        if code.co_name == "_run" and module == "asyncio.events":
            break
        top = module.partition(".")[0]
        if code.co_name in _METHODS and top != "interactions_core" and _called_by_us(frame):
            return frame, frame
        if tracked is None and id(frame) in calls:
            tracked = frame
        stack.append((frame, top))
        frame = frame.f_back
    # The first plugin frame inside the outermost runtime frame: what lies outside it is
    # the web server around the runtime; without one, the outermost plugin frame.
    ours = [i for i, (_, top) in enumerate(stack) if top == "interactions_core"]
    for f, top in reversed(stack[: ours[-1]] if ours else stack):
        if top not in _RUNTIME and top not in _STDLIB and top not in _SERVER:
            return (f if tracked is None else tracked), f
    if tracked is not None:  # the runtime's own work for a call (a record written out):
        return tracked, None  # charged to it, never named nor broken
    server = next((f for f, top in stack if top in _SERVER), None)
    return server, server


def _finalizer(frame: Any) -> tuple[Any, Any]:
    """``(key, named)`` of a block while Python's collector runs in the loop's thread: the
    innermost frame that is neither the runtime's, the standard library's nor the
    server's (a plugin object's ``__del__``) is both; failing one, the innermost frame
    keys it and nothing names it.

    The collector frees a plugin's reference cycles wherever an allocation happens
    to start it, often inside another episode's call: what their ``__del__`` holds
    is no call's, so it is charged to none (see ``LoopWatchdog._watch``).
    """
    innermost = frame
    while frame is not None:
        top = frame.f_globals.get("__name__", "?").partition(".")[0]
        if top not in _RUNTIME and top not in _STDLIB and top not in _SERVER:
            return frame, frame
        frame = frame.f_back
    return innermost, None


#: The thread running Python's garbage collector, while it runs (see _collecting).
_COLLECTOR: list[int | None] = [None]


def _collecting(phase: str, info: Mapping[str, Any]) -> None:
    """A ``gc.callbacks`` entry: note which thread collects, from start to stop."""
    _COLLECTOR[0] = threading.get_ident() if phase == "start" else None


def _inside(frame: Any, held: Any) -> bool:
    """Whether ``held`` is on ``frame``'s stack: the block the signal was sent to break has
    not ended (and the loop's own code, which may run before the loop's next turn is
    seen, is never interrupted)."""
    while frame is not None:
        if frame is held:
            return True
        frame = frame.f_back
    return False


class LoopWatchdog:
    """See the module docstring. Create, :meth:`start` and :meth:`stop` from the loop's thread."""

    def __init__(
        self,
        loop: Any,
        *,
        limit: float | None = None,
        report_after: float = 1.0,
        interval: float = 0.05,
        should_break: Callable[[], bool] | None = None,
    ) -> None:
        self.loop = loop
        self.limit = limit
        self.report_after = report_after if limit is None else min(report_after, limit)
        self.interval = interval
        self.should_break = should_break
        #: ``name -> [times it blocked, longest block in seconds]``
        self.blocks: dict[str, list[Any]] = {}
        self._beat = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._handle: Any = None
        self._main = threading.get_ident()
        self._current: str | None = None
        #: The frame of the call holding the loop, and since when (watchdog thread only).
        self._held: Any = None
        self._held_since = 0.0
        self._fresh = True
        self._sent = False
        self._for_timeout = False  # whether the break sent is the timeout's (see Call)
        self._previous: Any = None
        self._can_break = False
        #: The call last broken; seen holding the loop again, it caught the exception.
        self._broken: Any = None
        self._broken_named: Any = None
        self._named: Any = None  # the frame naming the block in progress (see _blocker)
        self._told_stuck: set[str] = set()
        self._told_unbreakable = False
        self._told_reclaimed = False
        # The time plugin calls held the loop, by call: what --timeout does not count
        # against the other calls (see held_elsewhere). A call is known by the frame
        # of the coroutine that bounds it (id -> Call, while it runs).
        self._lock = threading.Lock()
        self._held_total = 0.0
        self._calls: dict[int, Call] = {}
        #: The block in progress, seen from the thread: ``(call, since)``.
        self._block: tuple[Call, float] | None = None
        #: What a block while the collector runs is charged to: no call (see _finalizer).
        self._nobody = Call()

    def start(self) -> LoopWatchdog:
        self._beat = time.monotonic()
        self._handle = self.loop.call_later(self.interval, self._heartbeat)
        if _SIGNAL is not None and threading.current_thread() is threading.main_thread():
            try:
                if signal.getsignal(_SIGNAL) in (signal.SIG_DFL, None):
                    self._previous = signal.signal(_SIGNAL, self._on_signal)
                    self._can_break = True
            except (ValueError, OSError):
                self._can_break = False
        self._thread = threading.Thread(
            target=self._watch, name="interactions-watchdog", daemon=True
        )
        self._thread.start()
        if not _WATCHING:
            gc.callbacks.append(_collecting)
            _quiet_breaks.previous = sys.unraisablehook
            sys.unraisablehook = _quiet_breaks
        _WATCHING.append(self)
        return self

    def stop(self) -> None:
        if self in _WATCHING:
            _WATCHING.remove(self)
            if not _WATCHING and _collecting in gc.callbacks:
                gc.callbacks.remove(_collecting)
            if not _WATCHING and sys.unraisablehook is _quiet_breaks:
                sys.unraisablehook = _quiet_breaks.previous
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._handle is not None:
            self._handle.cancel()
        if self._can_break:
            signal.signal(_SIGNAL, self._previous or signal.SIG_DFL)  # type: ignore[arg-type]
            self._can_break = False

    def report(self) -> list[str]:
        """One line per blocking method, for the run's summary."""
        return [
            f"{name} blocked the event loop {count} time(s), up to {longest:.1f} s"
            for name, (count, longest) in sorted(self.blocks.items())
        ]

    def begin_call(self, frame: Any) -> Call:
        """Track the plugin call bounded in ``frame`` (its coroutine's) until :meth:`end_call`."""
        call = self._calls[id(frame)] = Call()
        return call

    def end_call(self, frame: Any) -> None:
        self._calls.pop(id(frame), None)

    def held_elsewhere(self, call: Call) -> float:
        """Seconds other plugin calls have held the loop since the watch began: each
        block of one call from its start, the one in progress up to now.

        A call's ``--timeout`` does not count this time (``Session``): a plugin
        that blocks the loop for a second must not make every episode waiting
        beside it time out; its own call is broken, and only it fails. A block is
        charged to the call whose coroutines ran it; one in a task a call started
        (``asyncio.gather``) is no call's, so it is not forgiven to anyone.
        """
        with self._lock:
            held = self._held_total - call.held
            block = self._block
            if block is not None and block[0] is not call:
                held += time.monotonic() - block[1]
        return held

    def _end_block(self, until: float, wait: bool = True) -> None:
        """Charge the block in progress, up to ``until``, to the call that ran it.

        ``wait=False`` (from the signal handler, in the loop's thread, which may be
        inside :meth:`held_elsewhere` already) leaves it to the next heartbeat when
        the lock is taken.
        """
        if not self._lock.acquire(blocking=wait):
            return
        try:
            if self._block is None:
                return
            call, since = self._block
            held = max(0.0, until - since)
            self._held_total += held
            call.held += held
            self._block = None
        finally:
            self._lock.release()

    def _call_of(self, frame: Any) -> Call | None:
        """The tracked call whose coroutine is on ``frame``'s stack, if any."""
        calls = self._calls
        while frame is not None:
            call = calls.get(id(frame))
            if call is not None:
                return call
            frame = frame.f_back
        return None

    def _heartbeat(self) -> None:
        self._beat = time.monotonic()
        if _COLLECTOR[0] == self._main:  # no collection runs here: a stop signal's handler
            _COLLECTOR[0] = None  # raised inside the callback before it said "stop"
        if self._block is not None:  # the loop turns again: the block is over
            self._end_block(self._beat)
        if self._can_break and signal.getsignal(_SIGNAL) != self._on_signal:  # type: ignore[arg-type]
            self._reclaim()
        if not self._stop.is_set():
            self._handle = self.loop.call_later(self.interval, self._heartbeat)

    def _watch(self) -> None:
        """Time each plugin call that holds the loop, from the thread.

        While the loop does not turn, the main thread's stack is read every
        ``interval``: as long as the same call (the same frame object, kept
        referenced so that no later call can reuse it) holds the loop, it is one
        block, reported after ``report_after`` seconds and broken after the
        limit. Many short calls in a row (episodes that never wait) are not one
        block: each is seen at most once.
        """
        keep_signals_off_this_thread()
        while not self._stop.wait(self.interval):
            now = time.monotonic()
            if now - self._beat < 2 * self.interval:  # the loop turns
                self._held, self._current, self._sent, self._fresh = None, None, False, True
                self._named = None
                continue
            stack = sys._current_frames().get(self._main)
            collecting = _COLLECTOR[0] == self._main
            frame, named = _finalizer(stack) if collecting else _blocker(stack, self._calls)
            if (
                named is not None
                and frame is not None
                and frame is self._broken
                and named is self._broken_named
            ):
                self._still_held(named)
            self._named = named
            if frame is None or frame is not self._held:
                # Another call (or the runtime's own work): timed afresh from here,
                # or from the last heartbeat when it is the first look at this stop.
                # The block before it, another call's in the same turn, ends here.
                self._end_block(now)
                self._held, self._current, self._sent = frame, None, False
                self._held_since = self._beat if self._fresh else now
                self._fresh = False
                continue
            held = now - self._held_since
            if self._block is None and self._calls:  # one call held it twice in a row
                call = self._nobody if collecting else self._call_of(frame)
                if call is not None:
                    with self._lock:
                        self._block = (call, self._held_since)
            if held < self.report_after or named is None:
                continue
            if self._current is None:
                self._current = _name(named)
                self.blocks.setdefault(self._current, [0, 0.0])[0] += 1
            entry = self.blocks[self._current]
            entry[1] = max(entry[1], held)
            limit = self.limit
            if self.should_break is not None and self.should_break():
                limit = self.report_after if limit is None else min(limit, self.report_after)
            if not self._sent and limit is not None and held >= limit:
                self._sent = True
                self._for_timeout = limit == self.limit  # not a stopping run's quicker break
                self._break(limit)

    def _break(self, limit: float) -> None:
        """Send the main thread the signal that breaks the call holding the loop.

        Only while the handler is still this watchdog's: a plugin may have reset it
        since the last heartbeat (to ``SIG_DFL``, which would end the process), or
        another handler was there first. Then the call is not broken, this is said
        once, and the call ends as a timeout when it returns (``Session``).
        """
        ours = self._can_break and signal.getsignal(_SIGNAL) == self._on_signal  # type: ignore[arg-type]
        if ours:
            try:
                signal.pthread_kill(self._main, _SIGNAL)  # type: ignore[arg-type]
            except (OSError, ValueError):
                pass
            return
        if not self._told_unbreakable:
            self._told_unbreakable = True
            sys.stderr.write(
                f"interactions: warning: {self._current} has held the event loop for "
                f"over {limit:g} s and cannot be broken: {_SIGNAL_NAME}, the signal that "
                "breaks it, has another handler (the plugin's own?); it runs until it "
                "returns, and then a call past its timeout ends as timed out\n"
            )

    def _reclaim(self) -> None:
        """Put this watchdog's handler back when a plugin replaced it (main thread, on
        the loop): said once, as for the stop signals."""
        signal.signal(_SIGNAL, self._on_signal)  # type: ignore[arg-type]
        if not self._told_reclaimed:
            self._told_reclaimed = True
            sys.stderr.write(
                f"interactions: warning: plugin code replaced the {_SIGNAL_NAME} handler "
                "that breaks a call blocking the event loop; it was put back\n"
            )

    def _still_held(self, frame: Any) -> None:
        """Say once per method, from this thread (the loop is held), that a broken call
        caught :class:`LoopBlocked` and goes on holding the loop."""
        self._broken = self._broken_named = None
        name = _name(frame)
        if name not in self._told_stuck:
            self._told_stuck.add(name)
            sys.stderr.write(
                f"interactions: warning: {name} caught the exception that broke its block "
                "(a bare `except:`?) and still holds the event loop: nothing else runs until "
                "it returns; a second stop signal ends the process\n"
            )

    def _on_signal(self, signum: int, frame: Any) -> None:
        if frame is not None and frame.f_code is _collecting.__code__:
            # Raised in a gc callback, the break would be swallowed (and the collector's
            # state left stale): sent again at the watchdog's next look.
            self._sent = False
            return
        now = time.monotonic()
        if self._sent and now - self._beat >= self.report_after and _inside(frame, self._held):
            # This block ends here: a later one is timed (and broken) afresh. It is
            # charged up to now, not to the next heartbeat: the call that follows in the
            # same turn of the loop (the next episode's) would be forgiven the rest.
            held = now - self._held_since
            block = self._block
            if block is not None and self._for_timeout:
                block[0].timed_out = True
            self._end_block(now, wait=False)
            self._beat = now
            self._broken, self._broken_named = self._held, self._named
            self._held, self._current, self._sent, self._fresh = None, None, False, True
            raise LoopBlocked(
                f"blocked the event loop for {held:.1f} s and was stopped; {BLOCKING_ADVICE}"
            )
