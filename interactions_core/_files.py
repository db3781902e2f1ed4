"""Writing a file whole, locking a file, reading a line: the file-system idioms, once.

Every file the project writes in one piece (a dataset, a report, the index
cache) must never be seen half-written, even when the process is killed while
writing; and every file that only one process may write at a time (a records
file, the cache's build lock) is guarded by an advisory lock. Every file of JSON
lines it reads (records, ``--data``, standard input) is read one line at a time
with a bound on the line (:func:`bounded_lines`), so no line, not even one that
never ends, is held whole. These idioms have sharp edges (temporary files in the
same folder so the rename stays atomic, ``fsync`` before the rename, platforms
without ``fcntl``, ``readline`` without a size), so they live here once and the
callers keep only their own error messages. And what a JSON line may hold,
whatever a plugin handed over (:func:`json_safe`, :func:`as_text`).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import IO, Any

__all__ = [
    "MAX_LINE",
    "MAX_NESTING",
    "MAX_VALUES",
    "as_text",
    "bounded_lines",
    "json_safe",
    "line_too_long",
    "lock",
    "lock_fd",
    "replacing",
    "telling_a_wait",
    "temporary_next_to",
    "write_atomically",
]


#: Open flags of a temporary file: never through a symbolic link, never inherited.
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
#: Random names drawn before giving up (a clash of 48-bit names is already unlikely).
_NAME_TRIES = 100


def temporary_next_to(path: str | os.PathLike[str]) -> str:
    """Create an empty file beside ``path`` and return its name.

    The name is unpredictable (48 random bits) and the file is created
    exclusively without following a symbolic link, so nothing planted in advance
    can be written through; it gets the permissions a plain ``open()`` would
    give (``0o666`` less the umask, applied by the system). Being in the same
    folder, it can be renamed onto ``path`` atomically. Raises :class:`OSError`
    when the folder cannot be written.

    ``tempfile.mkstemp`` does the same, but importing it imports ``random`` and
    ``hashlib``, a few milliseconds paid by every ``interactions list`` that
    rebuilds the index after an install (``benchmarks/bench_discovery.py``), and
    its files are private (``0o600``), which would need a process-wide umask
    change to undo.
    """
    folder, base = os.path.split(os.path.abspath(path))
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
    for _ in range(_NAME_TRIES):
        tmp = os.path.join(folder, f".{base}.{os.urandom(6).hex()}.tmp")
        try:
            os.close(os.open(tmp, flags, 0o666))
        except FileExistsError:  # a clash of random names: draw another
            continue
        return tmp
    raise FileExistsError(f"no unused temporary name beside {path} after {_NAME_TRIES} tries")


@contextmanager
def replacing(
    path: str | os.PathLike[str], *, overwrite: bool = True, durable: bool = True
) -> Iterator[str]:
    """Yield a temporary file name to write; on success move it onto ``path``.

    The finished file is renamed into place, so a reader sees the old file or
    the whole new one, never a part. ``durable`` first flushes it to disk
    (``fsync``), so a crash cannot leave an empty file behind the new name; a
    cache that is rebuilt when it cannot be read skips that (a few ms each).
    With ``overwrite=False`` the move fails with :class:`FileExistsError` when
    ``path`` exists by then. Whatever happens, the temporary file is gone
    afterwards.
    """
    target = os.fspath(path)
    tmp = temporary_next_to(target)
    try:
        yield tmp
        if durable:
            _sync(tmp)
        _publish(tmp, target, overwrite)
    finally:
        if os.path.lexists(tmp):
            os.remove(tmp)


def write_atomically(path: str | os.PathLike[str], data: bytes, *, durable: bool = True) -> None:
    """Write ``data`` to ``path`` whole (see :func:`replacing`); raises :class:`OSError`."""
    with replacing(path, durable=durable) as tmp, open(tmp, "wb") as handle:
        handle.write(data)


def _sync(path: str) -> None:
    """Flush ``path``'s data to the disk before it is renamed into place."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError:  # a file system or device that cannot sync: the rename still holds
        pass
    finally:
        os.close(fd)


def _publish(tmp: str, path: str, overwrite: bool) -> None:
    """Move the finished ``tmp`` onto ``path`` atomically, never clobbering unless asked."""
    if overwrite:
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)  # atomic, and fails if ``path`` appeared meanwhile
    except FileExistsError:
        raise
    except OSError:  # no hard links on this file system
        if os.path.lexists(path):
            raise FileExistsError(path) from None
        os.replace(tmp, path)


def lock_fd(fd: int, timeout: float = 0.0) -> bool | None:
    """Take an exclusive advisory lock (``flock``) on the open file ``fd``.

    Returns ``True`` once the lock is held; ``False`` when another process still
    holds it after ``timeout`` seconds (``0``: do not wait); ``None`` when this
    platform or file system has no such locks, in which case the caller goes
    on unlocked. Closing ``fd`` releases the lock.
    """
    try:
        import fcntl
    except ImportError:
        return None
    deadline = time.monotonic() + timeout
    pause = 0.005
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            pass
        except OSError:  # a file system without locks
            return None
        if time.monotonic() >= deadline:
            return False
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


@contextmanager
def lock(path: str | os.PathLike[str], timeout: float = 0.0) -> Iterator[bool | None]:
    """Hold an exclusive lock on the file ``path`` (created if missing) for the block.

    Yields what :func:`lock_fd` returns (``True`` held, ``False`` busy after
    ``timeout``, ``None`` locks unsupported); the block runs in every case and
    decides what a busy lock means. Raises :class:`OSError` when the file
    cannot be opened.
    """
    fd = os.open(os.fspath(path), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        yield lock_fd(fd, timeout)
    finally:
        os.close(fd)


#: The longest line read from a file of JSON lines (a records file, ``--data``): a
#: whole conversation fits many times over, and neither a 900 MB line nor an endless
#: one on standard input can take the memory it would need to be held.
MAX_LINE = 64 << 20


def bounded_lines(file: IO[bytes]) -> Iterator[bytes | None]:
    """The lines of ``file``; ``None`` for a line over :data:`MAX_LINE`, never held whole.

    The rest of such a line is read past, 1 MiB at a time, only when the next line
    is asked for: a caller that stops at the ``None`` (a strict reader) reads no
    further, and one that goes on holds at most 1 MiB of it, even of a line that
    never ends. Line numbers stay right (one item a line).
    """
    limit = MAX_LINE  # read when reading starts, so a test can lower it
    while line := file.readline(limit):
        if len(line) < limit or line.endswith(b"\n"):
            yield line
            continue
        yield None
        while (rest := file.readline(1 << 20)) and not rest.endswith(b"\n"):
            pass


def line_too_long() -> str:
    """What :func:`bounded_lines` passed over, in words: "a line longer than 64 MiB"."""
    limit = MAX_LINE
    size = f"{limit >> 20} MiB" if limit % (1 << 20) == 0 else f"{limit:,} bytes"
    return f"a line longer than {size}"


#: How many levels of lists and objects a sample's prompt message or interaction kwargs
#: may nest (in a data file or a served reset), and a value a record holds (a plugin's
#: ``extra``, say). A chat message needs a handful (content parts, tool calls and their
#: arguments); a few hundred already break the deep copies, encoders and decoders that
#: recurse (Python's "maximum recursion depth exceeded").
MAX_NESTING = 100


#: How many values a value written to a line may hold, a part it shares counted each
#: time it appears (as JSON writes it out): far more than a line the readers take (64
#: MiB) can hold, so that a few lists sharing one another (``x = [x, x]``, forty times:
#: 2**40 values from 41 lists) are refused before anything tries to write them.
MAX_VALUES = 1 << 24


def json_safe(obj: Any, *, text: bool = False) -> Any:
    """``obj`` as JSON can hold it, whatever a plugin put in it (its ``extra``, say).

    NaN and infinite floats become ``None``; an integer too long for ``str()``
    (over 4,300 digits), a placeholder naming its size; a key that is not text,
    its text (:func:`as_text`); a list or mapping inside itself, ``"<cycle>"``, and
    one nested deeper than :data:`MAX_NESTING` levels, ``"<nested too deeply>"``,
    so the line stays readable by every reader of records; a mapping that cannot
    be read, its text. Other values are left to the encoder's ``default=as_text``,
    or with ``text`` made text here: then the result is plain JSON data of the
    built-in types (a ``str``, ``int`` or ``float`` subclass's value made plain),
    and no method of the value's own (a ``__str__``, a mapping's ``items``, a
    string's ``__len__``) runs later; more than :data:`MAX_LINE` characters of text
    are then refused with ``ValueError``.

    A part shared by several places is made once, and the result shares it too;
    ``ValueError`` when the whole holds more than :data:`MAX_VALUES` values.
    """
    return _Walk(text).value(obj, frozenset())


class _Walk:
    """One :func:`json_safe`: what it made of each list and mapping (by id, the object
    kept alive with it so that no id is reused), and how many values it has counted."""

    __slots__ = ("chars", "made", "text", "values")

    def __init__(self, text: bool) -> None:
        self.text = text
        self.chars = 0
        # id -> (obj, made, values, depth, characters)
        self.made: dict[int, tuple[Any, Any, int, int, int]] = {}
        self.values = 0

    def key(self, key: Any) -> str:
        kind = type(key)
        text = key if kind is str else str.__str__(key) if issubclass(kind, str) else None
        if text is None:
            text = as_text(key)
        self.count_text(len(text))
        return text  # type: ignore[no-any-return]

    def put(self, result: dict[str, Any], key: Any, value: Any) -> None:
        """``result[key as text] = value``; keys whose text collides (``1`` and ``"1"``,
        ``None`` and ``"None"``) are told apart by their class, never silently merged."""
        text = self.key(key)
        if text in result:
            from .errors import class_name

            base = f"{text} ({class_name(type(key))})"
            text, n = base, 2
            while text in result:
                text, n = f"{base} #{n}", n + 1
            self.count_text(len(text))
        result[text] = value

    def count_text(self, chars: int) -> None:
        """Count ``chars`` characters of text; with ``text``, refuse more than a line holds
        (one long string repeated a thousand times takes little memory until written)."""
        self.chars += chars
        if self.chars > MAX_LINE and self.text:
            raise ValueError(
                f"it would take over {MAX_LINE >> 20} MiB of text written out (a part it "
                "shares counted each time it appears), more than a line can hold"
            )

    def count(self, values: int) -> None:
        self.values += values
        if self.values > MAX_VALUES:
            raise ValueError(
                f"it holds over {MAX_VALUES:,} values (a part it shares counted each time "
                "it appears), more than a line can"
            )

    def value(self, obj: Any, inside: frozenset[int]) -> Any:
        self.count(1)
        kind = type(obj)  # never the object's own ``__class__``, which may say anything
        if issubclass(kind, float):
            if self.text:
                self.count_text(24)  # its longest printed form
            if not math.isfinite(obj):
                return None
            return float.__float__(obj) if self.text else obj  # a subclass's: a plain float
        if issubclass(kind, int):
            try:
                int.__repr__(obj)  # what the encoder will call
            except ValueError:
                return f"<integer of {obj.bit_length():,} bits>"
            if self.text:
                self.count_text(obj.bit_length() // 3 + 2)  # about its digits
                if kind is not int and kind is not bool:
                    return int.__int__(obj)
            return obj
        if issubclass(kind, str):
            self.count_text(str.__len__(obj))
            return str.__str__(obj) if self.text else obj
        if not isinstance(obj, (Mapping, list, tuple)):
            if not self.text:
                return obj
            self.count_text(5)
            return None if obj is None else as_text(obj)
        key = id(obj)
        if key in inside:
            return "<cycle>"
        made = self.made.get(key)
        if made is not None and made[3] >= len(inside):  # no deeper than where it was made
            self.count(made[2])
            self.count_text(made[4])
            return made[1]
        if len(inside) >= MAX_NESTING:
            return "<nested too deeply>"
        start, chars = self.values, self.chars
        inside = inside | {key}
        result: Any
        if not isinstance(obj, Mapping):
            result = [self.value(v, inside) for v in obj]
        elif issubclass(kind, dict):
            plain: dict[Any, Any] = obj  # type: ignore[assignment]
            result = {}
            for k, v in dict.items(plain):
                self.put(result, k, self.value(v, inside))
        else:  # a plugin's mapping: its items are counted as they come (they may not end)
            try:
                pairs = iter(obj.items())
            except Exception:
                return as_text(obj)
            result = {}
            while True:
                try:
                    k, v = next(pairs)
                except StopIteration:
                    break
                except Exception:
                    return as_text(obj)
                self.put(result, k, self.value(v, inside))
        self.made[key] = (obj, result, self.values - start, len(inside) - 1, self.chars - chars)
        return result


def as_text(obj: Any) -> str:
    """``str(obj)`` (plain text even for a ``str`` subclass), or a placeholder when it raises."""
    from .errors import class_name

    try:
        # ``str()`` may hand back a subclass (its ``__str__`` returns one): its methods
        # (``__eq__``, ``__hash__``, ``__len__``) would run wherever the text is used.
        return str.__str__(obj if issubclass(type(obj), str) else str(obj))
    except Exception:
        return f"<{class_name(type(obj))} that cannot be shown>"


@contextmanager
def telling_a_wait(path: str, note: str, after: float = 1.0) -> Iterator[None]:
    """Write ``note`` to stderr if opening the named pipe ``path`` takes ``after`` seconds.

    Opening a pipe to write waits until a process opens it to read, which is
    what a pipe is for; the note says what is awaited. Anything else: no note.
    """
    import stat
    import sys
    import threading

    try:
        is_pipe = stat.S_ISFIFO(os.stat(path).st_mode)
    except (OSError, ValueError):
        is_pipe = False
    if not is_pipe:
        yield
        return
    timer = threading.Timer(after, lambda: sys.stderr.write(note))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
