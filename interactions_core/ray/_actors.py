"""Starting a pool's replica actors: their Ray options, and waiting until each is ready.

A pool's size settings are checked before Ray is touched; each replica then
becomes an actor of :class:`~interactions_core.ray.replica.Replica` with the
resources asked for. A replica that cannot be placed, or cannot build its
interaction on its node, is reported with what to do about it, not with
Ray's traceback.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import InteractionsError
from ._messages import cause_text
from ._routing import ReplicaState
from .errors import RayUnavailableError

__all__ = ["actor_options", "check_sizes", "start_replicas", "wait_ready"]

#: Resource names that are ``ray.remote`` options of their own; the rest go in ``resources``.
_OWN_OPTIONS = {"CPU": "num_cpus", "GPU": "num_gpus", "memory": "memory"}


def check_sizes(**sizes: Any) -> None:
    """Each size must be a positive integer (``True`` is not one)."""
    for label, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{label} must be a positive integer, not {value!r}")


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
    from .replica import Replica

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
