"""Listing stays fast with the suite installed: a warm `interactions list` never imports it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

PROBE = (
    "import sys, time\n"
    "t = time.perf_counter()\n"
    "from interactions_core.cli import main\n"
    "import io, contextlib\n"
    "out = io.StringIO()\n"
    "with contextlib.redirect_stdout(out):\n"
    "    code = main(['list', '--json'])\n"
    "names = [row['name'] for row in __import__('json').loads(out.getvalue())]\n"
    "print(__import__('json').dumps({'code': code, 'rg': sum(n.startswith('rg/') for n in names),"
    " 'imported': 'reasoning_gym' in sys.modules,"
    " 'seconds': time.perf_counter() - t}))\n"
)


def _list(cache: Path) -> dict:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    env.pop("INTERACTIONS_NO_CACHE", None)
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["wall"] = time.perf_counter() - started
    return result


def test_warm_list_does_not_import_reasoning_gym(tmp_path: Path) -> None:
    cold = _list(tmp_path)
    warm = _list(tmp_path)
    assert cold["code"] == warm["code"] == 0
    assert cold["rg"] == warm["rg"] >= 100
    assert cold["imported"], "the cold scan runs the registration hook"
    assert not warm["imported"], "a warm list must come from the index cache"
    assert warm["seconds"] < cold["seconds"]
    sys.stderr.write(
        f"\nlist with reasoning-gym installed: cold {cold['wall']:.3f}s, warm {warm['wall']:.3f}s\n"
    )
