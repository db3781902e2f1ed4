"""The JSONL trace writer: one line per session start, turn and session end.

:class:`TraceWriter` is an ordinary hook plugin: it implements the observer hooks
(``on_session_start``, ``on_turn``, ``on_session_end``) and is registered with
the registry's plugin host for the duration of a run (:func:`tracing`), so it
sees exactly what any third-party observer sees. Lines::

    {"event": "session_start", "time": ..., "interaction": "gsm8k", "instance_id": "...",
     "kwargs": {...}}
    {"event": "turn", "time": ..., "interaction": ..., "instance_id": ..., "turn": 1,
     "assistant": "...", "should_terminate": false, "content": "...", "score": 0.0, "extra": {}}
    {"event": "session_end", "time": ..., "interaction": ..., "instance_id": ..., "index": 0,
     "end_reason": "terminated", "turns": 2, "final_score": 1.0, "error": null}
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..hookspecs import hookimpl
from .writers import LineWriter

__all__ = ["TraceWriter", "tracing"]


class TraceWriter:
    """Writes observer events as JSON lines to ``path`` (see the module docstring)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        overwrite: bool = False,
        append: bool = False,
        autoflush: bool = False,
    ) -> None:
        self.writer = LineWriter(path, overwrite=overwrite, append=append, autoflush=autoflush)

    @hookimpl
    def on_session_start(self, interaction_name: str, instance_id: str, kwargs: Any) -> None:
        self.writer.write(
            {
                "event": "session_start",
                "time": time.time(),
                "interaction": interaction_name,
                "instance_id": instance_id,
                "kwargs": kwargs,
            }
        )

    @hookimpl
    def on_turn(
        self,
        interaction_name: str,
        instance_id: str,
        turn: int,
        messages: list[dict[str, Any]],
        result: Any,
    ) -> None:
        assistant = None
        for message in reversed(messages):
            if message.get("role") == "assistant":
                assistant = message.get("content")
                break
        self.writer.write(
            {
                "event": "turn",
                "time": time.time(),
                "interaction": interaction_name,
                "instance_id": instance_id,
                "turn": turn,
                "assistant": assistant,
                "should_terminate": result.should_terminate,
                "content": result.content,
                "score": result.score,
                "extra": dict(result.extra) if result.extra else {},
            }
        )

    @hookimpl
    def on_session_end(
        self, interaction_name: str, instance_id: str, record: Any, error: BaseException | None
    ) -> None:
        self.writer.write(
            {
                "event": "session_end",
                "time": time.time(),
                "interaction": interaction_name,
                "instance_id": instance_id,
                "index": record.index,
                "end_reason": record.end_reason,
                "turns": record.turns,
                "final_score": record.final_score,
                "error": None if error is None else f"{error.__class__.__name__}: {error}",
            }
        )

    def close(self) -> None:
        self.writer.close()


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
