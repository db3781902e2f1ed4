"""Allow- and deny-lists: which installed code may be imported at all.

``INTERACTIONS_PLUGINS`` (allow-list) and ``INTERACTIONS_DISABLE`` (deny-list)
take comma-separated identities: an interaction name, a qualified
``distribution:name``, a distribution name, a hook plugin's entry-point name, or a
dotted class path. An allow-list that is set but empty allows nothing; the
deny-list always wins. Installing a distribution is the act of trust, and these
lists let an operator withdraw it without uninstalling anything.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["ALLOW_VAR", "DENY_VAR", "Selection", "normalize", "warn_unmatched"]

ALLOW_VAR = "INTERACTIONS_PLUGINS"
DENY_VAR = "INTERACTIONS_DISABLE"


def normalize(name: str) -> str:
    """PEP 503 normalisation, so ``Interactions_GSM8K`` matches ``interactions-gsm8k``."""
    out = name.strip().lower()
    for ch in "_.":
        out = out.replace(ch, "-")
    while "--" in out:
        out = out.replace("--", "-")
    return out


def _parse(value: str) -> frozenset[str]:
    items = set()
    for raw in value.split(","):
        if raw.strip():
            items.add(raw.strip())
            items.add(normalize(raw))
    return frozenset(items)


class Selection:
    """The allow/deny decision for a set of identities."""

    __slots__ = ("allow", "deny")

    def __init__(self, allow: frozenset[str] | None = None, deny: frozenset[str] = frozenset()):
        self.allow = allow
        self.deny = deny

    @classmethod
    def from_env(cls, environ: os._Environ[str] | dict[str, str] | None = None) -> Selection:
        env = os.environ if environ is None else environ
        allow_raw = env.get(ALLOW_VAR)
        allow = None if allow_raw is None else _parse(allow_raw)
        return cls(allow, _parse(env.get(DENY_VAR, "")))

    @property
    def key(self) -> tuple[object, ...]:
        """A hashable summary, for caching things computed under this selection."""
        return (None if self.allow is None else tuple(sorted(self.allow)), tuple(sorted(self.deny)))

    def _hit(self, items: frozenset[str], identities: tuple[str, ...]) -> bool:
        if not items:  # no list set, the usual case: nothing to normalise for every entry
            return False
        return any(i in items or normalize(i) in items for i in identities if i)

    def excluded(self, *identities: str) -> str | None:
        """Why something known by ``identities`` may not be loaded, or ``None`` if it may."""
        if self._hit(self.deny, identities):
            return f"disabled by {DENY_VAR}"
        if self.allow is not None and not self._hit(self.allow, identities):
            if not self.allow:
                return f"disabled: {ALLOW_VAR} is set but empty, which allows nothing"
            return f"not in {ALLOW_VAR}"
        return None

    def plugin_excluded(self, identities: tuple[str, ...], provides: tuple[str, ...]) -> str | None:
        """Like :meth:`excluded`, for a hook plugin that provides the names ``provides``.

        Allow-listing one interaction a hook plugin registers (``rg/countdown``)
        allows the plugin itself to be loaded; denying one of its names does not
        deny the whole plugin (the name itself stays disabled).
        """
        reason = self.excluded(*identities)
        if reason is None or self._hit(self.deny, identities):
            return reason
        return None if self.allow and self._hit(self.allow, provides) else reason


def warn_unmatched(index: dict[str, Any], entries: list[Any]) -> None:
    """Warn about allow/deny names that match nothing (a typo would otherwise be silent)."""

    from ._naming import suggest
    from .errors import SelectionWarning, warn

    known: set[str] = set()
    tops: set[str] = set()
    for record in index.get("entries", []):
        for identity in (record.get("name"), record.get("dist")):
            if identity:
                known.add(normalize(identity))
        known.add(normalize(f"{record.get('dist')}:{record.get('name')}"))
        tops.add(str(record.get("value", "")).partition(":")[0].split(".")[0].strip())
    for entry in entries:
        known.update(normalize(i) for i in (entry.name, entry.qualified, entry.plugin or ""))
    for variable in (ALLOW_VAR, DENY_VAR):
        for raw in os.environ.get(variable, "").split(","):
            name = raw.strip()
            if not name or normalize(name) in known or "." in name or name in tops:
                continue
            if _importable_top_level(name):
                continue  # a package named for its dotted class paths
            hint = suggest(normalize(name), known, n=1)
            warn(
                f"{variable} names {name!r}, which matches no installed interaction, "
                f"plugin, policy or distribution{hint}",
                SelectionWarning,
                stacklevel=2,
            )


def _importable_top_level(name: str) -> bool:
    """Whether ``name`` is a top-level module on ``sys.path`` (found, never imported)."""
    import importlib.util

    try:
        return name.isidentifier() and importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False
