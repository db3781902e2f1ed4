"""Which named thing a name means, and what to say when it means none or several.

One resolver serves interactions, policies and dataset builders
(:func:`resolve`). A name on the command line or in a config is plain
(``gsm8k``) or qualified (``interactions-gsm8k:gsm8k``). A qualified name
designates one distribution's contribution, enabled or not; a plain one must
designate exactly one usable contribution: none is the kind's
:class:`~interactions_core.errors.UnknownNameError` (built by the caller, which
knows what to list and suggest), only disabled ones a
:class:`~interactions_core.errors.DisabledError`, several distributions a
:class:`~interactions_core.errors.ConflictError` naming the qualified names to
write instead. :meth:`Registry.resolve <interactions_core.registry.Registry.resolve>`
is the public face for interactions.
"""

from __future__ import annotations

from . import _discovery as discovery
from ._hook_index import plugin_records
from ._naming import find_named, suggest, summarize
from ._selection import normalize
from .errors import ConflictError, DisabledError, UnknownInteractionError, UnknownNameError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import TypeVar

    from ._contribution import Contribution
    from .registry import Entry, Registry

    C = TypeVar("C", bound=Contribution)

__all__ = ["resolve", "resolve_entry"]


def resolve(contributions: Sequence[C], name: str, unknown: Callable[[], UnknownNameError]) -> C:
    """The one contribution ``name`` designates; ``unknown()`` is raised when none does."""
    matches = find_named(contributions, name)
    if not matches:
        raise unknown()
    if matches[0].name != name:  # qualified: exactly one distribution
        found = matches[0]
        if found.status == "disabled":
            raise DisabledError(f"{found.noun} {found.describe()} is {found.error}")
        return found
    usable = [c for c in matches if c.status != "disabled"]
    if not usable:
        found = matches[0]
        raise DisabledError(
            f"{found.noun} {found.describe()} is {found.error}; "
            "change INTERACTIONS_PLUGINS / INTERACTIONS_DISABLE to use it"
        )
    if len({normalize(c.distribution) for c in usable}) > 1:
        raise _conflict(name, usable)
    return usable[0]


def resolve_entry(registry: Registry, name: str) -> Entry:
    """The interaction entry ``name`` designates; raises a teaching error when there is none."""
    return resolve(
        registry.entries(), name, lambda: UnknownInteractionError(unknown_message(registry, name))
    )


def _conflict(name: str, usable: Sequence[Contribution]) -> ConflictError:
    claims = "; ".join(c.claim() for c in usable)
    choices = " or ".join(repr(c.qualified) for c in usable)
    # The core itself provides built-in policies: suggest disabling a plugin, never it.
    plugins = [c.distribution for c in usable if normalize(c.distribution) != "interactions-core"]
    return ConflictError(
        f"{usable[0].noun} name {name!r} is registered by {len(usable)} distributions: "
        f"{claims}. Write the qualified name {choices} in the config or on the "
        f"command line, or uninstall or disable one (INTERACTIONS_DISABLE="
        f"{(plugins or [usable[-1].distribution])[-1]})."
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
