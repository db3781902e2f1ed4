"""Discovery: what is installed, read from package metadata and kept in an on-disk index.

:func:`load_index` returns the index of entry points in the core's groups
(interaction classes, hook plugins, policies). Importing ``importlib.metadata``
alone costs several times a bare interpreter start, so the index is cached as
JSON under ``$XDG_CACHE_HOME/interactions-core/``: the warm path reads it,
importing no plugin code and not ``importlib.metadata``; the cold path scans
metadata once and writes it back. ``INTERACTIONS_NO_CACHE=1`` turns it off.

The cache is keyed by the interpreter, ``sys.path`` and the state of its
directories (an install adds or removes a ``*.dist-info`` folder, which changes
its directory's mtime). The file name is a CRC-32 of the key (``zlib``: a
checksum is all a file name needs, and it spares the warm path OpenSSL's
``hashlib``); the full key is stored inside and compared. Writes are atomic;
anything unreadable is ignored, never trusted; an unwritable folder degrades to
no cache with one warning.

Each record is a plain dict: ``group``, ``name``, ``value`` (``module:attr``),
``dist``, ``version``, ``path`` (of the metadata) and ``error`` (``None`` unless the
metadata is unusable). The same distribution twice on ``sys.path`` is one: the first.

Hook plugins are the expensive part of a cold index: learning what one registers
means importing it. So what it registered is remembered apart from the index,
keyed by its distribution and the versions of what it requires (:func:`hook_key`),
and so is what was read of each distribution's metadata: an unrelated install
rebuilds the index from entry points but reuses both.
"""

from __future__ import annotations

import json
import os
import sys
import zlib

# ``typing`` is imported for type checkers only: this module is on the path of a
# warm ``interactions list``, where importing ``typing`` alone costs about a
# third of a bare interpreter start (docs/performance.md).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    Index = dict[str, Any]

__all__ = [
    "GROUPS",
    "INTERACTIONS_GROUP",
    "NO_CACHE_VAR",
    "PLUGINS_GROUP",
    "POLICIES_GROUP",
    "BuildLock",
    "cache_dir",
    "cache_enabled",
    "clear",
    "current_key",
    "hook_key",
    "load_index",
    "plugin_id",
    "save_hooks",
    "scan",
    "seconds_from",
]

INTERACTIONS_GROUP = "interactions_core.interactions"
PLUGINS_GROUP = "interactions_core.plugins"
POLICIES_GROUP = "interactions_core.policies"  # the model side, discovered the same way
GROUPS = (INTERACTIONS_GROUP, PLUGINS_GROUP, POLICIES_GROUP)

#: Bump when the payload layout changes; older files are then ignored.
FORMAT = 4
NO_CACHE_VAR = "INTERACTIONS_NO_CACHE"
LOCK_TIMEOUT_VAR = "INTERACTIONS_LOCK_TIMEOUT"
#: Longest wait for another process's index build, unless the variable says otherwise.
LOCK_TIMEOUT = 30.0


def plugin_id(record: dict[str, Any]) -> str:
    """The identity of a hook plugin's record: ``distribution:entry-point-name``."""
    return f"{record['dist']}:{record['name']}"


# -- where the cache lives and what it depends on --------------------------------


def cache_enabled() -> bool:
    """Whether the index cache is in use (``INTERACTIONS_NO_CACHE`` not set)."""
    return os.environ.get(NO_CACHE_VAR, "").strip().lower() not in ("1", "true", "yes", "on")


def cache_dir() -> str:
    """``$XDG_CACHE_HOME/interactions-core`` (default ``~/.cache/interactions-core``)."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):  # the XDG spec: a relative path is invalid, ignore it
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "interactions-core")


#: The folders already checked by :func:`_folder_is_safe`, with the verdict.
_checked: dict[str, bool] = {}


def _folder_is_safe(folder: str) -> bool:
    """Whether the cache ``folder`` may be trusted: created 0700, else ours and not shared.

    Whoever can write it decides which class a name loads, so a folder another user
    owns or others can write is bypassed with one warning. Checked once per process.
    """
    if folder not in _checked:
        _checked[folder] = _check_folder(folder)
    return _checked[folder]


def _check_folder(folder: str) -> bool:
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        info = os.stat(folder)
    except OSError:
        return True  # unusable: the writes fail and say so (_write)
    uid = os.getuid() if hasattr(os, "getuid") else None
    if uid is None:  # no owners to compare (Windows): the user's profile protects it
        return True
    problem = ""
    if info.st_uid != uid:
        problem = f"is owned by another user (uid {info.st_uid}, you are {uid})"
    elif info.st_mode & 0o022:
        problem = f"can be written by other users (mode {info.st_mode & 0o777:o})"
    if problem:
        _warn(
            f"the index cache folder {folder} {problem}, so it is not trusted. Remove it "
            f"(or run 'chmod 700 {folder}' if it is yours), or set XDG_CACHE_HOME to a "
            f"folder of your own; {NO_CACHE_VAR}=1 turns the cache off"
        )
        return False
    return True


def _cache_usable() -> bool:
    """The cache is on and its folder is safe to trust (see :func:`_folder_is_safe`)."""
    return cache_enabled() and _folder_is_safe(cache_dir())


def seconds_from(variable: str, default: float) -> float:
    """``$variable`` as a positive number of seconds, else ``default`` (NaN too: no wait ends)."""
    try:
        value = float(os.environ.get(variable, "").strip() or default)
    except ValueError:
        return default
    return value if value > 0 else default


def _mtime(path: str) -> int:
    try:
        return os.stat(path or ".").st_mtime_ns
    except OSError:
        return -1


def _stamp(path: str) -> int:
    """A distribution's metadata folder's mtime, or its METADATA's (PKG-INFO's) when newer:
    ``setup.py develop`` rewrites an ``.egg-info`` in place."""
    inside = (_mtime(os.path.join(path, name)) for name in ("METADATA", "PKG-INFO"))
    return max(_mtime(path), *inside) if path else -1


def _metadata_names(path: str) -> object:
    """The metadata folders directly in ``path``: what can change the index there."""
    try:
        with os.scandir(path) as it:
            return sorted(e.name for e in it if e.name.endswith((".dist-info", ".egg-info")))
    except OSError:
        return -1


def current_key() -> list[object]:
    """What the index depends on: interpreter, ``sys.path`` and each entry's state.

    An entry's state is its mtime, except for the current directory (``""`` for
    ``python -c``, the full path for ``python -m``): a working folder changes all the
    time, so its metadata folders key it, and a busy folder does not make runs cold.
    """
    cwd = os.getcwd()
    paths = [p or cwd for p in sys.path]
    state = [_metadata_names(p) if p == cwd else _mtime(p) for p in paths]
    return [FORMAT, sys.executable, sys.version, paths, state]


def _digest(value: object) -> str:
    """Eight hex digits naming ``value`` (its JSON text's CRC-32) in a cache file name."""
    text = json.dumps(value, ensure_ascii=False)
    return f"{zlib.crc32(text.encode('utf-8', 'surrogatepass')):08x}"


def _index_file(key: list[object]) -> str:
    return os.path.join(cache_dir(), f"index-{_digest(key[:4])}.json")


def _hooks_file() -> str:
    # One file per Python version, shared by its virtualenvs and by every name of
    # its executable: each result is keyed by the absolute path of the hook
    # plugin's metadata, which tells environments apart.
    return os.path.join(cache_dir(), f"hooks-{_digest([FORMAT, sys.version])}.json")


# -- reading and writing ----------------------------------------------------------

_warned = False


def _warn(message: str) -> None:
    global _warned
    if not _warned:
        _warned = True
        sys.stderr.write(f"interactions-core: warning: {message}; continuing without the cache\n")


#: The largest cache file read: an index of thousands of distributions is a few MB.
MAX_CACHE_BYTES = 64 << 20


def _read(path: str) -> dict[str, Any] | None:
    """The cache stored at ``path``, or ``None`` when there is none to trust: missing,
    truncated, corrupt, too deep, of another format, or no regular file of a cache's
    size (a named pipe there had held every command, waiting for a writer; a file of
    gigabytes had been read whole). ``None`` rebuilds it, replacing what was there."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO opens without a writer
        with os.fdopen(fd, "rb") as fh:
            info = os.fstat(fh.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_CACHE_BYTES:
                return None
            stored = json.loads(fh.read(MAX_CACHE_BYTES + 1))
    except (OSError, ValueError, RecursionError):  # missing, truncated, corrupt, too deep
        return None
    return stored if isinstance(stored, dict) and stored.get("format") == FORMAT else None


def _write(path: str, content: dict[str, Any]) -> bool:
    """Write ``content`` as JSON to ``path`` whole (the one atomic write, ``_files``)."""
    from ._files import write_atomically

    folder = os.path.dirname(path)
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        stored = {"format": FORMAT, **content}
        try:
            data = json.dumps(stored, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:  # a name a hook plugin gave holds a lone surrogate:
            data = json.dumps(stored).encode("ascii")  # escaped, it reads back the same
        # A cache: a file a crash left empty is unreadable, so it is rebuilt.
        write_atomically(path, data, durable=False)
        return True
    except (OSError, ValueError, TypeError) as exc:
        _warn(f"cannot write the index cache in {folder} ({exc.__class__.__name__}: {exc})")
        return False


def _load_cached(key: list[object]) -> Index | None:
    """The cached index for ``key``, or ``None`` when missing, stale or unreadable."""
    stored = _read(_index_file(key)) if _cache_usable() else None
    payload = stored.get("payload") if stored and stored.get("key") == key else None
    return payload if _well_formed(payload) else None


def _well_formed(payload: Any) -> bool:
    """Whether a stored index has the shape the catalog reads (else it is rebuilt)."""
    found = payload if type(payload) is dict else {}
    entries, hooks = found.get("entries"), found.get("hooks")
    records_ok = type(entries) is list and all(map(_is_entry, entries))
    return records_ok and type(hooks) is dict and all(map(_is_result, hooks.values()))


#: The text fields of an entry :func:`_record` writes.
_ENTRY_TEXT = ("group", "name", "value", "dist", "version", "path")


def _is_entry(record: Any) -> bool:
    """Whether a stored entry has the fields and types :func:`_record` gives it: a cache
    edited or written by another version (``"name": 123``) is rebuilt, not trusted."""
    if type(record) is not dict or type(record.get("error")) not in (str, type(None)):
        return False
    key = record.get("hook_key")
    key_ok = key is None or (type(key) is list and len(key) == 5 and type(key[1]) is str)
    return key_ok and all(type(record.get(field)) is str for field in _ENTRY_TEXT)


def _is_result(value: Any) -> bool:
    """Whether a stored hook result is ``{"names": [[name, target, description]], "error"}``."""
    names = value.get("names") if type(value) is dict else None
    return type(names) is list and all(
        type(n) is list and len(n) == 3 and all(type(part) in (str, type(None)) for part in n)
        for n in names
    )


def _store(key: list[object], payload: Index) -> bool:
    return _cache_usable() and _write(_index_file(key), {"key": key, "payload": payload})


def _load_learned() -> dict[str, dict[str, Any]]:
    """What earlier scans learned: ``results`` of hook plugins by the JSON text of their
    :func:`hook_key`, and ``dists``, the facts read of distributions by metadata folder."""
    stored = _read(_hooks_file()) if _cache_usable() else None
    results, dists = ((stored or {}).get(part) for part in ("results", "dists"))
    results = {k: v for k, v in results.items() if _is_result(v)} if type(results) is dict else {}
    return {"results": results, "dists": dists if type(dists) is dict else {}}


def clear() -> int:
    """Remove every cached index and hook result; return how many files were removed."""
    import contextlib

    folder, removed = cache_dir(), 0
    with contextlib.suppress(OSError):
        for name in [n for n in os.listdir(folder) if n.startswith(("index-", "hooks-"))]:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(folder, name))
                removed += 1
    return removed


class BuildLock:
    """An exclusive lock on the cache folder while an index is being built: of many
    workers starting after an install, one scans; the others wait, then find its index.

    Best effort: without a usable folder or ``fcntl`` building goes on unlocked; a
    holder over ``$INTERACTIONS_LOCK_TIMEOUT`` seconds (a hanging plugin) is reported.
    """

    def __init__(self) -> None:
        self._fd: int | None = None

    def __enter__(self) -> BuildLock:
        if not _cache_usable():
            return self
        try:
            fd = os.open(os.path.join(cache_dir(), "build.lock"), os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            return self
        if self._wait(fd):
            self._fd = fd
        else:
            os.close(fd)
        return self

    @staticmethod
    def _wait(fd: int) -> bool:
        """Take the lock (the one lock helper, ``_files``), waiting at most the limit."""
        from ._files import lock_fd

        limit = seconds_from(LOCK_TIMEOUT_VAR, LOCK_TIMEOUT)
        held = lock_fd(fd, limit)
        if held is False:
            sys.stderr.write(
                "interactions-core: warning: another interactions process has held the "
                f"index lock in {cache_dir()} for over {limit:g} s (a plugin hanging at "
                "import?); building the index without waiting "
                f"({LOCK_TIMEOUT_VAR} sets the wait)\n"
            )
        return bool(held)

    def __exit__(self, *exc_info: object) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing releases the lock
            self._fd = None


# -- the metadata scan (the cold path) --------------------------------------------


def _validate(group: str, name: str, value: str) -> str | None:
    """What is wrong with an entry point's name or value, or ``None``."""
    if not _is_reference(value):
        return f"malformed entry point value {value!r}: expected 'module:attribute'"
    if group != PLUGINS_GROUP and ":" not in value:
        return f"entry point value {value!r} names a module; expected 'module:Class'"
    if group != PLUGINS_GROUP and (":" in name or not name.strip()):
        return f"invalid interaction name {name!r}: names may not be empty or contain ':'"
    return None


def _is_reference(value: str) -> bool:
    """Whether ``value`` is ``module`` or ``module:attribute``, each a dotted name of Python
    identifiers (string methods: a regular expression's compilation costs more here)."""
    module, colon, attribute = value.partition(":")
    parts = (module, attribute) if colon else (module,)
    return all(all(w.isidentifier() for w in p.strip().split(".")) for p in parts)


class _Metadata:
    """What one scan reads of each distribution: ``[mtime_ns, name, version, requires]``.

    One scan asks for the same distributions several times (entry points, what hook
    plugins require): each is read once. What earlier scans read (``known``, kept with
    the hook results) is reused while the metadata keeps its path and mtime
    (:func:`_stamp`), so an unrelated install parses nothing again; a parse reads the
    headers only, not the long description after them.
    """

    def __init__(self, known: dict[str, Any] | None = None) -> None:
        self.known = known or {}
        #: What this scan read, by metadata folder (stored back with the hook results).
        self.read: dict[str, list[Any]] = {}
        self._versions: dict[str, str | None] = {}
        #: The scan's distributions by importlib's normalised name (the first of each).
        self.installed: dict[Any, Any] = {}

    def facts(self, dist: Any) -> list[Any]:
        """``dist``'s ``[mtime_ns, name, version, requires]``; raises when unreadable."""
        path = str(getattr(dist, "_path", "") or "")
        found = self.read.get(path) if path else None
        if found is None:
            mtime = _stamp(path)
            old: Any = self.known.get(path)
            found = old if _is_fact(old, mtime) else [mtime, *_read_headers(dist)]
            if path:
                self.read[path] = found
        return found

    def version(self, name: str) -> str | None:
        """The installed version of ``name``, ``None`` when it is not installed."""
        if name not in self._versions:
            from importlib.metadata import PackageNotFoundError, distribution

            from ._names import normalize

            try:  # the scan's distribution, else importlib's own search
                seen = self.installed.get(normalize(name).replace("-", "_"))
                self._versions[name] = self.facts(seen or distribution(name))[2]
            except PackageNotFoundError:
                self._versions[name] = None
            except Exception:  # unreadable metadata: a version of its own
                self._versions[name] = "?"
        return self._versions[name]


def _is_fact(value: Any, mtime: int) -> bool:
    """Whether a stored fact is of a folder with this ``mtime`` and well formed."""
    if mtime == -1 or not isinstance(value, list) or len(value) != 4 or value[0] != mtime:
        return False
    texts = [*value[1:3], *value[3]] if isinstance(value[3], list) else [None]
    return all(isinstance(v, str) for v in texts)


def _read_headers(dist: Any) -> list[Any]:
    """``[name, version, requires]`` from ``dist``'s metadata headers."""
    import email

    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
    headers = email.message_from_string(text.partition("\n\n")[0])
    return [headers["Name"] or "", headers["Version"] or "", _requirements(headers)]


def _requirements(headers: Any) -> list[str]:
    """Names of the distributions a plugin requires unconditionally (extras left out):
    the PEP 508 name that starts each requirement, so no requirement parser is needed."""
    import re

    names = []
    for line in headers.get_all("Requires-Dist") or []:
        requirement, _, marker = line.partition(";")
        found = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
        if found and "extra" not in marker:
            names.append(found.group(1))
    return names


def _record(group: str, ep: Any, metadata: _Metadata) -> dict[str, Any]:
    name, value = str(getattr(ep, "name", "")), str(getattr(ep, "value", ""))
    dist = getattr(ep, "dist", None)
    error = None
    mtime, dist_name, version, path, requires = -1, "", "", "", []
    try:
        if dist is None:
            raise LookupError("entry point has no distribution")
        mtime, dist_name, version, requires = metadata.facts(dist)
        path = str(getattr(dist, "_path", "") or "")
        if not dist_name:
            raise LookupError("distribution metadata has no Name")
    except Exception as exc:  # unreadable metadata: list it as broken, keep going
        error = f"unreadable distribution metadata: {exc.__class__.__name__}: {exc}"
    if error is None:
        error = _validate(group, name, value)
    record: dict[str, Any] = {
        "group": group,
        "name": name,
        "value": value.replace(" ", ""),
        "dist": dist_name,
        "version": version,
        "path": path,
        "error": error,
    }
    if group == PLUGINS_GROUP and error is None:
        record["hook_key"] = hook_key(record, mtime, requires, metadata.version)
    return record


def hook_key(
    record: dict[str, Any], mtime: int, requires: list[str], version: Callable[[str], str | None]
) -> list[object] | None:
    """What a hook plugin's registrations depend on, or ``None`` when that is unknowable.

    Its identity, metadata folder, version and the folder's ``mtime`` (a reinstall
    or an upgrade changes one), and the installed version of each distribution it
    requires (``None`` when missing): a suite whose names come from a dependency, or
    a core upgrade, is asked again. A plugin changed in place without any of these
    changing (edited code of an editable install) needs ``interactions cache clear``.
    """
    path = record["path"]
    if not path or mtime == -1:
        return None
    deps = [[name, version(name)] for name in requires]
    return [plugin_id(record), path, record["version"], mtime, deps]


def scan(metadata: _Metadata | None = None) -> list[dict[str, Any]]:
    """Scan installed metadata for the core's entry-point groups (the cold path).

    One pass over every distribution's entry points: ``entry_points()`` would sort
    them all by group, and ``select`` per group compare each of them three times.
    """
    metadata = metadata or _Metadata()
    by_group: dict[str, list[Any]] = {group: [] for group in GROUPS}
    for ep in _entry_points_one_by_one(metadata.installed):
        bucket = by_group.get(ep.group)
        if bucket is not None:
            bucket.append(ep)
    return [_record(group, ep, metadata) for group in GROUPS for ep in by_group[group]]


def _entry_points_one_by_one(seen: dict[Any, Any]) -> list[Any]:
    """Every distribution's entry points (the first of each name, kept in ``seen``), skipping
    unreadable ones: ``entry_points()`` fails as a whole when one ``entry_points.txt`` cannot
    be read, which would stop every command; here that one is named in a warning."""
    from importlib.metadata import distributions

    found: list[Any] = []
    for dist in distributions():
        key = getattr(dist, "_normalized_name", None) or id(dist)
        if key in seen:
            continue
        seen[key] = dist
        try:
            found.extend(dist.entry_points)
        except Exception as exc:  # not UTF-8, a line without "=", ...
            from .errors import InteractionsWarning, warn

            where, why = getattr(dist, "_path", None) or key, f"{exc.__class__.__name__}: {exc}"
            text = f"the entry points of the distribution at {where} cannot be read ({why}); "
            fix = "it is left out (reinstall it, or save its entry_points.txt as UTF-8)"
            warn(text + fix, InteractionsWarning)
    return found


# -- the index --------------------------------------------------------------------


def load_index(use_cache: bool = True, complete: Callable[[Index], object] | None = None) -> Index:
    """The index: ``{"entries": [records], "hooks": {plugin id: what it registered}}``.

    On a miss, metadata is scanned and ``complete`` (the catalog learning what hook
    plugins register) fills in what it can before the index is stored, both under
    the :class:`BuildLock`, so concurrent cold starts do the work once."""
    key = current_key()
    payload = _load_cached(key) if use_cache else _build(complete, known=None)
    if payload is None:
        with BuildLock():
            payload = _load_cached(key)  # built by another process while we waited?
            if payload is None:
                payload = _build(complete, known=_load_learned())
                _store(key, payload)
    payload["_key"] = key
    return payload


def _build(complete: Callable[[Index], object] | None, known: dict[str, Any] | None) -> Index:
    """Scan metadata, reuse what hook plugins registered before, let ``complete`` add the rest."""
    metadata = _Metadata(known["dists"] if known else None)
    payload: Index = {"entries": scan(metadata), "hooks": {}}
    reusable = known["results"] if known else {}
    for record in payload["entries"] if reusable else ():
        result = reusable.get(json.dumps(record.get("hook_key")))
        if result is not None and not result.get("error"):
            payload["hooks"][plugin_id(record)] = result
    if complete is not None:
        complete(payload)
    if known is not None:
        _remember(payload, known, metadata.read)
    return payload


def _remember(payload: Index, known: dict[str, Any], read: dict[str, Any] | None = None) -> None:
    """Store the hook results of ``payload`` under their keys, and what a scan ``read``.

    Results for other distributions are kept while their folder exists (another
    ``sys.path`` may use them), not when it now holds a newer key. A failure is not
    kept: what fixes it may not change the key. Written only when something changed.
    """
    results: dict[str, Any] = {}
    current_paths = set()
    for record in payload["entries"]:
        key = record.get("hook_key")
        if key is None:
            continue
        current_paths.add(key[1])
        result = payload["hooks"].get(plugin_id(record))
        if result is not None and not result.get("error"):
            results[json.dumps(key)] = result
    for text, result in known["results"].items():
        try:
            folder = json.loads(text)[1]
        except (ValueError, LookupError, TypeError):
            continue
        if text not in results and folder not in current_paths and os.path.exists(folder):
            results[text] = result
    dists = known["dists"]
    if read and any(dists.get(path) != fact for path, fact in read.items()):
        dists = {p: f for p, f in dists.items() if p not in read and os.path.exists(p)} | read
    if (results, dists) != (known["results"], known["dists"]) and _cache_usable():
        _write(_hooks_file(), {"results": results, "dists": dists})


def save_hooks(index: Index) -> None:
    """Persist the hook registrations learned after ``index`` was loaded (best effort)."""
    key = index.get("_key")
    if key is None or not _cache_usable():
        return
    payload = {k: v for k, v in index.items() if not k.startswith("_")}
    _store(key, payload)
    _remember(payload, _load_learned())
