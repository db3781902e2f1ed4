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

Hook plugins are the expensive part of a cold index: learning what one
registers means importing it (the reasoning-gym suite imports reasoning-gym).
What it registered is therefore remembered apart from the index, under the
plugin's :func:`hook_key` (its own distribution and the versions of what it
requires): installing an unrelated package rebuilds the index from metadata
but reuses those results, and a hook plugin is asked again only when its own
distribution, or one it depends on, changes.
"""

from __future__ import annotations

import os

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
    "hook_key",
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


def _metadata_text(dist: object) -> str | None:
    """The raw ``METADATA`` (or ``PKG-INFO``) of ``dist``, ``None`` when unreadable."""
    read_text = getattr(dist, "read_text", None)
    if read_text is None:
        return None
    try:
        text = read_text("METADATA") or read_text("PKG-INFO")
    except Exception:
        return None
    return text if isinstance(text, str) else None


def _name_version(dist: object, text: str | None) -> tuple[str, str]:
    """A distribution's ``Name`` and ``Version``.

    ``dist.metadata`` imports the email package and parses the whole file,
    long description included, which costs more than the rest of a cold listing;
    reading the two header fields directly is enough, with ``dist.metadata`` as
    the fallback for anything this cannot read with certainty.
    """
    if text is not None:
        fields = _header_fields(text)
        if fields is not None:
            return fields
    meta = dist.metadata  # type: ignore[attr-defined]
    return meta["Name"] or "", meta["Version"] or ""


def _requirements(text: str | None) -> list[str]:
    """Names of the distributions a hook plugin requires (``Requires-Dist``, extras left out).

    Only the name matters here (what it resolves to is looked up when the hook
    key is built), so the line is not parsed further than its first word.
    """
    names = []
    for line in (text or "").split("\n\n", 1)[0].splitlines():
        field, colon, value = line.partition(":")
        if not colon or field.strip().lower() != "requires-dist":
            continue
        requirement, _, marker = value.partition(";")
        if "extra" in marker:
            continue
        name = requirement.strip()
        for i, char in enumerate(name):
            if not (char.isalnum() or char in "._-"):
                name = name[:i]
                break
        if name:
            names.append(name)
    return names


def _record(group: str, ep: object, value_re: re.Pattern[str]) -> dict:
    name = getattr(ep, "name", "")
    value = getattr(ep, "value", "")
    dist = getattr(ep, "dist", None)
    error = None
    dist_name, version, path, text = "", "", "", None
    try:
        if dist is None:
            raise LookupError("entry point has no distribution")
        text = _metadata_text(dist)
        dist_name, version = _name_version(dist, text)
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
    record = {
        "group": group,
        "name": name,
        "value": value.replace(" ", ""),
        "dist": dist_name,
        "version": version,
        "path": path,
        "error": error,
    }
    if group == PLUGINS_GROUP and error is None:
        record["hook_key"] = hook_key(record, _requirements(text))
    return record


def _installed_version(name: str) -> str | None:
    """The version of the installed distribution ``name``, read like :func:`_name_version`."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        dist = distribution(name)
        return _name_version(dist, _metadata_text(dist))[1]
    except PackageNotFoundError:
        return None
    except Exception:  # unreadable metadata: a version of its own
        return "?"


def hook_key(record: dict, requires: list[str]) -> tuple | None:
    """What a hook plugin's registrations depend on, or ``None`` when that is unknowable.

    The plugin's identity, where its metadata lives, its version and that
    folder's mtime (a reinstall or an upgrade changes one of them), and the
    installed version of each distribution it requires (a suite whose names
    come from a dependency, or a core upgrade, is asked again). A plugin
    changed in place without any of these changing (an editable install whose
    code was edited) needs ``interactions cache clear``.
    """
    path = record["path"]
    if not path:
        return None
    try:
        mtime = os.stat(path).st_mtime_ns
    except OSError:
        return None
    deps = tuple((name, _installed_version(name)) for name in requires)
    return (plugin_id(record), path, record["version"], mtime, deps)


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
        payload = _build(complete, known=None)
        payload["_key"] = key
        return payload
    cached = _cache.load(key)
    if cached is None:
        with _cache.BuildLock():
            cached = _cache.load(key)  # built by another process while we waited?
            if cached is None:
                cached = _build(complete, known=_cache.load_hooks())
                _cache.store(key, cached)
    cached["_key"] = key
    return cached


def _build(complete: Callable[[dict], None] | None, known: dict | None) -> dict:
    """Scan metadata, reuse what hook plugins registered before, let ``complete`` add the rest."""
    payload: dict = {"entries": scan(), "hooks": {}}
    if known:
        for record in payload["entries"]:
            result = known.get(record.get("hook_key"))
            if result is not None and not result.get("error"):
                payload["hooks"][plugin_id(record)] = result
    if complete is not None:
        complete(payload)
    if known is not None:
        _remember_hooks(payload, known)
    return payload


def _remember_hooks(payload: dict, known: dict) -> None:
    """Store the hook results of ``payload`` under their keys (best effort).

    Results for other distributions are kept while their folder exists (another
    ``sys.path`` of the same interpreter may use them); a result whose folder
    now holds a newer key is dropped. When two processes write at once the last
    write wins: what the other learned is learned again later, never wrong.
    """
    results: dict = {}
    current_paths = set()
    for record in payload["entries"]:
        key = record.get("hook_key")
        if key is None:
            continue
        current_paths.add(key[1])
        result = payload["hooks"].get(plugin_id(record))
        # A failure is not kept: what fixes it (a module installed that the plugin
        # does not declare) may not change the key, so it is retried on a rebuild.
        if result is not None and not result.get("error"):
            results[key] = result
    for key, result in known.items():
        if key not in results and key[1] not in current_paths and os.path.exists(key[1]):
            results[key] = result
    if results != known:
        _cache.store_hooks(results)


def save_hooks(index: dict) -> None:
    """Persist hook registrations recorded in ``index`` (best effort)."""
    key = index.get("_key")
    if key is None:
        return
    payload = {k: v for k, v in index.items() if not k.startswith("_")}
    _cache.store(key, payload)
    _remember_hooks(payload, _cache.load_hooks())
