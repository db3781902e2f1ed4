"""The cluster consistency check on a real cluster, with planted differences.

The first tests see the head node alone (consistent). Then two more raylets join,
each with a different ``PYTHONPATH``: one has an extra plugin installed, the
other an older ``interactions-weather``. Both are zero-CPU nodes, so nothing
else the tests run is scheduled there; they leave when this module ends.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray
from cluster_support import add_node, cli, write_dist

from interactions_core.ray import (
    ClusterInconsistentError,
    check_cluster_plugins,
    ensure_cluster_consistent,
)


def test_a_consistent_cluster_has_no_differences(address: str) -> None:
    report = check_cluster_plugins(address)
    assert report.differences == []
    assert report.consistent
    assert len(report.nodes) == 1 and report.nodes[0].error is None
    names = set(report.nodes[0].snapshot["entries"])  # type: ignore[index]
    assert {"gsm8k (interactions-gsm8k)", "weather (interactions-weather)"} <= names
    assert report.format().endswith(": consistent")


def test_cli_check_of_a_consistent_cluster_exits_0(address: str) -> None:
    code, out, err = cli("ray", "check", "--address", address)
    assert code == 0, err
    assert "1 node checked against the driver" in out and out.strip().endswith("consistent")


def test_ensure_remembers_a_consistent_result(address: str) -> None:
    first = ensure_cluster_consistent(address)
    assert first.consistent
    assert ensure_cluster_consistent(address) is first  # cheap to call per worker


def test_the_check_runs_with_the_jobs_runtime_env(address: str) -> None:
    # A runtime_env is what the job's workers get: here it disables weather there.
    report = check_cluster_plugins(
        address, runtime_env={"env_vars": {"INTERACTIONS_DISABLE": "weather"}}
    )
    [diff] = report.differences
    assert (diff.name, diff.field) == ("weather (interactions-weather)", "status")
    assert (diff.driver, diff.value) == ("ok", "disabled")


@pytest.fixture(scope="module")
def odd_nodes(cluster: object, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list]:
    extra = tmp_path_factory.mktemp("node-extra-plugin")
    write_dist(
        extra,
        "acme-judge",
        "2.0",
        {"judge": "acme_judge:Judge"},
        {"acme_judge": "class Judge:\n    pass\n"},
    )
    older = tmp_path_factory.mktemp("node-older-weather")
    write_dist(older, "interactions-weather", "0.0.9", {"weather": "interactions_weather:X"})
    nodes = [add_node(cluster, extra), add_node(cluster, older)]
    yield nodes
    ids = {node.node_id for node in nodes}  # type: ignore[attr-defined]
    for node in nodes:
        cluster.remove_node(node)  # type: ignore[attr-defined]
    # later checks must not wait for nodes the cluster still thinks are alive
    deadline = time.monotonic() + 120
    while any(n["NodeID"] in ids and n["Alive"] for n in ray.nodes()):
        assert time.monotonic() < deadline, "removed nodes still reported alive"
        time.sleep(0.5)


def _by_node(report: object) -> dict[str, list[tuple[str, str, str, str]]]:
    out: dict[str, list[tuple[str, str, str, str]]] = {}
    for d in report.differences:  # type: ignore[attr-defined]
        out.setdefault(d.node, []).append((d.name, d.field, d.driver, d.value))
    return out


def test_planted_differences_are_found(address: str, odd_nodes: list) -> None:
    report = check_cluster_plugins(address)
    assert len(report.nodes) == 3 and all(n.error is None for n in report.nodes)
    found = sorted(sorted(rows) for rows in _by_node(report).values())
    assert found == sorted(
        [
            [("judge (acme-judge)", "only on node", "-", "acme-judge 2.0 (ok)")],
            [
                (
                    "weather (interactions-weather)",
                    "target",
                    "interactions_weather:WeatherInteraction",
                    "interactions_weather:X",
                ),
                ("weather (interactions-weather)", "version", "0.1.0", "0.0.9"),
            ],
        ]
    )
    assert not report.consistent
    # the head node agrees with the driver: two of three nodes differ
    assert len({d.node for d in report.differences}) == 2


def test_cli_check_prints_the_table_and_exits_1(address: str, odd_nodes: list) -> None:
    code, out, _ = cli("ray", "check", "--address", address)
    assert code == 1
    assert "3 nodes checked" in out and "2 nodes differ" in out
    for text in ("judge (acme-judge)", "only on node", "0.0.9", "0.1.0", "docs/ray.md"):
        assert text in out
    code, out, _ = cli("ray", "check", "--address", address, "--json")
    assert code == 1
    data = json.loads(out)
    assert data["consistent"] is False and len(data["nodes"]) == 3
    assert {d["field"] for d in data["differences"]} == {"only on node", "version", "target"}


def test_ensure_raises_with_the_table(address: str, odd_nodes: list) -> None:
    # a consistent result remembered before these nodes joined does not hide them
    with pytest.raises(ClusterInconsistentError) as info:
        ensure_cluster_consistent(address)
    assert "acme-judge 2.0" in str(info.value) and "0.0.9" in str(info.value)
    assert info.value.report is not None


def test_cli_check_without_a_cluster_says_what_to_do(tmp_path: Path) -> None:
    code, _, err = cli("ray", "check", "--address", "127.0.0.1:1", "--timeout", "5", timeout=120)
    assert code == 1
    assert "interactions: error: no Ray cluster could be reached at '127.0.0.1:1'" in err
    assert "ray start --head" in err and "Traceback" not in err
