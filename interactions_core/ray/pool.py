"""Interactions served by pools of Ray actors, with the same async lifecycle.

An :class:`InteractionPool` looks like one interaction to its caller
(``start_interaction``, ``generate_response``, ``calculate_score``,
``finalize_interaction``), so a rollout worker or ``run_episodes`` uses it
unchanged, while the work happens in ``replicas`` actors (:mod:`.replica`):

- **Sticky sessions.** A session's calls all go to the replica that started it
  (its state lives there).
- **Spread by load.** A new session goes to the live replica with the fewest
  open sessions plus calls in flight (ties: round robin). See :mod:`._routing`.
- **Failures stay local.** When a replica's process dies, the calls in flight on
  it and every later call of its sessions raise :class:`ReplicaLostError`;
  finalizing such a session succeeds (its state died with the process). New
  sessions go to the survivors. Ray restarts the actor (``max_restarts``); the
  pool probes a dead replica at most every ``probe_interval`` seconds and,
  once it answers with a new incarnation, gives it new sessions again. See
  :mod:`._routing`.
- **Batching** (``batch=True``): calls for one replica issued in the same event
  loop iteration travel in one Ray call (at most ``max_batch``), which
  amortises Ray's per-call cost when many episodes run concurrently. See
  :mod:`._routing`.
- **Back-pressure.** At most ``max_in_flight`` calls per replica are in flight;
  further callers wait, so nothing queues without bound.

Pools are usually built from a config (:mod:`.from_config`).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping
from typing import Any

from ..errors import InteractionsError
from ._routing import CallBatcher, ReplicaHealth, ReplicaState, Router
from .errors import ReplicaLostError, cause_text
from .replica import actor_options, check_sizes, start_replicas, wait_ready

__all__ = ["InteractionPool"]

#: An answer of a replica: ``(ok, value or exception, incarnation)``.
Envelope = tuple[bool, Any, str]


class InteractionPool:
    """One interaction served by ``replicas`` Ray actors; see the module docstring.

    Build it with :func:`remote_interactions_from_config` or :func:`pool_for_entry`
    rather than directly. ``spec`` is the one-entry config each replica loads
    (``name``, ``plugin`` or ``class_name``, ``config``).
    """

    def __init__(
        self,
        spec: Mapping[str, Any],
        replicas: int = 1,
        *,
        resources: Mapping[str, float] | None = None,
        batch: bool = False,
        max_batch: int = 64,
        max_in_flight: int = 64,
        max_restarts: int = -1,
        probe_interval: float = 1.0,
        runtime_env: Mapping[str, Any] | None = None,
        ready_timeout: float = 120.0,
    ) -> None:
        from .errors import connect, import_ray

        check_sizes(replicas=replicas, max_batch=max_batch, max_in_flight=max_in_flight)
        ray = import_ray()
        if not ray.is_initialized():
            connect()
        self._configure(ray, dict(spec), batch, max_batch, max_in_flight, probe_interval)
        options = actor_options(
            resources,
            max_restarts=max_restarts,
            max_in_flight=max_in_flight,
            runtime_env=runtime_env,
        )
        self._adopt(start_replicas(ray, self.spec, replicas, options), first=0)
        try:
            wait_ready(ray, self._router.replicas, ready_timeout, self.name)
        except InteractionsError:
            self.shutdown()
            raise

    def _configure(
        self,
        ray: Any,
        spec: dict[str, Any],
        batch: bool,
        max_batch: int,
        max_in_flight: int,
        probe_interval: float,
    ) -> None:
        self._ray = ray
        self.spec = spec
        self.name = str(spec["name"])
        self.batch = batch
        self.max_batch = max_batch
        self.max_in_flight = max_in_flight
        self.probe_interval = probe_interval

    def _adopt(self, replicas: list[ReplicaState], first: int) -> None:
        """Route over ``replicas``; the first tie goes to replica ``first``."""
        self._router = Router(self.name, replicas, first)
        self._health = ReplicaHealth(self._router, self.probe_interval)
        self._loop: asyncio.AbstractEventLoop | None = None

    def _bind_loop(self) -> None:
        """Semaphores and batchers belong to one event loop: (re)make them for this one."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop = loop
            for state in self._router.replicas:
                state.semaphore = asyncio.Semaphore(self.max_in_flight)
                state.batcher = (
                    CallBatcher(state.handle, self.max_batch, loop) if self.batch else None
                )

    # -- the lifecycle -----------------------------------------------------------

    async def start_interaction(self, instance_id: str | None = None, **kwargs: Any) -> str:
        self._bind_loop()
        self._router.check_new(instance_id)
        self._health.probe_dead()
        state = self._router.choose()
        state.in_flight += 1  # counts towards load while the session is being created
        try:
            answer = await self._send(state, "start_interaction", (instance_id,), kwargs)
        finally:
            state.in_flight -= 1
        session_id = str(_value(answer))
        self._router.open(session_id, state, answer[2])
        return session_id

    async def generate_response(
        self, instance_id: str, messages: list[dict[str, Any]], **kwargs: Any
    ) -> Any:
        return await self._session_call(
            instance_id, "generate_response", (instance_id, messages), kwargs
        )

    async def calculate_score(self, instance_id: str, **kwargs: Any) -> Any:
        return await self._session_call(instance_id, "calculate_score", (instance_id,), kwargs)

    async def finalize_interaction(self, instance_id: str, **kwargs: Any) -> None:
        """Finalize on the session's replica; a lost or unknown session finalizes quietly."""
        self._bind_loop()
        state = self._router.close(instance_id)
        if state is None:
            return None
        try:
            answer = await self._send(state, "finalize_interaction", (instance_id,), kwargs)
        except ReplicaLostError:
            return None  # its state died with the replica: nothing left to release
        _value(answer)
        return None

    # -- one call on one replica ---------------------------------------------------

    async def _session_call(
        self, instance_id: str, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        self._bind_loop()
        state, incarnation = self._router.find(instance_id)
        answer = await self._send(state, method, args, kwargs)
        if answer[2] != incarnation:  # the process that held the session is gone
            lost = self._router.lost.get(instance_id)
            raise ReplicaLostError(lost or self._router.lost_message(state))
        return _value(answer)

    async def _send(
        self, state: ReplicaState, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Envelope:
        """One call on one replica, bounded by its semaphore; actor death -> ReplicaLostError.

        Every answer names the incarnation that gave it, which tells the pool
        whether the replica restarted since (:meth:`ReplicaHealth.seen`).
        """
        ray = self._ray
        semaphore = state.semaphore
        assert semaphore is not None
        async with semaphore:
            state.in_flight += 1
            try:
                if state.batcher is not None:
                    answer: Envelope = await state.batcher.submit((method, args, kwargs))
                else:
                    answer = await state.handle.call.remote(method, args, kwargs)
            except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as exc:
                self._health.mark_dead(state, cause_text(exc))
                raise ReplicaLostError(self._router.lost_message(state)) from None
            finally:
                state.in_flight -= 1
        self._health.seen(state, answer[2])
        return answer

    # -- inspection and shutdown ---------------------------------------------------

    @property
    def replicas(self) -> int:
        return len(self._router.replicas)

    @property
    def open_sessions(self) -> int:
        """Sessions started through this pool and not finalized (lost ones included)."""
        return self._router.open_sessions

    def replica_status(self) -> list[dict[str, Any]]:
        """Per replica: alive, open sessions routed to it, calls in flight, pid and node."""
        return self._router.status()

    async def replica_stats(self, timeout: float = 30.0) -> list[dict[str, Any] | None]:
        """Ask every replica for its pid, call count and the interaction's open sessions."""
        out: list[dict[str, Any] | None] = []
        for state in self._router.replicas:
            try:
                incarnation, info = await asyncio.wait_for(state.handle.ping.remote(), timeout)
            except Exception:
                out.append(None)
                continue
            out.append({**info, "incarnation": incarnation, "index": state.index})
        return out

    def shutdown(self) -> None:
        """Kill every replica; the pool is unusable afterwards."""
        for state in self._router.replicas:
            try:
                self._ray.kill(state.handle, no_restart=True)
            except Exception:
                pass
            state.alive = False
            state.lost_reason = "shut down"

    # -- shipping a pool to other processes ----------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        """What another process needs: the actor handles and the settings.

        A pool passed to a Ray task or actor (say, every rollout worker of a
        trainer) shares the driver's replicas. Its copy starts with no sessions
        and no load figures of its own: sessions are sticky within the process
        that started them, and each process spreads its new sessions by the load
        it sees itself.
        """
        return {
            "spec": self.spec,
            "name": self.name,
            "batch": self.batch,
            "max_batch": self.max_batch,
            "max_in_flight": self.max_in_flight,
            "probe_interval": self.probe_interval,
            "replicas": [s.portable() for s in self._router.replicas],
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        from .errors import import_ray

        self._configure(
            import_ray(),
            state["spec"],
            state["batch"],
            state["max_batch"],
            state["max_in_flight"],
            state["probe_interval"],
        )
        self.name = state["name"]
        rows = state["replicas"]
        replicas = [ReplicaState.from_portable(i, row) for i, row in enumerate(rows)]
        # copies in many processes must not all send their first sessions to replica 0
        self._adopt(replicas, first=random.randrange(len(replicas) or 1))

    def __repr__(self) -> str:
        alive = sum(s.alive for s in self._router.replicas)
        return (
            f"<InteractionPool {self.name!r} {alive}/{self.replicas} replicas alive, "
            f"{len(self._router.sessions)} sessions>"
        )


def _value(answer: Envelope) -> Any:
    """The plugin's return value, or its exception raised here with its own type."""
    ok, value, _ = answer
    if not ok:
        raise value
    return value
