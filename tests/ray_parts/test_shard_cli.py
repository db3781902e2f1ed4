"""The ``--ray`` branch of ``interactions run`` (interactions_core.cli._run_play).

What happens before a cluster is needed: refused options, the settings built
from the arguments, the address chosen, records written and counted, and the
empty ``--output`` of a failed run removed. A run with nothing left to play
needs no cluster, so it runs here without Ray.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from interactions_core.cli import _run_play as _shard_cli
from interactions_core.cli._run_play import Played, ShardedRun
from interactions_core.errors import ConfigError


def _args(**overrides: Any) -> argparse.Namespace:
    values: dict[str, Any] = {
        "trace": None,
        "policy": "replay",
        "config": None,
        "concurrency": 4,
        "max_assistant_turns": None,
        "max_user_turns": None,
        "timeout": None,
        "repeat": 2,
        "pass_score": 1.0,
        "ray": "",
        "resume": False,
        "policy_option": [],
        "model": None,
        "base_url": None,
    }
    values.update(overrides)
    return argparse.Namespace(**values)


def play_sharded(
    args: argparse.Namespace, samples: list[Any], skip: set[tuple[int, int]] | None = None
) -> Played:
    """The --ray branch as ``interactions run`` calls it, without files."""
    inputs = argparse.Namespace(samples=lambda: samples, default=None)
    outputs = argparse.Namespace(sink=None, progress=None, output=None)
    return ShardedRun(args, inputs, outputs, [0]).play(skip)  # type: ignore[arg-type]


def test_the_ray_package_never_imports_the_cli() -> None:
    import interactions_core.ray as package

    root = Path(package.__file__).parent
    for module in root.glob("*.py"):
        text = module.read_text(encoding="utf-8")
        assert "..cli" not in text and "interactions_core.cli" not in text, module.name


def test_options_no_worker_can_honour_are_refused_together() -> None:
    with pytest.raises(ConfigError) as info:
        play_sharded(_args(trace="t.jsonl", policy="human"), [])
    text = str(info.value)
    assert "--trace is not supported with --ray yet" in text
    assert "--policy human needs this terminal; it cannot run on Ray workers" in text


def test_a_run_with_nothing_left_to_play_needs_no_cluster() -> None:
    samples = [{"id": "a"}, {"id": "b"}]
    done = {(0, 0), (0, 1), (1, 0), (1, 1)}
    played = play_sharded(_args(ray="203.0.113.1:1"), samples, done)
    summary = played.summary
    assert played.still_open == 0 and summary.groups.repeat == 2 and summary.records is None


def test_no_address_means_the_jobs_cluster_or_a_new_local_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert _shard_cli._cluster_address("") == "local"
    assert _shard_cli._cluster_address("local") == "local"
    assert _shard_cli._cluster_address("auto") == "auto"
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.5:6379")
    assert _shard_cli._cluster_address("") == "10.0.0.5:6379"
    assert _shard_cli._cluster_address("10.0.0.9:6379") == "10.0.0.9:6379"


def test_only_an_empty_new_output_file_is_removed(tmp_path: Path) -> None:
    empty, full = tmp_path / "empty.jsonl", tmp_path / "full.jsonl"
    empty.write_text("")
    full.write_text("{}\n")
    for path in (empty, full):
        _shard_cli._remove_if_unused(argparse.Namespace(path=str(path), lines=0))
    written = tmp_path / "written.jsonl"
    written.write_text("")
    _shard_cli._remove_if_unused(argparse.Namespace(path=str(written), lines=1))
    _shard_cli._remove_if_unused(argparse.Namespace(path="/dev/null", lines=0))
    _shard_cli._remove_if_unused(None)
    assert not empty.exists() and full.exists() and written.exists()
    assert Path("/dev/null").exists()
