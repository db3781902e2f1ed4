"""Zero-config registration: ``import verl`` alone makes the agent name ``interactions``.

verl loads every ``verl.plugins`` entry point while ``import verl`` runs; these
tests start fresh interpreters (the state of interest is a process's first
``import verl``) and check what that import registers, what it costs in imported
modules, how a broken adapter is reported, and that a rollout worker needs no
agent-loop YAML.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from harness import ScriptedServer, make_worker, run_batch, trainer_config

from interactions_core.errors import InteractionsError

#: What the entry point registers.
REGISTERED = {"_target_": "interactions_core.integrations.verl.InteractionAgentLoop"}

PROBE = r"""
import json, sys
import verl
first = sorted(m for m in sys.modules if m.startswith("interactions_core"))
loaded_before = "verl.experimental.agent_loop.agent_loop" in sys.modules
from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
entry = _agent_loop_registry.get("interactions")
print(json.dumps({
    "project_modules": first,
    "agent_loop_loaded_by_import_verl": loaded_before,
    "entry": entry and dict(entry),
    "adapter_loaded": "interactions_core.integrations.verl" in sys.modules,
}))
"""

#: A process where the adapter cannot be imported, as with a broken dependency.
BROKEN = r"""
import importlib.abc, sys
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "interactions_core.integrations.verl":
            raise ImportError("simulated: a dependency of the adapter is broken")
        return None
sys.meta_path.insert(0, Refuse())
""" + PROBE.replace(
    "print(json.dumps({",
    """import hydra.utils
try:
    hydra.utils.instantiate(entry)
    error = None
except Exception as exc:
    error = f"{type(exc).__name__}: {exc}"
print(json.dumps({"error": error,""",
)


def probe(script: str, **env: str) -> tuple[dict[str, Any], str]:
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


@pytest.fixture(scope="module")
def fresh() -> dict[str, Any]:
    """What a fresh interpreter's ``import verl`` did (one process for several tests)."""
    return probe(PROBE)[0]


def test_import_verl_alone_registers_the_agent_loop(fresh: dict[str, Any]) -> None:
    seen = fresh
    assert seen["entry"] == REGISTERED
    assert seen["adapter_loaded"]


def test_import_verl_loads_only_the_small_plugin_module(fresh: dict[str, Any]) -> None:
    """Every verl process pays for the plugin: it must be the registration hook only."""
    seen = fresh
    assert not seen["agent_loop_loaded_by_import_verl"], (
        "verl now imports its agent loop on `import verl`: the registration can be eager"
    )
    assert set(seen["project_modules"]) <= {
        "interactions_core",
        "interactions_core._interaction",
        "interactions_core.errors",
        "interactions_core.integrations",
        "interactions_core.integrations.verl_plugin",
    }
    assert "interactions_core.integrations.verl_plugin" in seen["project_modules"]


def test_verls_own_switch_turns_the_plugin_off() -> None:
    seen, _ = probe(PROBE, VERL_USE_EXTERNAL_PLUGINS="none")
    assert seen["entry"] is None
    assert "interactions_core.integrations.verl_plugin" not in seen["project_modules"]


def test_a_broken_adapter_is_reported_in_the_projects_words() -> None:
    """verl logs plugin failures at DEBUG only: the project says what failed, twice."""
    seen, stderr = probe(BROKEN)
    assert seen["entry"] == {
        "_target_": "interactions_core.integrations.verl_plugin.PlaceholderAgentLoop"
    }
    assert "interactions-core: importing interactions_core.integrations.verl failed" in stderr
    assert "simulated: a dependency of the adapter is broken" in stderr
    # The first trajectory fails with the reason and what to do, not "not registered".
    error = seen["error"]
    assert "is unavailable in this worker" in error
    assert "simulated: a dependency of the adapter is broken" in error
    assert "interactions-core[verl]" in error


def test_the_placeholder_raises_the_projects_error() -> None:
    from interactions_core.integrations.verl_plugin import PlaceholderAgentLoop

    with pytest.raises(InteractionsError, match="unavailable in this worker"):
        PlaceholderAgentLoop()


GSM8K_ROW = {
    "prompt": [{"role": "user", "content": "What is 54 + 18?"}],
    "extra_info": {"interaction_kwargs": {"name": "gsm8k", "ground_truth": "72"}},
}


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """The registry as a fresh process has it: verl's workers keep agent-loop YAML
    entries in a process-wide registry, so earlier tests' entries would linger."""
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry

    monkeypatch.setitem(_agent_loop_registry, "interactions", dict(REGISTERED))


def no_yaml_config(model_dir: Path, tmp_path: Path) -> Any:
    config = trainer_config(model_dir, tmp_path / "unused.yaml", max_assistant_turns=2)
    config.actor_rollout_ref.rollout.agent.agent_loop_config_path = None
    return config


@pytest.mark.usefixtures("registered")
def test_a_worker_without_an_agent_loop_yaml_plays_by_name(
    model_dir: Path, tokenizer: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("INTERACTIONS_CONFIG", raising=False)
    server = ScriptedServer(tokenizer, lambda prompt, n: "#### 70" if n == 0 else "#### 72")
    out = run_batch(make_worker(no_yaml_config(model_dir, tmp_path), server), [GSM8K_ROW])
    assert [list(s) for s in out.non_tensor_batch["turn_scores"]] == [[0.0, 1.0]]
    assert list(out.non_tensor_batch["interaction_name"]) == ["gsm8k"]


@pytest.mark.usefixtures("registered")
def test_interactions_config_names_the_config_when_no_entry_does(
    model_dir: Path, tokenizer: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "interactions.yaml"
    config.write_text("interaction:\n  - name: weather\n")
    monkeypatch.setenv("INTERACTIONS_CONFIG", str(config))
    server = ScriptedServer(tokenizer, lambda prompt, n: "#### 72")
    worker = make_worker(no_yaml_config(model_dir, tmp_path), server)
    with pytest.raises(Exception, match="unknown interaction 'gsm8k'") as raised:
        run_batch(worker, [GSM8K_ROW])
    assert "weather" in str(raised.value)


KEEPS_THE_FILE_ENTRY = r"""
import json
from verl.experimental.agent_loop.agent_loop import _agent_loop_registry as registry
entry = {"name": "interactions", "interaction_config": "mine.yaml",
         "_target_": "interactions_core.integrations.verl.InteractionAgentLoop"}
registry["interactions"] = entry  # what a worker reading an agent-loop file stores
import interactions_core.integrations.verl  # imported late: must not replace it
print(json.dumps(dict(registry["interactions"])))
"""


def test_importing_the_adapter_late_keeps_an_agent_loop_files_entry() -> None:
    """With verl's plugin loading off, the adapter is imported after verl read the file."""
    done = subprocess.run(
        [sys.executable, "-c", KEEPS_THE_FILE_ENTRY],
        capture_output=True,
        text=True,
        env={**os.environ, "VERL_USE_EXTERNAL_PLUGINS": "none"},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    kept = json.loads(done.stdout.strip().splitlines()[-1])
    assert kept["interaction_config"] == "mine.yaml"
