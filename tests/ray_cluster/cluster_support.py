"""Helpers of the Ray tests: the environment, extra nodes, fake distributions, the CLI.

The head node is limited to 2 CPUs. Everything listens on the loopback
interface only: ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` makes Ray use 127.0.0.1
as the node address (as it does on a laptop), and it is set in ``os.environ``
so that the CLI subprocesses of the tests connect the same way. Extra "nodes"
are more raylets on this machine, started with a different ``PYTHONPATH`` (so a
different set of installed distributions), by ``add_node``.
"""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path
from typing import Any

RAY_ENVIRONMENT = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # node address 127.0.0.1: nothing off loopback
    "RAY_AUTH_MODE": "disabled",  # a loopback-only test cluster; no token file needed
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_worker_niceness": "0",  # Ray's default 15 starves the workers on a busy CI machine
}


ROOT = Path(__file__).resolve().parents[2]
SHARED_DATA = ROOT.parent / "shared" / "data"
KEYS = ("6b_finetuning", "6b_verification", "175b_finetuning", "175b_verification")
GSM8K_CONFIG = "interaction:\n  - name: gsm8k\n    config: {method: flexible}\n"
#: The local summary of the GSM8K replay (tests/runtime/test_runtime_acceptance.py).
EXPECTED = {
    "episodes": 1319,
    "terminated": 887,
    "turns": {"1": 286, "2": 293, "3": 119, "4": 621},
    "errors": 0,
}
#: Record fields that differ between two runs of the same episodes.
VOLATILE = ("started_at", "duration_s", "instance_id")


def add_node(cluster: Any, pythonpath: Path, **node_args: object) -> object:
    """Start another raylet whose workers see ``pythonpath`` first on ``sys.path``."""
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(pythonpath)
    try:
        return cluster.add_node(
            num_cpus=node_args.pop("num_cpus", 0),
            object_store_memory=80 * 1024 * 1024,
            **node_args,
        )
    finally:
        if before is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = before


def write_dist(
    root: Path,
    name: str,
    version: str,
    entry_points: dict[str, str],
    modules: dict[str, str] | None = None,
) -> None:
    """An installed distribution (``*.dist-info`` with entry points) plus its modules."""
    info = root / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8"
    )
    lines = ["[interactions_core.interactions]"]
    lines += [f"{k} = {v}" for k, v in entry_points.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for module, code in (modules or {}).items():
        (root / f"{module}.py").write_text(textwrap.dedent(code), encoding="utf-8")


def stable(record: dict) -> dict:
    """A record without the fields that differ between runs (times, random session ids)."""
    out = {k: v for k, v in record.items() if k not in VOLATILE}
    out["errors"] = [{k: v for k, v in e.items() if k != "instance_id"} for e in out["errors"]]
    return out


def cli(*args: str, timeout: float = 300) -> tuple[int, str, str]:
    """``python -m interactions_core ARGS`` in a subprocess: (exit code, stdout, stderr)."""
    import subprocess

    proc = subprocess.run(
        [sys.executable, "-m", "interactions_core", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ),
    )
    return proc.returncode, proc.stdout, proc.stderr
