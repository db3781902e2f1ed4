"""Which replica serves a call: sticky sessions, spread by load, sessions lost with a replica.

The bookkeeping of an :class:`~interactions_core.ray.pool.InteractionPool`,
with no Ray call in it. A session's state lives in the replica process that
started it, so the :class:`Router` remembers, per session, that replica and
the incarnation (process) that holds it. A new session goes to the live
replica with the fewest open sessions plus calls in flight (ties: round robin).
When a replica's process is gone, its sessions move to the *lost* table: every
later call of one of them raises :class:`ReplicaLostError`, and finalizing it
is quiet.

Also here, the two helpers that keep that bookkeeping true:

- :class:`ReplicaHealth` notices a dead or restarted replica and probes it back
  into service. A pool learns that a replica is gone in two ways: a call to it
  fails with Ray's actor error (:meth:`ReplicaHealth.mark_dead`), or an answer
  comes from a new incarnation, i.e. Ray restarted the process
  (:meth:`ReplicaHealth.seen`). Either way the sessions of the old process are
  lost. A dead replica is pinged at most every ``probe_interval`` seconds; when
  it answers it takes new sessions again, and if the *same* process answered (it
  was only unreachable), the sessions the pool gave up on are finalized there so
  they do not leak.
- :class:`CallBatcher`: one replica's calls made in the same event-loop
  iteration travel in one Ray call. Each Ray call costs a round trip whatever it
  carries; when many episodes run concurrently, most of a pool's time would go
  to those round trips. A pool built with ``batch=True`` gives every replica a
  batcher, which collects the calls issued before the loop next runs (at most
  ``max_batch``) and sends them through
  :meth:`~interactions_core.ray.replica.Replica.call_batch`.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

from ..errors import SessionError
from .errors import ReplicaLostError

__all__ = ["Call", "CallBatcher", "ReplicaHealth", "ReplicaState", "Router"]

#: ``(method, args, kwargs)`` of one lifecycle call.
Call = tuple[str, tuple[Any, ...], dict[str, Any]]

#: What a copy of the pool in another process needs of one replica.
PortableReplica = tuple[Any, str, dict[str, Any], bool, str]


class ReplicaState:
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
        self.batcher: CallBatcher | None = None

    @property
    def load(self) -> int:
        return len(self.sessions) + self.in_flight

    def portable(self) -> PortableReplica:
        return (self.handle, self.incarnation, self.info, self.alive, self.lost_reason)

    @classmethod
    def from_portable(cls, index: int, row: PortableReplica) -> ReplicaState:
        handle, incarnation, info, alive, reason = row
        state = cls(index, handle)
        state.incarnation, state.info = incarnation, dict(info)
        state.alive, state.lost_reason = alive, reason
        return state


class Router:
    """Sessions to replicas: the open ones, the lost ones, and where a new one goes."""

    def __init__(self, name: str, replicas: list[ReplicaState], first: int = 0) -> None:
        self.name = name
        self.replicas = replicas
        #: Open sessions: the replica that holds each and the incarnation that started it.
        self.sessions: dict[str, tuple[ReplicaState, str]] = {}
        #: Sessions whose replica was lost, with the message their calls raise.
        self.lost: dict[str, str] = {}
        self._round_robin = itertools.count(first)

    # -- opening and closing sessions ----------------------------------------------

    def choose(self) -> ReplicaState:
        """The live replica with the lowest load (ties: round robin)."""
        alive = [s for s in self.replicas if s.alive]
        if not alive:
            reasons = "; ".join(
                f"replica {s.index}: {s.lost_reason}" for s in self.replicas if s.lost_reason
            )
            raise ReplicaLostError(
                f"all {len(self.replicas)} replicas of pool {self.name!r} are down "
                f"({reasons}); they take sessions again once Ray has restarted them"
            )
        low = min(s.load for s in alive)
        tied = [s for s in alive if s.load == low]
        return tied[next(self._round_robin) % len(tied)]

    def check_new(self, instance_id: str | None) -> None:
        """Refuse an id that is live; forget a lost session of the same id."""
        if instance_id is not None and (instance_id in self.sessions):
            raise SessionError(
                f"interaction {self.name!r} already has a live session {instance_id!r}; "
                "finalize it first or use a fresh instance_id"
            )
        self.lost.pop(instance_id or "", None)

    def open(self, session_id: str, state: ReplicaState, incarnation: str) -> None:
        """Remember that ``incarnation`` of ``state`` holds the new session ``session_id``."""
        if session_id in self.sessions:  # the plugin returned an id already live elsewhere
            raise SessionError(
                f"interaction {self.name!r} returned session id {session_id!r}, which is "
                "already live on another replica of the pool"
            )
        self.sessions[session_id] = (state, incarnation)
        state.sessions.add(session_id)

    def find(self, instance_id: str) -> tuple[ReplicaState, str]:
        """The replica and incarnation holding an open session, or the error its call raises."""
        lost = self.lost.get(instance_id)
        if lost is not None:
            raise ReplicaLostError(lost)
        found = self.sessions.get(instance_id)
        if found is None:
            raise SessionError(
                f"interaction {self.name!r} has no open session {instance_id!r}: "
                "call start_interaction first (a finalized session cannot be reused)"
            )
        state, incarnation = found
        if state.incarnation != incarnation:
            self.forget_lost_sessions(state, "restarted")
            raise ReplicaLostError(self.lost[instance_id])
        return found

    def close(self, instance_id: str) -> ReplicaState | None:
        """Forget a session; the replica to finalize it on, or None if its state is gone."""
        if self.lost.pop(instance_id, None) is not None:
            return None
        found = self.sessions.pop(instance_id, None)
        if found is None:
            return None
        state, incarnation = found
        state.sessions.discard(instance_id)
        if not state.alive or state.incarnation != incarnation:
            return None
        return state

    # -- sessions lost with a replica ----------------------------------------------

    def lost_message(self, state: ReplicaState) -> str:
        where = state.info.get("node_id") or "?"
        return (
            f"replica {state.index} of pool {self.name!r} (pid {state.info.get('pid')}, node "
            f"{str(where)[:8]}) {state.lost_reason or 'was lost'}: its sessions are gone; "
            "new sessions go to the other replicas"
        )

    def forget_lost_sessions(self, state: ReplicaState, why: str | None) -> None:
        """Move every session of ``state``'s old incarnation(s) to the lost list."""
        if why:
            state.lost_reason = why
        message = self.lost_message(state)
        for sid in list(state.sessions):
            _, incarnation = self.sessions[sid]
            if state.alive and incarnation == state.incarnation:
                continue
            del self.sessions[sid]
            state.sessions.discard(sid)
            self.lost[sid] = message
            if not state.alive:
                state.orphans.append((sid, incarnation))

    # -- inspection ----------------------------------------------------------------

    @property
    def open_sessions(self) -> int:
        """Sessions started and not finalized (lost ones included)."""
        return len(self.sessions) + len(self.lost)

    def status(self) -> list[dict[str, Any]]:
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
            for s in self.replicas
        ]


class ReplicaHealth:
    """Tracks which replicas are alive and brings dead ones back once they answer."""

    def __init__(self, router: Router, probe_interval: float) -> None:
        self.router = router
        self.probe_interval = probe_interval

    def mark_dead(self, state: ReplicaState, reason: str) -> None:
        """A call to ``state`` failed: it takes no sessions, and its sessions are lost."""
        if state.alive:
            state.alive = False
            state.lost_reason = f"died ({reason})"
            state.next_probe = time.monotonic() + self.probe_interval
        self.router.forget_lost_sessions(state, None)

    def seen(self, state: ReplicaState, incarnation: str) -> None:
        """An answer came from ``incarnation``: a new one means the replica restarted."""
        if incarnation != state.incarnation:
            state.incarnation = incarnation
            state.alive = True
            self.router.forget_lost_sessions(state, "restarted")

    def probe_dead(self) -> None:
        """Start a probe of each dead replica whose next probe is due (needs a running loop)."""
        now = time.monotonic()
        for state in self.router.replicas:
            if state.alive or state.probing or now < state.next_probe:
                continue
            state.probing = True
            asyncio.get_running_loop().create_task(self._probe(state))

    async def _probe(self, state: ReplicaState) -> None:
        try:
            incarnation, info = await asyncio.wait_for(
                state.handle.ping.remote(), timeout=max(self.probe_interval, 1.0) * 5
            )
        except Exception:
            state.next_probe = time.monotonic() + self.probe_interval
        else:
            state.info = info
            await self._release_orphans(state, incarnation)
            if incarnation != state.incarnation:
                self.seen(state, incarnation)
            state.alive = True
            state.lost_reason = ""
        finally:
            state.probing = False

    @staticmethod
    async def _release_orphans(state: ReplicaState, incarnation: str) -> None:
        """The same process came back (it was unreachable, not dead): release the
        sessions the pool gave up on, so its interaction does not keep them."""
        orphans, state.orphans = state.orphans, []
        for sid, old in orphans:
            if old == incarnation:
                try:
                    await state.handle.call.remote("finalize_interaction", (sid,), {})
                except Exception:
                    pass


class CallBatcher:
    """Collects one replica's calls made in the same loop iteration into one Ray call."""

    def __init__(self, handle: Any, max_batch: int, loop: asyncio.AbstractEventLoop) -> None:
        self.handle = handle
        self.max_batch = max_batch
        self.loop = loop
        self.pending: list[tuple[Call, asyncio.Future[Any]]] = []
        self.scheduled = False

    def submit(self, call: Call) -> asyncio.Future[Any]:
        """Queue ``call``; its answer arrives on the returned future."""
        future = self.loop.create_future()
        self.pending.append((call, future))
        if len(self.pending) >= self.max_batch:
            self.flush()
        elif not self.scheduled:
            self.scheduled = True
            self.loop.call_soon(self.flush)
        return future

    def flush(self) -> None:
        """Send everything queued, ``max_batch`` calls per Ray call."""
        self.scheduled = False
        while self.pending:
            batch = self.pending[: self.max_batch]
            del self.pending[: self.max_batch]
            ref = self.handle.call_batch.remote([c for c, _ in batch])
            self.loop.create_task(self._deliver(ref, [f for _, f in batch]))

    @staticmethod
    async def _deliver(ref: Any, futures: list[asyncio.Future[Any]]) -> None:
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
