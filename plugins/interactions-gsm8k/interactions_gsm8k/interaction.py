"""The GSM8K interaction: checks each assistant answer against the sample's reference.

A session is opened with the sample's ``ground_truth``; after every assistant
turn the last assistant message is scored with :mod:`.scoring`. A correct answer
ends the episode with score 1.0, a wrong one asks the model to try again with
score 0.0. This is verl's ``Gsm8kInteraction`` with its bugs fixed (see the
package README).

It uses only the documented :class:`~interactions_core.SessionInteraction`
API (``new_session``, ``respond``, ``score``): the base class owns the sessions.
Its own share of a turn is kept small (``benchmarks/bench_turn.py`` measures a
session against a hand-written verl class): the extractor for the configured
method is picked once per instance; ``respond`` and ``score`` await nothing, so
they are plain functions (no coroutine per call); and a turn's result is the
plain ``(should_terminate, content, score, extra)`` tuple verl itself returns,
which costs less to build than an :class:`~interactions_core.InteractionResult`
(the runtime reads both alike). Each turn gets a new ``extra`` dict, since a
result's ``extra`` must not be shared between turns.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

import attrs

from interactions_core._interaction import SessionInteraction

from .scoring import _EXTRACTORS, METHODS, TAIL_CHARS, normalize_ground_truth

__all__ = ["Gsm8kConfig", "Gsm8kInteraction"]

CORRECT_MESSAGE = "Your response is correct!"
INCORRECT_MESSAGE = "Your response is incorrect! You need to reflect on your answer and try again."


@attrs.frozen
class Gsm8kConfig:
    """Options of the ``gsm8k`` interaction (its ``config:`` mapping)."""

    method: Literal["strict", "flexible"] = attrs.field(
        default="strict",
        validator=attrs.validators.in_(METHODS),
        metadata={
            "help": (
                "how the answer is found in the last 300 characters of a response: "
                "'strict' = the number after the last '#### '; "
                "'flexible' = the last number, commas and a trailing period dropped"
            )
        },
    )


class _Session:
    """Per-session state: the normalised reference answer and the last turn's score.

    One of these lives per open session, hence ``__slots__``. It has no
    ``__init__``: :meth:`Gsm8kInteraction.new_session` fills both slots, which
    spares a second Python call for every sample of a training run.
    """

    __slots__ = ("ground_truth", "last_score")

    ground_truth: str | None
    last_score: float

    def __repr__(self) -> str:
        return f"_Session(ground_truth={self.ground_truth!r}, last_score={self.last_score!r})"


def _part_text(part: Any) -> str:
    """The text of one content part: a plain string or ``{"type": "text", "text": ...}``."""
    if isinstance(part, str):
        return part
    if isinstance(part, Mapping) and part.get("type", "text") == "text":
        text = part.get("text")
        return text if isinstance(text, str) else ""
    return ""  # images, audio and other non-text parts carry no answer


def message_text(content: Any) -> str:
    """The text of a message's ``content``, whatever shape the trainer produced.

    verl's scorer assumed a ``str`` and crashed on ``None`` (a tool-calling turn)
    or on OpenAI-style lists of parts; those give ``""`` and the joined text parts.
    """
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        return "".join(_part_text(part) for part in content)
    return ""


def _last_assistant(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The last message with role ``assistant``, or ``None``."""
    for message in reversed(messages):
        if message.get("role") == "assistant":
            return message
    return None


class Gsm8kInteraction(SessionInteraction):
    """Scores GSM8K answers turn by turn; stops the episode at the first correct one.

    Start a session with ``start_interaction(instance_id, ground_truth=...)``;
    ``ground_truth`` may be a ``str``, ``int`` or ``float``.
    """

    config_schema = Gsm8kConfig
    settings: Gsm8kConfig

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__(config)
        # Resolved once so a turn does not dispatch on the method name.
        self._extract: Callable[[str], str | None] = _EXTRACTORS[self.settings.method]

    def new_session(self, ground_truth: Any = None, **kwargs: Any) -> _Session:
        """Normalise the reference once, so turns compare plain strings.

        Other interaction kwargs (``name``, ``query``, ...) are accepted and ignored.
        """
        state = _Session()
        if ground_truth.__class__ is str and "," not in ground_truth:
            state.ground_truth = ground_truth.strip()  # the common case, in one step
        else:
            state.ground_truth = normalize_ground_truth(ground_truth)
        state.last_score = 0.0
        return state

    def respond(
        self, state: _Session, messages: list[dict[str, Any]], **kwargs: Any
    ) -> tuple[bool, str, float, dict[str, Any]]:
        """Judge the latest assistant turn and record its score on the session.

        The last assistant message is found by a reverse scan (usually it is
        the last message); its text is read with :func:`message_text` only when
        it is not a plain string (the common case skips the call: this runs
        once per turn).
        """
        expected = state.ground_truth
        if expected is not None and messages:
            last = messages[-1]
            message = last if last.get("role") == "assistant" else _last_assistant(messages)
            if message is not None:
                text = message.get("content")
                if text.__class__ is not str:
                    text = message_text(text)
                if text and self._extract(text[-TAIL_CHARS:]) == expected:
                    state.last_score = 1.0
                    return (True, CORRECT_MESSAGE, 1.0, {})
        state.last_score = 0.0
        return (False, INCORRECT_MESSAGE, 0.0, {})

    def score(self, state: _Session, **kwargs: Any) -> float:
        """The score of the last turn seen in the session (0.0 before any turn)."""
        return state.last_score
