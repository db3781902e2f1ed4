"""Do all nodes of a Ray cluster see the same plugins as the driver?

Every Ray worker builds its interactions from what is installed on its own node;
a registration made in the driver never reaches it (design lesson 8). A node
with a missing plugin, a different version or a broken import fails only when a
sample happens to land on it, an hour into a job. :func:`check_cluster_plugins`
asks every alive node, through one zero-CPU task pinned to it, what discovery
finds there, and compares it with the driver: interaction names, distributions,
versions, targets and status, plus the version of interactions-core itself.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Mapping
from typing import Any

from .errors import ClusterInconsistentError

__all__ = [
    "ClusterReport",
    "Difference",
    "NodeSnapshot",
    "check_cluster_plugins",
    "discover_here",
    "ensure_cluster_consistent",
]

#: What is compared for each interaction found on both sides.
FIELDS = ("distribution", "version", "target", "status")


def discover_here() -> dict[str, Any]:
    """What discovery finds in this process: the core's version and every entry.

    Runs in the driver and, as a Ray task, on every node. A fresh registry is
    built each time (a reused Ray worker must not answer from an old one).
    """
    from .. import __version__
    from ..registry import Registry

    registry = Registry.from_environment()
    rows = [e.as_dict() for e in registry.entries()]
    rows += [e.as_dict() for e in registry.plugin_problems()]
    entries = {f"{r['name']} ({r['distribution']})": {f: r.get(f) for f in FIELDS} for r in rows}
    return {
        "core_version": __version__,
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
        "python": sys.version.split()[0],
        "entries": entries,
    }


class Difference:
    """One disagreement between a node and the driver."""

    __slots__ = ("driver", "field", "name", "node", "value")

    def __init__(self, node: str, name: str, field: str, driver: str, value: str) -> None:
        self.node = node
        self.name = name
        self.field = field
        self.driver = driver
        self.value = value

    def as_dict(self) -> dict[str, str]:
        """The report's JSON row (the node's value under ``node_value``)."""
        values = (self.node, self.name, self.field, self.driver, self.value)
        return dict(zip(("node", "name", "field", "driver", "node_value"), values, strict=True))

    def __repr__(self) -> str:
        return f"<Difference {self.node} {self.name} {self.field}: {self.driver} != {self.value}>"


class NodeSnapshot:
    """What one node answered (``snapshot``), or why it could not (``error``)."""

    __slots__ = ("address", "error", "node_id", "snapshot")

    def __init__(
        self,
        node_id: str,
        address: str,
        snapshot: Mapping[str, Any] | None,
        error: str | None = None,
    ) -> None:
        self.node_id = node_id
        self.address = address
        self.snapshot = snapshot
        self.error = error

    @property
    def label(self) -> str:
        return f"{self.node_id[:8]}@{self.address}"


def _describe(row: Mapping[str, Any]) -> str:
    return f"{row.get('distribution')} {row.get('version')} ({row.get('status')})"


def compare(driver: Mapping[str, Any], node: NodeSnapshot) -> list[Difference]:
    """The differences between the driver's snapshot and one node's."""
    label = node.label
    if node.snapshot is None:
        return [Difference(label, "*", "check", "answered", node.error or "no answer")]
    out: list[Difference] = []
    theirs = node.snapshot
    if theirs.get("core_version") != driver.get("core_version"):
        out.append(
            Difference(
                label,
                "interactions-core",
                "version",
                str(driver.get("core_version")),
                str(theirs.get("core_version")),
            )
        )
    mine_entries: Mapping[str, Any] = driver.get("entries", {})
    their_entries: Mapping[str, Any] = theirs.get("entries", {})
    for key in sorted(set(mine_entries) | set(their_entries)):
        mine, other = mine_entries.get(key), their_entries.get(key)
        if mine is None:
            out.append(Difference(label, key, "only on node", "-", _describe(other or {})))
        elif other is None:
            out.append(Difference(label, key, "missing on node", _describe(mine), "-"))
        else:
            for field in FIELDS:
                if mine.get(field) != other.get(field):
                    out.append(
                        Difference(label, key, field, str(mine.get(field)), str(other.get(field)))
                    )
    return out


class ClusterReport:
    """The driver's snapshot, every node's, and their ``differences``.

    ``differences`` is empty exactly when every alive node discovers what the
    driver discovers.
    """

    def __init__(self, driver: Mapping[str, Any], nodes: list[NodeSnapshot]) -> None:
        self.driver = driver
        self.nodes = nodes
        self.differences: list[Difference] = [d for n in nodes for d in compare(driver, n)]

    @property
    def consistent(self) -> bool:
        return not self.differences

    def as_dict(self) -> dict[str, Any]:
        return {
            "consistent": self.consistent,
            "nodes": [
                {
                    "node_id": n.node_id,
                    "address": n.address,
                    "error": n.error,
                    "interactions": len((n.snapshot or {}).get("entries", {})),
                }
                for n in self.nodes
            ],
            "driver_interactions": sorted(self.driver.get("entries", {})),
            "differences": [d.as_dict() for d in self.differences],
        }

    #: The columns of :meth:`rows`: a table of the differences (``interactions ray check``).
    COLUMNS = ("node", "interaction", "difference", "driver", "node value")
    #: What to do about differences.
    ADVICE = (
        "Install the same plugins on every node (or ship them with a runtime_env: "
        "see docs/ray.md), then check again."
    )

    def headline(self) -> str:
        """How many nodes were checked against what, and whether they agree."""
        count = len(self.driver.get("entries", {}))
        nodes = len(self.nodes)
        head = (
            f"{nodes} node{'s' if nodes != 1 else ''} checked against the driver "
            f"({count} interaction{'s' if count != 1 else ''}, interactions-core "
            f"{self.driver.get('core_version')})"
        )
        if self.consistent:
            return f"{head}: consistent"
        odd = len({d.node for d in self.differences})
        return f"{head}: {odd} node{'s' if odd != 1 else ''} differ"

    def rows(self) -> list[list[str]]:
        """The differences as rows of :attr:`COLUMNS`, for a table."""
        return [[d.node, d.name, d.field, d.driver, d.value] for d in self.differences]

    def format(self) -> str:
        """The headline and, when the cluster disagrees, one line per difference and the advice."""
        if self.consistent:
            return self.headline()
        lines = [
            f"  {node}: {name}: {field}: driver {driver}, node {value}"
            for node, name, field, driver, value in self.rows()
        ]
        return "\n".join([self.headline(), *lines, self.ADVICE])


def check_cluster_plugins(
    address: str | None = None,
    *,
    runtime_env: Mapping[str, Any] | None = None,
    timeout: float = 120.0,
) -> ClusterReport:
    """Run discovery on every alive node of the cluster and compare with the driver.

    ``address`` is passed to ``ray.init`` unless this process is connected
    already. ``runtime_env`` is the one your job's workers use (``pip``,
    ``py_modules``, ``env_vars``): the check then sees what they will see. A
    node that does not answer within ``timeout`` seconds, or cannot run the check
    (interactions-core missing there), is a difference too.
    """
    from .errors import connect

    ray = connect(address)
    driver = discover_here()
    task = ray.remote(discover_here)
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    refs = [_on_node(task, node["NodeID"], runtime_env).remote() for node in nodes]
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout)
    answered = {ref.hex() for ref in ready}
    snapshots = [
        _snapshot(ray, node, ref, ref.hex() in answered, timeout)
        for node, ref in zip(nodes, refs, strict=True)
    ]
    return ClusterReport(driver, snapshots)


def _on_node(task: Any, node_id: str, runtime_env: Mapping[str, Any] | None) -> Any:
    """``task`` pinned to one node, using no CPU (a busy node still answers), never retried."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    options: dict[str, Any] = {
        "num_cpus": 0,
        "max_retries": 0,
        "scheduling_strategy": NodeAffinitySchedulingStrategy(node_id, soft=False),
    }
    if runtime_env is not None:
        options["runtime_env"] = dict(runtime_env)
    return task.options(**options)


def _snapshot(
    ray: Any, node: Mapping[str, Any], ref: Any, answered: bool, timeout: float
) -> NodeSnapshot:
    """What one node answered, or why it did not (no answer in time, or the check failed)."""
    node_id, address = node["NodeID"], str(node.get("NodeManagerAddress", "?"))
    if not answered:
        ray.cancel(ref, force=True)
        return NodeSnapshot(node_id, address, None, f"no answer within {timeout:g} s")
    try:
        return NodeSnapshot(node_id, address, ray.get(ref))
    except Exception as exc:
        cause = getattr(exc, "cause", None) or exc
        message = str(cause).strip().splitlines()[-1] if str(cause).strip() else ""
        return NodeSnapshot(
            node_id,
            address,
            None,
            f"cannot run the check ({type(cause).__name__}: {message}); "
            "is interactions-core installed there?",
        )


def ensure_cluster_consistent(
    address: str | None = None,
    *,
    runtime_env: Mapping[str, Any] | None = None,
    timeout: float = 120.0,
) -> ClusterReport:
    """:func:`check_cluster_plugins`, raising :class:`ClusterInconsistentError` on a difference.

    For start-up code (the verl adapter's check option): fail before the first
    sample, with the table of differences as the message. A consistent result is
    remembered in the process for the same runtime_env, the same set of alive
    nodes (a node that joins later is checked) and the same local plugins (an
    install in this process is checked), so code that runs per worker may call it
    freely; a failure is never remembered.
    """
    import json

    from .errors import connect

    ray = connect(address)
    nodes = sorted(n["NodeID"] for n in ray.nodes() if n.get("Alive"))
    here = discover_here()["entries"]
    key = json.dumps([nodes, runtime_env, here], sort_keys=True, default=repr)
    known = _CONSISTENT.get(key)
    if known is not None:
        return known
    report = check_cluster_plugins(address, runtime_env=runtime_env, timeout=timeout)
    if report.differences:
        raise ClusterInconsistentError(report.format(), report)
    _CONSISTENT[key] = report
    return report


_CONSISTENT: dict[str, ClusterReport] = {}
