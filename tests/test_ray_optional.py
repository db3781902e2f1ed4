"""The Ray integration where Ray is absent or not needed: imports, config keys, the report.

The cluster tests themselves are in tests/ray_cluster (the ``ray`` nox session).
These run in the plain suite: Ray stays optional, its absence is explained, the
config keys are checked, and the consistency report compares and prints right.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from interactions_core import ConfigError, load_config, load_interactions
from interactions_core.cli.ray import render
from interactions_core.ray.consistency import ClusterReport, NodeSnapshot, discover_here

ROOT = Path(__file__).resolve().parents[1]
#: Runs the CLI in a fresh interpreter where ``import ray`` fails, installed or not.
WITHOUT_RAY = (
    "import sys\n"
    "sys.modules['ray'] = None\n"
    "from interactions_core.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def _cli_without_ray(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_RAY, *args],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        cwd=ROOT,
        timeout=120,
    )


def test_importing_the_ray_package_does_not_import_ray() -> None:
    code = (
        "import sys, json, interactions_core.ray as r\n"
        "names = r.__all__\n"
        "print(json.dumps([m for m in sys.modules if m == 'ray' or m.startswith('ray.')]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(proc.stdout) == []


def test_ray_check_without_ray_names_the_extra() -> None:
    proc = _cli_without_ray("ray", "check")
    assert proc.returncode == 1
    assert "Ray is not installed" in proc.stderr
    assert "pip install 'ray>=2.40'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_run_with_ray_flag_without_ray_names_the_extra() -> None:
    proc = _cli_without_ray(
        "run", "examples/config.yaml", "--data", "examples/gsm8k_demo.jsonl", "--ray"
    )
    assert proc.returncode == 1
    assert "pip install 'ray>=2.40'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_ray_without_subcommand_prints_its_help() -> None:
    proc = _cli_without_ray("ray")
    assert proc.returncode == 2 and "check" in proc.stdout


def test_replicas_and_resources_are_accepted_and_ignored_by_a_plain_load(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(
        "interaction:\n"
        "  - name: gsm8k\n"
        "    replicas: 4\n"
        "    resources: {CPU: 1, GPU: 0.5, judge_host: 1}\n"
        "  - name: weather\n",
        encoding="utf-8",
    )
    loaded = load_config(config)
    entry = loaded.entries[0].entry
    assert (entry.replicas, entry.resources) == (4, {"CPU": 1, "GPU": 0.5, "judge_host": 1})
    assert loaded.entries[1].entry.replicas is None
    instances = load_interactions(config)
    assert type(instances["gsm8k"]).__name__ == "Gsm8kInteraction"
    proc = subprocess.run(
        [sys.executable, "-m", "interactions_core", "check", str(config)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(
    ("entry", "needle"),
    [
        ("replicas: 0", "interaction[0].replicas must be a positive integer"),
        ("replicas: two", "interaction[0].replicas must be a positive integer"),
        ("replicas: true", "interaction[0].replicas must be a positive integer"),
        ("replicas: 2\n    resources: [CPU]", "resources must map Ray resource names"),
        ("replicas: 2\n    resources: {CPU: -1}", "resources must map Ray resource names"),
        ("resources: {CPU: 1}", "needs 'replicas: N' as well"),
        ("replica: 2", "unknown key 'replica'; allowed keys: name, plugin, class_name, config"),
    ],
)
def test_bad_pool_keys_are_explained_with_their_line(
    tmp_path: Path, entry: str, needle: str
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(f"interaction:\n  - name: gsm8k\n    {entry}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(config)
    assert needle in str(info.value)
    line = 4 if "resources: " in entry and "replicas" in entry else 3
    assert f"{config}:{line}: interaction[0]" in str(info.value)
    if "replica:" in entry:
        assert "did you mean 'replicas'?" in str(info.value)


def _node(
    snapshot: dict | None, error: str | None = None, node_id: str = "ab" * 20
) -> NodeSnapshot:
    return NodeSnapshot(node_id, "10.0.0.7", snapshot, error)


def test_report_of_identical_snapshots_is_consistent() -> None:
    here = discover_here()
    report = ClusterReport(here, [_node(dict(here)), _node(dict(here), node_id="cd" * 20)])
    assert report.differences == [] and report.consistent
    assert report.format().startswith("2 nodes checked against the driver (")
    assert report.as_dict()["consistent"] is True


def test_report_lists_every_kind_of_difference() -> None:
    driver = {
        "core_version": "0.1.0",
        "entries": {
            "gsm8k (interactions-gsm8k)": {
                "distribution": "interactions-gsm8k",
                "version": "0.1.0",
                "target": "interactions_gsm8k:Gsm8kInteraction",
                "status": "ok",
            },
            "weather (interactions-weather)": {
                "distribution": "interactions-weather",
                "version": "0.1.0",
                "target": "interactions_weather:WeatherInteraction",
                "status": "ok",
            },
        },
    }
    node = json.loads(json.dumps(driver))
    node["core_version"] = "0.2.0"
    del node["entries"]["weather (interactions-weather)"]
    node["entries"]["gsm8k (interactions-gsm8k)"]["status"] = "broken"
    node["entries"]["judge (acme)"] = {
        "distribution": "acme",
        "version": "3",
        "target": "acme:J",
        "status": "ok",
    }
    report = ClusterReport(driver, [_node(node), _node(None, "no answer within 5 s", "ef" * 20)])
    rows = {(d.name, d.field, d.driver, d.value) for d in report.differences}
    assert rows == {
        ("interactions-core", "version", "0.1.0", "0.2.0"),
        ("gsm8k (interactions-gsm8k)", "status", "ok", "broken"),
        (
            "weather (interactions-weather)",
            "missing on node",
            "interactions-weather 0.1.0 (ok)",
            "-",
        ),
        ("judge (acme)", "only on node", "-", "acme 3 (ok)"),
        ("*", "check", "answered", "no answer within 5 s"),
    }
    text = report.format()
    assert "2 nodes differ" in text and "abababab@10.0.0.7" in text and "efefefef@10.0.0.7" in text
    assert "  abababab@10.0.0.7: gsm8k (interactions-gsm8k): status: driver ok, node broken" in text
    assert text.endswith(ClusterReport.ADVICE)
    # interactions ray check prints the same rows as a table
    table = render(report).splitlines()
    assert table[0] == text.splitlines()[0]
    assert table[1].split() == ["NODE", "INTERACTION", "DIFFERENCE", "DRIVER", "NODE", "VALUE"]
    assert len(table) == 2 + len(report.differences) + 1
