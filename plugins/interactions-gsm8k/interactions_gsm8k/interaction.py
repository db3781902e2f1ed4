"""The GSM8K interaction: checks each assistant answer against the sample's reference.

A session is opened with the sample's ``ground_truth``; after every assistant
turn the last assistant message is scored with :mod:`.scoring`. A correct answer
ends the episode with score 1.0, a wrong one asks the model to try again with
score 0.0. This is verl's ``Gsm8kInteraction`` with its bugs fixed (see the
package README).

The per-turn path is written to cost no more than verl's own: the extractor for
the configured method is picked once per instance and the session lookup is a
single dict access. Each turn gets a result of its own (its ``extra`` dict must
not be shared between turns).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import attrs

from interactions_core.base import SessionInteraction
from interactions_core.result import InteractionResult

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

    One of these lives per open session, hence ``__slots__``.
    """

    __slots__ = ("ground_truth", "last_score")

    def __init__(self, ground_truth: str | None) -> None:
        self.ground_truth = ground_truth
        self.last_score = 0.0

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


def _last_assistant_text(messages: Sequence[Any]) -> str:
    """The text of the last ``assistant`` message, ``""`` when there is none."""
    for message in reversed(messages):
        if message.get("role") == "assistant":
            content = message.get("content")
            # The common case first: skip a function call for a plain string.
            return content if content.__class__ is str else message_text(content)
    return ""


class Gsm8kInteraction(SessionInteraction):
    """Scores GSM8K answers turn by turn; stops the episode at the first correct one.

    Start a session with ``start_interaction(instance_id, ground_truth=...)``;
    ``ground_truth`` may be a ``str``, ``int`` or ``float``.
    """

    config_schema = Gsm8kConfig
    settings: Gsm8kConfig

    #: True in subclasses that override :meth:`new_session` (start then calls it).
    _custom_session = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._custom_session = cls.new_session is not Gsm8kInteraction.new_session

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__(config)
        # Resolved once so a turn does not dispatch on the method name.
        self._extract: Callable[[str], str | None] = _EXTRACTORS[self.settings.method]

    async def start_interaction(
        self, instance_id: str | None = None, ground_truth: Any = None, **kwargs: Any
    ) -> str:
        """Open a session for a sample whose reference answer is ``ground_truth``."""
        sessions = self._sessions
        if instance_id is None or instance_id in sessions or self._custom_session:
            # A fresh id to draw, a live id reused (the core raises SessionError), or a
            # subclass with its own new_session: the general route.
            return await super().start_interaction(instance_id, ground_truth=ground_truth, **kwargs)
        # new_session, written out: this runs once per sample of a training run.
        if ground_truth.__class__ is str and "," not in ground_truth:
            sessions[instance_id] = _Session(ground_truth.strip())
        else:
            sessions[instance_id] = _Session(normalize_ground_truth(ground_truth))
        return instance_id

    def new_session(self, ground_truth: Any = None, **kwargs: Any) -> _Session:
        """Normalise the reference once, so turns compare plain strings.

        Other interaction kwargs (``name``, ``query``, ...) are accepted and ignored.
        """
        if ground_truth.__class__ is str and "," not in ground_truth:
            return _Session(ground_truth.strip())  # the common case, without the checks
        return _Session(normalize_ground_truth(ground_truth))

    def _judge(self, state: _Session, messages: Sequence[Any]) -> InteractionResult:
        """Score the last assistant message and record the score on the session."""
        expected = state.ground_truth
        if expected is not None:
            text = _last_assistant_text(messages)
            if text and self._extract(text[-TAIL_CHARS:]) == expected:
                state.last_score = 1.0
                return InteractionResult(True, CORRECT_MESSAGE, 1.0)
        state.last_score = 0.0
        return InteractionResult(False, INCORRECT_MESSAGE, 0.0)

    async def generate_response(
        self, instance_id: str, messages: list[dict[str, Any]], **kwargs: Any
    ) -> InteractionResult:
        """Judge the latest assistant turn of the session ``instance_id``.

        The same as :meth:`respond` on the session's state, written out in one
        function: this is the per-turn path, and it saves a coroutine and three
        calls per turn over the generic route (see docs/performance.md).
        """
        try:
            state = self._sessions[instance_id]
        except KeyError:
            state = self.session_state(instance_id)  # raises the core's SessionError
        expected = state.ground_truth
        if expected is not None:
            for message in reversed(messages):
                if message.get("role") == "assistant":
                    text = message.get("content")
                    if text.__class__ is not str:
                        text = message_text(text)
                    if text and self._extract(text[-TAIL_CHARS:]) == expected:
                        state.last_score = 1.0
                        return InteractionResult(True, CORRECT_MESSAGE, 1.0)
                    break
        state.last_score = 0.0
        return InteractionResult(False, INCORRECT_MESSAGE, 0.0)

    async def calculate_score(self, instance_id: str, **kwargs: Any) -> float:
        """The score of the last turn of the session ``instance_id`` (0.0 before any).

        :meth:`score` on the session's state, written out to save a coroutine.
        """
        state = self._sessions.get(instance_id)
        if state is None:
            state = self.session_state(instance_id)  # raises the core's SessionError
        return state.last_score

    async def respond(
        self, state: _Session, messages: list[dict[str, Any]], **kwargs: Any
    ) -> InteractionResult:
        """Judge the latest assistant turn of the session whose state is given."""
        return self._judge(state, messages)

    async def score(self, state: _Session, **kwargs: Any) -> float:
        """The score of the last turn seen in the session (0.0 before any turn)."""
        return state.last_score
