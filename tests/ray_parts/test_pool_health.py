"""Replica health (interactions_core.ray._routing): dead, restarted and probed replicas."""

from __future__ import annotations

import asyncio

from local_actors import LocalHandle

from interactions_core.ray._routing import ReplicaHealth, ReplicaState, Router


def _pool(handle: LocalHandle, interval: float = 0.0) -> tuple[Router, ReplicaHealth]:
    state = ReplicaState(0, handle)
    state.incarnation = handle.incarnation
    router = Router("judge", [state])
    return router, ReplicaHealth(router, interval)


def test_a_dead_replica_takes_no_sessions_and_loses_its_own() -> None:
    router, health = _pool(LocalHandle())
    state = router.replicas[0]
    router.open("a", state, state.incarnation)
    health.mark_dead(state, "ActorDiedError: killed")
    assert not state.alive and state.lost_reason == "died (ActorDiedError: killed)"
    assert "a" in router.lost and state.orphans == [("a", "inc-1")]
    health.mark_dead(state, "again")  # a second failure keeps the first reason
    assert state.lost_reason == "died (ActorDiedError: killed)"


def test_an_answer_from_a_new_incarnation_means_a_restart() -> None:
    router, health = _pool(LocalHandle())
    state = router.replicas[0]
    router.open("a", state, state.incarnation)
    health.seen(state, "inc-1")
    assert "a" in router.sessions
    health.seen(state, "inc-2")
    assert state.incarnation == "inc-2" and state.alive
    assert "restarted" in router.lost["a"] and state.orphans == []


async def test_a_probe_brings_back_the_same_process_and_releases_its_orphans() -> None:
    handle = LocalHandle()
    router, health = _pool(handle)
    state = router.replicas[0]
    router.open("a", state, state.incarnation)
    handle.down = True
    health.mark_dead(state, "unreachable")
    state.next_probe = 0.0
    health.probe_dead()
    await asyncio.sleep(0.01)
    assert not state.alive and not state.probing  # the probe failed: try again later
    handle.down = False
    state.next_probe = 0.0
    health.probe_dead()
    assert state.probing
    health.probe_dead()  # one probe at a time
    await asyncio.sleep(0.01)
    assert state.alive and state.lost_reason == "" and state.orphans == []
    assert handle.call.calls == [("finalize_interaction", ("a",), {})]
    assert len(handle.ping.calls) == 2


async def test_a_restarted_process_is_not_asked_to_finalize_old_sessions() -> None:
    handle = LocalHandle()
    router, health = _pool(handle)
    state = router.replicas[0]
    router.open("a", state, state.incarnation)
    health.mark_dead(state, "killed")
    handle.incarnation = "inc-2"
    health.probe_dead()
    await asyncio.sleep(0.01)
    assert state.alive and state.incarnation == "inc-2"
    assert handle.call.calls == []
