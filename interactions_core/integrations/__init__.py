"""Trainer integrations, one module per trainer, and the interactions a worker shares.

``interactions_core.integrations.verl`` is verl's 0.9 agent loop and
``interactions_core.integrations.trl`` TRL's ``environment_factory``; each is a
thin adapter importing its trainer, so nothing here imports a trainer until one
of them is imported.

This package itself holds what a trainer's worker process shares between its
rollouts. verl, for one, builds one agent-loop instance per trajectory, but loading a config (and
importing its plugins, starting its Ray pools) once per trajectory would cost
more than the episode. So the interactions of one ``interaction_config`` are
loaded once per worker process, on first use, and shared by every trajectory:
:func:`interactions_for` hands out that shared catalog. The cluster check of
``ray_check: true`` runs once per process for the same reason.

This module imports no trainer; :mod:`interactions_core.integrations.verl`
re-exports both functions.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import threading
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

from .. import SessionInteraction

__all__ = [
    "Caller",
    "InteractionCatalog",
    "check_cluster_once",
    "computes_only",
    "interactions_for",
    "shared_loop",
]


class InteractionCatalog:
    """The interactions of one config, loaded once per worker process and shared.

    With no config, every installed interaction is available by its registered
    name with its default options, each created the first time a sample names it.
    """

    def __init__(self, config: str | None, pools: Mapping[str, int] | None = None) -> None:
        self.config = config
        self._instances: dict[str, Any] = {}
        self._owners: list[Any] = []  # keeps the shared pools' owners alive
        self.default: str | None = None
        if config is not None:
            self._load(config, pools or {})
        elif pools:
            raise ValueError("ray_pool needs an interaction_config naming the pooled entries")

    def _load(self, config: str, pools: Mapping[str, int]) -> None:
        """The config's instances, the ``ray_pool`` entries served by shared actor pools."""
        from ..loader import load_config

        loaded = load_config(config)
        unknown = sorted(set(pools) - set(loaded.names))
        if unknown:
            raise ValueError(
                f"ray_pool names {', '.join(map(repr, unknown))}, which "
                f"{config!r} does not configure ({', '.join(loaded.names) or 'none'})"
            )
        self._instances = loaded.instantiate()
        self.default = loaded.default
        for name, replicas in pools.items():
            from ..ray import shared_pool_for_entry

            pool, owner = shared_pool_for_entry(config, name, int(replicas))
            self._instances[name] = pool
            self._owners.append(owner)

    def get(self, name: str | None) -> tuple[str, Any]:
        """The interaction a sample asks for; ``ValueError`` naming the choices otherwise."""
        if not name:
            name = self.default
            if name is None:
                raise ValueError(
                    "the sample's extra_info.interaction_kwargs has no 'name' and the "
                    f"interaction config {self._describe()} has no 'default:'; "
                    f"set one of them (available: {self._available()})"
                )
        found = self._instances.get(name)
        if found is not None:
            return name, found
        if self.config is None:
            return name, self._create_installed(name)
        from .._names import suggest

        hint = suggest(name, self._instances, n=1)
        raise ValueError(
            f"unknown interaction {name!r} in the sample's extra_info.interaction_kwargs; "
            f"the config {self._describe()} provides {self._available()}{hint}"
        )

    def _create_installed(self, name: str) -> Any:
        """Without a config: the installed interaction ``name``, created once and kept."""
        from ..errors import InteractionsError
        from ..registry import get_registry

        try:
            found = get_registry().create(name)
        except InteractionsError as exc:
            raise ValueError(f"interaction {name!r} for the verl agent loop: {exc}") from exc
        self._instances[name] = found
        return found

    def _describe(self) -> str:
        return repr(self.config) if self.config else "(none: installed interactions)"

    def _available(self) -> str:
        if self.config is None:
            from ..registry import get_registry

            names = get_registry().names()
        else:
            names = list(self._instances)
        return ", ".join(names) or "none"


_catalogs: dict[tuple[str | None, tuple[tuple[str, int], ...]], InteractionCatalog] = {}
_catalogs_lock = threading.Lock()
_cluster_checked = False


def check_cluster_once() -> None:
    """Compare the plugins of every Ray node with this one, once per process.

    The ``ray_check: true`` option: a node that is missing a plugin, or has
    another version, fails the job at start-up with the table of differences
    instead of failing the first sample that lands on it.
    """
    global _cluster_checked
    with _catalogs_lock:
        if _cluster_checked:
            return
        from ..ray import ensure_cluster_consistent

        ensure_cluster_consistent()
        _cluster_checked = True


def interactions_for(
    config: str | os.PathLike[str] | None, pools: Mapping[str, int] | None = None
) -> InteractionCatalog:
    """The shared interactions of ``config`` in this process (loaded on first use).

    ``pools`` (the ``ray_pool`` option) maps entry names to replica counts: those
    entries are served by one Ray actor pool per job, shared by every worker.
    """
    path = None if config is None else os.path.abspath(os.fspath(config))
    key = (path, tuple(sorted((str(k), int(v)) for k, v in (pools or {}).items())))
    with _catalogs_lock:
        catalog = _catalogs.get(key)
        if catalog is None:
            catalog = _catalogs[key] = InteractionCatalog(path, dict(key[1]))
    return catalog


# -- calling an interaction from synchronous code ------------------------------
#
# Calling an interaction from synchronous code: inline, or on the one shared loop.
#
# Some trainers (SkyRL) call their environments synchronously, from many executor
# threads at once, while an interaction's lifecycle is ``async``. Starting an event
# loop per environment, or a thread per step, costs more than the turn itself, and
# an interaction instance shared by every environment may hold loop-bound objects
# (an HTTP client, a lock). So each interaction is called one of two ways, chosen
# once per instance by :class:`Caller`:
#
# * **inline**, in the calling thread, when nothing in its lifecycle can suspend: a
#   :class:`~interactions_core.SessionInteraction` whose ``respond`` and ``score``
#   are plain ``def`` (the documented way to write an interaction that only
#   computes) and whose lifecycle methods are the base class's. Its coroutines then
#   finish on their first step, so they are driven to the end without any loop,
#   under a lock per instance: the interaction sees one call at a time, as it would
#   on a loop;
# * **on the shared loop** otherwise: one event loop per process, in one daemon
#   thread, started on first use and shared by every caller
#   (``asyncio.run_coroutine_threadsafe``). A child process made by ``fork`` starts
#   a loop of its own when it first needs one.
#
# Either way the caller runs the runtime's own coroutines (the session and the
# episode step), so nothing of the episode's logic is written twice.

T = TypeVar("T")

_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def shared_loop() -> asyncio.AbstractEventLoop:
    """This process's background event loop, started in a daemon thread on first use."""
    global _loop
    loop = _loop
    if loop is not None:
        return loop
    with _loop_lock:
        if _loop is None:
            new = asyncio.new_event_loop()
            thread = threading.Thread(
                target=new.run_forever, name="interactions-shared-loop", daemon=True
            )
            thread.start()
            _loop = new
        return _loop


def _forget_loop() -> None:
    """In a forked child the loop's thread does not exist: start afresh when needed."""
    global _loop, _loop_lock
    _loop = None
    _loop_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_loop)

#: The lifecycle methods an inline interaction must inherit unchanged.
_LIFECYCLE = ("start_interaction", "generate_response", "calculate_score", "finalize_interaction")


def computes_only(interaction: Any) -> bool:
    """Whether no lifecycle call of ``interaction`` can suspend (see the comment above)."""
    if not isinstance(interaction, SessionInteraction):
        return False
    cls = type(interaction)
    if any(getattr(cls, m) is not getattr(SessionInteraction, m) for m in _LIFECYCLE):
        return False
    hooks = (cls.new_session, cls.respond, cls.score, cls.end_session)
    return not any(inspect.iscoroutinefunction(h) for h in hooks)


def _run_to_end(coro: Coroutine[Any, Any, T]) -> T:
    """Drive ``coro``, which must finish without suspending, and return its result."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError(
        "an interaction call suspended although its class computes only; write "
        "respond/score as `async def` when they await something"
    )


class Caller:
    """Runs one interaction's coroutines for synchronous code (see the comment above)."""

    __slots__ = ("inline", "interaction", "lock")

    def __init__(self, interaction: Any) -> None:
        self.interaction = interaction
        self.inline = computes_only(interaction)
        self.lock = threading.Lock()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` to its end and return its result (``timeout`` in seconds, loop only).

        Must not be called from the shared loop's own thread (it would wait on itself).
        """
        if self.inline:
            with self.lock:
                return _run_to_end(coro)
        loop = shared_loop()
        if _running_loop() is loop:
            coro.close()
            raise RuntimeError("a synchronous interaction call cannot be made from the shared loop")
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout)

    def submit(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run ``coro`` without waiting for it (safe from a garbage-collector callback)."""
        asyncio.run_coroutine_threadsafe(self._locked(coro), shared_loop())

    async def _locked(self, coro: Coroutine[Any, Any, Any]) -> Any:
        if not self.inline:
            return await coro
        with self.lock:  # held briefly: inline calls never wait on anything
            return _run_to_end(coro)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
