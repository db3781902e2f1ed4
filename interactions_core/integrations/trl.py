"""TRL: interactions as the ``environment_factory`` of ``GRPOTrainer``.

TRL (1.16) builds one environment per concurrent rollout with ``Cls()``, calls a
*synchronous* ``reset(**dataset_row)`` before each rollout, exposes every other
public method as a tool the model can call, and asks ``get_reward()`` once the
rollout is over. Feedback reaches the model only as a tool result, so the
interaction is exposed as one tool, :meth:`InteractionsEnvironment.answer`,
through which the model submits each answer and reads the interaction's feedback::

    from trl import GRPOConfig, GRPOTrainer
    from interactions_core.integrations.trl import environment_factory

    trainer = GRPOTrainer(
        model=model,
        args=GRPOConfig(...),
        train_dataset=dataset,  # rows with prompt and interaction_kwargs (verl's shape)
        environment_factory=environment_factory("config.yaml"),
    )

``environment_factory(CONFIG)`` plays the interactions in this process, on a
private event loop in a daemon thread (TRL's calls are synchronous);
``environment_factory(url="http://host:8000")`` plays them on a running
``interactions serve`` through OpenEnv's client instead. Either way every session
is finalized: when its episode ends, at the next ``reset``, when TRL drops the
instance, and at interpreter exit. See ``docs/trl.md``.
"""

from __future__ import annotations

import asyncio
import atexit
import threading
import weakref
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, ClassVar, TypeVar

from ..errors import InteractionsError
from ..runtime.episode import interaction_kwargs_of

__all__ = ["InteractionsEnvironment", "environment_factory"]

T = TypeVar("T")

#: Seconds a call waits for the interaction (or the server) before giving up.
CALL_TIMEOUT = 300.0
#: Seconds a reset keeps retrying while the server is at capacity (--max-sessions).
CAPACITY_WAIT = 120.0
#: How the server's capacity error starts (interactions_core.serve.hub.Hub.admit).
AT_CAPACITY = "the server is at capacity"


class _Loop:
    """A private event loop in a daemon thread; synchronous callers submit coroutines to it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="interactions-trl-loop", daemon=True
        )
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = CALL_TIMEOUT) -> T:
        """Run ``coro`` on the loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def submit(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run ``coro`` on the loop without waiting (safe from a garbage-collector callback)."""
        if self.loop.is_closed():
            coro.close()
            return
        asyncio.run_coroutine_threadsafe(coro, self.loop)


class _InProcess:
    """Episodes played on a :class:`~interactions_core.serve.hub.Hub` in this process."""

    def __init__(self, config: Any, default: str | None, options: dict[str, Any]) -> None:
        from ..serve.hub import Hub

        self.hub = Hub.from_config(config, default=default, **options)
        self.loop = _Loop()
        atexit.register(self.shutdown)

    def new(self) -> Any:
        from ..serve.episode import ServedEpisode

        return ServedEpisode(self.hub)

    def start(self, episode: Any, prompt: Any, kwargs: Any, token: str | None) -> dict[str, Any]:
        result: dict[str, Any] = self.loop.run(episode.start(prompt, kwargs, token))
        return result

    def step(self, episode: Any, content: str) -> dict[str, Any]:
        result: dict[str, Any] = self.loop.run(episode.step(content))
        return result

    def end(self, episode: Any) -> None:
        self.loop.run(episode.end())

    def release(self, episode: Any) -> None:
        self.loop.submit(episode.end())

    def shutdown(self) -> None:
        try:
            self.loop.run(self.hub.drain(), timeout=30)
        except Exception:  # interpreter exit: best effort, the sessions are in-process
            pass

    def open_sessions(self) -> int:
        return self.hub.tracker.open


async def _awaited(call: Callable[[], Any]) -> Any:
    """Call an OpenEnv client method on the private loop and await what it returns.

    ``openenv-core`` 0.3 returns a coroutine; ``openenv`` 0.10 returns an awaitable
    inside a running loop but runs the call synchronously outside one, so the
    method is called here, on the loop.
    """
    return await call()


class _Remote:
    """Episodes played on a running ``interactions serve`` through OpenEnv's client."""

    def __init__(self, url: str) -> None:
        try:
            from openenv.core import GenericEnvClient
        except ImportError as exc:
            raise InteractionsError(
                "playing against a server needs OpenEnv's client: "
                "pip install 'openenv>=0.10' (part of the [trl] extra; see docs/install.md)"
            ) from exc
        self.client_class = GenericEnvClient
        self.url = url
        self.loop = _Loop()
        self._clients: weakref.WeakSet[Any] = weakref.WeakSet()
        atexit.register(self.shutdown)

    def new(self) -> Any:
        client = self.client_class(base_url=self.url)
        self._clients.add(client)
        return client

    def _result(self, result: Any) -> dict[str, Any]:
        observation = dict(result.observation)
        observation["reward"] = result.reward
        observation["done"] = result.done
        return observation

    def _call(self, call: Callable[[], Any]) -> Any:
        try:
            return self.loop.run(_awaited(call))
        except RuntimeError as exc:  # OpenEnv's client reports server errors this way
            message = str(exc).removeprefix("Server error: ")
            raise InteractionsError(message) from exc
        except ConnectionError as exc:
            raise InteractionsError(
                f"cannot reach the interactions server at {self.url}: {exc}. Is "
                "`interactions serve` running there?"
            ) from exc

    def start(self, client: Any, prompt: Any, kwargs: Any, token: str | None) -> dict[str, Any]:
        """Reset; while the server is at capacity, retry for up to ``CAPACITY_WAIT`` s."""
        import time

        arguments: dict[str, Any] = {"prompt": prompt, "interaction_kwargs": kwargs}
        if token is not None:
            arguments["token"] = token
        deadline = time.monotonic() + CAPACITY_WAIT
        delay = 0.05
        while True:
            try:
                return self._result(self._call(lambda: client.reset(**arguments)))
            except InteractionsError as exc:
                if not str(exc).startswith(AT_CAPACITY) or time.monotonic() > deadline:
                    raise
            time.sleep(delay)
            delay = min(delay * 2, 1.0)

    def step(self, client: Any, content: str) -> dict[str, Any]:
        return self._result(self._call(lambda: client.step({"content": content})))

    def end(self, client: Any) -> None:
        # Closing the connection ends the episode: the server finalizes its session.
        self.loop.run(_awaited(client.close))

    def release(self, client: Any) -> None:
        self.loop.submit(_awaited(client.close))

    def shutdown(self) -> None:
        for client in list(self._clients):
            try:
                self.loop.run(_awaited(client.close), timeout=10)
            except Exception:  # interpreter exit: the server finalizes on disconnect anyway
                pass

    def open_sessions(self) -> int:
        import json
        import urllib.request

        with urllib.request.urlopen(self.url.rstrip("/") + "/interactions", timeout=10) as r:
            return int(json.loads(r.read())["sessions"]["open"])


class InteractionsEnvironment:
    """One rollout's episode; TRL creates, resets and reuses these (see the module docstring).

    Public methods other than ``reset`` and ``get_reward`` are tools for TRL, so
    this class has exactly one: :meth:`answer`.
    """

    _backend: ClassVar[Any] = None
    _token: ClassVar[str | None] = None

    def __init__(self) -> None:
        backend = type(self)._backend
        if backend is None:
            raise InteractionsError(
                "use environment_factory(CONFIG) (or environment_factory(url=...)) to get a "
                "class to pass to GRPOTrainer, not InteractionsEnvironment itself"
            )
        self._episode = backend.new()
        self._last: dict[str, Any] | None = None
        # When TRL drops this instance, its episode's session is finalized.
        self._release = weakref.finalize(self, backend.release, self._episode)

    def reset(self, **row: Any) -> None:
        """Start the row's episode: ``prompt`` and ``interaction_kwargs`` (or verl's
        ``extra_info.interaction_kwargs``); any episode in progress ends first.

        Returns ``None``: the model sees the row's prompt unchanged.
        """
        kwargs = interaction_kwargs_of(row)
        self._last = None
        self._last = self._backend.start(self._episode, row.get("prompt"), kwargs, self._token)

    def answer(self, content: str) -> str:
        """Submit your answer to be checked. The reply says whether it is correct; when it is
        not, you may reflect and answer again.

        Args:
            content: Your complete answer, ending with the final result.

        Returns:
            The feedback on your answer.
        """
        last = self._last
        if last is None:
            raise InteractionsError("no episode in progress: the trainer did not call reset")
        if last["done"]:
            raise InteractionsError("the episode is over: no further answer is checked")
        self._last = self._backend.step(self._episode, content)
        return str(self._last["feedback"])

    def get_reward(self) -> float:
        """The episode's reward: its final score when it ended, else the last turn's score.

        An episode the model left unfinished (it stopped answering, or TRL's tool
        budget ran out) ends here, and its session is finalized.
        """
        last = self._last
        if last is None:
            return 0.0
        if last["done"] and last["final_score"] is not None:
            return float(last["final_score"])
        self._backend.end(self._episode)
        reward = last.get("reward")
        return float(reward) if reward is not None else 0.0

    @classmethod
    def _open_sessions(cls) -> int:
        """Sessions open right now (on this process's hub, or on the server)."""
        return int(cls._backend.open_sessions())


def environment_factory(
    config: str | Mapping[str, Any] | None = None,
    *,
    url: str | None = None,
    default: str | None = None,
    max_turns: int | None = None,
    timeout: float | None = None,
    token: str | None = None,
) -> type[InteractionsEnvironment]:
    """A class for ``GRPOTrainer(environment_factory=...)`` playing the interactions of ``config``.

    ``config`` is a config file or mapping, played in this process (``default``
    overrides its ``default:``; ``max_turns`` ends an episode after that many
    answers; ``timeout`` bounds each interaction call, in seconds). With ``url``
    (and no config), episodes are played on a running ``interactions serve``;
    ``token`` is its shared token, if it has one.
    """
    if (config is None) == (url is None):
        raise InteractionsError(
            "environment_factory needs exactly one of CONFIG (play in this process) or "
            "url=... (play on a running `interactions serve`)"
        )
    backend: Any
    if url is not None:
        if default is not None or max_turns is not None or timeout is not None:
            raise InteractionsError(
                "default, max_turns and timeout are the server's options with url=...: "
                "pass them to `interactions serve` instead"
            )
        backend = _Remote(url)
    else:
        options = {"max_turns": max_turns, "timeout": timeout}
        backend = _InProcess(config, default, options)
    namespace = {"_backend": backend, "_token": token, "__module__": __name__}
    return type("InteractionsEnvironment", (InteractionsEnvironment,), namespace)
