"""The pool's routing (interactions_core.ray._routing): sticky sessions, load, lost sessions."""

from __future__ import annotations

import pytest

from interactions_core.errors import SessionError
from interactions_core.ray._routing import ReplicaState, Router
from interactions_core.ray.errors import ReplicaLostError


def _router(count: int = 3, first: int = 0) -> Router:
    replicas = []
    for i in range(count):
        state = ReplicaState(i, handle=None)
        state.incarnation = f"inc-{i}"
        state.info = {"pid": 100 + i, "node_id": "feedc0ffee123456"}
        replicas.append(state)
    return Router("judge", replicas, first)


def _open(router: Router, sid: str) -> ReplicaState:
    state = router.choose()
    router.open(sid, state, state.incarnation)
    return state


def test_new_sessions_spread_by_load_then_round_robin() -> None:
    router = _router(3)
    placed = [_open(router, f"s{i}").index for i in range(6)]
    assert sorted(placed[:3]) == sorted(placed[3:]) == [0, 1, 2]  # one each, then again
    router.replicas[1].in_flight = 5  # busy: the next sessions avoid it
    assert sorted(_open(router, f"t{i}").index for i in range(2)) == [0, 2]
    assert [len(s.sessions) for s in router.replicas] == [3, 2, 3]


def test_the_first_tie_goes_to_the_replica_a_copy_starts_at() -> None:
    assert _router(3, first=2).choose().index == 2


def test_a_session_stays_on_the_replica_that_started_it() -> None:
    router = _router(2)
    state = _open(router, "a")
    _open(router, "b")
    assert router.find("a") == (state, state.incarnation)
    assert router.close("a") is state
    assert "a" not in state.sessions and router.open_sessions == 1


def test_live_and_duplicate_ids_are_refused() -> None:
    router = _router(2)
    _open(router, "a")
    with pytest.raises(SessionError, match="already has a live session 'a'"):
        router.check_new("a")
    with pytest.raises(SessionError, match="already live on another replica"):
        router.open("a", router.replicas[1], "inc-1")


def test_closing_a_session_whose_process_is_gone_asks_no_replica() -> None:
    router = _router(2)
    restarted = _open(router, "a")
    dead = _open(router, "b")
    restarted.incarnation = "inc-new"
    dead.alive = False
    assert router.close("a") is None and router.close("b") is None
    assert router.open_sessions == 0 and not restarted.sessions and not dead.sessions


def test_unknown_sessions_are_a_session_error_not_a_lost_replica() -> None:
    router = _router(1)
    with pytest.raises(SessionError, match="has no open session 'x'") as info:
        router.find("x")
    assert not isinstance(info.value, ReplicaLostError)
    assert router.close("x") is None


def test_a_restarted_replica_loses_its_old_sessions_only() -> None:
    router = _router(2)
    lost = _open(router, "a")
    kept = _open(router, "b")
    lost.incarnation = "inc-new"  # an answer came from a new process
    with pytest.raises(ReplicaLostError, match=r"replica 0 of pool 'judge' .*restarted"):
        router.find("a")
    assert router.find("b") == (kept, kept.incarnation)
    with pytest.raises(ReplicaLostError, match="pid 100, node feedc0ff"):
        router.find("a")  # still lost, without asking the replica
    assert router.open_sessions == 2  # a lost session counts until it is finalized
    assert router.close("a") is None  # finalizing it is quiet...
    assert router.open_sessions == 1
    router.check_new("a")  # ...and a lost id may be used again


def test_sessions_of_a_dead_replica_become_orphans() -> None:
    router = _router(1)
    state = _open(router, "a")
    state.alive = False
    router.forget_lost_sessions(state, "died (boom)")
    assert state.orphans == [("a", "inc-0")]
    assert router.lost["a"].startswith("replica 0 of pool 'judge' (pid 100, node feedc0ff) died")


def test_when_every_replica_is_down_the_message_says_why() -> None:
    router = _router(2)
    for state, why in zip(router.replicas, ("died (oom)", "shut down"), strict=True):
        state.alive = False
        state.lost_reason = why
    with pytest.raises(ReplicaLostError) as info:
        router.choose()
    assert str(info.value) == (
        "all 2 replicas of pool 'judge' are down (replica 0: died (oom); replica 1: shut "
        "down); they take sessions again once Ray has restarted them"
    )


def test_status_and_the_portable_form() -> None:
    router = _router(2)
    _open(router, "a")
    assert [row["sessions"] for row in router.status()] == [1, 0]
    assert router.status()[0]["pid"] == 100
    copy = ReplicaState.from_portable(0, router.replicas[0].portable())
    assert (copy.incarnation, copy.info, copy.alive) == ("inc-0", router.replicas[0].info, True)
    assert copy.sessions == set() and copy.info is not router.replicas[0].info
