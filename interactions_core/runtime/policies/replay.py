"""``replay``: play recorded assistant replies from the sample, one per turn.

Each sample carries its replies in a field (``responses`` unless ``field`` says
otherwise): a list of strings, played in order. When they run out before the
interaction ends the episode, the episode ends as ``exhausted``. Scoring
recorded trajectories offline, and testing an interaction without a model, are
what it is for.

Several recorded attempts per sample (to read pass@k offline with ``--repeat K``)
are a list of lists: ``[["attempt 0, turn 1", ...], ["attempt 1, turn 1", ...]]``.
Repeat ``r`` of the sample plays attempt ``r``; a repeat without its attempt is
an error of that episode (never a silent replay of another attempt), and so is
``--repeat`` above 1 on a sample that holds one plain list.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ...errors import PolicyError
from .base import Policy

__all__ = ["ReplayPolicy"]


class ReplayPolicy(Policy):
    """Replies recorded in the sample's ``field`` (a list of strings), in order.

    Options: ``field`` (default ``"responses"``) — a top-level key of the row, or
    a dotted path into nested mappings (``extra_info.responses``). The field may
    instead hold a list of attempts (lists of strings); repeat ``r`` plays attempt ``r``.
    """

    name = "replay"

    def __init__(self, *, field: str = "responses") -> None:
        if not isinstance(field, str) or not field.strip():
            raise ValueError(f"field must be a non-empty string, not {field!r}")
        self.field = field
        self._path = tuple(field.split("."))
        #: The top-level key holding the replies (``None`` for a dotted path).
        self._key = field if len(self._path) == 1 else None

    def start(self, sample: Mapping[str, Any], repeat: int = 0) -> Iterator[str]:
        # Items are not checked here: the episode loop rejects a reply that is not a str
        # when it is played (so a sample whose replies run out early costs nothing more).
        key = self._key
        if key is not None:
            value = sample.get(key)
            flat = value.__class__ is list and not (value and value[0].__class__ is list)
            if flat and not repeat:
                return iter(value)  # type: ignore[arg-type]
        value = sample
        for key in self._path:
            if not isinstance(value, Mapping) or key not in value:
                raise PolicyError(
                    f"replay: the sample has no {self.field!r} field (a list of recorded "
                    "assistant replies); set the field with --policy-option field=NAME"
                )
            value = value[key]
        if isinstance(value, str) or not isinstance(value, (list, tuple)):
            raise PolicyError(
                f"replay: field {self.field!r} must be a list of strings, "
                f"not {type(value).__name__}"
            )
        if value and isinstance(value[0], (list, tuple)):
            return iter(self._attempt(value, repeat))
        if repeat:
            raise PolicyError(
                f"replay: field {self.field!r} holds one recorded attempt (a list of replies), "
                f"so repeat {repeat} has nothing to play; for --repeat K give a list of K "
                "attempts, each a list of replies"
            )
        return iter(value)

    def _attempt(self, attempts: list[Any] | tuple[Any, ...], repeat: int) -> Any:
        """Attempt ``repeat`` of a list of attempts (each a list of replies)."""
        if repeat >= len(attempts):
            raise PolicyError(
                f"replay: field {self.field!r} holds {len(attempts)} recorded attempt"
                f"{'s' if len(attempts) != 1 else ''}, so repeat {repeat} (0-based) has none; "
                f"run with --repeat {len(attempts)} or fewer"
            )
        attempt = attempts[repeat]
        if isinstance(attempt, str) or not isinstance(attempt, (list, tuple)):
            raise PolicyError(
                f"replay: attempt {repeat} of field {self.field!r} must be a list of replies, "
                f"not {type(attempt).__name__} (a list of attempts holds lists only)"
            )
        return attempt

    def reply(self, state: Iterator[str], messages: list[dict[str, Any]]) -> str | None:
        return next(state, None)

    def __repr__(self) -> str:
        return f"<ReplayPolicy field={self.field!r}>"
