"""A plugin's fault mid-episode, or a spec violation, points at the plugin's own line.

Import errors already name ``file:line``; these check the same for an exception a
plugin raises in the middle of an episode (the record, the summary's examples,
the CLI's stderr, the ``--trace`` line; the whole traceback with
``INTERACTIONS_DEBUG=1``) and for a method written against the spec.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import pytest

from interactions_core import BaseInteraction, InteractionResult, run_episodes
from interactions_core.errors import InteractionValidationError
from interactions_core.runtime.policies.base import ReplayPolicy

HERE = Path(__file__).resolve()


class Breaks(BaseInteraction):
    async def generate_response(
        self, instance_id: str, messages: list[dict[str, Any]], **kwargs: Any
    ) -> InteractionResult:
        if len(messages) > 2:
            raise ValueError("the judge fell over")  # the line every check points at
        return InteractionResult(False, "again", 0.0, {})


RAISE_LINE = next(
    i
    for i, line in enumerate(
        inspect.getsource(Breaks).splitlines(), inspect.getsourcelines(Breaks)[1]
    )
    if "the judge fell over" in line
)
SAMPLE = {
    "prompt": [{"role": "user", "content": "2+2?"}],
    "responses": ["3", "4", "4"],
    "interaction_kwargs": {"name": "breaks"},
}


async def test_the_record_and_summary_name_the_plugins_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("INTERACTIONS_DEBUG", raising=False)
    summary = await run_episodes(
        [SAMPLE], ReplayPolicy(), {"breaks": Breaks({"name": "breaks"})}, keep_records=True
    )
    assert summary.errors == 1 and summary.records is not None
    error = summary.records[0].errors[0]
    assert error["where"] == "generate_response" and error["type"] == "ValueError"
    assert error["at"] == f"{HERE}:{RAISE_LINE}"
    assert "traceback" not in error
    assert summary.error_examples[0]["at"] == f"{HERE}:{RAISE_LINE}"


async def test_debug_keeps_the_whole_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INTERACTIONS_DEBUG", "1")
    summary = await run_episodes(
        [SAMPLE], ReplayPolicy(), {"breaks": Breaks({"name": "breaks"})}, keep_records=True
    )
    assert summary.records is not None
    trace = summary.records[0].errors[0]["traceback"]
    assert trace.startswith("Traceback") and f"line {RAISE_LINE}, in generate_response" in trace
    assert trace.endswith("ValueError: the judge fell over")


def test_the_cli_and_the_trace_name_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from interactions_core.cli import main

    plugin = tmp_path / "breaking_plugin.py"
    plugin.write_text(
        "from interactions_core import BaseInteraction, InteractionResult\n"
        "class Breaks(BaseInteraction):\n"
        "    async def generate_response(self, instance_id, messages, **kwargs):\n"
        "        raise ValueError('the judge fell over')\n",
        encoding="utf-8",
    )
    config = tmp_path / "config.yaml"
    config.write_text(
        "interaction:\n  - name: breaks\n    class_name: breaking_plugin.Breaks\n",
        encoding="utf-8",
    )
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps(SAMPLE) + "\n", encoding="utf-8")
    trace, out = tmp_path / "trace.jsonl", tmp_path / "out.jsonl"
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("INTERACTIONS_DEBUG", raising=False)
    code = main(
        ["run", str(config), "--data", str(data), "--output", str(out), "--trace", str(trace)]
    )
    err = capsys.readouterr().err
    assert code != 0
    assert f"(at {plugin}:4)" in err
    record = json.loads(out.read_text(encoding="utf-8").splitlines()[0])
    assert record["errors"][0]["at"] == f"{plugin}:4"
    ends = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    assert any(f"(at {plugin}:4)" in (e.get("error") or "") for e in ends)


def test_a_spec_violation_names_the_methods_line() -> None:
    from interactions_core._spec import validate_interaction_class

    class Sync(BaseInteraction):
        def generate_response(self, instance_id, messages, **kwargs):  # type: ignore[override]
            return InteractionResult(True, "", 1.0, {})

    line = inspect.getsourcelines(Sync.generate_response)[1]
    with pytest.raises(InteractionValidationError) as info:
        validate_interaction_class(Sync, "interaction 'sync'")
    assert "is not async" in str(info.value) and f"(at {HERE}:{line})" in str(info.value)
