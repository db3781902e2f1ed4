"""Writing output files: whether a path may be written, and JSON lines written whole.

Every output of the CLI (records, traces, reports, datasets) first asks
whether its path may be written (:func:`refuse_existing`, :func:`is_special_file`,
:func:`same_file`), so a run never destroys a file it was not told to replace,
and ``/dev/null`` or a named pipe is written as it is.

Records and traces are appended as JSON lines by :class:`LineWriter`. A line
is only ever written whole: lines are buffered and handed to the OS in
complete batches, at least once a second, so a crash never leaves half a line;
continuing a file cuts off the torn last line an earlier crash may have left
(the rule :mod:`.records` reads by); and an existing file is never overwritten
unless asked. Datasets, written in one piece, are :func:`.datasets.write_rows`.
"""

from __future__ import annotations

import json
import math
import os
import stat
import threading
import time
from collections.abc import Mapping
from typing import Any

from .._files import lock_fd
from .errors import DatasetError

__all__ = ["LineWriter", "is_special_file", "is_whole_record", "refuse_existing", "same_file"]


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


def is_whole_record(line: bytes) -> bool:
    """Whether ``line`` (without its newline) parses as one JSON object."""
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def _lock_exclusively(fd: int, path: str) -> None:
    """Lock ``fd`` for this writer, or refuse: another process is writing ``path``.

    Where locks do not exist (no ``fcntl``, a file system without them), one
    writer per file is up to the user.
    """
    if lock_fd(fd) is False:
        raise DatasetError(
            f"{path} is being written by another process (another interactions run?); "
            "wait for it to finish or choose another file"
        )


def _cut_partial_line(fd: int) -> int:
    """Make ``fd`` end with a whole line; return its new size.

    A last line without a newline is a torn write (a crash mid-write) unless
    it is a whole JSON object: a torn line is cut off, a whole one is ended
    with its newline. :mod:`.records` reads a file by the same rule.
    """
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
    if end == size:
        return end
    if is_whole_record(os.pread(fd, size - end, end)):
        os.write(fd, b"\n")  # the file is open for appending
        return size + 1
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
