"""Interactions served by pools of Ray actors, with the same async lifecycle.

An :class:`InteractionPool` looks like one interaction to its caller
(``start_interaction``, ``generate_response``, ``calculate_score``,
``finalize_interaction``), so a rollout worker or ``run_episodes`` uses it
unchanged, while the work happens in ``replicas`` actors (:mod:`.replica`):

- **Sticky sessions.** A session's calls all go to the replica that started it
  (its state lives there).
- **Spread by load.** A new session goes to the live replica with the fewest
  open sessions plus calls in flight (ties: round robin).
- **Failures stay local.** When a replica's process dies, the calls in flight on
  it and every later call of its sessions raise :class:`ReplicaLostError`;
  finalizing such a session succeeds (its state died with the process). New
  sessions go to the survivors. Ray restarts the actor (``max_restarts``); the
  pool probes a dead replica at most every ``probe_interval`` seconds and,
  once it answers with a new incarnation, gives it new sessions again.
- **Batching** (``batch=True``): calls for one replica issued in the same event
  loop iteration travel in one Ray call (at most ``max_batch``), which
  amortises Ray's per-call cost when many episodes run concurrently.
- **Back-pressure.** At most ``max_in_flight`` calls per replica are in flight;
  further callers wait, so nothing queues without bound.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import time
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError, InteractionsError, SessionError
from .errors import RayUnavailableError, ReplicaLostError

__all__ = ["InteractionPool", "pool_for_entry", "remote_interactions_from_config"]

Source = Any  # a path or a mapping, as load_config accepts


class _ReplicaState:
    """What the pool knows about one replica."""

    __slots__ = (
        "alive",
        "batcher",
        "handle",
        "in_flight",
        "incarnation",
        "index",
        "info",
        "lost_reason",
        "next_probe",
        "orphans",
        "probing",
        "semaphore",
        "sessions",
    )

    def __init__(self, index: int, handle: Any) -> None:
        self.index = index
        self.handle = handle
        self.incarnation = ""
        self.alive = True
        self.sessions: set[str] = set()
        self.in_flight = 0
        self.info: dict[str, Any] = {}
        self.lost_reason = ""
        self.next_probe = 0.0
        self.probing = False
        #: Sessions failed while the replica was unreachable, by incarnation: if the
        #: same process answers again they are finalized there, so nothing leaks.
        self.orphans: list[tuple[str, str]] = []
        self.semaphore: asyncio.Semaphore | None = None
        self.batcher: _Batcher | None = None

    @property
    def load(self) -> int:
        return len(self.sessions) + self.in_flight


class _Batcher:
    """Collects one replica's calls made in the same loop iteration into one Ray call."""

    def __init__(self, handle: Any, max_batch: int, loop: asyncio.AbstractEventLoop) -> None:
        self.handle = handle
        self.max_batch = max_batch
        self.loop = loop
        self.pending: list[tuple[tuple[str, tuple[Any, ...], dict[str, Any]], asyncio.Future]] = []
        self.scheduled = False

    def submit(self, call: tuple[str, tuple[Any, ...], dict[str, Any]]) -> asyncio.Future:
        future = self.loop.create_future()
        self.pending.append((call, future))
        if len(self.pending) >= self.max_batch:
            self.flush()
        elif not self.scheduled:
            self.scheduled = True
            self.loop.call_soon(self.flush)
        return future

    def flush(self) -> None:
        self.scheduled = False
        while self.pending:
            batch = self.pending[: self.max_batch]
            del self.pending[: self.max_batch]
            ref = self.handle.call_batch.remote([c for c, _ in batch])
            self.loop.create_task(self._deliver(ref, [f for _, f in batch]))

    @staticmethod
    async def _deliver(ref: Any, futures: list[asyncio.Future]) -> None:
        try:
            answers = await ref
        except BaseException as exc:
            for f in futures:
                if not f.done():
                    f.set_exception(exc)
            return
        for f, answer in zip(futures, answers, strict=True):
            if not f.done():
                f.set_result(answer)


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
        from ._connect import import_ray
        from .replica import Replica

        for label, value in (
            ("replicas", replicas),
            ("max_batch", max_batch),
            ("max_in_flight", max_in_flight),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{label} must be a positive integer, not {value!r}")
        ray = import_ray()
        if not ray.is_initialized():
            from ._connect import connect

            connect()
        self._ray = ray
        self.spec = dict(spec)
        self.name = str(spec["name"])
        self.batch = batch
        self.max_batch = max_batch
        self.max_in_flight = max_in_flight
        self.probe_interval = probe_interval
        options: dict[str, Any] = {
            "max_restarts": max_restarts,
            "max_task_retries": 0,
            # calls in flight are bounded by the pool; leave room for probes
            "max_concurrency": max_in_flight + 8,
        }
        res = dict(resources or {})
        if "CPU" in res:
            options["num_cpus"] = res.pop("CPU")
        if "GPU" in res:
            options["num_gpus"] = res.pop("GPU")
        if "memory" in res:
            options["memory"] = res.pop("memory")
        if res:
            options["resources"] = res
        if runtime_env is not None:
            options["runtime_env"] = dict(runtime_env)
        actor_class = ray.remote(Replica).options(**options)
        self._replicas = [_ReplicaState(i, actor_class.remote(self.spec)) for i in range(replicas)]
        self._sessions: dict[str, tuple[_ReplicaState, str]] = {}
        self._lost: dict[str, str] = {}
        self._round_robin = itertools.count()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wait_ready(self._replicas, ready_timeout)

    # -- set-up ------------------------------------------------------------------

    def _wait_ready(self, states: list[_ReplicaState], timeout: float) -> None:
        ray = self._ray
        refs = [s.handle.ping.remote() for s in states]
        try:
            answers = ray.get(refs, timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            self.shutdown()
            raise RayUnavailableError(
                f"the {len(states)} replica(s) of pool {self.name!r} were not all ready "
                f"within {timeout:g} s: the cluster may lack the resources asked for each "
                "replica (see 'ray status'), or building the interaction is slow; lower "
                "'replicas' or 'resources', or raise ready_timeout"
            ) from None
        except ray.exceptions.RayActorError as exc:
            self.shutdown()
            raise InteractionsError(
                f"a replica of pool {self.name!r} could not build its interaction on its "
                f"node: {_cause_text(exc)}; run 'interactions ray check' to compare the "
                "plugins installed on each node"
            ) from None
        for state, (incarnation, info) in zip(states, answers, strict=True):
            state.incarnation = incarnation
            state.info = info
            state.alive = True

    def _bind_loop(self) -> asyncio.AbstractEventLoop:
        """Semaphores and batchers belong to one event loop: (re)make them for this one."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop = loop
            for state in self._replicas:
                state.semaphore = asyncio.Semaphore(self.max_in_flight)
                state.batcher = _Batcher(state.handle, self.max_batch, loop) if self.batch else None
        return loop

    # -- the lifecycle -----------------------------------------------------------

    async def start_interaction(self, instance_id: str | None = None, **kwargs: Any) -> str:
        self._bind_loop()
        if instance_id is not None and (instance_id in self._sessions):
            raise SessionError(
                f"interaction {self.name!r} already has a live session {instance_id!r}; "
                "finalize it first or use a fresh instance_id"
            )
        self._lost.pop(instance_id or "", None)
        state = self._choose()
        state.in_flight += 1  # counts towards load while the session is being created
        try:
            answer = await self._send(state, "start_interaction", (instance_id,), kwargs)
        finally:
            state.in_flight -= 1
        ok, value, incarnation = answer
        self._seen(state, incarnation)
        if not ok:
            raise value
        session_id = str(value)
        if session_id in self._sessions:  # the plugin returned an id already live elsewhere
            raise SessionError(
                f"interaction {self.name!r} returned session id {session_id!r}, which is "
                "already live on another replica of the pool"
            )
        self._sessions[session_id] = (state, incarnation)
        state.sessions.add(session_id)
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
        if self._lost.pop(instance_id, None) is not None:
            return None
        found = self._sessions.pop(instance_id, None)
        if found is None:
            return None
        state, incarnation = found
        state.sessions.discard(instance_id)
        if not state.alive or state.incarnation != incarnation:
            return None
        try:
            ok, value, answered = await self._send(
                state, "finalize_interaction", (instance_id,), kwargs
            )
        except ReplicaLostError:
            return None  # its state died with the replica: nothing left to release
        self._seen(state, answered)
        if not ok:
            raise value
        return None

    # -- routing -----------------------------------------------------------------

    def _choose(self) -> _ReplicaState:
        self._probe_dead()
        alive = [s for s in self._replicas if s.alive]
        if not alive:
            reasons = "; ".join(
                f"replica {s.index}: {s.lost_reason}" for s in self._replicas if s.lost_reason
            )
            raise ReplicaLostError(
                f"all {len(self._replicas)} replicas of pool {self.name!r} are down "
                f"({reasons}); they take sessions again once Ray has restarted them"
            )
        low = min(s.load for s in alive)
        tied = [s for s in alive if s.load == low]
        return tied[next(self._round_robin) % len(tied)]

    async def _session_call(
        self, instance_id: str, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        self._bind_loop()
        lost = self._lost.get(instance_id)
        if lost is not None:
            raise ReplicaLostError(lost)
        found = self._sessions.get(instance_id)
        if found is None:
            raise SessionError(
                f"interaction {self.name!r} has no open session {instance_id!r}: "
                "call start_interaction first (a finalized session cannot be reused)"
            )
        state, incarnation = found
        if state.incarnation != incarnation:
            self._forget_lost_sessions(state, "restarted")
            raise ReplicaLostError(self._lost[instance_id])
        ok, value, answered = await self._send(state, method, args, kwargs)
        self._seen(state, answered)
        if answered != incarnation:
            raise ReplicaLostError(self._lost.get(instance_id) or self._lost_message(state))
        if not ok:
            raise value
        return value

    async def _send(
        self, state: _ReplicaState, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[bool, Any, str]:
        """One call on one replica, bounded by its semaphore; actor death -> ReplicaLostError."""
        ray = self._ray
        semaphore = state.semaphore
        assert semaphore is not None
        async with semaphore:
            state.in_flight += 1
            try:
                if state.batcher is not None:
                    answer: tuple[bool, Any, str] = await state.batcher.submit(
                        (method, args, kwargs)
                    )
                else:
                    answer = await state.handle.call.remote(method, args, kwargs)
            except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as exc:
                self._mark_dead(state, _cause_text(exc))
                raise ReplicaLostError(self._lost_message(state)) from None
            finally:
                state.in_flight -= 1
        return answer

    def _lost_message(self, state: _ReplicaState) -> str:
        where = state.info.get("node_id") or "?"
        return (
            f"replica {state.index} of pool {self.name!r} (pid {state.info.get('pid')}, node "
            f"{str(where)[:8]}) {state.lost_reason or 'was lost'}: its sessions are gone; "
            "new sessions go to the other replicas"
        )

    def _mark_dead(self, state: _ReplicaState, reason: str) -> None:
        if state.alive:
            state.alive = False
            state.lost_reason = f"died ({reason})"
            state.next_probe = time.monotonic() + self.probe_interval
        self._forget_lost_sessions(state, None)

    def _forget_lost_sessions(self, state: _ReplicaState, why: str | None) -> None:
        """Move every session of ``state``'s old incarnation(s) to the lost list."""
        if why:
            state.lost_reason = why
        message = self._lost_message(state)
        for sid in list(state.sessions):
            _, incarnation = self._sessions[sid]
            if state.alive and incarnation == state.incarnation:
                continue
            del self._sessions[sid]
            state.sessions.discard(sid)
            self._lost[sid] = message
            if not state.alive:
                state.orphans.append((sid, incarnation))

    def _seen(self, state: _ReplicaState, incarnation: str) -> None:
        """An answer came from ``incarnation``: a new one means the replica restarted."""
        if incarnation != state.incarnation:
            state.incarnation = incarnation
            state.alive = True
            self._forget_lost_sessions(state, "restarted")

    def _probe_dead(self) -> None:
        now = time.monotonic()
        for state in self._replicas:
            if state.alive or state.probing or now < state.next_probe:
                continue
            state.probing = True
            asyncio.get_running_loop().create_task(self._probe(state))

    async def _probe(self, state: _ReplicaState) -> None:
        try:
            incarnation, info = await asyncio.wait_for(
                state.handle.ping.remote(), timeout=max(self.probe_interval, 1.0) * 5
            )
        except Exception:
            state.next_probe = time.monotonic() + self.probe_interval
        else:
            state.info = info
            orphans, state.orphans = state.orphans, []
            # the same process came back (it was unreachable, not dead): release the
            # sessions the pool gave up on, so its interaction does not keep them
            for sid, old in orphans:
                if old == incarnation:
                    try:
                        await state.handle.call.remote("finalize_interaction", (sid,), {})
                    except Exception:
                        pass
            if incarnation != state.incarnation:
                self._seen(state, incarnation)
            state.alive = True
            state.lost_reason = ""
        finally:
            state.probing = False

    # -- inspection and shutdown ---------------------------------------------------

    @property
    def replicas(self) -> int:
        return len(self._replicas)

    @property
    def open_sessions(self) -> int:
        """Sessions started through this pool and not finalized (lost ones included)."""
        return len(self._sessions) + len(self._lost)

    def replica_status(self) -> list[dict[str, Any]]:
        """Per replica: alive, open sessions routed to it, calls in flight, pid and node."""
        return [
            {
                "index": s.index,
                "alive": s.alive,
                "sessions": len(s.sessions),
                "in_flight": s.in_flight,
                "pid": s.info.get("pid"),
                "node_id": s.info.get("node_id"),
                "lost_reason": s.lost_reason,
            }
            for s in self._replicas
        ]

    async def replica_stats(self, timeout: float = 30.0) -> list[dict[str, Any] | None]:
        """Ask every replica for its pid, call count and the interaction's open sessions."""
        out: list[dict[str, Any] | None] = []
        for state in self._replicas:
            try:
                incarnation, info = await asyncio.wait_for(state.handle.ping.remote(), timeout)
            except Exception:
                out.append(None)
                continue
            out.append({**info, "incarnation": incarnation, "index": state.index})
        return out

    def shutdown(self) -> None:
        """Kill every replica; the pool is unusable afterwards."""
        for state in self._replicas:
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
            "replicas": [
                (s.handle, s.incarnation, s.info, s.alive, s.lost_reason) for s in self._replicas
            ],
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        from ._connect import import_ray

        self._ray = import_ray()
        self.spec = state["spec"]
        self.name = state["name"]
        self.batch = state["batch"]
        self.max_batch = state["max_batch"]
        self.max_in_flight = state["max_in_flight"]
        self.probe_interval = state["probe_interval"]
        self._replicas = []
        for i, (handle, incarnation, info, alive, reason) in enumerate(state["replicas"]):
            replica = _ReplicaState(i, handle)
            replica.incarnation, replica.info = incarnation, dict(info)
            replica.alive, replica.lost_reason = alive, reason
            self._replicas.append(replica)
        self._sessions = {}
        self._lost = {}
        # copies in many processes must not all send their first sessions to replica 0
        self._round_robin = itertools.count(random.randrange(len(self._replicas) or 1))
        self._loop = None

    def __repr__(self) -> str:
        alive = sum(s.alive for s in self._replicas)
        return (
            f"<InteractionPool {self.name!r} {alive}/{len(self._replicas)} replicas alive, "
            f"{len(self._sessions)} sessions>"
        )


def _cause_text(exc: BaseException) -> str:
    text = str(exc).strip()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    short = lines[-1] if lines else type(exc).__name__
    return short if len(short) <= 300 else short[:297] + "..."


def _spec(resolved: Any) -> dict[str, Any]:
    """The one-entry config a replica loads for a resolved entry of the driver's config."""
    spec: dict[str, Any] = {"name": resolved.name, "config": dict(resolved.options)}
    if resolved.entry.class_name:
        spec["class_name"] = resolved.origin
    else:
        spec["plugin"] = resolved.origin  # qualified: the same distribution on every node
    return spec


def remote_interactions_from_config(
    source: Source,
    replicas: int | None = None,
    *,
    only_marked: bool = False,
    address: str | None = None,
    resources: Mapping[str, float] | None = None,
    batch: bool = False,
    max_batch: int = 64,
    max_in_flight: int = 64,
    max_restarts: int = -1,
    runtime_env: Mapping[str, Any] | None = None,
    ready_timeout: float = 120.0,
    registry: Any = None,
) -> dict[str, Any]:
    """Like :func:`interactions_core.load_interactions`, each interaction in a pool of actors.

    The config is checked completely in the driver first (names, options), so a
    typo fails here, before any actor starts. An entry's own ``replicas:`` and
    ``resources:`` win over the ``replicas`` and ``resources`` given here; an entry
    with neither gets one replica, or, with ``only_marked=True``, stays a plain
    local instance (for configs where only the heavy entries should be pooled).
    The other options are :class:`InteractionPool`'s. If any pool fails to
    start, the pools already started are shut down.
    """
    from ..loader import load_config
    from ._connect import connect

    loaded = load_config(source, registry=registry)
    connect(address)
    out: dict[str, Any] = {}
    try:
        for resolved in loaded.entries:
            entry = resolved.entry
            count = entry.replicas if entry.replicas is not None else replicas
            if count is None and only_marked:
                out[resolved.name] = resolved.cls({**resolved.options, "name": resolved.name})
                continue
            out[resolved.name] = InteractionPool(
                _spec(resolved),
                count or 1,
                resources=entry.resources if entry.resources is not None else resources,
                batch=batch,
                max_batch=max_batch,
                max_in_flight=max_in_flight,
                max_restarts=max_restarts,
                runtime_env=runtime_env,
                ready_timeout=ready_timeout,
            )
    except BaseException:
        for value in out.values():
            if isinstance(value, InteractionPool):
                value.shutdown()
        raise
    return out


def pool_for_entry(
    source: Source, name: str, replicas: int | None = None, **options: Any
) -> InteractionPool:
    """The pool of one entry (by its name) of a config, for callers that pool some entries.

    ``options`` are :func:`remote_interactions_from_config`'s (``address``,
    ``resources``, ``batch``, ...). The entry's ``replicas:`` wins over ``replicas``.
    """
    from ..loader import load_config
    from ._connect import connect

    registry = options.pop("registry", None)
    address = options.pop("address", None)
    loaded = load_config(source, registry=registry)
    for resolved in loaded.entries:
        if resolved.name == name:
            break
    else:
        raise ConfigError(
            [
                f"no interaction named {name!r} in {loaded.source or 'the config'} "
                f"(configured: {', '.join(loaded.names) or 'none'})"
            ]
        )
    connect(address)
    entry = resolved.entry
    count = entry.replicas if entry.replicas is not None else replicas
    resources = entry.resources if entry.resources is not None else options.pop("resources", None)
    options.pop("resources", None)
    return InteractionPool(_spec(resolved), count or 1, resources=resources, **options)


class _PoolOwner:
    """A named actor holding one entry's pool, so every process of a job gets the same one."""

    def __init__(self, source: str, name: str, replicas: int | None) -> None:
        self._pool = pool_for_entry(source, name, replicas)

    def pool(self) -> InteractionPool:
        return self._pool


def shared_pool_for_entry(
    source: str | os.PathLike[str], name: str, replicas: int | None = None
) -> tuple[InteractionPool, Any]:
    """The pool of entry ``name`` of ``source``, built once per Ray job and shared.

    The first caller in a job starts a named actor that builds the pool
    (:func:`pool_for_entry`); every later caller, in any process of the job (the
    rollout workers of a trainer), gets a copy of that pool using the same
    replicas. Returns the pool and the owner's handle: keep the handle while the
    pool is in use (the owner lives as long as some process holds one).
    """
    import hashlib

    from ._connect import connect

    ray = connect(None)
    path = os.path.abspath(os.fspath(source))
    key = hashlib.sha256(f"{path}\0{name}\0{replicas}".encode()).hexdigest()[:16]
    owner_cls = ray.remote(num_cpus=0)(_PoolOwner)
    owner = owner_cls.options(name=f"interactions-pool-{key}", get_if_exists=True).remote(
        path, name, replicas
    )
    return ray.get(owner.pool.remote()), owner
