"""Ray support: the same plugins on every node, interactions in actor pools, sharded runs.

An optional extra (``[ray]``, which installs Ray; see docs/install.md). Importing this
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

Where things live: ``pool`` (the pool object) over ``_routing`` (sticky
sessions, load, dead and restarted replicas, batched calls) and ``replica``
(the actor, and starting replicas); ``from_config`` builds pools from a
config. ``shard`` is a sharded run: the local runner playing chunks on
workers (the ``--ray`` branch of ``interactions run`` is in the CLI).
``consistency`` is the cluster plugin check; ``errors`` holds the errors,
connecting to a cluster, and the quotes of Ray's error texts.

See ``docs/ray.md``.
"""

from __future__ import annotations

from .._names import lazy_exports

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
    from .from_config import pool_for_entry as pool_for_entry
    from .from_config import remote_interactions_from_config as remote_interactions_from_config
    from .from_config import shared_pool_for_entry as shared_pool_for_entry
    from .pool import InteractionPool as InteractionPool
    from .shard import run_sharded as run_sharded

#: Public name -> the submodule that defines it; each is imported on first use (PEP 562).
_SOURCES = {
    name: module
    for module, names in {
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
        "from_config": (
            "pool_for_entry",
            "remote_interactions_from_config",
            "shared_pool_for_entry",
        ),
        "pool": ("InteractionPool",),
        "shard": ("run_sharded",),
    }.items()
    for name in names
}
__all__ = sorted(_SOURCES)

__getattr__ = lazy_exports(__name__, _SOURCES)


def __dir__() -> list[str]:
    return list(__all__)
