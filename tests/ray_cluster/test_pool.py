"""Interaction pools on a real cluster: identical results, stickiness, failures, batching."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_support import EXPECTED, stable, write_dist

from interactions_core import load_interactions
from interactions_core.errors import SessionError
from interactions_core.ray import (
    InteractionPool,
    ReplicaLostError,
    pool_for_entry,
    remote_interactions_from_config,
)
from interactions_core.registry import reset_registry
from interactions_core.runtime import ReplayPolicy, SampleReader, run_episodes

ZERO_CPU = {"CPU": 0}  # replicas fit beside the test's tasks on the 2-CPU head


async def _replay(data: Path, interactions: dict, limit: int | None = None, **kw: object):
    return await run_episodes(
        SampleReader(data, limit=limit),
        ReplayPolicy(),
        interactions,
        concurrency=32,
        observe=False,
        keep_records=True,
        **kw,  # type: ignore[arg-type]
    )


@pytest.fixture(scope="module")
def local_records(replay_files: tuple[Path, Path]) -> dict[int, dict]:
    config, data = replay_files
    summary = asyncio.run(_replay(data, load_interactions(config)))
    return {r.index: stable(r.to_dict()) for r in summary.records}


@pytest.mark.parametrize("batch", [False, True], ids=["unbatched", "batched"])
def test_pool_gives_the_local_results_on_the_gsm8k_replay(
    address: str, replay_files: tuple[Path, Path], local_records: dict, batch: bool
) -> None:
    config, data = replay_files
    pools = remote_interactions_from_config(config, replicas=2, resources=ZERO_CPU, batch=batch)
    pool = pools["gsm8k"]
    try:
        assert isinstance(pool, InteractionPool) and pool.replicas == 2
        summary = asyncio.run(_replay(data, pools))
        result = summary.as_dict()
        assert {k: result[k] for k in EXPECTED} == EXPECTED
        assert {r.index: stable(r.to_dict()) for r in summary.records} == local_records
        assert pool.open_sessions == 0
        stats = asyncio.run(pool.replica_stats())
        assert [s["open_sessions"] for s in stats] == [0, 0]  # type: ignore[index]
        calls = [s["calls"] for s in stats]  # type: ignore[index]
        assert min(calls) > 0.3 * sum(calls)  # both replicas served a fair share
        trips = sum(s["round_trips"] for s in stats)  # type: ignore[index]
        if batch:
            assert trips < sum(calls) / 2  # batching sent several calls per Ray call
        else:
            assert trips == sum(calls)
    finally:
        pool.shutdown()


def test_sessions_are_sticky_and_spread_by_load(address: str) -> None:
    pool = pool_for_entry({"interaction": [{"name": "gsm8k"}]}, "gsm8k", 3, resources=ZERO_CPU)

    async def main() -> None:
        ids = [await pool.start_interaction(f"s{i}", ground_truth="7") for i in range(9)]
        assert [s["sessions"] for s in pool.replica_status()] == [3, 3, 3]
        stats = await pool.replica_stats()
        assert [s["open_sessions"] for s in stats] == [3, 3, 3]  # type: ignore[index]
        # every call of a session reaches the replica holding its state
        for sid in ids:
            result = await pool.generate_response(sid, [{"role": "assistant", "content": "#### 7"}])
            terminate, _, score, _ = result  # gsm8k answers verl's plain 4-tuple
            assert score == 1.0 and terminate
            assert await pool.calculate_score(sid) == 1.0
        with pytest.raises(SessionError, match="already has a live session 's0'"):
            await pool.start_interaction("s0")
        for sid in ids[:3]:
            await pool.finalize_interaction(sid)
        # the replicas that lost sessions take the next ones
        loads_before = [s["sessions"] for s in pool.replica_status()]
        new = [await pool.start_interaction(f"n{i}", ground_truth="1") for i in range(3)]
        assert sorted(s["sessions"] for s in pool.replica_status()) == [3, 3, 3]
        assert loads_before != [3, 3, 3]
        for sid in ids[3:] + new:
            await pool.finalize_interaction(sid)
        with pytest.raises(SessionError, match="no open session 's5'"):
            await pool.generate_response("s5", [])
        assert pool.open_sessions == 0
        assert [s["open_sessions"] for s in await pool.replica_stats()] == [0, 0, 0]  # type: ignore[index]

    try:
        asyncio.run(main())
    finally:
        pool.shutdown()


def test_plugin_errors_keep_their_type(address: str) -> None:
    pool = pool_for_entry({"interaction": [{"name": "gsm8k"}]}, "gsm8k", 1, resources=ZERO_CPU)

    async def main() -> None:
        sid = await pool.start_interaction(ground_truth="3")
        with pytest.raises(SessionError, match="has no open session 'nope'") as info:
            await pool._session_call("nope", "generate_response", ("nope", []), {})
        assert not isinstance(info.value, ReplicaLostError)
        # an error raised inside the replica comes back with its own type
        await pool.finalize_interaction(sid)
        sid = await pool.start_interaction(ground_truth="3")
        pool._router.sessions["ghost"] = pool._router.sessions[sid]
        with pytest.raises(SessionError, match="has no open session 'ghost'"):
            await pool.generate_response("ghost", [])
        del pool._router.sessions["ghost"]
        await pool.finalize_interaction(sid)

    try:
        asyncio.run(main())
    finally:
        pool.shutdown()


def _kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)


def test_a_dead_replica_fails_its_own_sessions_and_rejoins_after_restart(address: str) -> None:
    pool = pool_for_entry(
        {"interaction": [{"name": "gsm8k"}]},
        "gsm8k",
        2,
        resources=ZERO_CPU,
        probe_interval=0.2,
    )
    answer = [{"role": "assistant", "content": "#### 5"}]

    async def main() -> None:
        ids = [await pool.start_interaction(f"s{i}", ground_truth="5") for i in range(6)]
        status = pool.replica_status()
        victim = status[0]
        on_victim = [sid for sid in ids if sid in pool._router.replicas[0].sessions]
        on_survivor = [sid for sid in ids if sid not in on_victim]
        assert len(on_victim) == len(on_survivor) == 3
        _kill(victim["pid"])
        # the first call on a session of the dead replica reports it plainly
        with pytest.raises(ReplicaLostError) as info:
            await pool.generate_response(on_victim[0], answer)
        message = str(info.value)
        assert "replica 0 of pool 'gsm8k'" in message and "its sessions are gone" in message
        assert f"pid {victim['pid']}" in message
        # the other sessions of that replica fail the same way, without a Ray call
        for sid in on_victim[1:]:
            with pytest.raises(ReplicaLostError):
                await pool.calculate_score(sid)
        # the survivor's sessions are untouched
        for sid in on_survivor:
            assert (await pool.generate_response(sid, answer))[2] == 1.0  # the score
        # new sessions go to the survivor while replica 0 is down
        fresh = [await pool.start_interaction(f"f{i}", ground_truth="5") for i in range(2)]
        assert all(sid in pool._router.replicas[1].sessions for sid in fresh)
        # finalizing lost sessions is quiet; nothing is leaked on the survivor
        for sid in ids + fresh:
            await pool.finalize_interaction(sid)
        assert pool.open_sessions == 0
        survivor = (await pool.replica_stats())[1]
        assert survivor is not None and survivor["open_sessions"] == 0
        # Ray restarts the actor; the pool probes it and gives it sessions again
        deadline = time.monotonic() + 60
        rejoined = None
        while time.monotonic() < deadline:
            sid = await pool.start_interaction(ground_truth="5")
            on_zero = sid in pool._router.replicas[0].sessions
            if on_zero:
                rejoined = sid
                break
            await pool.finalize_interaction(sid)
            await asyncio.sleep(0.2)
        assert rejoined is not None, pool.replica_status()
        assert (await pool.generate_response(rejoined, answer))[2] == 1.0  # the score
        await pool.finalize_interaction(rejoined)
        now = pool.replica_status()[0]
        assert now["alive"] and now["pid"] != victim["pid"]

    try:
        asyncio.run(main())
    finally:
        pool.shutdown()


def test_killing_a_replica_mid_run_fails_only_its_episodes(
    address: str, replay_files: tuple[Path, Path], local_records: dict
) -> None:
    config, data = replay_files
    pools = remote_interactions_from_config(config, replicas=2, resources=ZERO_CPU, max_restarts=0)
    pool = pools["gsm8k"]
    victim = pool.replica_status()[0]["pid"]
    done = [0]

    def on_record(record: object) -> None:
        done[0] += 1
        if done[0] == 100:
            _kill(victim)

    try:
        summary = asyncio.run(_replay(data, pools, limit=600, on_record=on_record))
        assert summary.episodes == 600  # every sample is accounted for
        records = {r.index: r for r in summary.records}
        failed = [r for r in records.values() if r.errors]
        assert 0 < len(failed) <= 32  # only the episodes in flight on the dead replica
        assert {e["type"] for r in failed for e in r.errors} == {"ReplicaLostError"}
        for index, record in records.items():
            if not record.errors:
                assert stable(record.to_dict()) == local_records[index]
        # after the kill every new session went to the survivor, which leaked none
        assert pool.open_sessions == 0
        stats = asyncio.run(pool.replica_stats())
        assert stats[0] is None  # max_restarts=0: it stays dead
        assert stats[1] is not None and stats[1]["open_sessions"] == 0
    finally:
        pool.shutdown()


def test_back_pressure_bounds_the_calls_in_flight(
    address: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    write_dist(
        site,
        "acme-slow",
        "1.0",
        {"slow": "acme_slow:Slow"},
        {
            "acme_slow": """
            import asyncio
            from interactions_core import SessionInteraction

            class Slow(SessionInteraction):
                running = 0
                peak = 0

                def new_session(self, **kwargs):
                    return {}

                async def respond(self, state, messages, **kwargs):
                    Slow.running += 1
                    Slow.peak = max(Slow.peak, Slow.running)
                    await asyncio.sleep(0.05)
                    Slow.running -= 1
                    return False, "ok", 0.0, {}

                async def score(self, state, **kwargs):
                    return float(Slow.peak)
            """
        },
    )
    monkeypatch.syspath_prepend(str(site))
    reset_registry()
    try:
        pool = pool_for_entry(
            {"interaction": [{"name": "slow"}]},
            "slow",
            1,
            resources=ZERO_CPU,
            max_in_flight=3,
            runtime_env={"env_vars": {"PYTHONPATH": str(site)}},
        )
    finally:
        reset_registry()

    async def main() -> float:
        ids = [await pool.start_interaction() for _ in range(12)]
        await asyncio.gather(*(pool.generate_response(sid, []) for sid in ids))
        peak = await pool.calculate_score(ids[0])
        for sid in ids:
            await pool.finalize_interaction(sid)
        return peak

    try:
        assert asyncio.run(main()) == 3.0  # 12 concurrent callers, never more than 3 at once
    finally:
        pool.shutdown()


def test_a_pool_that_cannot_be_placed_says_why(address: str) -> None:
    with pytest.raises(Exception, match="were not all ready within 3 s"):
        pool_for_entry(
            {"interaction": [{"name": "gsm8k"}]},
            "gsm8k",
            1,
            resources={"CPU": 64},
            ready_timeout=3,
        )


def test_config_replicas_and_resources_are_honoured(address: str, tmp_path: Path) -> None:
    config = tmp_path / "mixed.yaml"
    config.write_text(
        "interaction:\n"
        "  - name: gsm8k\n"
        "    replicas: 3\n"
        "    resources: {CPU: 0}\n"
        "  - name: weather\n",
        encoding="utf-8",
    )
    mixed = remote_interactions_from_config(config, only_marked=True)
    try:
        assert isinstance(mixed["gsm8k"], InteractionPool) and mixed["gsm8k"].replicas == 3
        assert not isinstance(mixed["weather"], InteractionPool)
        # a plain load of the same config ignores the pool keys: one local instance each
        plain = load_interactions(config)
        assert not any(isinstance(v, InteractionPool) for v in plain.values())
    finally:
        mixed["gsm8k"].shutdown()


@pytest.fixture(autouse=True)
def _no_leftover_actors(address: str) -> Iterator[None]:
    yield
    from ray._private.state import actors  # the GCS table (the state API needs a dashboard)

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        alive = [a for a in actors().values() if a.get("State") not in ("DEAD", 4)]
        if not alive:
            return
        time.sleep(0.5)
    raise AssertionError(f"actors left alive after the test: {alive}")


def test_sessions_given_up_on_an_unreachable_replica_are_released_when_it_answers(
    address: str,
) -> None:
    pool = pool_for_entry(
        {"interaction": [{"name": "gsm8k"}]}, "gsm8k", 1, resources=ZERO_CPU, probe_interval=0.1
    )

    async def main() -> None:
        ids = [await pool.start_interaction(ground_truth="2") for _ in range(3)]
        state = pool._router.replicas[0]
        # what a transient ActorUnavailableError does: the pool gives up on the replica
        pool._health.mark_dead(state, "unreachable for a moment")
        with pytest.raises(ReplicaLostError, match="unreachable for a moment"):
            await pool.generate_response(ids[0], [])
        for sid in ids:
            await pool.finalize_interaction(sid)  # quiet: the pool already let them go
        assert (await pool.replica_stats())[0]["open_sessions"] == 3  # type: ignore[index]
        await asyncio.sleep(0.2)
        with pytest.raises(ReplicaLostError):  # no live replica yet; this starts the probe
            await pool.start_interaction(ground_truth="2")
        deadline = time.monotonic() + 30
        while not state.alive and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert state.alive  # the same process answered: it takes sessions again...
        stats = (await pool.replica_stats())[0]
        assert stats is not None and stats["open_sessions"] == 0  # ...and leaks none
        sid = await pool.start_interaction(ground_truth="2")
        await pool.finalize_interaction(sid)

    try:
        asyncio.run(main())
    finally:
        pool.shutdown()


def test_a_dotted_class_path_ships_with_the_jobs_py_modules(address: str, tmp_path: Path) -> None:
    package = tmp_path / "code" / "acme_dotted"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "judge.py").write_text(
        "import os\n"
        "from interactions_core import SessionInteraction\n\n"
        "class EchoJudge(SessionInteraction):\n"
        "    def new_session(self, **kwargs):\n"
        "        return {}\n\n"
        "    async def respond(self, state, messages, **kwargs):\n"
        "        return True, f'judged in {os.getpid()}', 1.0, {}\n",
        encoding="utf-8",
    )
    # A local folder in py_modules is uploaded at the job level (ray.init), so this
    # runs as a job of its own: a driver that has the package, workers that do not.
    script = tmp_path / "job.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import asyncio, os, sys
            sys.path.insert(0, {str(package.parent)!r})
            import ray
            from interactions_core.ray import remote_interactions_from_config

            ray.init(address={address!r}, runtime_env={{"py_modules": [{str(package)!r}]}})
            entry = {{"name": "echo", "class_name": "acme_dotted.judge.EchoJudge"}}
            pools = remote_interactions_from_config(
                {{"interaction": [entry]}}, replicas=1, resources={{"CPU": 0}}
            )
            pool = pools["echo"]

            async def main():
                sid = await pool.start_interaction()
                result = await pool.generate_response(sid, [])
                await pool.finalize_interaction(sid)
                return result[1]

            print(asyncio.run(main()), pool.replica_status()[0]["pid"], os.getpid())
            pool.shutdown()
            """
        ),
        encoding="utf-8",
    )
    proc = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    replica_pid, driver_pid = proc.stdout.split()[-2:]
    assert proc.stdout.strip().startswith(f"judged in {replica_pid}")  # ran in the replica
    assert replica_pid != driver_pid


def test_a_pool_passed_to_ray_workers_shares_the_drivers_replicas(address: str) -> None:
    import ray

    pool = pool_for_entry({"interaction": [{"name": "gsm8k"}]}, "gsm8k", 2, resources=ZERO_CPU)

    @ray.remote(num_cpus=0)
    def rollout_worker(pool: InteractionPool, truth: str) -> tuple[float, int]:
        async def main() -> tuple[float, int]:
            sid = await pool.start_interaction(ground_truth=truth)
            result = await pool.generate_response(
                sid, [{"role": "assistant", "content": f"#### {truth}"}]
            )
            await pool.finalize_interaction(sid)
            return result[2], pool.open_sessions  # the score

        return asyncio.run(main())

    try:
        answers = ray.get([rollout_worker.remote(pool, str(n)) for n in range(6)])
        assert answers == [(1.0, 0)] * 6
        stats = asyncio.run(pool.replica_stats())
        assert sum(s["calls"] for s in stats) == 18  # type: ignore[index]  # the same actors
        assert [s["open_sessions"] for s in stats] == [0, 0]  # type: ignore[index]
        sid = asyncio.run(pool.start_interaction(ground_truth="1"))  # the driver's copy works
        asyncio.run(pool.finalize_interaction(sid))
    finally:
        pool.shutdown()


def test_shared_pool_for_entry_builds_one_pool_per_job(address: str, tmp_path: Path) -> None:
    import ray

    from interactions_core.ray import shared_pool_for_entry

    config = tmp_path / "interactions.yaml"
    config.write_text(
        "interaction:\n  - name: gsm8k\n    replicas: 2\n    resources: {CPU: 0}\n",
        encoding="utf-8",
    )

    @ray.remote(num_cpus=0)
    def in_another_process() -> tuple[list[int], str]:
        pool, _owner = shared_pool_for_entry(str(config), "gsm8k")
        return sorted(r["pid"] for r in pool.replica_status()), repr(pool)

    pool, owner = shared_pool_for_entry(config, "gsm8k")  # 2 replicas: the entry says so
    try:
        pids = sorted(r["pid"] for r in pool.replica_status())
        assert len(pids) == 2 and len(set(pids)) == 2
        assert ray.get(in_another_process.remote()) == (
            pids,
            "<InteractionPool 'gsm8k' 2/2 replicas alive, 0 sessions>",
        )
        sid = asyncio.run(pool.start_interaction(ground_truth="7"))
        answer = [{"role": "assistant", "content": "#### 7"}]
        assert asyncio.run(pool.generate_response(sid, answer))[2] == 1.0  # the score
        asyncio.run(pool.finalize_interaction(sid))
    finally:
        pool.shutdown()
        ray.kill(owner)
