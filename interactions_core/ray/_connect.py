"""Importing Ray and connecting to a cluster, with errors that say what to do."""

from __future__ import annotations

from typing import Any

from .errors import RayUnavailableError

__all__ = ["connect", "import_ray"]

INSTALL_HINT = 'install it with: pip install "interactions-core[ray]"'


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
        where = f"at {address!r}" if address else "on this machine"
        raise _unreachable(where, str(exc)) from None
    return ray


def _unreachable(where: str, why: str) -> RayUnavailableError:
    return RayUnavailableError(
        f"no Ray cluster could be reached {where}: {why}. Start one with "
        "'ray start --head' (or give the head's HOST:PORT), or leave the address out "
        "to start a local cluster"
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
        raise _unreachable(f"at {address!r}", exc.strerror or str(exc)) from None
