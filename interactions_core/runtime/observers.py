"""Observer hooks: hook plugins watching sessions start, turns and sessions end.

:class:`Observers` holds a run's hook callers, looked up once; an observer's bug
is recorded in its episode, never fatal (:func:`observe`).

The built-in observer is the JSONL trace (``--trace FILE``): one line per
session start, turn and session end. :class:`TraceWriter` is an ordinary hook
plugin: it implements the observer hooks and is registered with the registry's
plugin host for the duration of a run (:func:`tracing`), so it sees exactly
what any third-party observer sees. It is a :class:`~.records.LineWriter`
(whole lines, opened like ``--output``), and its hooks take their arguments
from :class:`~interactions_core.PluginSpec` rather than repeating the
signatures. Lines::

    {"event": "session_start", "time": ..., "interaction": "gsm8k", "instance_id": "...",
     "kwargs": {...}}
    {"event": "turn", "time": ..., "interaction": ..., "instance_id": ..., "turn": 1,
     "assistant": "...", "should_terminate": false, "content": "...", "score": 0.0, "extra": {}}
    {"event": "session_end", "time": ..., "interaction": ..., "instance_id": ..., "index": 0,
     "repeat": 0, "end_reason": "terminated", "turns": 2, "final_score": 1.0, "error": null}
"""

from __future__ import annotations

import functools
import inspect
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from .._classes import fault_location
from .._files import json_safe
from .._spec import PluginSpec, hookimpl
from ..errors import cut_text
from .record import error_entry
from .records import LineWriter
from .session import stops_the_run
from .step import ERROR

__all__ = ["Observers", "TraceWriter", "observe", "tracing"]


class Observers:
    """The observer hook callers of a run, looked up once (``None``: not implemented)."""

    __slots__ = ("on_session_end", "on_session_start", "on_turn")

    def __init__(
        self,
        on_session_start: Callable[..., Any] | None = None,
        on_turn: Callable[..., Any] | None = None,
        on_session_end: Callable[..., Any] | None = None,
    ) -> None:
        self.on_session_start = on_session_start
        self.on_turn = on_turn
        self.on_session_end = on_session_end

    @classmethod
    def from_registry(cls, registry: Any) -> Observers:
        """Ask the registry's plugin host for each observer hook, once."""
        host = registry.plugin_host
        return cls(
            host.observer("on_session_start"),
            host.observer("on_turn"),
            host.observer("on_session_end"),
        )

    def notify(self, _record: Any, _hook: str, /, **kw: Any) -> None:
        """Call ``_hook`` (when implemented) about ``_record``'s session; see :func:`observe`."""
        caller = getattr(self, _hook)
        if caller is not None:
            observe(
                _record,
                _hook,
                caller,
                interaction_name=_record.interaction,
                instance_id=_record.instance_id,
                **kw,
            )

    def __bool__(self) -> bool:
        return any((self.on_session_start, self.on_turn, self.on_session_end))


def observe(_record: Any, _hook: str, _caller: Callable[..., Any], /, **kw: Any) -> None:
    """Call an observer hook; a bug in it is recorded in the episode, which goes on.

    Each plugin's implementation is called apart, in pluggy's order: pluggy's own call
    stops at the first that raises, so one plugin's bug (a ``tryfirst`` observer
    that raises) had kept the others, the trace included, from the event. A hook
    with a wrapper among its implementations is called through pluggy whole, as the
    wrapper expects.
    """
    get = getattr(_caller, "get_hookimpls", None)  # a pluggy hook caller
    impls = get() if get is not None else None
    if not impls or any(i.hookwrapper or getattr(i, "wrapper", False) for i in impls):
        _observed(_record, _hook, _caller, (), kw)
        return
    for impl in reversed(impls):  # pluggy calls the last registered (and tryfirst) first
        _observed(_record, _hook, impl.function, [kw[name] for name in impl.argnames], {})


def _observed(
    record: Any, hook: str, call: Callable[..., Any], args: Any, kwargs: dict[str, Any]
) -> None:
    try:
        call(*args, **kwargs)
    except BaseException as exc:
        if stops_the_run(exc):
            raise
        record.add_error(f"observer {hook}", exc)


# -- the trace: the built-in observer --------------------------------------------


def _observer(hook: str, fields: Callable[..., dict[str, Any]]) -> Callable[..., None]:
    """The implementation of observer ``hook``: one line, ``fields(...)`` after the common keys.

    It takes the hook's arguments exactly as :class:`~interactions_core.PluginSpec`
    declares them (pluggy reads the names from the wrapped specification), so
    they are written down once. ``interaction_name`` and ``instance_id`` go in
    every line; ``fields`` receives the other arguments by name.
    """
    spec = getattr(PluginSpec, hook)
    names = tuple(inspect.signature(spec).parameters)[1:]  # after self
    event = hook.removeprefix("on_")

    @functools.wraps(spec, updated=())  # sets __wrapped__: the names pluggy passes
    def observe(self: LineWriter, *args: Any, **kwargs: Any) -> None:
        given = dict(zip(names, args, strict=False), **kwargs)  # or by name
        line = {
            "event": event,
            "time": time.time(),
            "interaction": given.pop("interaction_name"),
            "instance_id": _id_shown(given.pop("instance_id")),
        }
        line.update(fields(**given))
        self.write(line)

    observe.__qualname__ = f"TraceWriter.{hook}"
    return hookimpl(observe)


#: The most characters of a session id a trace line repeats: a plugin's
#: ``start_interaction`` chooses the id, and one of megabytes on every line of an
#: episode made a 1.2 GB trace of 6 MB of records.
MAX_TRACE_ID = 1000


def _id_shown(instance_id: Any) -> Any:
    if type(instance_id) is str and len(instance_id) > MAX_TRACE_ID:
        return cut_text(instance_id, MAX_TRACE_ID)
    return instance_id


def _session_start(kwargs: Any) -> dict[str, Any]:
    return {"kwargs": kwargs}


def _turn(turn: int, messages: list[dict[str, Any]], result: Any) -> dict[str, Any]:
    assistant = None
    for message in reversed(messages):
        if message.get("role") == "assistant":
            assistant = message.get("content")
            break
    return {
        "turn": turn,
        "assistant": assistant,
        "should_terminate": result.should_terminate,
        "content": result.content,
        "score": result.score,
        # plain JSON data here, in the episode (see EpisodeRecord.keep_plain): a part the
        # extra shares many times over is refused rather than written out in full
        "extra": json_safe(result.extra, text=True) if result.extra else {},
    }


def _session_end(record: Any, error: BaseException | None) -> dict[str, Any]:
    return {
        "index": record.index,
        "repeat": getattr(record, "repeat", 0),
        "end_reason": record.end_reason,
        "turns": record.turns,
        "final_score": record.final_score,
        "error": _error_text(error) if error is not None else _recorded_error(record),
    }


class TraceWriter(LineWriter):
    """A :class:`~.records.LineWriter` of observer events: the trace (see the module docstring).

    Opened like any line writer (``overwrite``, ``append``, ``autoflush``).
    """

    on_session_start = _observer("on_session_start", _session_start)
    on_turn = _observer("on_turn", _turn)
    on_session_end = _observer("on_session_end", _session_end)


@contextmanager
def tracing(
    registry: Any, path: str | os.PathLike[str] | TraceWriter, *, overwrite: bool = False
) -> Iterator[TraceWriter]:
    """Register a :class:`TraceWriter` with ``registry``'s hook plugins for a block.

    Create the :class:`~interactions_core.runtime.runner.Runner` inside the
    block (observers are looked up when it is created). The writer (made for
    ``path``, or the one given) is unregistered and its file flushed and closed
    on the way out.
    """
    writer = path if isinstance(path, TraceWriter) else TraceWriter(path, overwrite=overwrite)
    host = registry.plugin_host
    host.register_object(writer, name=f"interactions-core:trace:{id(writer)}")
    try:
        yield writer
    finally:
        try:
            host.manager.unregister(writer)
        finally:
            writer.close()


def _recorded_error(record: Any) -> str | None:
    """The error a record ended with when no exception ended the episode (its record could
    not be made plain data, say), as ``Type: message``; ``None`` for an episode that
    did not end with an error."""
    errors = getattr(record, "errors", None)
    if getattr(record, "end_reason", None) != ERROR or not errors:
        return None
    last = error_entry(errors[-1])
    return f"{last.get('type') or 'Error'}: {last.get('message', '')}"


def _error_text(error: BaseException) -> str:
    """``Type: message``, and where in plugin code it was raised when that is known."""
    from ..errors import exception_kind, exception_text, plugin_exception

    at = fault_location(plugin_exception(error)).get("at")
    return f"{exception_kind(error)}: {exception_text(error)}" + (f" (at {at})" if at else "")
