"""Observer hooks: hook plugins watching sessions start, turns and sessions end."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .session import stops_the_run

__all__ = ["Observers", "observe"]


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
    """Call an observer hook; its bug is recorded in the episode, which goes on."""
    try:
        _caller(**kw)
    except BaseException as exc:
        if stops_the_run(exc):
            raise
        _record.add_error(f"observer {_hook}", exc)
