"""A verl class path in a config is noted once per entry per run, never repeated.

Both branches of the rule in ``_config.py`` are driven: verl's module absent (the
path resolves to the installed plugin) and present (a stand-in ``verl`` package
on ``PYTHONPATH`` whose class is loaded). Each command runs as users run it, in a
subprocess, and its stderr is counted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from interactions_core._config import verl_module_installed

VERL_PATH = "verl.interactions.gsm8k_interaction.Gsm8kInteraction"
FAKE_VERL = {
    "verl/__init__.py": "",
    "verl/interactions/__init__.py": "",
    "verl/interactions/gsm8k_interaction.py": """\
from interactions_core import BaseInteraction, InteractionResult


class Gsm8kInteraction(BaseInteraction):
    async def generate_response(self, instance_id, messages, **kwargs):
        return InteractionResult(True, "ok", 1.0)
""",
}


def run(tmp_path: Path, *args: str, fake_verl: bool, code: str | None = None) -> str:
    """The stderr of ``interactions ARGS`` (or of ``python -c CODE``), with verl or without."""
    environ = dict(os.environ)
    environ.pop("PYTHONWARNINGS", None)
    if fake_verl:
        root = tmp_path / "fake"
        for name, text in FAKE_VERL.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
        environ["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(root), environ.get("PYTHONPATH")])
        )
    command = ["-c", code] if code is not None else ["-m", "interactions_core", *args]
    proc = subprocess.run(
        [sys.executable, *command],
        capture_output=True,
        text=True,
        env=environ,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stderr


def notes(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if VERL_PATH in line]


@pytest.fixture
def files(tmp_path: Path) -> tuple[str, str]:
    config = tmp_path / "verl.yaml"
    config.write_text(f"interaction:\n  - name: gsm8k\n    class_name: {VERL_PATH}\n")
    data = tmp_path / "data.jsonl"
    rows = [
        {"prompt": [{"role": "user", "content": f"{n} + 1?"}],
         "interaction_kwargs": {"name": "gsm8k", "ground_truth": str(n + 1)},
         "responses": [[f"#### {n + 1}"], ["#### 0"]]}
        for n in range(3)
    ]  # fmt: skip
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(config), str(data)


@pytest.mark.parametrize("fake_verl", [False, True], ids=["verl-absent", "verl-present"])
def test_a_run_notes_a_verl_path_once(
    tmp_path: Path, files: tuple[str, str], fake_verl: bool
) -> None:
    config, data = files
    options = ["--repeat", "2", "--concurrency", "4", "--output", "out.jsonl"]
    stderr = run(tmp_path, "run", config, "--data", data, *options, "--report", "r.html",
                 fake_verl=fake_verl)  # fmt: skip
    found = notes(stderr)
    assert len(found) == 1, stderr
    assert found[0].startswith("interactions: warning: ")
    present = fake_verl or verl_module_installed(VERL_PATH)  # a real verl 0.7 ships the module
    expected = "loaded verl's own class" if present else "the installed plugin"
    assert expected in found[0]
    assert len(notes(run(tmp_path, "check", config, fake_verl=fake_verl))) == 1
    resumed = run(tmp_path, "run", config, "--data", data, *options, "--resume",
                  fake_verl=fake_verl)  # fmt: skip
    assert len(notes(resumed)) == 1, resumed


def test_each_entry_is_noted_once_and_a_second_load_repeats_nothing(
    tmp_path: Path, files: tuple[str, str]
) -> None:
    config = tmp_path / "two.yaml"
    config.write_text(
        f"interaction:\n  - name: a\n    class_name: {VERL_PATH}\n"
        f"  - name: b\n    class_name: {VERL_PATH}\n"
    )
    code = (
        "import interactions_core as ic\n"
        f"for _ in range(3): ic.load_interactions({str(config)!r})\n"
        "from interactions_core.compat.verl import initialize_interactions_from_config as i\n"
        f"i({str(config)!r})\n"
    )
    found = notes(run(tmp_path, code=code, fake_verl=False))
    assert len(found) == 2, found
    assert "interaction[0]" in found[0] and "interaction[1]" in found[1]
