"""The adapter's ``ray_check`` option, on a real local Ray cluster (Ray comes with verl)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from harness import ScriptedServer, make_worker, run_batch, trainer_config

from interactions_core.compat import verl_agent_loop
from interactions_core.registry import reset_registry


@pytest.fixture(scope="module")
def ray_cluster() -> Any:
    ray = pytest.importorskip("ray", reason="Ray is a dependency of every verl release")
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def loops_with_check(tmp_path: Path) -> Path:
    config = tmp_path / "interactions.yaml"
    config.write_text("default: gsm8k\ninteraction:\n  - name: gsm8k\n")
    loops = tmp_path / "agent_loops.yaml"
    loops.write_text(
        "- name: interactions\n"
        "  _target_: interactions_core.compat.verl_agent_loop.InteractionAgentLoop\n"
        f"  interaction_config: {config}\n"
        "  ray_check: true\n"
    )
    return loops


def test_a_consistent_cluster_passes_and_the_check_runs_once(
    ray_cluster: Any, tmp_path: Path, model_dir: Path, tokenizer: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setattr(verl_agent_loop, "_cluster_checked", False)
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
    monkeypatch.setattr(verl_agent_loop, "_cluster_checked", False)
    server = ScriptedServer(tokenizer, lambda prompt, n: "#### 4")
    worker = make_worker(trainer_config(model_dir, loops_with_check(tmp_path)), server)
    rows = [{"prompt": [{"role": "user", "content": "q"}],
             "extra_info": {"interaction_kwargs": {"ground_truth": "4"}}}]  # fmt: skip
    with pytest.raises(Exception) as info_:
        run_batch(worker, rows)
    assert "acme_extra" in str(info_.value)
    assert server.requests == []  # nothing was generated
    reset_registry()
