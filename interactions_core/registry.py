"""The registry: names -> interaction classes, resolved from the index on demand.

A :class:`Registry` is built from the discovery index (metadata only) and the
allow/deny :class:`~interactions_core._selection.Selection`. It answers three
questions, in increasing cost:

1. *What is there?* :meth:`Registry.entries` — from metadata and the cached hook
   registrations; imports nothing on the warm path.
2. *Which one is meant?* :meth:`Registry.resolve` — plain or qualified
   (``distribution:name``) names; unknown names get a did-you-mean, names claimed
   by two distributions are a :class:`~interactions_core.errors.ConflictError`,
   disabled ones a :class:`~interactions_core.errors.DisabledError`.
3. *Give me the class.* :meth:`Registry.load` — imports the module the first time,
   validates the class against the spec, and remembers success or the failure
   (a broken plugin stays broken with its original exception as the cause).

The registry holds the entries and answers the first question itself; the rules
of the second are in ``_resolution.py`` and the importing in ``_class_loading.py``.

:meth:`Registry.from_classes` builds a registry from in-memory classes, so plugin
authors can test without installing anything.
"""

from __future__ import annotations

import os
import sys

from . import _discovery as discovery
from ._contribution import Contribution, mark_conflicts
from ._hook_index import hook_entries
from ._selection import Selection

TYPE_CHECKING = False
if TYPE_CHECKING:  # ``typing`` is not imported at run time: this module is on the warm path
    from typing import Any

__all__ = [
    "Entry",
    "Registry",
    "get_registry",
    "reset_registry",
]

MEMORY_DISTRIBUTION = "<memory>"


class Entry(Contribution):
    """One interaction the registry knows about, whether or not it loads."""

    __slots__ = ("_cls", "defaults", "path", "plugin", "version")

    noun = "interaction"
    listed = (
        "name",
        "distribution",
        "version",
        "target",
        "status",
        "error",
        "kind",
        "qualified_name",
    )

    def __init__(
        self,
        name: str,
        distribution: str,
        version: str,
        target: str,
        kind: str = "entry-point",
        plugin: str | None = None,
        path: str = "",
        error: str | None = None,
        defaults: dict[str, Any] | None = None,
        description: str | None = None,
        cls: Any = None,
    ) -> None:
        super().__init__(name, distribution, target, kind, error, description)
        self.version = version
        self.plugin = plugin
        self.path = path
        self.defaults = defaults or {}
        self._cls = cls


class Registry:
    """Interactions by name; see the module docstring."""

    def __init__(
        self,
        index: dict,
        selection: Selection | None = None,
        *,
        save_index: bool = True,
    ) -> None:
        self.index = index
        self.selection = selection if selection is not None else Selection.from_env()
        self._save_index = save_index
        self._host: Any = None  # PluginHost, created only when a hook plugin is consulted
        self._entries: list[Entry] | None = None
        self._memory: list[Entry] = []

    # -- construction --------------------------------------------------------

    @classmethod
    def from_environment(cls, use_cache: bool = True) -> Registry:
        """The registry of what is installed for this interpreter."""
        hosts: list[Any] = []

        def complete(payload: dict) -> None:
            # Learn what the allowed hook plugins register while the index is built.
            builder = cls(payload, save_index=False)
            hook_entries(builder)
            hosts.append(builder._host)

        registry = cls(discovery.load_index(use_cache, complete), save_index=use_cache)
        if hosts:
            registry._host = hosts[0]  # plugins already imported: reuse them
        return registry

    @classmethod
    def from_classes(
        cls,
        classes: dict[str, Any],
        *,
        distribution: str = MEMORY_DISTRIBUTION,
        selection: Selection | None = None,
    ) -> Registry:
        """A registry of in-memory classes (for tests): ``{"name": InteractionClass}``."""
        registry = cls({"entries": [], "hooks": {}}, selection or Selection(), save_index=False)
        for name, klass in classes.items():
            registry.add(name, klass, distribution=distribution)
        return registry

    def add(self, name: str, klass: Any, *, distribution: str = MEMORY_DISTRIBUTION) -> Entry:
        """Register a class in memory under ``name`` (it takes part in conflicts)."""
        target = f"{getattr(klass, '__module__', '?')}:{getattr(klass, '__qualname__', klass)}"
        entry = Entry(name, distribution, "", target, kind="memory", cls=klass)
        self._memory.append(entry)
        self._entries = None
        return entry

    # -- hook plugins --------------------------------------------------------

    @property
    def plugin_host(self) -> Any:
        """The :class:`~interactions_core.plugins.PluginHost` (imports pluggy on first use)."""
        if self._host is None:
            from .plugins import PluginHost

            provides = {
                pid: tuple(n[0] for n in known.get("names", []))
                for pid, known in self.index.get("hooks", {}).items()
            }
            self._host = PluginHost(self.index["entries"], self.selection, provides)
        return self._host

    def plugin_problems(self) -> list[Entry]:
        """Hook plugins that failed to load or register, as broken entries."""
        from ._hook_index import plugin_problems

        self.entries()  # collects (or reads cached) registrations, recording failures
        return plugin_problems(self)

    # -- what is there -------------------------------------------------------

    def entries(self) -> list[Entry]:
        """Every known interaction with its status, sorted by name then distribution."""
        if self._entries is not None:
            return self._entries
        entries = [
            Entry(r["name"], r["dist"], r["version"], r["value"], path=r["path"], error=r["error"])
            for r in self.index["entries"]
            if r["group"] == discovery.INTERACTIONS_GROUP
        ]
        entries.extend(hook_entries(self))
        entries.extend(self._memory)
        for entry in entries:
            reason = self.selection.excluded(
                entry.name, entry.qualified, entry.distribution, entry.plugin or ""
            )
            if reason is not None:
                entry.status, entry.error = "disabled", reason
        mark_conflicts(entries, "use a qualified name ({qualified})")
        entries.sort(key=lambda e: (e.name, e.distribution))
        self._entries = entries
        if self.selection.allow or self.selection.deny:
            from ._selection import warn_unmatched

            warn_unmatched(self.index, entries)
        return entries

    def names(self) -> list[str]:
        """Names that can be loaded as they are (ok, or broken and not yet known to be)."""
        return sorted({e.name for e in self.entries() if e.status in ("ok", "broken")})

    # -- which one is meant ---------------------------------------------------

    def resolve(self, name: str) -> Entry:
        """The entry ``name`` designates; raises a teaching error when there is none.

        ``name`` is plain or qualified (``distribution:name``). An unknown name is
        an :class:`~interactions_core.errors.UnknownInteractionError` with a
        did-you-mean, a plain name claimed by two distributions a
        :class:`~interactions_core.errors.ConflictError`, a disabled one a
        :class:`~interactions_core.errors.DisabledError`.
        """
        from ._resolution import resolve_entry

        return resolve_entry(self, name)

    # -- give me the class ----------------------------------------------------

    def load(self, name_or_entry: str | Entry) -> Any:
        """The validated class for a name or entry (imported on first use)."""
        entry = self.resolve(name_or_entry) if isinstance(name_or_entry, str) else name_or_entry
        if entry._cls is not None:
            return entry._cls
        from ._class_loading import load_entry

        return load_entry(self, entry)

    def check(self, import_timeout: float | None = None) -> list[Entry]:
        """Import and validate every usable entry; return all entries with updated status.

        Each import is waited for at most ``import_timeout`` seconds (default:
        ``$INTERACTIONS_IMPORT_TIMEOUT``, else 60): a plugin that hangs while
        being imported is reported as broken and the check goes on.
        """
        from ._class_loading import check_entries

        return check_entries(self, import_timeout)

    def create(self, name: str, config: dict[str, Any] | None = None) -> Any:
        """Instantiate the interaction ``name`` with ``config`` (``name`` added if absent)."""
        entry = self.resolve(name)
        klass = self.load(entry)
        options = {**entry.defaults, **(config or {})}
        options.setdefault("name", name)
        return klass(options)


_current: tuple[tuple[object, ...], Registry] | None = None


def get_registry() -> Registry:
    """The process-wide registry, rebuilt when ``sys.path`` or the selection changes."""
    global _current
    key = (tuple(sys.path), Selection.from_env().key, os.environ.get("INTERACTIONS_NO_CACHE"))
    if _current is None or _current[0] != key:
        _current = (key, Registry.from_environment())
    return _current[1]


def reset_registry() -> None:
    """Forget the process-wide registry (after installing something in-process)."""
    global _current
    _current = None
