"""Named things plugins provide: matching, resolving, suggesting, and the allow/deny lists.

Interactions, policies and dataset builders are all named by plugins, and a
name may be claimed by two distributions. Everything that looks a name up does
it here, the same way (:func:`resolve`): an exact match on the name first, then
``distribution:name`` with the distribution compared after PEP 503
normalisation (:func:`normalize`, the one place it is written); an unknown
name gets a did-you-mean from the names that exist. A :class:`Contribution` is
one named thing (an interaction, a policy, a dataset builder) with the status
vocabulary (``ok``, ``broken``, ``conflict``, ``disabled``) and the one conflict
rule (:func:`mark_conflicts`): two distributions claiming one name are both
marked, never resolved by order.

The allow- and deny-lists decide which installed code may be imported at all.
``INTERACTIONS_PLUGINS`` (allow-list) and ``INTERACTIONS_DISABLE`` (deny-list)
take comma-separated identities: an interaction name, a qualified
``distribution:name``, a distribution name, a hook plugin's entry-point name,
or a dotted class path. An allow-list that is set but empty allows nothing;
the deny-list always wins. Installing a distribution is the act of trust, and
these lists let an operator withdraw it without uninstalling anything.

The project's own packages name things too: :func:`lazy_exports` is the one way a
package (``ray``, ``testing``) resolves each public name to the submodule that
defines it, importing that submodule only when the name is first used.
"""

from __future__ import annotations

import os

# ``typing`` is imported for type checkers only: this module is on the path of a
# warm ``interactions list``, where importing ``typing`` alone costs about a
# third of a bare interpreter start (docs/performance.md).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence
    from typing import Any, TypeVar

    from .errors import UnknownNameError

    T = TypeVar("T")
    C = TypeVar("C", bound="Contribution")

__all__ = [
    "ALLOW_VAR",
    "CORE_DISTRIBUTION",
    "DENY_VAR",
    "Contribution",
    "Selection",
    "close_matches",
    "find_named",
    "lazy_exports",
    "mark_conflicts",
    "normalize",
    "resolve",
    "suggest",
    "summarize",
    "unknown_message",
    "warn_unmatched",
]

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


# -- finding one name among many ------------------------------------------------


def find_named(items: Sequence[T], name: str) -> list[T]:
    """The items (with ``.name`` and ``.distribution``) that ``name`` designates."""
    matches = [item for item in items if getattr(item, "name", None) == name]
    if not matches and ":" in name:
        dist, _, short = name.partition(":")
        wanted = normalize(dist)
        matches = [
            i
            for i in items
            if getattr(i, "name", None) == short
            and normalize(str(getattr(i, "distribution", ""))) == wanted
        ]
    return matches


def close_matches(name: str, known: Iterable[str], n: int = 2, cutoff: float = 0.6) -> list[str]:
    """The names of ``known`` closest to ``name``, best first: the one did-you-mean."""
    import difflib

    names = sorted(set(known))
    # A ratio of at least ``cutoff`` needs lengths within that ratio of each other; and
    # difflib's cost grows with the name: a served client's name of 12 MB held the event
    # loop 3 s. A name far longer than every known one matches none: not compared.
    longest = max(map(len, names), default=0)
    if len(name) > 2 * longest + 16:
        return []
    return difflib.get_close_matches(name, names, n=n, cutoff=cutoff)


def suggest(
    name: str,
    known: Iterable[str],
    n: int = 2,
    cutoff: float = 0.6,
    render: Callable[[str], str] = repr,
) -> str:
    """``"; did you mean 'a' or 'b'?"`` for close matches of ``name``, else ``""``."""
    close = close_matches(name, known, n, cutoff)
    return f"; did you mean {' or '.join(render(c) for c in close)}?" if close else ""


#: Names sharing a ``prefix/`` are shown as one ``prefix/*`` item from this many on.
GROUP_FROM = 3


def summarize(names: Iterable[str], limit: int = 12) -> str:
    """A short list of names for an error message: ``gsm8k, rg/* (106 names), weather``.

    Suites (names sharing a ``prefix/``) collapse to one item with their count,
    so the names a user is likely to mean are not cut off by a hundred
    generated ones; past ``limit`` items the rest are counted.
    """
    unique = sorted(set(names))
    by_prefix: dict[str, int] = {}
    for name in unique:
        prefix, slash, _ = name.partition("/")
        if slash:
            by_prefix[prefix] = by_prefix.get(prefix, 0) + 1
    items: list[str] = []
    shown: set[str] = set()
    for name in unique:
        prefix, slash, _ = name.partition("/")
        if slash and by_prefix[prefix] >= GROUP_FROM:
            if prefix not in shown:
                shown.add(prefix)
                items.append(f"{prefix}/* ({by_prefix[prefix]} names)")
        else:
            items.append(name)
    if len(items) > limit:
        return ", ".join(items[:limit]) + f", ... and {len(items) - limit} more"
    return ", ".join(items)


# -- named contributions and resolving a name ---------------------------------------

CORE_DISTRIBUTION = "interactions-core"


class Contribution:
    """One named thing a distribution provides; subclasses add what their kind needs."""

    __slots__ = ("description", "distribution", "error", "kind", "name", "status", "target")

    #: The kind of thing, as messages name it ("interaction", "policy", ...), and its plural.
    noun = "contribution"
    plural = "contributions"
    #: The command that lists this kind, for messages.
    listing = "interactions list"
    #: The attributes :meth:`as_dict` lists, in this order (a listing's JSON row).
    listed: tuple[str, ...] = ("name", "distribution", "target", "kind", "status", "error")

    def __init__(
        self,
        name: str,
        distribution: str,
        target: str,
        kind: str,
        error: str | None = None,
        description: str | None = None,
    ) -> None:
        self.name = name
        self.distribution = distribution
        self.target = target
        self.kind = kind  # how it was contributed: entry-point, hook, builtin, memory
        self.error = error
        self.status = "broken" if error else "ok"
        self.description = description

    @property
    def qualified(self) -> str:
        """``distribution:name``, the name that stays unique when two claim one."""
        return f"{self.distribution}:{self.name}"

    @property
    def qualified_name(self) -> str:
        """:attr:`qualified`, under the key listings use for it."""
        return self.qualified

    @property
    def release(self) -> str:
        """``distribution version``, or the distribution alone for kinds without a version."""
        version = getattr(self, "version", None)
        return f"{self.distribution} {version}" if version else self.distribution

    def describe(self) -> str:
        """``'name' (distribution version, target)`` for messages."""
        return f"{self.name!r} ({self.release}, {self.target})"

    def claim(self) -> str:
        """``distribution version (target)``: one side of a conflict, for messages."""
        return f"{self.release} ({self.target})"

    def as_dict(self) -> dict[str, Any]:
        """The :attr:`listed` attributes, as ``interactions list --json`` and friends show them."""
        return {field: getattr(self, field) for field in self.listed}

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.qualified} {self.status}>"


def mark_conflicts(items: Iterable[Contribution], how: str) -> None:
    """Mark every item whose name another distribution also claims (disabled ones aside).

    ``how`` says how to pick one, e.g. ``"use a qualified name ({qualified})"``;
    ``{qualified}`` is replaced by the item's own qualified name.
    """
    by_name: dict[str, list[Contribution]] = {}
    for item in items:
        if item.status != "disabled":
            by_name.setdefault(item.name, []).append(item)
    for name, claims in by_name.items():
        if len({normalize(c.distribution) for c in claims}) < 2:
            continue
        for item in claims:
            others = ", ".join(c.qualified for c in claims if c is not item)
            item.status = "conflict"
            item.error = (
                f"name {name!r} is also provided by {others}; "
                f"{how.format(qualified=item.qualified)} or disable one"
            )


def resolve(contributions: Sequence[C], name: str, unknown: Callable[[], UnknownNameError]) -> C:
    """The one contribution ``name`` designates; ``unknown()`` is raised when none does.

    A qualified name designates one distribution's contribution, enabled or not;
    a plain one must designate exactly one usable contribution.
    """
    from .errors import ConflictError, DisabledError  # here: a listing never raises them

    matches = find_named(contributions, name)
    if not matches:
        raise unknown()
    found = matches[0]
    if found.name != name:  # qualified: exactly one distribution
        if found.status == "disabled":
            raise DisabledError(f"{found.noun} {found.describe()} is {found.error}")
        return found
    usable = [c for c in matches if c.status != "disabled"]
    if not usable:
        raise DisabledError(
            f"{found.noun} {found.describe()} is {found.error}; "
            "change INTERACTIONS_PLUGINS / INTERACTIONS_DISABLE to use it"
        )
    if len({normalize(c.distribution) for c in usable}) > 1:
        claims = "; ".join(c.claim() for c in usable)
        choices = " or ".join(repr(c.qualified) for c in usable)
        # The core itself provides built-in policies: suggest disabling a plugin, never it.
        plugins = [c.distribution for c in usable if normalize(c.distribution) != CORE_DISTRIBUTION]
        raise ConflictError(
            f"{usable[0].noun} name {name!r} is registered by {len(usable)} distributions: "
            f"{claims}. Write the qualified name {choices} in the config or on the "
            f"command line, or uninstall or disable one (INTERACTIONS_DISABLE="
            f"{(plugins or [usable[-1].distribution])[-1]})."
        )
    return usable[0]


def unknown_message(
    kind: type[Contribution], name: str, items: Sequence[Contribution], notes: Sequence[str] = ()
) -> str:
    """Why ``name`` names no ``kind``: a did-you-mean, what is installed, and what is hidden.

    One wording for every kind; ``notes`` add what only one kind knows (hook
    plugins never asked, or failed).
    """
    known = sorted({c.name for c in items if c.status != "disabled"})
    message = f"unknown {kind.noun} {name!r}{suggest(name, known, n=3) or '.'}"
    if known:
        message += f" Installed ({len(known)}): {summarize(known)}."
    disabled = sum(1 for c in items if c.status == "disabled")
    if disabled:
        what = f"{kind.noun} is" if disabled == 1 else f"{kind.plural} are"
        message += f" {disabled} installed {what} disabled by {ALLOW_VAR} / {DENY_VAR}."
    message += "".join(f" {note}" for note in notes)
    if not known and not disabled and not notes:
        message += f" No {kind.plural} are installed."
    return message + f" Install the plugin that provides it, or see '{kind.listing}'."


# -- a package's public names, imported on first use --------------------------------


def lazy_exports(package: str, sources: Mapping[str, str]) -> Callable[[str], Any]:
    """The PEP 562 ``__getattr__`` of ``package``, which exports the names of ``sources``.

    ``sources`` maps each public name to the submodule (relative to ``package``)
    that defines it; that submodule is imported the first time the name is read.
    Packages whose parts need an optional stack (``ray``) or are loaded by another
    tool on every start (``testing``, through pytest's plugin) export this way, so
    importing the package imports none of its parts, nor what they import.
    """

    def __getattr__(name: str) -> Any:
        module = sources.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        import importlib  # here, not at the top: it imports ``warnings``

        return getattr(importlib.import_module(f".{module}", package), name)

    return __getattr__


# -- the allow/deny lists ---------------------------------------------------------


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

    def __init__(
        self, allow: frozenset[str] | None = None, deny: frozenset[str] = frozenset()
    ) -> None:
        self.allow = allow
        self.deny = deny

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Selection:
        env = os.environ if environ is None else environ
        allow_raw = env.get(ALLOW_VAR)
        allow = None if allow_raw is None else _parse(allow_raw)
        return cls(allow, _parse(env.get(DENY_VAR, "")))

    @property
    def key(self) -> tuple[object, ...]:
        """A hashable summary, for caching things computed under this selection."""
        return (None if self.allow is None else tuple(sorted(self.allow)), tuple(sorted(self.deny)))

    @property
    def active(self) -> bool:
        """Whether either list is set."""
        return self.allow is not None or bool(self.deny)

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


def warn_unmatched(records: Iterable[Mapping[str, Any]], identities: Iterable[str]) -> None:
    """Warn about allow/deny names that match nothing (a typo would otherwise be silent).

    ``records`` are the index's entry-point records, ``identities`` every name,
    qualified name and plugin id the catalog knows.
    """
    from .errors import SelectionWarning, warn

    known = {normalize(i) for i in identities if i}
    tops: set[str] = set()
    for record in records:
        for identity in (record.get("name"), record.get("dist")):
            if identity:
                known.add(normalize(identity))
        known.add(normalize(f"{record.get('dist')}:{record.get('name')}"))
        tops.add(str(record.get("value", "")).partition(":")[0].split(".")[0].strip())
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
