"""Installed interactions as a verifiers 0.4 taskset, played in-process.

``vf-eval interactions-verifiers`` (or ``[env.taskset] id = "interactions-verifiers"``
in an eval file) loads this module: verifiers' loader turns the id into the
top-level module name ``interactions_verifiers`` and takes the one ``Taskset``
subclass and the one ``Env`` subclass of its ``__all__``. It has to be a
top-level module because the loader first looks the id up under
``verifiers.v1.tasksets`` with ``importlib.util.find_spec``, which raises for a
dotted name inside another package.

Each entry of ``taskset.rows`` is one sample in verl's dataset shape: a
``prompt`` (a string, or chat messages) and ``interaction_kwargs`` (``name``,
else the config's ``default:``, plus the interaction's own arguments such as
``ground_truth``). ``taskset.config`` names an interactions config file; without
one every installed interaction is available by its name with its default
options. The model plays through the agent's harness as in any verifiers
taskset; after each reply the runtime's one episode step
(:func:`interactions_core.runtime.step.judge`) judges it through a
:class:`interactions_core.Session`, and the interaction's feedback goes back to
the model as the next user turn, as plain text. The episode's reward,
``interaction_score``, is the interaction's ``calculate_score``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import verifiers.v1 as vf
from pydantic import Field

from interactions_core import Session
from interactions_core.integrations import interactions_for
from interactions_core.runtime.step import judge

__all__ = [
    "InteractionsConfig",
    "InteractionsData",
    "InteractionsEnv",
    "InteractionsEnvConfig",
    "InteractionsTask",
    "InteractionsTaskset",
]

#: The reward each trace carries: the interaction's ``calculate_score``.
REWARD = "interaction_score"


class InteractionsData(vf.TaskData):
    """One sample. ``prompt`` stays unset (the env opens the exchange with ``opening``),
    so the interaction, not verifiers, decides what the model sees."""

    opening: str | list[dict[str, Any]]
    interaction_kwargs: dict[str, Any]
    config: str | None
    max_turns: int | None


class InteractionsConfig(vf.TasksetConfig):
    config: str | None = None
    """An interactions config file (``interactions run``'s); None = every installed
    interaction, by name, with its default options."""
    rows: list[dict[str, Any]] = Field(default_factory=list)
    """One task per sample: ``prompt`` and ``interaction_kwargs``, verl's shape."""
    max_turns: int | None = None
    """Assistant turns after which an episode ends (None: when the interaction says so)."""


class InteractionsTask(vf.Task[InteractionsData]):
    pass


class InteractionsTaskset(vf.Taskset[InteractionsTask, InteractionsConfig]):
    def load(self) -> Iterator[InteractionsTask]:
        config = self.config
        for idx, row in enumerate(config.rows):
            kwargs = dict(row.get("interaction_kwargs") or {})
            prompt = row.get("prompt")
            if not prompt:
                raise ValueError(f"taskset.rows[{idx}] has no prompt")
            yield InteractionsTask(
                InteractionsData(
                    name=f"{kwargs.get('name') or 'default'}#{idx}",
                    opening=prompt,
                    interaction_kwargs=kwargs,
                    config=config.config,
                    max_turns=config.max_turns,
                ),
                config.task,
            )


class InteractionsEnvConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig()


def _messages(prompt: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    return [dict(message) for message in prompt]


class InteractionsEnv(vf.Env[InteractionsEnvConfig]):
    """The interaction plays the user: judge each reply, send its feedback, until the end."""

    async def run(self, task: Any, agents: Any) -> None:
        data = task.data
        kwargs = dict(data.interaction_kwargs)
        name, interaction = interactions_for(data.config).get(kwargs.get("name"))
        messages = _messages(data.opening)
        turns = user_turns = 0
        async with Session(interaction, name=name) as session:
            await session.start(**kwargs)
            async with agents.player.interaction(task) as chat:
                segment = await chat.turn(messages)
                while not segment.terminated:
                    messages.append({"role": "assistant", "content": segment.last_reply})
                    turns += 1
                    _, end = await judge(session, messages, turns, user_turns, data.max_turns)
                    if end is not None:
                        chat.trace.stop(end)
                        break
                    user_turns += 1
                    segment = await chat.turn(messages[-1]["content"])
            score = await session.score()
        chat.trace.record_reward(REWARD, score)
