"""One replica of a pool: an interaction instance living in a Ray actor.

The class is plain Python; :func:`start_replicas` turns it into an actor with
``ray.remote`` when a pool is built, so importing this module needs no Ray.
The replica builds its interaction from a one-entry config *on its own node*,
through that node's installed entry points (design lesson 8): what runs is what
is installed there, which is why ``check_cluster_plugins`` exists.

Every answer is an envelope ``(ok, value, incarnation)``: a plugin's exception
travels back as a value, so the pool re-raises it with its own type, and the
``incarnation`` (new each time the actor process starts) lets the pool notice a
restart that lost the sessions held by the previous process.

Starting a pool's replicas is here too: a pool's size settings are checked
before Ray is touched (:func:`check_sizes`); each replica then becomes an actor
with the resources asked for (:func:`actor_options`). A replica that cannot be
placed, or cannot build its interaction on its node, is reported with what to
do about it, not with Ray's traceback (:func:`wait_ready`).
"""

from __future__ import annotations

import asyncio
import os
import pickle
import uuid
from collections.abc import Mapping
from typing import Any

from ..errors import InteractionsError
from ..runtime.episode import check_positive_int
from ._routing import ReplicaState
from .errors import RayUnavailableError, cause_text

__all__ = [
    "Replica",
    "actor_options",
    "check_sizes",
    "portable_exception",
    "start_replicas",
    "wait_ready",
]

Envelope = tuple[bool, Any, str]


def portable_exception(exc: BaseException) -> BaseException:
    """``exc`` when it survives pickling, else a ``RuntimeError`` carrying its text."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return RuntimeError(f"{type(exc).__module__}.{type(exc).__qualname__}: {exc}")
    return exc


class Replica:
    """Serves one interaction's lifecycle calls; one instance per actor process."""

    def __init__(self, spec: dict[str, Any]) -> None:
        from ..loader import load_config

        self.incarnation = uuid.uuid4().hex
        self.name = str(spec["name"])
        self.interaction = load_config({"interaction": [spec]}).instantiate()[self.name]
        self.calls = 0  # lifecycle calls served
        self.round_trips = 0  # Ray calls received (a batch is one)

    async def ping(self) -> tuple[str, dict[str, Any]]:
        """The incarnation and where this replica runs."""
        return self.incarnation, self.info()

    def info(self) -> dict[str, Any]:
        node_id = None
        try:
            import ray

            node_id = ray.get_runtime_context().get_node_id()
        except Exception:
            pass
        return {
            "pid": os.getpid(),
            "node_id": node_id,
            "calls": self.calls,
            "round_trips": self.round_trips,
            "open_sessions": getattr(self.interaction, "open_sessions", None),
        }

    async def call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Envelope:
        """Run one lifecycle method of the interaction; never raises for the plugin's errors."""
        self.round_trips += 1
        return await self._run(method, args, kwargs)

    async def _run(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Envelope:
        self.calls += 1
        try:
            value = await getattr(self.interaction, method)(*args, **kwargs)
        except Exception as exc:
            return False, portable_exception(exc), self.incarnation
        return True, value, self.incarnation

    async def call_batch(
        self, calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]]
    ) -> list[Envelope]:
        """Several calls in one Ray round trip, run concurrently, answers in order."""
        self.round_trips += 1
        if len(calls) == 1:
            return [await self._run(*calls[0])]
        return list(await asyncio.gather(*(self._run(*c) for c in calls)))


#: Resource names that are ``ray.remote`` options of their own; the rest go in ``resources``.
_OWN_OPTIONS = {"CPU": "num_cpus", "GPU": "num_gpus", "memory": "memory"}


def check_sizes(**sizes: Any) -> None:
    """Each size must be a positive integer (``True`` is not one)."""
    for label, value in sizes.items():
        check_positive_int(label, value)


def actor_options(
    resources: Mapping[str, float] | None,
    *,
    max_restarts: int,
    max_in_flight: int,
    runtime_env: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The ``ray.remote`` options of every replica of a pool."""
    options: dict[str, Any] = {
        "max_restarts": max_restarts,
        "max_task_retries": 0,
        # calls in flight are bounded by the pool; leave room for probes
        "max_concurrency": max_in_flight + 8,
    }
    res = dict(resources or {})
    for name, option in _OWN_OPTIONS.items():
        if name in res:
            options[option] = res.pop(name)
    if res:
        options["resources"] = res
    if runtime_env is not None:
        options["runtime_env"] = dict(runtime_env)
    return options


def start_replicas(
    ray: Any, spec: dict[str, Any], count: int, options: dict[str, Any]
) -> list[ReplicaState]:
    """Start ``count`` replica actors serving the one-entry config ``spec``."""
    actor_class = ray.remote(Replica).options(**options)
    return [ReplicaState(i, actor_class.remote(spec)) for i in range(count)]


def wait_ready(ray: Any, states: list[ReplicaState], timeout: float, pool: str) -> None:
    """Wait until every replica answers; record its incarnation and where it runs."""
    refs = [s.handle.ping.remote() for s in states]
    try:
        answers = ray.get(refs, timeout=timeout)
    except ray.exceptions.GetTimeoutError:
        raise RayUnavailableError(
            f"the {len(states)} replica(s) of pool {pool!r} were not all ready "
            f"within {timeout:g} s: the cluster may lack the resources asked for each "
            "replica (see 'ray status'), or building the interaction is slow; lower "
            "'replicas' or 'resources', or raise ready_timeout"
        ) from None
    except ray.exceptions.RayActorError as exc:
        raise InteractionsError(
            f"a replica of pool {pool!r} could not build its interaction on its "
            f"node: {cause_text(exc)}; run 'interactions ray check' to compare the "
            "plugins installed on each node"
        ) from None
    for state, (incarnation, info) in zip(states, answers, strict=True):
        state.incarnation = incarnation
        state.info = info
        state.alive = True
