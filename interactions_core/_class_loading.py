"""Importing an interaction's class, once, and remembering how it went.

The registry knows every entry from metadata; the class is imported only when
a name is used (:meth:`Registry.load <interactions_core.registry.Registry.load>`).
Then the class is validated against the spec, and the result is kept on the
entry: the class when it is good, or the entry marked ``broken`` with the
reason, so a broken plugin stays broken (with its original exception as the
cause) instead of being imported again. :func:`check_entries` does this for
every entry, each import bounded in time, for ``interactions check``.
"""

from __future__ import annotations

import os

from .errors import PluginLoadError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .registry import Entry, Registry

__all__ = ["check_entries", "import_timeout", "load_entry"]


def load_entry(registry: Registry, entry: Entry) -> Any:
    """Import and validate ``entry``'s class; a failure marks the entry broken and raises."""
    if entry.status == "broken" and entry.error and entry.kind != "memory":
        raise PluginLoadError(f"interaction {entry.describe()} is broken: {entry.error}")
    from ._spec import validate_interaction_class

    try:
        klass = _from_hook(registry, entry) if entry.kind == "hook" else _from_target(entry)
    except PluginLoadError as exc:
        from ._fault import describe

        cause = exc.__cause__
        entry.status, entry.error = "broken", describe(cause) if cause else str(exc)
        raise
    try:
        validate_interaction_class(klass, f"interaction {entry.describe()}")
    except Exception as exc:
        entry.status, entry.error = "broken", str(exc)
        raise
    entry._cls = klass
    if entry.path:  # a plugin declaring other core versions gets a clear warning
        from ._core_versions import warn_if_incompatible

        warn_if_incompatible(entry.distribution, entry.version, entry.path, entry.name)
    return klass


def _from_hook(registry: Registry, entry: Entry) -> Any:
    """The class a hook plugin registers under the entry's name (the plugin imported now)."""
    host = registry.plugin_host
    registrations = host.collect("register_interactions")
    if entry.plugin in host.errors:
        raise PluginLoadError(
            f"hook plugin {entry.plugin} providing interaction {entry.name!r} failed: "
            f"{host.error_message(entry.plugin)}"
        ) from host.errors[entry.plugin]
    for reg in registrations.get(entry.plugin or "", []):
        if reg.name == entry.name:
            entry.defaults = reg.defaults
            entry.description = reg.description
            return reg.obj
    raise PluginLoadError(
        f"hook plugin {entry.plugin} no longer registers {entry.name!r}; "
        "run 'interactions cache clear' if it was upgraded in place"
    )


def _from_target(entry: Entry) -> Any:
    """The class an entry point's ``module:attribute`` names."""
    from .plugins import import_target

    try:
        return import_target(entry.target)
    except Exception as exc:
        from ._fault import import_failure

        raise PluginLoadError(import_failure(f"interaction {entry.describe()}", exc)) from exc


def check_entries(registry: Registry, timeout: float | None = None) -> list[Entry]:
    """Import and validate every usable entry; return all entries with updated status.

    Each import is waited for at most ``timeout`` seconds (default:
    :func:`import_timeout`): a plugin that hangs while being imported is
    reported as broken and the check goes on.
    """
    import threading

    if timeout is None:
        timeout = import_timeout()
    for entry in registry.entries():
        if entry.status != "ok":
            continue
        worker = threading.Thread(
            target=_load_quietly, args=(registry, entry), name="interactions-check", daemon=True
        )
        worker.start()
        worker.join(timeout)
        if worker.is_alive():  # left behind, as a daemon thread, to finish or not
            entry.status = "broken"
            entry.error = (
                f"importing it did not finish within {timeout:g} s (a plugin that "
                "hangs at import; set INTERACTIONS_IMPORT_TIMEOUT to wait longer)"
            )
    return registry.entries()


def _load_quietly(registry: Registry, entry: Entry) -> None:
    try:
        registry.load(entry)
    except BaseException:  # recorded on the entry by load()
        pass


def import_timeout() -> float:
    """``$INTERACTIONS_IMPORT_TIMEOUT`` seconds, else (or when not a positive number) 60."""
    text = os.environ.get("INTERACTIONS_IMPORT_TIMEOUT", "").strip()
    try:
        value = float(text) if text else 60.0
    except ValueError:
        value = 60.0
    return value if value > 0 else 60.0
