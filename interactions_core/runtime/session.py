"""Sessions: one interaction, one ``instance_id``, a lifecycle that always ends.

A :class:`Session` owns verl's lifecycle for one conversation::

    start_interaction -> generate_response ... -> calculate_score -> finalize_interaction

and guarantees the last step. Use it as an async context manager and
``finalize_interaction`` runs on every way out of the block: normal end, an
exception in the plugin, a timeout, or the task being cancelled::

    async with Session(interaction, timeout=30) as session:
        await session.start(ground_truth="72")
        result = await session.respond(messages)
        score = await session.score()

Every failing call is raised as :class:`~interactions_core.errors.InteractionCallError`,
whose message names the interaction, the session id and the method. A per-call
``timeout`` (seconds, off by default) turns a hung plugin call into such an error.

The rule for a failed start is decided here, once, for every caller (the
episode loop, the verl agent loop, ``interactions serve``, the test driver): a
``start_interaction`` that *raises* opened no session, so nothing is finalized
(the plugin refused the session and keeps nothing for it; finalizing would also
reach a live session that already holds that id). A ``start_interaction`` that
is *cancelled* while it runs may have stored state before the cancel reached
it, so that session is finalized like any other.

Anything a plugin call raises, of any class, becomes an ``InteractionCallError``;
only a real stop of the run (see :func:`stops_the_run`) passes through.

A :class:`SessionTracker` counts the sessions that are open, so a caller (and the
test suite) can check that a run left none behind.
"""

from __future__ import annotations

import asyncio
import traceback
from collections.abc import Callable, Mapping
from math import isfinite
from typing import Any

from .._interaction import InteractionResult, as_score
from ..errors import (
    MAX_MESSAGE,
    InteractionCallError,
    Interrupted,
    cut_text,
    exception_kind,
    exception_text,
    its_own_timeout,
    keep_text,
    made_by_runtime,
    runtime_call_error,
)

__all__ = ["Session", "SessionTracker", "call_error", "stops_the_run"]

_NEW, _OPEN, _CLOSED = 0, 1, 2

#: Per function: whether it takes the session id. verl's own base class declared
#: ``calculate_score(self)`` and ``finalize_interaction(self)`` (its loop never
#: called them); classes inheriting those are called without arguments.
_TAKES_ID: dict[Any, bool] = {}

#: The kwargs of a session not started yet: shared, never written to.
_NO_KWARGS: Mapping[str, Any] = {}


_timeout = getattr(asyncio, "timeout", None)


async def _bounded(
    make: Callable[[], Any], seconds: float, check: Callable[[Any], Any] | None
) -> Any:
    """``check(await make())``, for at most ``seconds``: ``TimeoutError`` after that.

    ``make`` looks the plugin's method up and calls it for its coroutine, and
    ``check`` (``None``: none) turns what the plugin returned into what the runtime
    keeps. Both run inside the bounds because both may run the plugin's code (its
    ``__getattribute__``; a ``str`` or ``tuple`` subclass's methods, a score's
    ``__float__``), as does reading the message of what it raised: time spent
    holding the loop there is this call's, and not forgiven to the calls beside it.

    ``asyncio.timeout`` (Python 3.11+) runs the call in the caller's task; before
    3.12, ``asyncio.wait_for`` wraps it in a task of its own, which costs more than
    a judge's turn and doubled the time of runs whose episodes never wait.

    The time another plugin call held the event loop is not counted (on 3.11+,
    under a :class:`~interactions_core.runtime.watchdog.LoopWatchdog`, which
    charges each block to the call whose coroutines ran it): a plugin blocking
    the loop for a second made every call waiting beside it time out, and only
    the blocking call must fail. A call that returns after its deadline is timed
    out too: its timer could not fire while the call itself held the loop (a
    block the watchdog could not break), and its late result is not taken.
    """
    from .watchdog import watching

    loop = asyncio.get_running_loop()
    start = loop.time()
    watch = watching(loop)
    if _timeout is None or watch is None:
        if _timeout is None:
            result = await asyncio.wait_for(_told(make()), seconds)
        else:
            async with _timeout(seconds):
                result = await _told(make())
        if check is not None:
            result = check(result)
        if loop.time() > start + seconds:
            raise asyncio.TimeoutError
        return result
    import inspect  # already imported by asyncio

    frame = inspect.currentframe()  # this coroutine's: the call's, seen from the watchdog
    me = watch.begin_call(frame)
    mark = watch.held_elsewhere(me)

    def deadline() -> float:
        return start + seconds + watch.held_elsewhere(me) - mark

    async with _timeout(None) as scope:
        timer: list[asyncio.TimerHandle] = []

        def expire() -> None:
            end = deadline()
            if loop.time() >= end:
                scope.reschedule(end)  # in the past: the scope times out now
            else:  # other calls held the loop meanwhile: the deadline moved
                timer[0] = loop.call_at(end, expire)

        timer.append(loop.call_at(start + seconds, expire))
        try:
            result = await make()
            if check is not None:
                result = check(result)
        except BaseException as exc:
            # Its message and its class's name are plugin code too, and so is the __del__
            # of what its frames hold: all while the call is still timed as this call.
            keep_text(exc)
            traceback.clear_frames(exc.__traceback__)
            raise
        finally:
            timer[0].cancel()
            watch.end_call(frame)
            # The frame holds itself through this local: left so, it would keep what the
            # call made (the plugin's copy of the conversation, in ``make``) until the
            # collector runs, and the collector runs inside some other call.
            del frame
    if me.timed_out or loop.time() > deadline():  # a block of its own was broken, or late
        raise asyncio.TimeoutError
    return result


async def _told(call: Any) -> Any:
    """``await call``; what it raises has its text kept (:func:`keep_text`) on its way out,
    so a ``TimeoutError`` of the plugin's own is told from the runtime's deadline."""
    try:
        return await call
    except BaseException as exc:
        keep_text(exc)
        raise


def _none(returned: Any) -> None:
    """What ``finalize_interaction`` returned, dropped while the call is timed: its
    ``__del__`` is the plugin's code."""


def _plain_id(returned: Any) -> str | type:
    """What ``start_interaction`` returned: a ``str`` (a subclass's made plain), else its
    type, for the error message.

    Nothing of the plugin's is kept past the call: the session hashes, compares and
    prints the id for as long as it lives, and an object's ``__del__`` would run
    when it is dropped; either is plugin code, which must run while the call is
    timed.
    """
    return str.__str__(returned) if isinstance(returned, str) else type(returned)


def _checked_result(result: Any) -> InteractionResult:
    """``generate_response``'s result as an :class:`InteractionResult` of plain types."""
    if type(result) is not InteractionResult:
        return InteractionResult.coerce(result)
    # Built by the plugin: a float or str subclass may do anything (its extra is a
    # dict already, made one when the result was built).
    done, content, score, _ = result
    if (
        type(done) is not bool
        or type(content) is not str
        or type(score) is not float
        or not isfinite(score)
    ):
        return InteractionResult.coerce(tuple(result))
    return result


def _checked_score(value: Any) -> float:
    """``calculate_score``'s value as a finite ``float``."""
    if type(value) is float and isfinite(value):
        return value  # type: ignore[no-any-return]
    return as_score(value, "the returned score")


def _takes_instance_id(interaction: Any, method: str) -> bool:
    func = getattr(type(interaction), method, None)
    known = _TAKES_ID.get(func)
    if known is None:
        import inspect

        positional = (
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            inspect.Parameter.VAR_POSITIONAL,
        )
        try:
            params = list(inspect.signature(func).parameters.values())[1:]  # type: ignore[arg-type]
            known = any(p.kind in positional for p in params)
        except (TypeError, ValueError):
            known = True
        _TAKES_ID[func] = known
    return known


def stops_the_run(exc: BaseException, stopping: Callable[[], bool] | None = None) -> bool:
    """Whether ``exc`` must leave the episode: a real stop, not something a plugin raised.

    A :class:`CancelledError` is real when the running task was asked to stop
    (``stopping()``, the :class:`Runner`'s own flag, or ``Task.cancelling()``
    on Python 3.11+; on 3.10 outside a runner every cancellation counts).
    :class:`RunInterrupted` is the CLI's second Ctrl-C. Everything else,
    ``SystemExit`` and ``KeyboardInterrupt`` included, is the episode's error:
    a real Ctrl-C reaches a run as a cancellation (``asyncio.run`` and the CLI
    turn the signal into one), never as an exception inside a plugin call.
    """
    kind = type(exc)  # not isinstance: it reads a plugin exception's own __class__
    if issubclass(kind, Interrupted):  # a real signal (RunInterrupted: the second Ctrl-C)
        return True
    if issubclass(kind, asyncio.CancelledError):
        if stopping is not None and stopping():
            return True
        task = asyncio.current_task()
        cancelling = getattr(task, "cancelling", None)
        if cancelling is None:
            return stopping is None
        if cancelling() > 0:
            return True
    return False


class SessionTracker:
    """Counts sessions started, finalized and still open (shared by a run's sessions).

    A session counts as started before its ``start_interaction`` call and as
    finalized once its ``finalize_interaction`` call returned or failed; one that a
    stop (a cancellation) cut short stays open: the plugin did not finish it.
    """

    __slots__ = ("finalized", "started")

    def __init__(self) -> None:
        self.started = 0
        self.finalized = 0

    @property
    def open(self) -> int:
        """Sessions started and not finalized yet."""
        return self.started - self.finalized

    def __repr__(self) -> str:
        return f"<SessionTracker open={self.open} started={self.started}>"


def call_error(
    name: str, instance_id: str, method: str, exc: BaseException, timeout: float | None = None
) -> InteractionCallError:
    """The :class:`InteractionCallError` describing ``exc`` raised by ``method``."""
    if made_by_runtime(exc):  # told already (a plugin's own one is told as it raised it)
        return exc  # type: ignore[return-value]
    kind = type(exc)  # not isinstance: it reads a plugin exception's own __class__
    # Without a timeout the runtime ends no call: any TimeoutError is the plugin's own
    # (its HTTP client's deadline, say), told with its message.
    ours = timeout is not None and not its_own_timeout(exc)
    if issubclass(kind, asyncio.TimeoutError) and ours:
        problem = f"timed out after {timeout:g} s"
    else:
        text = cut_text(exception_text(exc), MAX_MESSAGE)
        problem = f"raised {exception_kind(exc)}: {text}".rstrip(": ")
    error = runtime_call_error(name, instance_id, method, problem)
    error.__cause__ = exc
    return error


class Session:
    """One conversation with one interaction; see the module docstring.

    ``name`` defaults to the interaction's ``name`` attribute. ``instance_id`` is
    the id passed to ``start_interaction`` (``None`` lets the interaction choose);
    ``timeout`` bounds every lifecycle call in seconds (``None``: no bound).
    ``stopping`` tells a real stop of the run from a ``CancelledError`` a plugin
    raised (see :func:`stops_the_run`; the episode loop passes its runner's flag).
    The arguments may also be given by position, in this order: the episode loop
    does, because creating an object with keyword arguments builds a dict for them
    on every episode.
    """

    __slots__ = (
        "_kwargs",
        "_state",
        "instance_id",
        "interaction",
        "name",
        "stopping",
        "timeout",
        "tracker",
    )

    def __init__(
        self,
        interaction: Any,
        name: str | None = None,
        instance_id: str | None = None,
        timeout: float | None = None,
        tracker: SessionTracker | None = None,
        stopping: Callable[[], bool] | None = None,
    ) -> None:
        if timeout is not None and timeout <= 0:
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
        self.interaction = interaction
        self.name: str = name if name is not None else str(getattr(interaction, "name", "?"))
        self.instance_id: str = instance_id or ""
        self.timeout = timeout
        self.tracker = tracker
        self.stopping = stopping
        self._kwargs = _NO_KWARGS
        self._state = _NEW

    @property
    def is_open(self) -> bool:
        """True between a successful :meth:`start` and :meth:`finalize`."""
        return self._state == _OPEN

    def _error(self, method: str, exc: BaseException) -> InteractionCallError:
        """``exc`` as this session's call error, or re-raised when it is a real stop."""
        if stops_the_run(exc, self.stopping):
            raise exc
        return call_error(self.name, self.instance_id or "<unstarted>", method, exc, self.timeout)

    async def start(self, /, **kwargs: Any) -> str:
        """Call ``start_interaction(instance_id, **kwargs)``; return the session id.

        ``kwargs`` (the sample's ``interaction_kwargs``) are remembered and passed
        again to :meth:`respond` and :meth:`score`, as verl does.
        """
        if self._state != _NEW:
            raise RuntimeError(f"session {self.instance_id!r} was already started")
        interaction, given = self.interaction, self.instance_id or None
        try:
            if self.timeout is None:
                returned = _plain_id(await interaction.start_interaction(given, **kwargs))
            else:
                returned = await _bounded(
                    lambda: interaction.start_interaction(given, **kwargs), self.timeout, _plain_id
                )
        except BaseException as exc:
            if stops_the_run(exc, self.stopping):
                # The plugin may have stored state before the cancel reached it: release it.
                self._state = _OPEN
                if self.tracker is not None:
                    self.tracker.started += 1
                raise
            raise self._error("start_interaction", exc) from exc
        if type(returned) is str and returned:
            self.instance_id = returned  # type: ignore[assignment]
        elif not self.instance_id:
            kind = "str" if type(returned) is str else type.__getattribute__(returned, "__name__")
            raise self._error(
                "start_interaction", TypeError(f"returned {kind}, expected the session id (str)")
            )
        self._kwargs = kwargs
        self._state = _OPEN
        if self.tracker is not None:
            self.tracker.started += 1
        return self.instance_id

    def _check_open(self, method: str) -> None:
        if self._state != _OPEN:
            state = "not started" if self._state == _NEW else "finalized"
            raise self._error(method, RuntimeError(f"the session is {state}"))

    async def respond(self, messages: list[dict[str, Any]], /, **kwargs: Any) -> InteractionResult:
        """Call ``generate_response`` on the conversation so far; return a checked result.

        The interaction gets the kwargs given to :meth:`start`, updated with ``kwargs``.
        """
        if self._state != _OPEN:
            self._check_open("generate_response")
        call_kwargs = {**self._kwargs, **kwargs} if kwargs else self._kwargs
        interaction, instance_id = self.interaction, self.instance_id
        try:
            if self.timeout is None:
                result = _checked_result(
                    await interaction.generate_response(instance_id, messages, **call_kwargs)
                )
            else:
                result = await _bounded(
                    lambda: interaction.generate_response(instance_id, messages, **call_kwargs),
                    self.timeout,
                    _checked_result,
                )
        except BaseException as exc:
            raise self._error("generate_response", exc) from exc
        return result

    def _by_id(self, method: str, kwargs: Mapping[str, Any]) -> Any:
        """The coroutine of ``method`` called with the session id and ``kwargs``, or with
        neither when the class inherits verl's ``calculate_score(self)`` or
        ``finalize_interaction(self)`` (see ``_TAKES_ID``)."""
        interaction = self.interaction
        takes_id = _TAKES_ID.get(getattr(interaction.__class__, method, None))
        if takes_id is None:
            takes_id = _takes_instance_id(interaction, method)
        bound = getattr(interaction, method)
        return bound(self.instance_id, **kwargs) if takes_id else bound()

    async def score(self, /, **kwargs: Any) -> float:
        """Call ``calculate_score``; the score must be a real number (returned as float).

        The interaction gets the kwargs given to :meth:`start`, updated with ``kwargs``.
        """
        if self._state != _OPEN:
            self._check_open("calculate_score")
        call_kwargs = {**self._kwargs, **kwargs} if kwargs else self._kwargs
        try:
            if self.timeout is None:
                return _checked_score(await self._by_id("calculate_score", call_kwargs))
            return await _bounded(  # type: ignore[no-any-return]
                lambda: self._by_id("calculate_score", call_kwargs), self.timeout, _checked_score
            )
        except BaseException as exc:
            raise self._error("calculate_score", exc) from exc

    async def finalize(self) -> InteractionCallError | None:
        """Call ``finalize_interaction`` once; later calls do nothing.

        Never raises for a plugin failure, of any class: the error is *returned*
        (so a caller already handling another exception does not lose it). The
        session counts as closed afterwards whatever happened (a real stop that
        arrives while the plugin's own finalize is suspended interrupts it and is
        re-raised).
        """
        if self._state != _OPEN:
            return None
        self._state = _CLOSED
        tracker = self.tracker
        ended = True  # the call returned or failed, rather than a stop cutting it short
        try:
            if self.timeout is None:
                await self._finalize_call()
            else:
                await _bounded(self._finalize_call, self.timeout, _none)
        except BaseException as exc:
            ended = not stops_the_run(exc, self.stopping)
            return self._error("finalize_interaction", exc)
        finally:
            if tracker is not None and ended:
                tracker.finalized += 1
        return None

    async def _finalize_call(self) -> Any:
        try:
            return await self._by_id("finalize_interaction", _NO_KWARGS)
        finally:
            # What the plugin kept in the kwargs (``box["client"] = ...`` in a nested
            # one) is dropped now, while the call is timed as this one: dropped with the
            # session, it was no call's, and a slow __del__ timed out others' calls.
            self._kwargs = _NO_KWARGS

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        error = await self.finalize()
        if error is not None and exc_info[0] is None:
            raise error

    def __repr__(self) -> str:
        state = ("new", "open", "closed")[self._state]
        return f"<Session {self.name!r} {self.instance_id!r} {state}>"
