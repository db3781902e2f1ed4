"""Run the packaging proof (wheels, fresh virtualenv, list/uninstall/broken plugin)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("packaging_proof.py")


@pytest.mark.slow
def test_packaging_proof(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--workdir", str(tmp_path / "work")],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "packaging proof passed" in proc.stdout
