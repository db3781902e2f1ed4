"""The errors of the Ray integration, each one saying what to do next."""

from __future__ import annotations

from ..errors import InteractionsError, SessionError

__all__ = [
    "ClusterInconsistentError",
    "RayUnavailableError",
    "ReplicaLostError",
    "WorkerSetupError",
]


class RayUnavailableError(InteractionsError, RuntimeError):
    """Ray is not installed, or no cluster could be reached at the given address."""


class ClusterInconsistentError(InteractionsError, RuntimeError):
    """Nodes of the cluster discover different plugins than the driver.

    ``report`` is the :class:`~interactions_core.ray.consistency.ClusterReport`;
    the message is its table.
    """

    def __init__(self, message: str, report: object = None) -> None:
        super().__init__(message)
        self.report = report


class ReplicaLostError(SessionError):
    """The pool replica that held a session died or restarted: the session is gone.

    Only the sessions of that replica fail; new sessions go to the surviving
    replicas, and the replica takes new sessions again once Ray restarted it.
    """


class WorkerSetupError(InteractionsError, RuntimeError):
    """A Ray worker could not build the run's interactions or policy from its own plugins.

    Every chunk sent to that worker would fail the same way, so a sharded run
    stops at the first one instead of writing an error record per sample. The
    usual cause is a node with different plugins than the driver: the message
    names the node and points at ``interactions ray check``.
    """
