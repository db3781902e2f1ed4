"""The record of one episode: what happened, as the ``--output`` JSONL line says it.

Its ``end_reason`` is one of :data:`END_REASONS`, defined with the episode step
(:mod:`.step`) that decides them.
"""

from __future__ import annotations

import time
from typing import Any

from .._classes import fault_location
from ..errors import InteractionCallError
from .step import END_REASONS, ERROR

__all__ = ["END_REASONS", "WALL_OFFSET", "EpisodeRecord"]

#: Add to a ``perf_counter`` reading to get wall-clock (epoch) seconds.
WALL_OFFSET = time.time() - time.perf_counter()


_NO_ERRORS: list[dict[str, Any]] = []  # shared and never appended to

#: The keys of an ``--output`` record, in the order they are written.
RECORD_FIELDS = (
    "index",
    "repeat",
    "sample_id",
    "interaction",
    "instance_id",
    "end_reason",
    "turns",
    "user_turns",
    "scores",
    "final_score",
    "errors",
    "started_at",
    "duration_s",
    "usage",
    "messages",
)


class EpisodeRecord:
    """What happened in one episode. ``to_dict()`` is the JSONL record."""

    __slots__ = (
        "duration_s",
        "end_reason",
        "errors",
        "extras",
        "final_score",
        "index",
        "instance_id",
        "interaction",
        "messages",
        "repeat",
        "sample_id",
        "scores",
        "stage",
        "started_at",
        "turns",
        "usage",
        "user_turns",
    )

    def __init__(self, index: int, sample_id: Any, repeat: int = 0) -> None:
        self.index = index
        self.repeat = repeat  # which of the sample's --repeat episodes (0-based)
        self.sample_id = sample_id
        self.interaction: str | None = None
        self.instance_id: str | None = None
        self.messages: list[dict[str, Any]] = []
        self.scores: list[float] = []
        self.turns = 0
        self.user_turns = 0
        self.end_reason = ERROR
        self.final_score: float | None = None
        self.errors: list[dict[str, Any]] = _NO_ERRORS  # replaced by a list on the first error
        self.started_at = 0.0  # a perf_counter reading; to_dict() gives epoch seconds
        self.duration_s = 0.0
        self.usage: dict[str, Any] | None = None  # the policy's accounting (tokens, latency)
        #: Each judged turn's ``extra`` (aligned with ``scores``), once any turn returned one.
        self.extras: list[dict[str, Any]] | None = None
        #: Where the episode is (a lifecycle method, ``policy.reply``, ...): an error's ``where``.
        self.stage = "sample"

    @property
    def ok(self) -> bool:
        """True when the episode ran without any error."""
        return not self.errors

    def add_error(
        self,
        where: str,
        exc: BaseException,
    ) -> None:
        """Record ``exc``, raised in ``where`` (a lifecycle method, ``policy.reply``, ...)."""
        entry: dict[str, Any] = {
            "where": where,
            "interaction": self.interaction,
            "instance_id": self.instance_id,
            "type": exc.__class__.__name__,
            "message": str(exc),
        }
        cause = exc
        if isinstance(exc, InteractionCallError):
            entry["where"] = exc.method
            if exc.__cause__ is not None:
                cause = exc.__cause__
                entry["type"] = cause.__class__.__name__
        entry.update(fault_location(cause))
        if self.errors is _NO_ERRORS:
            self.errors = []
        self.errors.append(entry)

    def keep_extra(self, extra: dict[str, Any]) -> None:
        """Keep the ``extra`` of the turn just judged (``{}`` fills earlier turns without one)."""
        if self.extras is None:
            self.extras = [{} for _ in range(len(self.scores) - 1)]
        self.extras.append(extra)

    def to_dict(self) -> dict[str, Any]:
        """The JSONL record: :data:`RECORD_FIELDS` in order, ``started_at`` in epoch seconds.

        ``extras`` (each turn's ``extra``) is written only when an interaction returned one.
        """
        record = {field: getattr(self, field) for field in RECORD_FIELDS}
        record["errors"] = list(self.errors)
        record["started_at"] = round(self.started_at + WALL_OFFSET, 6)
        if self.extras is not None:
            record["extras"] = self.extras
        return record

    def __repr__(self) -> str:
        return (
            f"<EpisodeRecord {self.index} {self.interaction!r} {self.end_reason} "
            f"turns={self.turns} final_score={self.final_score!r}>"
        )
