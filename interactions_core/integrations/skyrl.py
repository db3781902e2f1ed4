"""SkyRL: every installed interaction as a skyrl-gym environment ``interactions/<name>``.

SkyRL chooses an environment per data row by its ``env_class`` and builds one with
``skyrl_gym.make(env_class, env_config=..., extras=row)`` per trajectory; its
generator then calls the environment's synchronous ``init(prompt)``,
``step(action)`` once per assistant turn, and ``close()``, many environments at
once from its executor threads. One call makes every installed interaction
available that way::

    from interactions_core.integrations.skyrl import register_interactions

    register_interactions()  # interactions/gsm8k, interactions/weather, ...

Call it in the process that builds the environments (in SkyRL, the entrypoint
that runs the trainer), as for any skyrl-gym environment. The allow/deny lists
(``INTERACTIONS_PLUGINS``, ``INTERACTIONS_DISABLE``) decide what is registered.

An environment accepts the rows ``interactions data`` writes (the sample's
``extra_info.interaction_kwargs``) and SkyRL's own (``reward_spec.ground_truth``,
passed to the interaction as ``ground_truth``). Each ``step`` is the runtime's one
episode step (:func:`interactions_core.runtime.step.judge`): the interaction's
feedback comes back as a ``user`` observation and the turn's score as the step's
reward, so SkyRL's generator places one reward per assistant turn. ``done`` is
set when the interaction terminates or at the turn limit (the row's
``max_turns``, which SkyRL's generator sets from ``generator.max_turns``, unless
the environment's own config sets one). ``close()`` finalizes the session, as
does every other way out (a failing plugin, an environment dropped unclosed).

A plugin that raises ends only its own episode: that step is ``done`` with
reward 0.0 and the error in its metadata. How the asynchronous interaction is
called from SkyRL's threads (inline, or on one loop shared by the process) is
explained in :mod:`interactions_core.integrations`.

Supported skyrl-gym releases: :data:`SUPPORTED_SKYRL_GYM`, tested by ``nox -s skyrl``.
"""

from __future__ import annotations

import itertools
import logging
import threading
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import skyrl_gym
from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput

from .. import InteractionCallError, InteractionResult, InteractionsError, Session
from ..runtime import SampleError
from ..runtime.episode import interaction_kwargs_of
from ..runtime.step import ERROR, judge
from . import Caller

__all__ = [
    "ENTRY_POINT",
    "PREFIX",
    "SUPPORTED_SKYRL_GYM",
    "InteractionEnv",
    "register_interactions",
]

#: What every registered id starts with: ``interactions/gsm8k``.
PREFIX = "interactions/"
#: The class skyrl-gym builds for every registered id.
ENTRY_POINT = f"{__name__}:InteractionEnv"
#: The skyrl-gym releases this adapter is tested against.
SUPPORTED_SKYRL_GYM = ">=0.4,<0.5"
#: The options an environment's ``env_config`` may set.
OPTIONS = ("max_turns", "timeout")

logger = logging.getLogger(__name__)


def register_interactions(names: Sequence[str] | None = None) -> list[str]:
    """Register interactions with skyrl-gym as ``interactions/<name>``; return the ids.

    ``names`` (plain or ``distribution:name``) defaults to every installed
    interaction the allow/deny lists let through. Calling it again is harmless;
    an id that something else registered is an error naming it.
    """
    from ..registry import get_registry

    registry = get_registry()
    chosen = registry.names() if names is None else [registry.resolve(n).name for n in names]
    ids = []
    for name in chosen:
        env_id = PREFIX + name
        kwargs = {"interaction": name}
        existing = skyrl_gym.registry.get(env_id)
        if existing is None:
            skyrl_gym.register(id=env_id, entry_point=ENTRY_POINT, kwargs=kwargs)
        elif existing.entry_point != ENTRY_POINT or existing.kwargs != kwargs:
            raise InteractionsError(
                f"skyrl_gym already has an environment {env_id!r} (entry point "
                f"{existing.entry_point!r}); deregister it first "
                "(skyrl_gym.envs.registration.deregister) or disable the interaction "
                f"with INTERACTIONS_DISABLE={name}"
            )
        ids.append(env_id)
    return ids


_callers: dict[str, Caller] = {}
_callers_lock = threading.Lock()


def caller_for(name: str) -> Caller:
    """The process's one instance of interaction ``name``, created on first use, shared."""
    caller = _callers.get(name)
    if caller is None:
        with _callers_lock:
            caller = _callers.get(name)
            if caller is None:
                from ..registry import get_registry

                caller = _callers[name] = Caller(get_registry().create(name))
    return caller


def _options(env_config: Any, env_id: str) -> dict[str, Any]:
    """``max_turns`` and ``timeout`` from the environment's config, checked.

    SkyRL passes an empty ``DictConfig`` for an environment it has no config for,
    on every trajectory; reading one costs more than a turn, so an empty one is not read.
    """
    if env_config is None or not len(env_config):
        return {}
    options = dict(env_config)
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise ValueError(
            f"unknown option(s) {', '.join(map(repr, unknown))} in the skyrl_gym config of "
            f"{env_id!r}; it takes: {', '.join(OPTIONS)}"
        )
    timeout = options.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not float(timeout) > 0):
        raise ValueError(f"timeout of {env_id!r} must be a positive number of seconds")
    return options


def _turn_limit(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{where} must be a positive whole number of turns, not {value!r}")
    return value


def row_kwargs(extras: Any, name: str) -> dict[str, Any]:
    """The ``interaction_kwargs`` a row gives interaction ``name`` (see the module docstring)."""
    if not isinstance(extras, Mapping):
        raise SampleError(f"extras must be the data row (a mapping), not {type(extras).__name__}")
    found = interaction_kwargs_of(extras)
    if found is not None and not isinstance(found, Mapping):
        raise SampleError(
            "the row's extra_info.interaction_kwargs must be a mapping such as "
            f'{{"ground_truth": "72"}}, not {type(found).__name__}'
        )
    kwargs = dict(found or {})
    named = kwargs.get("name")
    if named is not None and named != name:
        raise SampleError(
            f"the row's interaction_kwargs names {named!r} but its env_class is "
            f"{PREFIX + name!r}: set env_class to {PREFIX + str(named)!r}"
        )
    kwargs["name"] = name
    spec = extras.get("reward_spec")
    if isinstance(spec, Mapping) and spec.get("ground_truth") is not None:
        kwargs.setdefault("ground_truth", spec["ground_truth"])
    return kwargs


async def _turn(
    session: Session,
    start: dict[str, Any] | None,
    messages: list[dict[str, Any]],
    turns: int,
    user_turns: int,
    limit: int | None,
) -> tuple[InteractionResult, str | None, float | None]:
    """One step (the first also starts the session, with the ``start`` kwargs); at the
    episode's end also its final score, and the session finalized: one call per step."""
    if start is not None:
        await session.start(**start)
    result, end = await judge(session, messages, turns, user_turns, limit)
    if end is None:
        return result, None, None
    try:
        final = await session.score()
    finally:
        problem = await session.finalize()
    if problem is not None:  # the turn was judged: only worth a warning
        logger.warning("%s", problem)
    return result, end, final


#: Session ids: unique in the process and across processes (a random prefix per process).
_ids = itertools.count()
_id_prefix = f"skyrl-{uuid.uuid4().hex[:12]}-"


class InteractionEnv(BaseTextEnv):  # type: ignore[misc]
    """One episode of one interaction, as skyrl-gym's text environment.

    Built by ``skyrl_gym.make("interactions/<name>", env_config=..., extras=row)``;
    ``env_config`` may set ``max_turns`` and ``timeout`` (seconds per interaction
    call, for interactions that await something).
    """

    def __init__(
        self, env_config: Any = None, extras: Any = None, *, interaction: str = ""
    ) -> None:
        super().__init__()
        env_id = PREFIX + interaction
        options = _options(env_config, env_id)
        row = {} if extras is None else extras
        self.name = interaction
        self._kwargs = row_kwargs(row, interaction)
        limit = options.get("max_turns")
        if limit is None and isinstance(row, Mapping):
            limit = row.get("max_turns")
        self.max_turns = _turn_limit(limit, f"max_turns of {env_id!r}")
        self._caller = caller = caller_for(interaction)
        timeout = None if caller.inline else options.get("timeout")
        self._session = Session(
            caller.interaction,
            name=interaction,
            instance_id=f"{_id_prefix}{next(_ids)}",
            timeout=None if timeout is None else float(timeout),
        )
        self._messages: list[dict[str, Any]] = []
        self._user_turns = 0
        self._done = False
        self._error: str | None = None
        self._final: float | None = None
        self.end_reason: str | None = None

    def init(self, prompt: Any) -> tuple[Any, dict[str, Any]]:
        """The prompt goes to the model unchanged; the session starts with the first step
        (in the same call to the interaction as the first turn's judgement)."""
        self._messages = list(prompt)
        return prompt, {"interaction": self.name}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        """Judge the assistant turn ``action``: feedback, the turn's score, and ``done``."""
        if self._done:
            raise InteractionsError(
                f"{PREFIX + self.name}: step() after the episode ended; make a new environment"
            )
        self.turns += 1
        messages = self._messages
        messages.append({"role": "assistant", "content": action})
        start = self._kwargs if self.turns == 1 else None
        try:
            result, end, final = self._caller.run(
                _turn(self._session, start, messages, self.turns, self._user_turns, self.max_turns)
            )
        except InteractionCallError as exc:
            self._fail(exc)
            return self._failed()
        if end is None:
            self._user_turns += 1
            return {
                "observations": [messages[-1]],
                "reward": result.score,
                "done": False,
                "metadata": {"interaction": self.name},
            }
        self._done = True
        self.end_reason = end
        self._final = final
        metadata = {"interaction": self.name, "end_reason": end, "final_score": final}
        return {"observations": [], "reward": result.score, "done": True, "metadata": metadata}

    def _fail(self, exc: InteractionCallError) -> None:
        """The plugin failed: this episode ends (reward 0.0), its session is finalized."""
        logger.warning("interaction episode failed: %s", exc)
        self._error = str(exc)
        self.end_reason = ERROR
        self._finalize()

    def _failed(self) -> BaseTextEnvStepOutput:
        self._done = True
        metadata = {"interaction": self.name, "end_reason": ERROR, "error": self._error}
        return {"observations": [], "reward": 0.0, "done": True, "metadata": metadata}

    def _finalize(self) -> None:
        if self._session.is_open:
            problem = self._caller.run(self._session.finalize())
            if problem is not None:
                logger.warning("%s", problem)

    def close(self) -> None:
        """Finalize the session if the episode did not end by itself (harmless twice)."""
        self._finalize()

    def __del__(self) -> None:
        # Dropped without close(): finalize the session on the shared loop, never here
        # (a garbage collection can run in any thread, in the middle of anything).
        session = getattr(self, "_session", None)
        if session is not None and session.is_open:
            try:
                self._caller.submit(session.finalize())
            except Exception:  # interpreter exit: the sessions die with the process
                pass

    def get_metrics(self) -> dict[str, Any]:
        """Per episode, averaged by SkyRL: turns played, final score, whether it failed."""
        return {
            "turns": self.turns,
            "final_score": self._final or 0.0,
            "error": 0.0 if self._error is None else 1.0,
        }
