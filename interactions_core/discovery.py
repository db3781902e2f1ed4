"""Discovery: what is installed, read from package metadata, never by importing it.

:func:`load_index` returns the index of entry points in the groups the core
knows (interaction classes, hook plugins and policies). On the warm path it comes from the
on-disk cache (:mod:`interactions_core._cache`) without importing
``importlib.metadata``; on the cold path it is one metadata scan, then written
back.

Each record is a plain dict (cheap to cache, cheap to read):
``group``, ``name``, ``value`` (``module:attr``), ``dist``, ``version``, ``path``
(where the metadata lives) and ``error`` (``None`` unless the metadata itself is
unusable: such an entry is listed as broken, the scan goes on).

The same distribution found twice on ``sys.path`` (a ``lib64`` symlink, an
editable install next to a regular one) is one distribution: the first copy on
``sys.path`` wins, exactly as it does for imports.
"""

from __future__ import annotations

from . import _cache

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re
    from collections.abc import Callable

__all__ = [
    "GROUPS",
    "HOOK_GROUP",
    "INTERACTIONS_GROUP",
    "PLUGINS_GROUP",
    "POLICIES_GROUP",
    "load_index",
    "plugin_id",
    "save_hooks",
    "scan",
]

INTERACTIONS_GROUP = "interactions_core.interactions"
PLUGINS_GROUP = "interactions_core.plugins"
#: Policies (the model side of an episode) are discovered the same way.
POLICIES_GROUP = "interactions_core.policies"
GROUPS = (INTERACTIONS_GROUP, PLUGINS_GROUP, POLICIES_GROUP)
#: Pseudo-group of interactions contributed through the ``register_interactions`` hook.
HOOK_GROUP = "hook"

_VALUE_PATTERN = r"^\s*[A-Za-z_][\w.]*\s*(:\s*[A-Za-z_][\w.]*\s*)?$"


def _header_fields(text: str) -> tuple[str, str] | None:
    """``Name`` and ``Version`` from a core-metadata header, or ``None`` if unsure.

    Reads only the header lines (up to the first blank line) and only the two
    fields listing needs, with the email parser's rules for them: field names are
    case-insensitive, the first occurrence wins, leading blanks of a value are
    dropped. Anything unusual (a missing field, a folded value) answers ``None``
    so the caller falls back to the full parser.
    """
    found: dict[str, str] = {}
    lines = text.split("\n\n", 1)[0].splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            break
        field, colon, value = line.partition(":")
        key = field.lower()
        if colon and key in ("name", "version") and key not in found:
            if i + 1 < len(lines) and lines[i + 1][:1] in (" ", "\t"):
                return None  # a folded (multi-line) value
            found[key] = value.lstrip(" \t")
    if "name" not in found or "version" not in found:
        return None
    return found["name"], found["version"]


def _name_version(dist: object) -> tuple[str, str]:
    """A distribution's ``Name`` and ``Version``.

    ``dist.metadata`` imports the email package and parses the whole file,
    long description included, which costs more than the rest of a cold listing;
    reading the two header fields directly is enough, with ``dist.metadata`` as
    the fallback for anything this cannot read with certainty.
    """
    read_text = getattr(dist, "read_text", None)
    if read_text is not None:
        try:
            text = read_text("METADATA") or read_text("PKG-INFO")
        except Exception:
            text = None
        if isinstance(text, str):
            fields = _header_fields(text)
            if fields is not None:
                return fields
    meta = dist.metadata  # type: ignore[attr-defined]
    return meta["Name"] or "", meta["Version"] or ""


def _record(group: str, ep: object, value_re: re.Pattern[str]) -> dict:
    name = getattr(ep, "name", "")
    value = getattr(ep, "value", "")
    dist = getattr(ep, "dist", None)
    error = None
    dist_name, version, path = "", "", ""
    try:
        if dist is None:
            raise LookupError("entry point has no distribution")
        dist_name, version = _name_version(dist)
        path = str(getattr(dist, "_path", "") or "")
        if not dist_name:
            raise LookupError("distribution metadata has no Name")
    except Exception as exc:  # unreadable metadata: list it as broken, keep going
        error = f"unreadable distribution metadata: {exc.__class__.__name__}: {exc}"
    if error is None:
        if not value_re.match(value):
            error = f"malformed entry point value {value!r}: expected 'module:attribute'"
        elif group != PLUGINS_GROUP and ":" not in value:
            error = f"entry point value {value!r} names a module; expected 'module:Class'"
        elif group != PLUGINS_GROUP and (":" in name or not name.strip()):
            error = f"invalid interaction name {name!r}: names may not be empty or contain ':'"
    return {
        "group": group,
        "name": name,
        "value": value.replace(" ", ""),
        "dist": dist_name,
        "version": version,
        "path": path,
        "error": error,
    }


def plugin_id(record: dict) -> str:
    """The identity of a hook plugin's record: ``distribution:entry-point-name``.

    The same formula as :func:`interactions_core.plugins.plugin_id`, kept here so
    that listing (which only reads records) never imports pluggy.
    """
    return f"{record['dist']}:{record['name']}"


def scan() -> list[dict]:
    """Scan installed metadata for the core's entry-point groups (the cold path)."""
    import re
    from importlib.metadata import entry_points

    value_re = re.compile(_VALUE_PATTERN)
    everything = entry_points()
    records = []
    for group in GROUPS:
        for ep in everything.select(group=group):
            records.append(_record(group, ep, value_re))
    return records


def load_index(use_cache: bool = True, complete: Callable[[dict], None] | None = None) -> dict:
    """The index payload: ``{"entries": [...], "hooks": {...}}``.

    ``hooks`` maps a hook plugin's id to the interactions it registered. On a
    miss, the metadata is scanned and ``complete`` (the registry's hook
    collection) fills in what it can before the index is stored; both run under
    the cache's build lock, so concurrent cold starts do the work once.
    """
    key = _cache.current_key()
    if not use_cache:
        payload: dict = {"entries": scan(), "hooks": {}}
        if complete is not None:
            complete(payload)
        payload["_key"] = key
        return payload
    cached = _cache.load(key)
    if cached is None:
        with _cache.BuildLock():
            cached = _cache.load(key)  # built by another process while we waited?
            if cached is None:
                cached = {"entries": scan(), "hooks": {}}
                if complete is not None:
                    complete(cached)
                _cache.store(key, cached)
    cached["_key"] = key
    return cached


def save_hooks(index: dict) -> None:
    """Persist hook registrations recorded in ``index`` (best effort)."""
    key = index.get("_key")
    if key is None:
        return
    payload = {k: v for k, v in index.items() if not k.startswith("_")}
    _cache.store(key, payload)
