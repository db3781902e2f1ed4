"""Replica health: noticing a dead or restarted replica, and probing it back into service.

A pool learns that a replica is gone in two ways: a call to it fails with
Ray's actor error (:meth:`ReplicaHealth.mark_dead`), or an answer comes from a
new incarnation, i.e. Ray restarted the process (:meth:`ReplicaHealth.seen`).
Either way the sessions of the old process are lost (:class:`._routing.Router`).
A dead replica is pinged at most every ``probe_interval`` seconds; when it
answers it takes new sessions again, and if the *same* process answered (it was
only unreachable), the sessions the pool gave up on are finalized there so
they do not leak.
"""

from __future__ import annotations

import asyncio
import time

from ._routing import ReplicaState, Router

__all__ = ["ReplicaHealth"]


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
