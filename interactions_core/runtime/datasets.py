"""Datasets: reading samples, reporting bad rows, writing records whole lines at a time.

Samples are rows in verl's shape::

    {"prompt": [{"role": "user", "content": "..."}],
     "extra_info": {"interaction_kwargs": {"name": "gsm8k", "ground_truth": "72"}},
     "responses": ["...", "..."]}          # any fields a policy needs

A top-level ``interaction_kwargs`` works too. Files are JSONL (``.jsonl``,
``.json``, ``.ndjson``) or verl's parquet (``.parquet``; needs pyarrow, the
``parquet`` extra). :class:`SampleReader` streams rows one at a time, so a run's
memory does not grow with the file.

A bad row (invalid JSON, not an object, a missing or malformed ``prompt``,
``interaction_kwargs`` that is not an object) is reported with its line number
(row number for parquet). By default it is skipped and counted; with
``strict=True`` the first one raises :class:`~interactions_core.runtime.errors.DatasetError`.

:class:`LineWriter` writes JSON lines for records and traces: a line is only
ever written whole (lines are buffered and handed to the OS in complete
batches, at least once a second), so a crash never leaves half a line, and an
existing file is never overwritten unless asked.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from .errors import DatasetError

__all__ = [
    "BadRow",
    "LineWriter",
    "SampleReader",
    "check_row",
    "data_format",
    "refuse_existing",
    "same_file",
    "write_rows",
]

JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")
PARQUET_SUFFIXES = (".parquet", ".pq")
PARQUET_HINT = "reading and writing parquet needs pyarrow: pip install 'interactions-core[parquet]'"


#: ``--data -``: read the samples from standard input.
STDIN = "-"


def _is_pipe(path: str | os.PathLike[str]) -> bool:
    try:
        return stat.S_ISFIFO(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def data_format(path: str | os.PathLike[str], format: str | None = None) -> str:
    """``"jsonl"`` or ``"parquet"``, from ``format`` or the file's suffix."""
    if format is not None:
        if format not in ("jsonl", "parquet"):
            raise DatasetError(f"unknown data format {format!r}; use 'jsonl' or 'parquet'")
        return format
    if os.path.isdir(path):
        raise DatasetError(f"{os.fspath(path)} is a directory, not a data file")
    if os.fspath(path) == STDIN or _is_pipe(path):
        return "jsonl"  # a stream: JSONL (parquet needs a seekable file)
    name = os.fspath(path).lower()
    if name.endswith(JSONL_SUFFIXES):
        return "jsonl"
    if name.endswith(PARQUET_SUFFIXES):
        return "parquet"
    raise DatasetError(
        f"{os.fspath(path)}: cannot tell the format from the file name; name it .jsonl or "
        ".parquet (or pass --format)"
    )


def _import_parquet() -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise DatasetError(PARQUET_HINT) from None
    return pq


def check_row(row: Any) -> str | None:
    """Why ``row`` is not a usable sample, or ``None`` when it is."""
    if not isinstance(row, Mapping):
        return f"a row must be a JSON object, not {type(row).__name__}"
    prompt = row.get("prompt")
    if prompt is None:
        return "missing 'prompt' (a list of chat messages)"
    if not isinstance(prompt, list) or not prompt:
        return "'prompt' must be a non-empty list of chat messages"
    for i, message in enumerate(prompt):
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            return f"prompt[{i}] must be an object with a string 'role'"
    extra = row.get("extra_info")
    if extra is not None and not isinstance(extra, Mapping):
        return "'extra_info' must be an object"
    for where, kwargs in (
        ("extra_info.interaction_kwargs", extra.get("interaction_kwargs") if extra else None),
        ("interaction_kwargs", row.get("interaction_kwargs")),
    ):
        if kwargs is not None and not isinstance(kwargs, Mapping):
            return f"'{where}' must be an object"
    return None


def non_finite_field(row: Any) -> tuple[str, float] | None:
    """``(path, value)`` of the first NaN or infinite float in ``row`` (path ``a.b[2]``).

    JSON has no such values; a row holding one cannot be written faithfully.
    """
    stack: list[tuple[str, Any]] = [("", row)]
    while stack:
        where, obj = stack.pop()
        if isinstance(obj, float):
            if not math.isfinite(obj):
                return where or "<row>", obj
        elif isinstance(obj, Mapping):
            items = [(f"{where}.{k}" if where else str(k), v) for k, v in obj.items()]
            stack.extend(reversed(items))
        elif isinstance(obj, (list, tuple)):
            stack.extend(reversed([(f"{where}[{i}]", v) for i, v in enumerate(obj)]))
    return None


class BadRow:
    """A row that could not be used: where it is and why."""

    __slots__ = ("line", "path", "reason")

    def __init__(self, path: str, line: int, reason: str) -> None:
        self.path = path
        self.line = line
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "reason": self.reason}


class SampleReader:
    """Stream the valid samples of a JSONL or parquet file.

    Iterate it (once). ``skipped`` counts bad rows; ``bad_rows`` keeps the first
    ``max_examples`` of them. ``strict=True`` raises at the first bad row;
    ``limit`` stops after that many valid samples.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        strict: bool = False,
        limit: int | None = None,
        format: str | None = None,
        max_examples: int = 20,
    ) -> None:
        self.path = os.fspath(path)
        self.format = data_format(self.path, format)
        self.strict = strict
        self.limit = limit
        self.max_examples = max_examples
        self.skipped = 0
        self.rows = 0
        self.bad_rows: list[BadRow] = []
        self.stream = self.path == STDIN or _is_pipe(self.path)
        if self.format == "parquet":
            if self.stream:
                raise DatasetError(
                    f"{self.path}: parquet cannot be read from a stream; give a file"
                )
            _import_parquet()
        if not self.stream and not os.path.isfile(self.path):
            raise DatasetError(f"data file not found: {self.path}")
        if self.format == "parquet":
            self._parquet_file()  # a file that is not parquet fails here, before any episode

    def _parquet_file(self) -> Any:
        pq = _import_parquet()
        try:
            return pq.ParquetFile(self.path)
        except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ...
            raise self._unreadable(exc) from None

    def _unreadable(self, exc: BaseException) -> DatasetError:
        return DatasetError(
            f"{self.path} is not a readable parquet file: {exc}"
            + ("" if self.path.lower().endswith(PARQUET_SUFFIXES) else " (drop --format parquet?)")
        )

    def _bad(self, line: int, reason: str) -> None:
        bad = BadRow(self.path, line, reason)
        if self.strict:
            raise DatasetError(f"{bad} (bad row; run without --strict to skip bad rows)")
        self.skipped += 1
        if len(self.bad_rows) < self.max_examples:
            self.bad_rows.append(bad)

    def count(self) -> int:
        """The number of rows in the file (lines with content, for JSONL), cheaply.

        0 for standard input or a pipe, which can only be read once.
        """
        if self.stream:
            return 0
        if self.format == "parquet":
            return int(self._parquet_file().metadata.num_rows)
        count = 0
        last = b"\n"
        with open(self.path, "rb") as f:
            while chunk := f.read(1 << 20):
                count += chunk.count(b"\n")
                last = chunk[-1:]
        return count + (last != b"\n")

    def _raw_rows(self) -> Iterator[tuple[int, Any]]:
        if self.format == "parquet":
            number = 0
            batches = self._parquet_file().iter_batches(batch_size=512)
            while True:
                try:
                    batch = next(batches)
                except StopIteration:
                    return
                except Exception as exc:  # a corrupt row group
                    raise self._unreadable(exc) from None
                for row in batch.to_pylist():
                    number += 1
                    yield number, row
        if self.path == STDIN:
            source: Any = contextlib.nullcontext(sys.stdin.buffer)
        else:
            source = open(self.path, "rb")  # noqa: SIM115 - closed by the with below
        with source as f:
            for number, raw in enumerate(f, start=1):
                if not raw.strip():
                    continue
                try:
                    row = json.loads(raw)
                except UnicodeDecodeError as exc:
                    self._bad(number, f"not UTF-8 text ({exc.reason} at byte {exc.start})")
                    continue
                except ValueError as exc:
                    self._bad(number, f"invalid JSON: {exc}")
                    continue
                except RecursionError:
                    self._bad(number, "JSON nested too deeply to read")
                    continue
                yield number, row

    def __iter__(self) -> Iterator[dict[str, Any]]:
        limit = self.limit
        for number, row in self._raw_rows():
            problem = check_row(row)
            if problem is not None:
                self._bad(number, problem)
                continue
            if limit is not None and self.rows >= limit:
                return
            self.rows += 1
            yield row


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
        self._lock = threading.Lock()
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
            if self._size >= self._flush_bytes or (
                time.monotonic() - self._last_flush >= self._flush_seconds
            ):
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
        while not stop.wait(self._flush_seconds / 2):
            with self._lock:
                if self._error is not None or self._fd is None:
                    return
                if self._buffer and time.monotonic() - self._last_flush >= self._flush_seconds / 2:
                    try:
                        self._flush()
                    except DatasetError as exc:
                        self._error = exc  # raised by the next write, flush or close

    def _flush(self) -> None:
        if self._fd is None or not self._buffer:
            return
        data = memoryview(b"".join(self._buffer))
        self._buffer.clear()
        self._size = 0
        start = self._committed
        done = 0
        try:
            while done < len(data):  # os.write may write less than asked: go on
                done += os.write(self._fd, data[done:])
        except OSError as exc:
            # Keep whole lines only: cut the file back after the last complete one.
            keep = start + bytes(data[:done]).rfind(b"\n") + 1 if done else start
            try:
                os.ftruncate(self._fd, keep)
            except OSError:
                pass
            fd, self._fd = self._fd, None
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
                if self._fd is not None:  # _flush closes it itself when the disk is full
                    os.close(self._fd)
                    self._fd = None

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
