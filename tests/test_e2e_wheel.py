"""End to end: the gsm8k plugin built as a wheel, installed in a fresh virtualenv."""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run(*cmd: str | Path, cwd: Path | None = None) -> str:
    proc = subprocess.run(
        [str(c) for c in cmd], capture_output=True, text=True, cwd=cwd, timeout=600
    )
    assert proc.returncode == 0, f"{cmd}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.mark.slow
def test_gsm8k_wheel_in_a_fresh_virtualenv(tmp_path):
    wheels = tmp_path / "wheels"
    for project in (ROOT, ROOT / "plugins" / "interactions-gsm8k"):
        run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", wheels, project)
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    run(python, "-m", "pip", "install", "-q", *sorted(wheels.glob("*.whl")))
    listed = json.loads(run(env_dir / "bin" / "interactions", "list", "--json", cwd=tmp_path))
    [gsm8k] = [r for r in listed if r["name"] == "gsm8k"]
    assert gsm8k["distribution"] == "interactions-gsm8k" and gsm8k["status"] == "ok"
    assert gsm8k["target"] == "interactions_gsm8k:Gsm8kInteraction"
    checked = json.loads(
        run(python, "-m", "interactions_core", "list", "--check", "--json", cwd=tmp_path)
    )
    assert [r["status"] for r in checked if r["name"] == "gsm8k"] == ["ok"]
