"""The weather interaction: rewards a conversation that used a tool.

This is verl's example of a tool-using interaction, and the shortest complete
interaction in this project (``docs/writing-plugins.md`` walks through it). It
does not judge the answer, only whether the model called a tool (a message with
role ``tool`` is in the conversation), and it always ends the episode after one
check.
"""

from __future__ import annotations

from typing import Any

import attrs

from interactions_core import InteractionResult, SessionInteraction

__all__ = ["WeatherConfig", "WeatherInteraction", "WeatherSession"]

FOUND_MESSAGE = "Thank you for your weather query!"
MISSING_MESSAGE = "Please use the weather tool to get the weather information."


@attrs.frozen
class WeatherConfig:
    """Options of the ``weather`` interaction: none, so a config that passes any is refused."""


@attrs.define
class WeatherSession:
    """One conversation's state: the score of its last turn."""

    last_score: float = 0.0


class WeatherInteraction(SessionInteraction):
    """Score 1.0 when the conversation contains a tool message, else 0.0; always stop."""

    config_schema = WeatherConfig

    def new_session(self, **kwargs: Any) -> WeatherSession:
        """A fresh session; the sample's interaction kwargs are not needed."""
        return WeatherSession()

    async def respond(
        self, state: WeatherSession, messages: list[dict[str, Any]], **kwargs: Any
    ) -> InteractionResult:
        """Check the conversation and record the score on the session."""
        # From the end, where the last tool message usually is. Only the role counts:
        # verl looked for the text "no tool call", which a tool could return.
        used_tool = any(message.get("role") == "tool" for message in reversed(messages))
        state.last_score = 1.0 if used_tool else 0.0
        feedback = FOUND_MESSAGE if used_tool else MISSING_MESSAGE
        return InteractionResult(True, feedback, state.last_score)

    async def score(self, state: WeatherSession, **kwargs: Any) -> float:
        """The score of the last turn seen in the session (0.0 before any turn)."""
        return state.last_score
