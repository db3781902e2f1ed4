"""Completing the index with what hook plugins register.

Entry-point interactions are known from metadata alone. A hook plugin's
interactions are known only by asking it (an import); what it answered is kept
in the index (``index["hooks"]``, saved with it and, apart from it, under the
plugin's own distribution: see :mod:`interactions_core._discovery`), so it is
asked again only when that distribution changes. Plugins that failed become
broken entries, so ``interactions list`` shows them.
"""

from __future__ import annotations

from . import _discovery as discovery

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .registry import Entry, Registry

__all__ = ["hook_entries", "plugin_problems", "plugin_records"]


def plugin_records(index: dict[str, Any]) -> list[dict[str, Any]]:
    """The index records of hook plugins (entry-point group ``interactions_core.plugins``)."""
    return [r for r in index["entries"] if r["group"] == discovery.PLUGINS_GROUP]


def hook_entries(registry: Registry) -> list[Entry]:
    """Interactions registered by hook plugins: cached, or collected and cached now."""
    from .registry import Entry

    plugin_id = discovery.plugin_id
    out: list[Entry] = []
    hooks: dict = registry.index.setdefault("hooks", {})
    changed = False
    for record in plugin_records(registry.index):
        pid = plugin_id(record)
        cached = hooks.get(pid)
        provides = tuple(n[0] for n in (cached or {}).get("names", []))
        reason = registry.selection.plugin_excluded((record["name"], record["dist"], pid), provides)
        if cached is None and reason is None:
            cached = _collect(registry, pid)
            hooks[pid] = cached
            changed = True
        if cached is None:
            continue  # disabled and never scanned: we cannot know its names without importing
        for name, target, description in cached.get("names", []):
            out.append(
                Entry(
                    name,
                    record["dist"],
                    record["version"],
                    target,
                    kind="hook",
                    plugin=pid,
                    path=record["path"],
                    description=description,
                )
            )
    if changed and registry._save_index:
        discovery.save_hooks(registry.index)
    return out


def _collect(registry: Registry, pid: str) -> dict:
    host = registry.plugin_host
    registrations = host.collect("register_interactions").get(pid, [])
    if pid in host.errors:
        return {"names": [], "error": host.error_message(pid)}
    return {
        "names": [[r.name, r.target, r.description] for r in registrations],
        "error": None,
    }


def plugin_problems(registry: Registry) -> list[Entry]:
    """Hook plugins that failed to load or register, as broken entries."""
    from .registry import Entry

    out = []
    plugin_id = discovery.plugin_id
    hooks = registry.index.get("hooks", {})
    for record in plugin_records(registry.index):
        pid = plugin_id(record)
        error = record.get("error") or (hooks.get(pid) or {}).get("error")
        if registry._host is not None and pid in registry._host.errors:
            error = registry._host.error_message(pid)
        if error:
            out.append(
                Entry(
                    record["name"],
                    record["dist"],
                    record["version"],
                    record["value"],
                    kind="plugin",
                    plugin=pid,
                    path=record["path"],
                    error=error,
                )
            )
    return out
