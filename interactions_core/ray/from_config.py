"""Pools built from a config: every entry, one entry, or one entry's pool shared by a job.

The config is loaded and checked completely in the driver (names, options)
before any actor starts, so a typo fails there. Each pool's replicas load the
entry again on their own nodes, from a one-entry config naming the same
distribution (:func:`_spec`). An entry's own ``replicas:`` and ``resources:``
win over the defaults the caller gives.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import ConfigError
from .pool import InteractionPool

__all__ = ["pool_for_entry", "remote_interactions_from_config", "shared_pool_for_entry"]

Source = Any  # a path or a mapping, as load_config accepts


def remote_interactions_from_config(
    source: Source,
    replicas: int | None = None,
    *,
    only_marked: bool = False,
    address: str | None = None,
    resources: Mapping[str, float] | None = None,
    batch: bool = False,
    max_batch: int = 64,
    max_in_flight: int = 64,
    max_restarts: int = -1,
    runtime_env: Mapping[str, Any] | None = None,
    ready_timeout: float = 120.0,
    registry: Any = None,
) -> dict[str, Any]:
    """Like :func:`interactions_core.load_interactions`, each interaction in a pool of actors.

    The config is checked completely in the driver first (names, options), so a
    typo fails here, before any actor starts. An entry's own ``replicas:`` and
    ``resources:`` win over the ``replicas`` and ``resources`` given here; an entry
    with neither gets one replica, or, with ``only_marked=True``, stays a plain
    local instance (for configs where only the heavy entries should be pooled).
    The other options are :class:`InteractionPool`'s. If any pool fails to
    start, the pools already started are shut down.
    """
    from .._classes import instantiate
    from ..loader import load_config
    from .errors import connect

    loaded = load_config(source, registry=registry)
    connect(address)
    options: dict[str, Any] = {
        "batch": batch,
        "max_batch": max_batch,
        "max_in_flight": max_in_flight,
        "max_restarts": max_restarts,
        "runtime_env": runtime_env,
        "ready_timeout": ready_timeout,
    }
    out: dict[str, Any] = {}
    try:
        for resolved in loaded.entries:
            if resolved.entry.replicas is None and replicas is None and only_marked:
                options_ = {**resolved.options, "name": resolved.name}
                out[resolved.name] = instantiate(resolved.cls, options_)
            else:
                out[resolved.name] = _pool_of(resolved, replicas, resources, options)
    except BaseException:
        _shut_down(out.values())
        raise
    return out


def pool_for_entry(
    source: Source, name: str, replicas: int | None = None, **options: Any
) -> InteractionPool:
    """The pool of one entry (by its name) of a config, for callers that pool some entries.

    ``options`` are :func:`remote_interactions_from_config`'s (``address``,
    ``resources``, ``batch``, ...). The entry's ``replicas:`` wins over ``replicas``.
    """
    from ..loader import load_config
    from .errors import connect

    registry = options.pop("registry", None)
    address = options.pop("address", None)
    resources = options.pop("resources", None)
    loaded = load_config(source, registry=registry)
    for resolved in loaded.entries:
        if resolved.name == name:
            break
    else:
        raise ConfigError(
            [
                f"no interaction named {name!r} in {loaded.source or 'the config'} "
                f"(configured: {', '.join(loaded.names) or 'none'})"
            ]
        )
    connect(address)
    return _pool_of(resolved, replicas, resources, options)


def _pool_of(
    resolved: Any,
    replicas: int | None,
    resources: Mapping[str, float] | None,
    options: Mapping[str, Any],
) -> InteractionPool:
    """The pool of a resolved entry; its own ``replicas:`` and ``resources:`` win."""
    entry = resolved.entry
    count = entry.replicas if entry.replicas is not None else replicas
    if entry.resources is not None:
        resources = entry.resources
    return InteractionPool(_spec(resolved), count or 1, resources=resources, **options)


def _spec(resolved: Any) -> dict[str, Any]:
    """The one-entry config a replica loads for a resolved entry of the driver's config."""
    spec: dict[str, Any] = {"name": resolved.name, "config": dict(resolved.options)}
    if resolved.entry.class_name:
        spec["class_name"] = resolved.origin
    else:
        spec["plugin"] = resolved.origin  # qualified: the same distribution on every node
    return spec


def _shut_down(values: Iterable[Any]) -> None:
    """Shut down the pools among ``values`` (the plain instances need nothing)."""
    for value in values:
        if isinstance(value, InteractionPool):
            value.shutdown()


class _PoolOwner:
    """A named actor holding one entry's pool, so every process of a job gets the same one."""

    def __init__(self, source: str, name: str, replicas: int | None) -> None:
        self._pool = pool_for_entry(source, name, replicas)

    def pool(self) -> InteractionPool:
        return self._pool


def shared_pool_for_entry(
    source: str | os.PathLike[str], name: str, replicas: int | None = None
) -> tuple[InteractionPool, Any]:
    """The pool of entry ``name`` of ``source``, built once per Ray job and shared.

    The first caller in a job starts a named actor that builds the pool
    (:func:`pool_for_entry`); every later caller, in any process of the job (the
    rollout workers of a trainer), gets a copy of that pool using the same
    replicas. Returns the pool and the owner's handle: keep the handle while the
    pool is in use (the owner lives as long as some process holds one).
    """
    import hashlib

    from .errors import connect

    ray = connect(None)
    path = os.path.abspath(os.fspath(source))
    key = hashlib.sha256(f"{path}\0{name}\0{replicas}".encode()).hexdigest()[:16]
    owner_cls = ray.remote(num_cpus=0)(_PoolOwner)
    owner = owner_cls.options(name=f"interactions-pool-{key}", get_if_exists=True).remote(
        path, name, replicas
    )
    return ray.get(owner.pool.remote()), owner
