"""One real verl GRPO step on CPU, run exactly as ``docs/verl-on-a-laptop.md`` says.

The commands are read from the page's first ``tested-by`` block:
``python examples/verl_cpu_smoke.py [--legacy]`` runs ``verl.trainer.main_ppo``
end to end (Ray, FSDP2 over gloo, the ``hf_cpu`` rollout, the ``interactions``
agent loop, reward, GRPO, reference log-probs, the actor update) on 4 GSM8K rows
with ``rollout.n=2``. The rollout is scripted (see the example): per question,
one trajectory answers wrong then right (score 1.0, 4 turns), the other stays
wrong for ``max_assistant_turns=3`` (score 0.0, 6 turns). So what verl reports is
known in advance, and each assertion checks one link of the chain:

* the step finished and logged step 1's metrics;
* ``num_turns`` 4 and 6: the interaction's feedback was appended and the
  rollout continued;
* ``critic/score/mean`` 0.5: the interaction's scores became verl's reward
  (verl's own GSM8K rule would give 0.0 for all: the right answers have no ``####``);
* a non-zero gradient: the advantages of both outcomes reached the actor update;
* every session the interaction started was finalized (a ledger the interaction
  writes from verl's worker processes).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "verl-on-a-laptop.md"
MARKER = "<!-- check: tested-by tests/verl_adapter/test_cpu_smoke.py::test_one_grpo_step_on_cpu -->"

ROWS, N = 4, 2

# The run is a subprocess with its own verl; the harness's tokenization modes do not apply.
pytestmark = pytest.mark.one_tokenization


def documented_command(trainer: str) -> list[str]:
    """The page's command for ``trainer`` (its first block after the marker), split."""
    text = PAGE.read_text(encoding="utf-8")
    block = text.split(MARKER, 1)[1].split("```", 2)[1]
    commands = [line.split("#", 1)[0].strip() for line in block.splitlines()[1:]]
    commands = [line for line in commands if line]
    legacy = [c for c in commands if "--legacy" in c]
    default = [c for c in commands if "--legacy" not in c]
    assert len(legacy) == 1 and len(default) == 1, block
    words = shlex.split(legacy[0] if trainer == "legacy" else default[0])
    assert words[0] == "python", words
    return [sys.executable, *words[1:]]


def turns(metrics: dict[str, float], stat: str) -> float | None:
    """verl's ``num_turns`` statistic (verl 0.9.0's v1 trainer prefixes it with ``training/``)."""
    for key in (f"num_turns/{stat}", f"training/num_turns/{stat}"):
        if key in metrics:
            return metrics[key]
    return None


def run_example(command: list[str]) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    run = subprocess.run(
        command,
        cwd=ROOT,
        text=True,
        capture_output=True,
        timeout=900,
        check=False,
    )
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    assert lines, (
        f"no JSON summary; exit {run.returncode}\n{run.stdout[-4000:]}\n{run.stderr[-4000:]}"
    )
    return run, json.loads(lines[-1])


@pytest.mark.parametrize("trainer", ["v1", "legacy"])
def test_one_grpo_step_on_cpu(trainer: str) -> None:
    from importlib.metadata import version

    if trainer == "legacy" and version("verl") == "0.9.0":
        refused = subprocess.run(
            documented_command(trainer), cwd=ROOT, text=True, capture_output=True, timeout=300
        )
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "verl 0.9.0's legacy trainer cannot run on CPU" in refused.stdout
        return
    run, summary = run_example(documented_command(trainer))
    metrics = summary["metrics"]
    context = f"{run.stdout[-4000:]}\n{run.stderr[-2000:]}"

    assert run.returncode == 0, context
    assert summary["trainer"] == trainer
    assert metrics.get("training/global_step") == 1.0, context

    assert turns(metrics, "min") == 4.0
    assert turns(metrics, "max") == 6.0

    assert metrics["critic/score/mean"] == pytest.approx(0.5)
    assert metrics["critic/score/max"] == 1.0
    assert metrics["critic/score/min"] == 0.0

    assert metrics["actor/grad_norm"] > 0.0

    assert summary["sessions"] == {"started": ROWS * N, "finalized": ROWS * N, "open": 0}


# -- the CPU mode's parts, without a run ------------------------------------------------


def test_a_workaround_refuses_verl_code_it_does_not_recognise() -> None:
    import types

    from interactions_core.integrations import verl_plugin

    changed = types.ModuleType("verl.utils.distributed")

    def initialize_global_process_group_ray(timeout_second=None, backend=None):  # type: ignore[no-untyped-def]
        return backend or "cpu:gloo"  # a release that no longer builds the duplicated string

    changed.initialize_global_process_group_ray = initialize_global_process_group_ray  # type: ignore[attr-defined]
    with pytest.raises(verl_plugin.VerlCPUError, match=r"gloo-only-backend.*installed verl"):
        verl_plugin._gloo_only_backend(changed)


def test_register_refuses_a_verl_release_it_was_not_checked_against(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from interactions_core.integrations import verl_plugin

    monkeypatch.setattr(verl_plugin, "_registered", False)
    monkeypatch.setattr(verl_plugin, "_verl_version", lambda: "0.10.0")
    with pytest.raises(verl_plugin.VerlCPUError, match=r"not 0\.10\.0"):
        verl_plugin.register()


def test_scripted_answers_alternate_a_solver_and_a_stubborn_trajectory() -> None:
    from interactions_core.integrations.verl_cpu import ScriptedAnswers

    script = ScriptedAnswers([("How many eggs?", "18")])
    ask = "<|im_start|>user\nHow many eggs?<|im_end|>\n<|im_start|>assistant\n"
    assert script.reply("<|im_start|>user\nSomething else<|im_end|>\n") is None
    first, second = script.reply(ask), script.reply(ask)
    assert (first, second) == ("#### 19", "#### 20")
    feedback = "<|im_end|>\n<|im_start|>user\nincorrect<|im_end|>\n<|im_start|>assistant\n"
    assert script.reply(ask + first + feedback) == "The answer is 18."
    assert script.reply(ask + second + feedback) == "The answer is 20."


def test_when_imported_runs_after_the_import_or_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    from interactions_core.integrations.verl_plugin import when_imported

    (tmp_path / "cpu_split_probe.py").write_text("VALUE = 41\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "cpu_split_probe", raising=False)
    seen: list[int] = []

    def bump(module: Any) -> None:
        module.VALUE += 1
        seen.append(module.VALUE)

    when_imported("cpu_split_probe", bump)
    when_imported("cpu_split_probe", bump)  # the same hook, asked twice: arranged once
    assert seen == []
    module = importlib.import_module("cpu_split_probe")
    assert (module.VALUE, seen) == (42, [42])  # patched before the importer sees it
    when_imported("cpu_split_probe", bump)  # already imported: at once
    assert (module.VALUE, seen) == (43, [42, 43])
    monkeypatch.delitem(sys.modules, "cpu_split_probe")
