"""The adapter's ``ray_check`` option, on a real local Ray cluster (Ray comes with verl)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from harness import ScriptedServer, make_worker, run_batch, trainer_config

import interactions_core.integrations as _agent_loop_catalog
from interactions_core.integrations import verl as verl_agent_loop
from interactions_core.registry import reset_registry


@pytest.fixture(scope="module")
def ray_cluster() -> Any:
    ray = pytest.importorskip("ray", reason="Ray is a dependency of every verl release")
    # A cluster of its own, even when another one runs on this machine (ray.init would join it).
    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def loops_with_check(tmp_path: Path) -> Path:
    config = tmp_path / "interactions.yaml"
    config.write_text("default: gsm8k\ninteraction:\n  - name: gsm8k\n")
    loops = tmp_path / "agent_loops.yaml"
    loops.write_text(
        "- name: interactions\n"
        "  _target_: interactions_core.integrations.verl.InteractionAgentLoop\n"
        f"  interaction_config: {config}\n"
        "  ray_check: true\n"
    )
    return loops


def test_a_consistent_cluster_passes_and_the_check_runs_once(
    ray_cluster: Any, tmp_path: Path, model_dir: Path, tokenizer: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setattr(_agent_loop_catalog, "_cluster_checked", False)
    calls = []
    import interactions_core.ray as ray_support

    real = ray_support.ensure_cluster_consistent

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(ray_support, "ensure_cluster_consistent", counted)
    server = ScriptedServer(tokenizer, lambda prompt, n: "#### 4")
    worker = make_worker(trainer_config(model_dir, loops_with_check(tmp_path)), server)
    rows = [
        {"prompt": [{"role": "user", "content": f"q{i}"}],
         "extra_info": {"interaction_kwargs": {"ground_truth": "4"}}}
        for i in range(4)
    ]  # fmt: skip
    out = run_batch(worker, rows)
    assert out.batch["rm_scores"].sum().item() == 4.0
    assert calls == [1]  # once per worker process, not per trajectory


def test_a_plugin_missing_on_a_node_fails_before_the_first_sample(
    ray_cluster: Any, tmp_path: Path, model_dir: Path, tokenizer: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    # A distribution only this process sees: Ray's worker processes do not have it.
    site = tmp_path / "site"
    info = site / "acme_extra-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-extra\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[interactions_core.interactions]\nacme_extra = acme_extra_mod:Acme\n"
    )
    monkeypatch.syspath_prepend(str(site))
    reset_registry()
    monkeypatch.setattr(_agent_loop_catalog, "_cluster_checked", False)
    server = ScriptedServer(tokenizer, lambda prompt, n: "#### 4")
    worker = make_worker(trainer_config(model_dir, loops_with_check(tmp_path)), server)
    rows = [{"prompt": [{"role": "user", "content": "q"}],
             "extra_info": {"interaction_kwargs": {"ground_truth": "4"}}}]  # fmt: skip
    with pytest.raises(Exception) as info_:
        run_batch(worker, rows)
    assert "acme_extra" in str(info_.value)
    assert server.requests == []  # nothing was generated
    reset_registry()


def test_ray_pool_serves_an_entry_from_one_pool_per_job(
    ray_cluster: Any, tmp_path: Path, model_dir: Path, tokenizer: Any
) -> None:
    from interactions_core.ray import InteractionPool, shared_pool_for_entry

    config = tmp_path / "interactions.yaml"
    config.write_text("default: gsm8k\ninteraction:\n  - name: gsm8k\n  - name: weather\n")
    loops = tmp_path / "agent_loops.yaml"
    loops.write_text(
        "- name: interactions\n"
        "  _target_: interactions_core.integrations.verl.InteractionAgentLoop\n"
        f"  interaction_config: {config}\n"
        "  ray_pool: {gsm8k: 2}\n"
    )
    replies = ["#### 3", "#### 4"]
    server = ScriptedServer(tokenizer, lambda prompt, n: replies[min(n, 1)])
    worker = make_worker(trainer_config(model_dir, loops, max_assistant_turns=3), server)
    rows = [
        {"prompt": [{"role": "user", "content": f"q{i}"}],
         "extra_info": {"interaction_kwargs": {"ground_truth": "4"}}}
        for i in range(6)
    ]  # fmt: skip
    out = run_batch(worker, rows)
    # Served by the pool, with the plugin's results: wrong, then right.
    assert [list(s) for s in out.non_tensor_batch["turn_scores"]] == [[0.0, 1.0]] * 6
    assert out.batch["rm_scores"].sum(dim=-1).tolist() == [1.0] * 6
    catalog = verl_agent_loop.interactions_for(config, {"gsm8k": 2})
    pooled = catalog.get("gsm8k")[1]
    assert isinstance(pooled, InteractionPool) and pooled.replicas == 2
    assert pooled.open_sessions == 0
    assert not isinstance(catalog.get("weather")[1], InteractionPool)  # only what is asked
    # Another process of the job (a Ray task here) gets the same replicas.

    @ray_cluster.remote(num_cpus=0)
    def replica_pids() -> list[int]:
        pool, _owner = shared_pool_for_entry(str(config), "gsm8k", 2)
        return sorted(r["pid"] for r in pool.replica_status())

    here = sorted(r["pid"] for r in pooled.replica_status())
    assert len(here) == 2 and all(isinstance(pid, int) for pid in here)
    assert ray_cluster.get(replica_pids.remote()) == here
