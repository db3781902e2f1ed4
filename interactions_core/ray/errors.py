"""The errors of the Ray integration, each one saying what to do next.

Also where most of them start: importing Ray and connecting to a cluster
(:func:`connect`), and the cut-down quotes of Ray's own error texts that our
messages include (:func:`cause_text`, :func:`one_line`).
"""

from __future__ import annotations

from typing import Any

from ..errors import InteractionsError, SessionError

__all__ = [
    "ClusterInconsistentError",
    "RayUnavailableError",
    "ReplicaLostError",
    "WorkerSetupError",
    "cause_text",
    "connect",
    "import_ray",
    "one_line",
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


# -- Ray's error texts, cut down to what our own messages quote ------------------------
# Ray wraps a remote failure in several lines of traceback; a message that tells
# the user what to do quotes only the part that says what went wrong.


def cause_text(exc: BaseException) -> str:
    """The last line of an error's text (where Ray puts the cause), at most 300 characters."""
    text = str(exc).strip()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    short = lines[-1] if lines else type(exc).__name__
    return short if len(short) <= 300 else short[:297] + "..."


def one_line(exc: BaseException) -> str:
    """An error's whole text on one line: its non-blank lines, stripped, joined by spaces."""
    return " ".join(line.strip() for line in str(exc).splitlines() if line.strip())


# -- importing Ray and connecting to a cluster -----------------------------------------

INSTALL_HINT = (
    "install it with: pip install 'ray>=2.40' (what the [ray] extra installs; see docs/install.md)"
)


def import_ray() -> Any:
    """``import ray``, or a :class:`RayUnavailableError` naming the extra to install."""
    try:
        import ray
    except ImportError as exc:
        raise RayUnavailableError(f"Ray is not installed ({exc}); {INSTALL_HINT}") from None
    return ray


def connect(address: str | None = None, **init_options: Any) -> Any:
    """Connect this process to a cluster (once) and return the ``ray`` module.

    ``address=None`` reuses a connection made earlier (``ray.init`` by the
    caller), else starts a local cluster, as ``ray.init()`` does; ``"auto"``
    joins the cluster running on this machine; ``"HOST:PORT"`` joins that one.
    ``init_options`` go to ``ray.init`` (``runtime_env``, ``num_cpus``, ...).
    """
    ray = import_ray()
    if ray.is_initialized():
        return ray
    if address not in (None, "auto", "local") and "://" not in str(address):
        _probe(str(address))
    # Ray's INFO lines ("Started a local Ray instance") would mix with our output.
    options: dict[str, Any] = {
        "include_dashboard": False,
        "log_to_driver": False,
        "logging_level": "WARNING",
    }
    options.update(init_options)
    if address is not None:
        options["address"] = address
    try:
        ray.init(**options)
    except ConnectionError as exc:
        raise _unreachable(address, str(exc)) from None
    return ray


def _unreachable(address: str | None, why: str) -> RayUnavailableError:
    """The error for a cluster that did not answer, with the advice that fits ``address``.

    ``"auto"`` is what the CLI passes when no address was given: it joins the
    cluster started on this machine and never starts one of its own (a cluster
    it started would hold only this machine's plugins, proving nothing), so the
    advice is to start one or to name another; a ``HOST:PORT`` that does not
    answer is a head that is not running there, or a wrong address.
    """
    if address in (None, "auto", "local"):
        return RayUnavailableError(
            f"no Ray cluster is running on this machine: {why}. Start one with "
            "'ray start --head', or name a running cluster's head with --address "
            "HOST:PORT (or $RAY_ADDRESS)"
        )
    return RayUnavailableError(
        f"no Ray cluster could be reached at {address!r}: {why}. Check the address, and "
        "that the head node is running there ('ray start --head' on that machine)"
    )


def _probe(address: str, timeout: float = 5.0) -> None:
    """Fail in seconds, not minutes, when nothing listens at ``HOST:PORT``.

    ``ray.init`` retries an unreachable address for a long time before giving up.
    """
    import socket

    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise RayUnavailableError(
            f"Ray address {address!r} is not HOST:PORT (e.g. 10.0.0.5:6379), 'auto' or "
            "'ray://HOST:PORT'"
        )
    try:
        with socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout):
            pass
    except OSError as exc:
        raise _unreachable(address, exc.strerror or str(exc)) from None
