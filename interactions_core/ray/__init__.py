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

from .._lazy import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .consistency import ClusterReport as ClusterReport
    from .consistency import Difference as Difference
    from .consistency import NodeSnapshot as NodeSnapshot
    from .consistency import check_cluster_plugins as check_cluster_plugins
    from .consistency import ensure_cluster_consistent as ensure_cluster_consistent
    from .errors import ClusterInconsistentError as ClusterInconsistentError
    from .errors import RayUnavailableError as RayUnavailableError
    from .errors import ReplicaLostError as ReplicaLostError
    from .errors import WorkerSetupError as WorkerSetupError
    from .pool import InteractionPool as InteractionPool
    from .pool import pool_for_entry as pool_for_entry
    from .pool import remote_interactions_from_config as remote_interactions_from_config
    from .pool import shared_pool_for_entry as shared_pool_for_entry
    from .shard import run_sharded as run_sharded

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "consistency": (
            "ClusterReport",
            "Difference",
            "NodeSnapshot",
            "check_cluster_plugins",
            "ensure_cluster_consistent",
        ),
        "errors": (
            "ClusterInconsistentError",
            "RayUnavailableError",
            "ReplicaLostError",
            "WorkerSetupError",
        ),
        "pool": (
            "InteractionPool",
            "pool_for_entry",
            "remote_interactions_from_config",
            "shared_pool_for_entry",
        ),
        "shard": ("run_sharded",),
    },
)
