"""Writing JSON lines whole: records, traces and ``interactions data`` output.

:class:`LineWriter` writes JSON lines for records and traces: a line is only
ever written whole (lines are buffered and handed to the OS in complete
batches, at least once a second), so a crash never leaves half a line, and an
existing file is never overwritten unless asked. :func:`write_rows` writes a
dataset atomically (a temporary file renamed into place).
"""

from __future__ import annotations

import json
import math
import os
import stat
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from .datasets import _import_parquet, check_row, data_format, non_finite_field
from .errors import DatasetError

__all__ = ["LineWriter", "is_special_file", "refuse_existing", "same_file", "write_rows"]


def refuse_existing(
    path: str | os.PathLike[str], overwrite: bool, flag: str = "--overwrite"
) -> None:
    """Raise :class:`DatasetError` when ``path`` exists and ``overwrite`` is false.

    Only regular files (and directories, which can never be written) are refused:
    a device such as ``/dev/null`` or a named pipe is written to as it is.
    """
    if os.path.isdir(path):
        raise DatasetError(f"{os.fspath(path)} is a directory; give a file name to write")
    if not overwrite and os.path.lexists(path) and not is_special_file(path):
        raise DatasetError(
            f"{os.fspath(path)} already exists; refusing to overwrite it "
            f"(choose another file, or pass {flag})"
        )


def is_special_file(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` exists and is neither a regular file nor a directory (``/dev/null``)."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether ``a`` and ``b`` name the same file (``os.path.samefile`` when both exist)."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return os.path.realpath(a) == os.path.realpath(b)


class LineWriter:
    """Append JSON lines to a file, whole lines only; see the module docstring.

    The file is created when the writer is (``overwrite=False``: it must not
    exist; ``append=True``: an existing file is continued, after cutting off a
    partial last line a crash may have left). ``flush_bytes`` and
    ``flush_seconds`` bound what a crash can lose; with ``autoflush=True`` a
    background thread hands queued lines to the OS every ``flush_seconds`` even
    when no new line arrives (a run whose last episodes are slow).

    One writer per file: the file is locked (``fcntl.flock``) while open, so a
    second run writing the same file is refused instead of interleaving lines.
    A symbolic link is never written through when replacing or continuing a file.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        overwrite: bool = False,
        append: bool = False,
        autoflush: bool = False,
        flush_bytes: int = 1 << 20,
        flush_seconds: float = 1.0,
    ) -> None:
        self.path = os.fspath(path)
        self._lock = threading.Lock()  # the queue and the state; held only briefly
        self._io_lock = threading.Lock()  # one os.write sequence at a time, in order
        self._wake = threading.Event()  # the flush thread has work before its next tick
        self._buffer: list[bytes] = []
        self._size = 0
        self._committed = 0  # bytes in the file, all of them whole lines
        self._flush_bytes = flush_bytes
        self._flush_seconds = flush_seconds
        self._last_flush = time.monotonic()
        self._error: DatasetError | None = None
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None
        self.lines = 0
        self._fd: int | None = self._open(overwrite, append)
        if autoflush:
            self._stop = threading.Event()
            self._thread = threading.Thread(
                target=self._flush_periodically, name="interactions-flush", daemon=True
            )
            self._thread.start()

    def _open(self, overwrite: bool, append: bool) -> int:
        path = self.path
        if is_special_file(path):  # /dev/null, a pipe: write to it as it is
            try:
                return os.open(path, os.O_WRONLY)
            except OSError as exc:
                raise DatasetError(f"cannot write {path}: {exc.strerror or exc}") from None
        if not append:
            refuse_existing(path, overwrite)
        if (overwrite or append) and os.path.islink(path):
            raise DatasetError(
                f"{path} is a symbolic link (to {os.path.realpath(path)}); refusing to write "
                "through it: name the file itself, or remove the link"
            )
        nofollow = getattr(os, "O_NOFOLLOW", 0)
        if append:
            flags = os.O_RDWR | os.O_CREAT | os.O_APPEND | nofollow  # read: the last line
        elif overwrite:
            flags = os.O_WRONLY | os.O_CREAT | nofollow  # emptied once the lock is held
        else:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
        try:
            fd = os.open(path, flags, 0o644)
        except FileExistsError:
            refuse_existing(path, False)
            raise
        except OSError as exc:
            raise DatasetError(f"cannot write {path}: {exc.strerror or exc}") from None
        try:
            _lock_exclusively(fd, path)
            if append:
                self._committed = _cut_partial_line(fd)
            elif overwrite:
                os.ftruncate(fd, 0)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def write(self, obj: Any) -> None:
        """Queue one JSON line (flushed when the buffer or the clock says so)."""
        try:
            text = json.dumps(obj, ensure_ascii=False, default=str, allow_nan=False)
        except ValueError:  # NaN/Infinity are not JSON: write them as null
            text = json.dumps(_finite(obj), ensure_ascii=False, default=str, allow_nan=False)
        line = (text + "\n").encode("utf-8")
        with self._lock:
            if self._error is not None:
                raise self._error
            self._buffer.append(line)
            self._size += len(line)
            self.lines += 1
            if self._size < self._flush_bytes and (
                time.monotonic() - self._last_flush < self._flush_seconds
            ):
                return
            if self._thread is not None and self._size < 8 * self._flush_bytes:
                # The flush thread writes: a slow disk never holds the caller (the
                # event loop). Only a backlog the thread cannot drain is written here.
                self._wake.set()
                return
        self._flush()

    def flush(self) -> None:
        """Hand every queued line to the OS (complete lines only)."""
        with self._lock:
            if self._error is not None:
                raise self._error
        self._flush()

    def _flush_periodically(self) -> None:
        from .watchdog import keep_signals_off_this_thread

        keep_signals_off_this_thread()
        stop = self._stop
        assert stop is not None
        while True:
            self._wake.wait(self._flush_seconds / 2)
            self._wake.clear()
            if stop.is_set():
                return
            with self._lock:
                if self._error is not None or self._fd is None:
                    return
                due = bool(self._buffer) and (
                    self._size >= self._flush_bytes
                    or time.monotonic() - self._last_flush >= self._flush_seconds / 2
                )
            if due:
                try:
                    self._flush()
                except DatasetError as exc:
                    with self._lock:
                        self._error = exc  # raised by the next write, flush or close

    def _flush(self) -> None:
        """Write the queued lines; the caller holds neither lock (writes keep queueing)."""
        with self._io_lock:
            with self._lock:
                fd = self._fd
                if fd is None or not self._buffer:
                    return
                data = memoryview(b"".join(self._buffer))
                self._buffer.clear()
                self._size = 0
            start = self._committed
            done = 0
            try:
                while done < len(data):  # os.write may write less than asked: go on
                    done += os.write(fd, data[done:])
            except OSError as exc:
                # Keep whole lines only: cut the file back after the last complete one.
                keep = start + bytes(data[:done]).rfind(b"\n") + 1 if done else start
                try:
                    os.ftruncate(fd, keep)
                except OSError:
                    pass
                with self._lock:
                    self._fd = None
                os.close(fd)
                raise DatasetError(
                    f"cannot write {self.path}: {exc.strerror or exc}; the file keeps the "
                    "complete lines written so far"
                ) from None
            self._committed = start + done
            self._last_flush = time.monotonic()

    def close(self) -> None:
        """Flush and close (idempotent)."""
        if self._stop is not None:
            self._stop.set()
            self._wake.set()
            if self._thread is not None and self._thread is not threading.current_thread():
                self._thread.join()
        with self._lock:
            if self._fd is None:
                if self._error is not None:
                    error, self._error = self._error, None
                    raise error
                return
        try:
            self._flush()
        finally:
            with self._lock:
                fd, self._fd = self._fd, None
            if fd is not None:  # _flush closes it itself when the disk is full
                os.close(fd)

    def __enter__(self) -> LineWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _lock_exclusively(fd: int, path: str) -> None:
    """Lock ``fd`` for this writer, or refuse: another process is writing ``path``."""
    try:
        import fcntl
    except ImportError:  # no flock on this platform: one writer is then up to the user
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise DatasetError(
            f"{path} is being written by another process (another interactions run?); "
            "wait for it to finish or choose another file"
        ) from None
    except OSError:  # a file system without locks: go on unlocked
        return


def _cut_partial_line(fd: int) -> int:
    """Truncate ``fd`` after its last newline (a crash mid-write); return the new size."""
    size = os.fstat(fd).st_size
    end = size
    while end > 0:
        chunk = min(end, 1 << 16)
        data = os.pread(fd, chunk, end - chunk)
        cut = data.rfind(b"\n")
        if cut >= 0:
            end = end - chunk + cut + 1
            break
        end -= chunk
    if end != size:
        os.ftruncate(fd, end)
    return end


def _finite(obj: Any) -> Any:
    """``obj`` with NaN and infinite floats replaced by ``None`` (JSON has no such values)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def write_rows(
    rows: Iterable[Mapping[str, Any]],
    path: str | os.PathLike[str],
    *,
    format: str | None = None,
    overwrite: bool = False,
    strict: bool = True,
) -> int:
    """Write sample rows as JSONL or parquet; return how many were written.

    Every row is checked with :func:`check_row` (``strict``: the first bad one
    raises :class:`DatasetError` naming its position). The file is written under
    a temporary name and moved into place when complete, so a failing builder
    never leaves a partial file.
    """
    refuse_existing(path, overwrite)
    fmt = data_format(path, format)

    def checked() -> Iterator[Mapping[str, Any]]:
        for number, row in enumerate(rows, start=1):
            problem = check_row(row) if strict else None
            if problem is None and strict:
                found = non_finite_field(row)
                if found is not None:
                    problem = f"field {found[0]} is {found[1]}, which JSON cannot hold"
            if problem is not None:
                raise DatasetError(f"row {number} produced by the builder is invalid: {problem}")
            yield row

    special = is_special_file(path)  # /dev/null: write to it directly, never replace it
    if special:
        tmp = os.fspath(path)
    else:
        # Created exclusively under an unpredictable name next to the output, so
        # nothing planted in advance (a symbolic link) can be written through.
        import tempfile

        folder, base = os.path.split(os.path.abspath(path))
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{base}.", suffix=".tmp", dir=folder)
        except OSError as exc:
            raise DatasetError(f"cannot write {os.fspath(path)}: {exc.strerror or exc}") from None
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # what a plain open() would have given
        os.close(fd)
    try:
        if fmt == "jsonl":
            count = 0
            with LineWriter(tmp, overwrite=True) as writer:
                for row in checked():
                    writer.write(row)
                    count += 1
        else:
            pq = _import_parquet()
            import pyarrow as pa

            table = pa.Table.from_pylist([dict(r) for r in checked()])
            pq.write_table(table, tmp)
            count = int(table.num_rows)
        if not special:
            _publish(tmp, os.fspath(path), overwrite)
    finally:
        if not special and os.path.exists(tmp):
            os.remove(tmp)
    return count


def _publish(tmp: str, path: str, overwrite: bool) -> None:
    """Move the finished ``tmp`` to ``path`` atomically (never clobbering unless asked)."""
    if overwrite:
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)  # atomic, and fails if ``path`` appeared meanwhile
    except FileExistsError:
        refuse_existing(path, False)
        raise
    except OSError:  # no hard links on this file system
        refuse_existing(path, False)
        os.replace(tmp, path)
