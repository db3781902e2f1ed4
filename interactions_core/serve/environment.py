"""The OpenEnv face of a hub: action, observation and environment classes.

OpenEnv's server builds one :class:`InteractionEnvironment` per WebSocket
connection (and a throw-away one per stateless HTTP call) by calling the
factory with no arguments, so the factory is ``functools.partial`` bound to the
:class:`~interactions_core.serve.hub.Hub`. Each environment plays its
connection's episodes through a :class:`~interactions_core.serve.episode.ServedEpisode`.

Importing this module imports OpenEnv (seconds, many packages): only the
``serve`` command and the server tests do.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from openenv.core.env_server import Action, Environment, Observation, State
from openenv.core.env_server.types import EnvironmentMetadata
from pydantic import Field, ValidationError, model_validator

from .. import __version__
from ..errors import BadActionError, BadResetError, ServeError
from .episode import ServedEpisode
from .hub import Hub

__all__ = [
    "InteractionAction",
    "InteractionEnvironment",
    "InteractionObservation",
    "InteractionState",
]

log = logging.getLogger("interactions_core.serve")

#: Seconds a disconnecting client's environment waits for its session to be finalized.
CLOSE_WAIT = 30.0


class InteractionAction(Action):
    """One assistant turn: the message the interaction judges."""

    content: str = Field(description="The assistant's message, appended to the conversation.")

    @model_validator(mode="wrap")
    @classmethod
    def _readable(cls, data: Any, handler: Any) -> Any:
        """Turn pydantic's report into one sentence that shows the expected shape."""
        try:
            return handler(data)
        except ValidationError as exc:
            problems = []
            for error in exc.errors():
                where = ".".join(str(part) for part in error.get("loc", ())) or "action"
                problems.append(f"{where}: {error.get('msg', 'invalid')}")
            raise BadActionError(
                "bad action (" + "; ".join(problems) + '): send {"content": "<the assistant\'s '
                'message>"}'
            ) from None


class InteractionObservation(Observation):
    """What the interaction answered; ``reward`` is the turn's score."""

    messages: list[dict[str, Any]] = Field(
        default_factory=list,
        description="The conversation so far: the prompt, then each assistant message and "
        "the feedback that followed it (none after the last turn).",
    )
    feedback: str = Field(default="", description="The interaction's answer to the last turn.")
    turn: int = Field(default=0, description="Assistant turns judged so far (0 after reset).")
    final_score: float | None = Field(
        default=None, description="The episode's score (calculate_score), set once done."
    )
    interaction: str = Field(default="", description="The name of the interaction playing.")


class InteractionState(State):
    """``episode_id`` is the session id, ``step_count`` the turn."""

    interaction: str = Field(default="", description="The name of the interaction playing.")
    open: bool = Field(default=False, description="True while the episode is in progress.")


class InteractionEnvironment(
    Environment[InteractionAction, InteractionObservation, InteractionState]
):
    """One connection's episodes, played on the interactions of a hub."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, hub: Hub) -> None:
        super().__init__()
        self.hub = hub
        self.episode = ServedEpisode(hub)
        self._loop: asyncio.AbstractEventLoop | None = None

    async def reset_async(  # type: ignore[override]
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        prompt: object = None,
        interaction_kwargs: object = None,
        token: object = None,
        **kwargs: Any,
    ) -> InteractionObservation:
        """Start an episode: ``prompt`` (chat messages), ``interaction_kwargs`` (name, ...)."""
        if kwargs:
            unknown = ", ".join(sorted(kwargs))
            raise BadResetError(
                f"unknown reset argument(s): {unknown}. A reset takes prompt (chat messages) "
                "and interaction_kwargs (the interaction's name and its own arguments, such "
                'as {"name": "gsm8k", "ground_truth": "72"})'
            )
        self._loop = asyncio.get_running_loop()
        return InteractionObservation(**await self.episode.start(prompt, interaction_kwargs, token))

    async def step_async(  # type: ignore[override]
        self, action: InteractionAction, timeout_s: float | None = None, **kwargs: Any
    ) -> InteractionObservation:
        """Judge ``action.content``; the observation's ``reward`` is the turn's score."""
        return InteractionObservation(**await self.episode.step(action.content))

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> Any:
        raise ServeError("this environment is asynchronous: the server calls reset_async")

    def step(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
        raise ServeError("this environment is asynchronous: the server calls step_async")

    @property
    def state(self) -> InteractionState:
        episode = self.episode
        return InteractionState(
            episode_id=episode.instance_id,
            step_count=episode.turn,
            interaction=episode.name,
            open=episode.is_open,
        )

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="interactions",
            description=f"interactions-core: {self.hub.summary()}",
            version=__version__,
        )

    def close(self) -> None:
        """End the connection's episode; never blocks the server's event loop.

        OpenEnv calls this from the connection's worker thread when a client
        disconnects (then it waits until the session is finalized), and on the
        event loop itself after a stateless HTTP call (then it schedules it).
        """
        episode = self.episode
        loop = self._loop
        if loop is None or not episode.is_open:
            return
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self.hub.spawn(episode.end())
        elif loop.is_running():
            future = asyncio.run_coroutine_threadsafe(episode.end(), loop)
            try:
                future.result(timeout=CLOSE_WAIT)
            except Exception as exc:  # the loop is going away or the plugin hangs
                log.warning("finalizing session %s: %r", episode.instance_id, exc)
