"""Which interaction a name means, and what to say when it means none or several.

A name on the command line or in a config is plain (``gsm8k``) or qualified
(``interactions-gsm8k:gsm8k``). A qualified name designates one distribution's
entry, enabled or not; a plain one must designate exactly one usable entry:
none is an :class:`~interactions_core.errors.UnknownInteractionError` with a
did-you-mean and what is installed (and why some names may be missing), only
disabled ones a :class:`~interactions_core.errors.DisabledError`, several
distributions a :class:`~interactions_core.errors.ConflictError` naming the
qualified names to write instead. :meth:`Registry.resolve
<interactions_core.registry.Registry.resolve>` is the public face.
"""

from __future__ import annotations

from . import _discovery as discovery
from ._hook_index import plugin_records
from ._naming import find_named, suggest, summarize
from .errors import ConflictError, DisabledError, UnknownInteractionError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .registry import Entry, Registry

__all__ = ["resolve_entry"]


def resolve_entry(registry: Registry, name: str) -> Entry:
    """The entry ``name`` designates; raises a teaching error when there is none."""
    matches = find_named(registry.entries(), name)
    if matches and matches[0].name != name:  # qualified: exactly one distribution
        entry = matches[0]
        if entry.status == "disabled":
            raise DisabledError(f"interaction {entry.describe()} is {entry.error}")
        return entry
    if not matches:
        raise UnknownInteractionError(unknown_message(registry, name))
    usable = [e for e in matches if e.status != "disabled"]
    if not usable:
        entry = matches[0]
        raise DisabledError(
            f"interaction {entry.describe()} is {entry.error}; "
            "change INTERACTIONS_PLUGINS / INTERACTIONS_DISABLE to use it"
        )
    if len(usable) > 1:
        raise _conflict(name, usable)
    return usable[0]


def _conflict(name: str, usable: list[Entry]) -> ConflictError:
    claims = "; ".join(
        f"{e.distribution} {e.version} ({e.target})".replace("  ", " ") for e in usable
    )
    choices = " or ".join(repr(e.qualified) for e in usable)
    return ConflictError(
        f"interaction name {name!r} is registered by {len(usable)} distributions: "
        f"{claims}. Write the qualified name {choices} in the config or on the "
        f"command line, or uninstall or disable one (INTERACTIONS_DISABLE="
        f"{usable[-1].distribution})."
    )


def unknown_message(registry: Registry, name: str) -> str:
    """Why ``name`` is unknown: a did-you-mean, what is installed, and what is hidden."""
    entries = registry.entries()
    known = sorted({e.name for e in entries if e.status != "disabled"})
    message = f"unknown interaction {name!r}{suggest(name, known, n=3) or '.'}"
    if known:
        message += f" Installed ({len(known)}): {summarize(known)}."
    disabled = sum(1 for e in entries if e.status == "disabled")
    hooks = registry.index.get("hooks", {})
    unconsulted = [
        r["dist"] for r in plugin_records(registry.index) if discovery.plugin_id(r) not in hooks
    ]
    if disabled:
        message += (
            f" {disabled} installed interaction{'s are' if disabled != 1 else ' is'} "
            "disabled by INTERACTIONS_PLUGINS / INTERACTIONS_DISABLE."
        )
    if unconsulted:
        message += (
            f" Hook plugins not consulted because of the allow/deny lists: "
            f"{', '.join(sorted(set(unconsulted)))} (allow-list the distribution to use "
            "the names it registers)."
        )
    if not known and not disabled and not unconsulted:
        message += " No interactions are installed."
    return message + " Install the plugin that provides it, or see 'interactions list'."
