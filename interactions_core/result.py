"""The typed result of one interaction turn.

verl's interactions return an untyped 4-tuple ``(should_terminate, content,
score, extra)``. :class:`InteractionResult` is a named tuple of exactly those four
fields, so it is immutable, self-describing, and still unpacks the way verl's
rollout code expects::

    should_terminate, content, score, extra = await interaction.generate_response(...)

``extra`` is a plain ``dict``, new for every result unless one is passed, so a
result pickles (Ray), deep-copies and JSON-encodes like verl's own, and a trainer
that adds a key to one turn's ``extra`` cannot change another turn's. Build a
result per call rather than sharing one object between turns.
"""

from __future__ import annotations

from collections.abc import Mapping
from math import isfinite
from typing import Any, NamedTuple


class _Fields(NamedTuple):
    should_terminate: bool
    content: str
    score: float
    extra: dict[str, Any]


class InteractionResult(_Fields):
    """What an interaction answers after an assistant turn.

    A named tuple of four fields:

    * ``should_terminate`` -- true when the episode is over from the interaction's side;
    * ``content`` -- feedback text, appended to the conversation as a ``user`` message;
    * ``score`` -- the score of this turn, always a float;
    * ``extra`` -- free-form metrics or data for the trainer: a plain ``dict`` of this
      result's own (a new empty one by default; any other mapping is copied into one).
    """

    __slots__ = ()

    def __new__(
        cls,
        should_terminate: bool,
        content: str,
        score: float,
        extra: Mapping[str, Any] | None = None,
        _new: Any = tuple.__new__,
    ) -> InteractionResult:
        # One expression: this runs on every turn of every episode.
        return _new(  # type: ignore[no-any-return]
            cls,
            (
                should_terminate,
                content,
                score,
                {} if extra is None else extra if extra.__class__ is dict else dict(extra),
            ),
        )

    @classmethod
    def coerce(cls, value: Any) -> InteractionResult:
        """Return ``value`` as an :class:`InteractionResult`, checking its shape.

        Accepts verl-style 4-tuples and lists. Raises ``TypeError`` naming the bad
        field, so the runtime can report a plugin that returns the wrong types.
        """
        if type(value) is cls:
            return value
        if value.__class__ is tuple and len(value) == 4:
            # verl's own shape with exact types, the common case: checked in one line.
            terminate, content, score, extra = value
            if (
                terminate.__class__ is bool
                and content.__class__ is str
                and score.__class__ is float
                and extra.__class__ is dict
                and isfinite(score)
            ):
                return tuple.__new__(cls, value)  # type: ignore[no-any-return]
        return cls._checked(value)

    @classmethod
    def _checked(cls, value: Any) -> InteractionResult:
        """Every field checked, each problem named: any 4-sequence, any real number."""
        if not isinstance(value, (tuple, list)) or len(value) != 4:
            raise TypeError(
                "generate_response must return (should_terminate, content, score, extra); "
                f"got {type(value).__name__} {_short(value)}"
            )
        terminate, content, score, extra = value
        if not isinstance(terminate, bool):
            raise TypeError(f"should_terminate must be a bool, got {type(terminate).__name__}")
        if not isinstance(content, str):
            raise TypeError(f"content must be a str, got {type(content).__name__}")
        score = as_score(score, "score")
        if extra is not None and not isinstance(extra, Mapping):
            raise TypeError(f"extra must be a mapping, got {type(extra).__name__}")
        return cls(terminate, content, score, extra)


def as_score(value: Any, what: str = "the score") -> float:
    """``value`` as a finite float, or ``TypeError``/``ValueError`` saying what is wrong.

    A NaN or infinite score would silently poison every mean computed from it, so
    it is an error where it is returned, not a surprise in a summary.
    """
    if value.__class__ is not float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{what} must be a float, got {type(value).__name__}")
        value = float(value)
    if not isfinite(value):
        raise ValueError(f"{what} must be finite, got {value!r}")
    return value


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
