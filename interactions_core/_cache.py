"""The on-disk index cache.

Scanning installed metadata costs milliseconds per hundred distributions on every
call, and importing ``importlib.metadata`` alone costs several times a bare
interpreter start. The index of what is installed only changes when something is
installed or removed, so it is cached, keyed by the interpreter, ``sys.path`` and
the modification times of the ``sys.path`` entries (installing or removing a
distribution adds or removes a ``*.dist-info`` folder, which changes its
directory's mtime).

Design choices:

* ``marshal`` rather than JSON: it is built in, loads in microseconds, and the key
  already pins the interpreter version whose format it uses.
* One file per interpreter + ``sys.path``; the full key is stored inside and
  compared exactly, so a hash collision is only a miss.
* Writes go to a temporary file in the same folder and are renamed into place
  (atomic on POSIX), so a concurrent reader sees the old file or the new one,
  never a partial one.
* Anything unreadable, corrupt or of another format version is ignored, never
  trusted; an unwritable folder degrades to no cache with one warning.
* What hook plugins register is kept in a second file per interpreter, keyed by
  each hook plugin's own distribution (:func:`load_hooks`, :func:`store_hooks`):
  installing an unrelated package invalidates the index, but not what a hook
  plugin told us, so the next cold start rescans metadata without importing the
  hook plugins again.
* ``INTERACTIONS_NO_CACHE=1`` turns it off; ``interactions cache clear`` empties it.

This module is on the warm path of ``interactions list``: it imports nothing
beyond what a bare interpreter has already loaded, plus ``marshal``.
"""

from __future__ import annotations

import marshal
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "FORMAT",
    "BuildLock",
    "cache_dir",
    "clear",
    "current_key",
    "enabled",
    "load",
    "load_hooks",
    "store",
    "store_hooks",
]

#: Bump when the payload layout changes; older files are then ignored.
FORMAT = 3
NO_CACHE_VAR = "INTERACTIONS_NO_CACHE"

_warned = False


def enabled() -> bool:
    return os.environ.get(NO_CACHE_VAR, "").strip().lower() not in ("1", "true", "yes", "on")


def cache_dir() -> str:
    """``$XDG_CACHE_HOME/interactions-core`` (default ``~/.cache/interactions-core``)."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):  # the XDG spec: a relative path is invalid, ignore it
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "interactions-core")


def _mtime(path: str) -> int:
    try:
        return os.stat(path or ".").st_mtime_ns
    except OSError:
        return -1


def _metadata_names(path: str) -> object:
    """The metadata folders directly in ``path``: what can change the index there."""
    try:
        with os.scandir(path) as it:
            return tuple(sorted(e.name for e in it if e.name.endswith((".dist-info", ".egg-info"))))
    except OSError:
        return -1


def current_key() -> tuple[object, ...]:
    """What the index depends on: interpreter, ``sys.path`` and each entry's state.

    An entry's state is its mtime, except for the current directory (``""`` for
    ``python -c``, the full path for ``python -m``): a working folder changes all
    the time, so it is keyed by the metadata folders it holds instead, and a busy
    folder does not turn every run into a cold one. ``python -c`` and
    ``python -m`` started in the same folder share one index.
    """
    cwd = os.getcwd()
    paths = tuple(p or cwd for p in sys.path)
    state = tuple(_metadata_names(p) if p == cwd else _mtime(p) for p in paths)
    return (FORMAT, sys.executable, sys.version, paths, state)


def _fnv1a(data: bytes) -> int:
    """32-bit FNV-1a: a stable hash without importing ``zlib`` or ``hashlib``.

    Loading either extension module costs more on the warm path than hashing
    the few hundred bytes of a key in Python. Collisions only cost a miss: the
    full key is stored in the file and compared.
    """
    h = 0x811C9DC5
    for byte in data:
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h


def _file_for(key: tuple[object, ...]) -> str:
    ident = repr(key[:4]).encode("utf-8", "surrogatepass")
    return os.path.join(cache_dir(), f"index-{_fnv1a(ident):08x}.marshal")


def load(key: tuple[object, ...]) -> dict | None:
    """The cached payload for ``key``, or ``None`` when missing, stale or unreadable."""
    if not enabled():
        return None
    try:
        with open(_file_for(key), "rb") as fh:
            stored = marshal.load(fh)
    except Exception:  # missing, truncated, corrupt, another Python's format
        return None
    if not isinstance(stored, dict) or stored.get("key") != key:
        return None
    payload = stored.get("payload")
    return payload if isinstance(payload, dict) else None


def _hooks_file() -> str:
    # One file per Python version, shared by its virtualenvs and by every name of
    # its executable (``python``, ``python3``): each result is keyed by the
    # absolute path of the hook plugin's metadata, which tells environments apart.
    ident = repr((FORMAT, sys.version)).encode("utf-8", "surrogatepass")
    return os.path.join(cache_dir(), f"hooks-{_fnv1a(ident):08x}.marshal")


def load_hooks() -> dict:
    """What hook plugins registered, by hook key (see ``discovery.hook_key``); ``{}`` if none.

    The file holds one Python version's results (its name hashes the version);
    each result is trusted only for the exact key it was stored under.
    """
    if not enabled():
        return {}
    try:
        with open(_hooks_file(), "rb") as fh:
            stored = marshal.load(fh)
    except Exception:  # missing, truncated, corrupt, another Python's format
        return {}
    if not isinstance(stored, dict) or stored.get("format") != FORMAT:
        return {}
    results = stored.get("results")
    if not isinstance(results, dict):
        return {}
    # A key is (plugin id, metadata folder, version, mtime, requirements): see discovery.
    return {k: v for k, v in results.items() if isinstance(k, tuple) and len(k) == 5}


def store_hooks(results: dict) -> bool:
    """Write the hook results atomically; return whether they were written."""
    if not enabled():
        return False
    return _write(_hooks_file(), {"format": FORMAT, "results": results})


def _warn(message: str) -> None:
    global _warned
    if not _warned:
        _warned = True
        sys.stderr.write(f"interactions-core: warning: {message}; continuing without the cache\n")


def store(key: tuple[object, ...], payload: dict) -> bool:
    """Write ``payload`` for ``key`` atomically; return whether it was written."""
    if not enabled():
        return False
    return _write(_file_for(key), {"key": key, "payload": payload})


def _write(path: str, content: dict) -> bool:
    """Marshal ``content`` to ``path`` through a temporary file and a rename."""
    folder = os.path.dirname(path)
    tmp = f"{path}.{os.getpid()}.{id(content):x}.tmp"
    try:
        os.makedirs(folder, exist_ok=True)
        with open(tmp, "wb") as fh:
            marshal.dump(content, fh)
        os.replace(tmp, path)
        return True
    except (OSError, ValueError) as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        _warn(f"cannot write the index cache in {folder} ({exc.__class__.__name__}: {exc})")
        return False


#: Longest wait for another process's index build (``INTERACTIONS_LOCK_TIMEOUT``).
LOCK_TIMEOUT = 30.0


def _wait_for_lock(fcntl: Any, fd: int) -> bool:
    """Take the build lock, waiting at most ``$INTERACTIONS_LOCK_TIMEOUT`` seconds.

    A process that holds it far longer than a build takes is stuck (a hook
    plugin hanging at import): after the wait, say so once and build unlocked,
    which is correct, only slower, instead of waiting forever.
    """
    import time

    text = os.environ.get("INTERACTIONS_LOCK_TIMEOUT", "").strip()
    try:
        limit = float(text) if text else LOCK_TIMEOUT
    except ValueError:
        limit = LOCK_TIMEOUT
    deadline = time.monotonic() + limit
    pause = 0.005
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            pass
        except OSError:
            return False
        if time.monotonic() >= deadline:
            sys.stderr.write(
                "interactions-core: warning: another interactions process has held the index "
                f"lock in {cache_dir()} for over {limit:g} s (a plugin hanging at import?); "
                "building the index without waiting (INTERACTIONS_LOCK_TIMEOUT sets the wait)\n"
            )
            return False
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


class BuildLock:
    """An exclusive lock on the cache folder while an index is being built.

    When many workers start at once after an install, one of them scans (and runs
    the hook plugins); the others wait here, then find its index in the cache
    instead of all paying for the same scan. Best effort: where the folder is
    unusable or ``fcntl`` does not exist, building simply goes on unlocked.
    """

    def __init__(self) -> None:
        self._fd: int | None = None

    def __enter__(self) -> BuildLock:
        if not enabled():
            return self
        try:
            import fcntl

            os.makedirs(cache_dir(), exist_ok=True)
            fd = os.open(os.path.join(cache_dir(), "build.lock"), os.O_RDWR | os.O_CREAT, 0o644)
        except (ImportError, OSError):
            return self
        if not _wait_for_lock(fcntl, fd):
            os.close(fd)
            return self
        self._fd = fd
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing releases the lock
            self._fd = None


def clear() -> int:
    """Remove every cached index and hook result; return how many files were removed."""
    folder = cache_dir()
    removed = 0
    try:
        names = os.listdir(folder)
    except OSError:
        return 0
    for name in names:
        if name.startswith(("index-", "hooks-")):
            try:
                os.unlink(os.path.join(folder, name))
                removed += 1
            except OSError:
                pass
    return removed
