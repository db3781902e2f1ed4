"""Ray support: the same plugins on every node, interactions in actor pools, sharded runs.

An optional extra (``pip install "interactions-core[ray]"``). Importing this
package does not import Ray; each function imports it when called, so
``import interactions_core`` and ``interactions list`` stay light.

- :func:`check_cluster_plugins` compares what every alive node discovers with
  the driver (:class:`ClusterReport`); :func:`ensure_cluster_consistent` raises
  with the table instead.
- :func:`remote_interactions_from_config` is :func:`interactions_core.load_interactions`
  with each interaction served by an :class:`InteractionPool` of Ray actors;
  :func:`pool_for_entry` builds the pool of one entry.
- :func:`run_sharded` plays a dataset's episodes on Ray workers
  (``interactions run --ray``).

See ``docs/ray.md``.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .consistency import (
        ClusterReport,
        Difference,
        NodeSnapshot,
        check_cluster_plugins,
        ensure_cluster_consistent,
    )
    from .errors import (
        ClusterInconsistentError,
        RayUnavailableError,
        ReplicaLostError,
        WorkerSetupError,
    )
    from .pool import (
        InteractionPool,
        pool_for_entry,
        remote_interactions_from_config,
        shared_pool_for_entry,
    )
    from .shard import run_sharded

_EXPORTS = {
    "ClusterReport": "consistency",
    "Difference": "consistency",
    "NodeSnapshot": "consistency",
    "check_cluster_plugins": "consistency",
    "ensure_cluster_consistent": "consistency",
    "ClusterInconsistentError": "errors",
    "RayUnavailableError": "errors",
    "ReplicaLostError": "errors",
    "WorkerSetupError": "errors",
    "InteractionPool": "pool",
    "pool_for_entry": "pool",
    "remote_interactions_from_config": "pool",
    "shared_pool_for_entry": "pool",
    "run_sharded": "shard",
}

__all__ = [
    "ClusterInconsistentError",
    "ClusterReport",
    "Difference",
    "InteractionPool",
    "NodeSnapshot",
    "RayUnavailableError",
    "ReplicaLostError",
    "WorkerSetupError",
    "check_cluster_plugins",
    "ensure_cluster_consistent",
    "pool_for_entry",
    "remote_interactions_from_config",
    "run_sharded",
    "shared_pool_for_entry",
]


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'interactions_core.ray' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
