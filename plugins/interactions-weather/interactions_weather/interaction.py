"""The weather interaction: rewards a conversation that used a tool.

This is verl's example of a tool-using interaction. It does not judge the answer
itself, only whether the model called a tool (a message with role ``tool`` is in
the conversation), and always ends the episode after one check.

It uses only the documented :class:`~interactions_core.SessionInteraction`
API (``new_session``, ``respond``, ``score``). A turn costs a reverse scan of the
messages and one result of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from interactions_core._interaction import InteractionResult, SessionInteraction

__all__ = ["WeatherConfig", "WeatherInteraction"]

FOUND_MESSAGE = "Thank you for your weather query!"
MISSING_MESSAGE = "Please use the weather tool to get the weather information."


@attrs.frozen
class WeatherConfig:
    """Options of the ``weather`` interaction: none.

    Declared anyway so a config that passes options is rejected before a run
    starts, instead of the options being silently ignored.
    """


class _Session:
    """Per-session state: the last turn's score (one per open session)."""

    __slots__ = ("last_score",)

    def __init__(self) -> None:
        self.last_score = 0.0

    def __repr__(self) -> str:
        return f"_Session(last_score={self.last_score!r})"


def _has_tool_message(messages: Sequence[Any]) -> bool:
    """Whether any message has role ``tool``; scans from the end, stops at the last one.

    The most recent tool message is usually close to the end, so scanning backwards
    finds it after a few steps. Only the role counts: verl marked "none found" with
    the text ``no tool call``, so a tool that returned exactly that text was missed.
    """
    for message in reversed(messages):  # noqa: SIM110 -- a plain loop beats any(genexpr) here
        if message.get("role") == "tool":
            return True
    return False


class WeatherInteraction(SessionInteraction):
    """Score 1.0 when the conversation contains a tool message, else 0.0; always stop."""

    config_schema = WeatherConfig

    def new_session(self, **kwargs: Any) -> _Session:
        """A fresh session; the sample's interaction kwargs are not needed."""
        return _Session()

    async def respond(
        self, state: _Session, messages: list[dict[str, Any]], **kwargs: Any
    ) -> InteractionResult:
        """Check the conversation and record the score on the session."""
        if _has_tool_message(messages):
            state.last_score = 1.0
            return InteractionResult(True, FOUND_MESSAGE, 1.0)
        state.last_score = 0.0
        return InteractionResult(True, MISSING_MESSAGE, 0.0)

    async def score(self, state: _Session, **kwargs: Any) -> float:
        """The score of the last turn seen in the session (0.0 before any turn)."""
        return state.last_score
