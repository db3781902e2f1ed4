"""The GSM8K interaction: checks each assistant answer against the sample's reference.

A session is opened with the sample's ``ground_truth``; after every assistant
turn the text of the last assistant message is scored with :mod:`.scoring`. A
correct answer ends the episode with score 1.0, a wrong one asks the model to try
again with score 0.0. This is verl's ``Gsm8kInteraction`` with its bugs fixed
(see the package README).

It is written the documented way, as a plugin author would write it: a
:class:`~interactions_core.SessionInteraction` (``new_session``, ``respond``,
``score``; the base class owns the sessions), an attrs ``config_schema``, an
:class:`~interactions_core.InteractionResult` for every turn (its two replies never
change, so they are constants built once), and
:func:`~interactions_core.last_assistant_text` to read what the model said.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from interactions_core import InteractionResult, SessionInteraction, last_assistant_text

from .scoring import METHODS, answer_extractor, normalize_ground_truth

__all__ = ["CORRECT", "INCORRECT", "Gsm8kConfig", "Gsm8kInteraction", "message_text"]

CORRECT_MESSAGE = "Your response is correct!"
INCORRECT_MESSAGE = "Your response is incorrect! You need to reflect on your answer and try again."

#: The two replies. A result is an immutable value, so a reply that never changes is
#: built once and returned on every turn.
CORRECT = InteractionResult(True, CORRECT_MESSAGE, 1.0)
INCORRECT = InteractionResult(False, INCORRECT_MESSAGE, 0.0)


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


@attrs.define
class Gsm8kSession:
    """One session's state: the normalised reference answer and the last turn's score."""

    ground_truth: str | None
    last_score: float = 0.0


def message_text(content: Any) -> str:
    """The text of one message's ``content``: a string, ``None`` or a list of parts.

    The same reading as :func:`interactions_core.last_assistant_text`: ``None`` (a
    tool-calling turn) is ``""`` and a list of parts gives its text parts joined.
    """
    return last_assistant_text([{"role": "assistant", "content": content}])


class Gsm8kInteraction(SessionInteraction):
    """Scores GSM8K answers turn by turn; stops the episode at the first correct one.

    Start a session with ``start_interaction(instance_id, ground_truth=...)``;
    ``ground_truth`` may be a ``str``, ``int`` or ``float``.
    """

    config_schema = Gsm8kConfig
    settings: Gsm8kConfig

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__(config)
        # The configured method's extractor, looked up once rather than every turn.
        self.extract = answer_extractor(self.settings.method)

    def new_session(self, ground_truth: Any = None, **kwargs: Any) -> Gsm8kSession:
        """Normalise the reference once, so turns compare plain strings.

        Other interaction kwargs (``name``, ``query``, ...) are accepted and ignored.
        """
        return Gsm8kSession(normalize_ground_truth(ground_truth))

    def respond(
        self, state: Gsm8kSession, messages: list[dict[str, Any]], **kwargs: Any
    ) -> InteractionResult:
        """Judge the latest assistant turn and record its score on the session."""
        answer = self.extract(last_assistant_text(messages))
        correct = state.ground_truth is not None and answer == state.ground_truth
        reply = CORRECT if correct else INCORRECT
        state.last_score = reply.score
        return reply

    def score(self, state: Gsm8kSession, **kwargs: Any) -> float:
        """The score of the last turn seen in the session (0.0 before any turn)."""
        return state.last_score
