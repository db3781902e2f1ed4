"""The files a run writes, and reading its records back (``--resume``, ``interactions report``).

Writing. Every output of the CLI (records, traces, reports, datasets) first asks
whether its path may be written (:func:`refuse_existing`, :func:`is_special_file`,
:func:`same_file`), so a run never destroys a file it was not told to replace,
and ``/dev/null`` or a named pipe is written as it is. Records and traces are
appended as JSON lines by :class:`LineWriter`. A line is only ever written
whole: lines are buffered and handed to the OS in complete batches, at least
once a second, so a crash never leaves half a line; continuing a file cuts off
the torn last line an earlier crash may have left (the rule the reader below
reads by); and an existing file is never overwritten unless asked. Datasets,
written in one piece, are :func:`.datasets.write_rows`.

Reading. One reader (:func:`iter_records`) serves every consumer of a records
file (``--resume`` here, ``interactions report``), with one rule for damaged
lines:

- blank lines are ignored;
- a last line without its newline that does not parse is a *torn write* (the
  process was killed mid-write): it is ignored, and the reader says so with a
  :class:`BadLine` whose ``torn`` is true. :class:`LineWriter` cuts such a line
  off before it continues the file, and ends a whole last record that only
  lacks its newline;
- any other line that is not a JSON object is a bad line, reported with its
  line number; each consumer decides whether that is fatal.

Resuming: each record carries ``config_hash`` (the config's bytes and the
options that change episodes) and ``data_hash`` (the dataset's bytes);
:func:`read_records` refuses records of another config or dataset and returns
what is done, keyed by ``(index, repeat)`` (``repeat`` 0 when absent).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
import threading
import time
from collections.abc import Callable, Container, Iterator, Mapping
from typing import IO, Any, NamedTuple

from .. import _files
from .._files import as_text, bounded_lines, json_safe, line_too_long, lock_fd
from ..errors import DatasetError
from .record import (
    EpisodeRecord,
    error_entry,
    extras_of_counts,
    interaction_calls,
    usage_counts,
    usage_of_counts,
)

__all__ = [
    "BadLine",
    "LineWriter",
    "ResumeState",
    "config_hash",
    "data_hash",
    "encode_line",
    "is_special_file",
    "is_whole_record",
    "iter_records",
    "read_records",
    "record_key",
    "refuse_existing",
    "refuse_link",
    "same_file",
]

# -- writing: whole lines, and which paths may be written ---------------------------


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
        shorten: Callable[[Any, int], Any] | None = None,
    ) -> None:
        self.path = os.fspath(path)
        #: Makes an object whose line is over ``MAX_LINE`` fit (records: their texts cut).
        self.shorten = shorten
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
        if overwrite or append:
            refuse_link(path)
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
        line = _encoded(obj)
        if len(line) > _files.MAX_LINE and self.shorten is not None:  # what readers refuse
            line = _encoded(self.shorten(obj, _files.MAX_LINE))
        with self._lock:
            if self._error is not None:  # raised afresh: a traceback that grows costs each caller
                raise self._error.with_traceback(None)
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


def _encoded(obj: Any) -> bytes:
    try:
        text = json.dumps(obj, ensure_ascii=False, default=as_text, allow_nan=False)
    except Exception:  # NaN, a cycle, a key JSON cannot hold: see json_safe
        text = json.dumps(json_safe(obj), ensure_ascii=False, default=as_text, allow_nan=False)
    return encode_line(text, obj)


def encode_line(text: str, obj: Any) -> bytes:
    """``text`` and a newline as UTF-8; a lone surrogate is written as its ``\\uXXXX`` escape.

    Valid JSON input can hold a lone surrogate (``"\\udc80"``), which has no
    UTF-8 form. The rule for every file a run writes: such text is escaped
    (``ensure_ascii=True``, for that line only), never an error, so one odd row
    or plugin reply cannot stop a run; :func:`json.loads` reads it back as it was.
    """
    try:
        return (text + "\n").encode("utf-8")
    except UnicodeEncodeError:
        escaped = json.dumps(json_safe(obj), ensure_ascii=True, default=as_text, allow_nan=False)
        return (escaped + "\n").encode("ascii")


def is_whole_record(line: bytes) -> bool:
    """Whether ``line`` (without its newline) parses as one JSON object."""
    try:
        return isinstance(json.loads(line), dict)
    except (ValueError, RecursionError):
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


def refuse_link(path: str | os.PathLike[str]) -> None:
    """Raise :class:`DatasetError` when ``path`` is a symbolic link: an output replaced or
    continued is never written through one (nor is the link replaced by a file)."""
    if os.path.islink(path):
        raise DatasetError(
            f"{os.fspath(path)} is a symbolic link (to {os.path.realpath(path)}); refusing to "
            "write through it: name the file itself, or remove the link"
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


# -- reading: the one records reader, and resuming ---------------------------------

_HASH_CHARS = 16
#: Why a line ``json.loads`` gives up on (it recurses, one level a frame) is no record.
NESTED = "JSON nested too deeply to read"
#: Reads the usual line of :func:`iter_records`: ``json.loads``'s own decoder, as configured.
_DECODER = json.JSONDecoder()


class BadLine(NamedTuple):
    """A line of a records file that is not a record: where, why, and whether torn."""

    path: str
    number: int
    problem: str
    torn: bool = False

    def __str__(self) -> str:
        if self.torn:
            return f"{self.path}:{self.number}: a torn last line (a write cut short), ignored"
        return f"{self.path}:{self.number}: {self.problem}"


def iter_records(file: IO[bytes], path: str) -> Iterator[tuple[int, dict[str, Any] | BadLine]]:
    """Yield ``(line number, record or BadLine)`` for each non-blank line of ``file``.

    ``path`` names the file in :class:`BadLine`; see the module docstring for
    the rule on torn and bad lines.
    """
    loads, raw_decode = json.loads, _DECODER.raw_decode
    for number, line in enumerate(bounded_lines(file), 1):
        if line is None:
            yield number, BadLine(path, number, line_too_long())
            continue
        # The usual line (a JSON object in UTF-8, then a newline) skips json.loads's
        # encoding detection, a sixth of its time; json.loads answers any other.
        try:
            text = line.decode()
            record, end = raw_decode(text)
            usual = end == len(text) - 1 and text[end] == "\n" and record.__class__ is dict
        except (ValueError, RecursionError):
            usual = False
        if usual:
            yield number, record
            continue
        if not line.strip():
            continue
        try:
            record = loads(line)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested ~1,000 deep
            if not line.endswith(b"\n"):
                yield number, BadLine(path, number, "a torn last line", torn=True)
                return
            problem = f"not JSON ({exc})" if isinstance(exc, ValueError) else NESTED
            yield number, BadLine(path, number, problem)
            continue
        if isinstance(record, dict):
            yield number, record
        elif not line.endswith(b"\n"):
            yield number, BadLine(path, number, "a torn last line", torn=True)
        else:
            yield number, BadLine(path, number, "not a JSON object")


def config_hash(config_path: str | None, options: Mapping[str, Any]) -> str:
    """Fingerprint of the config file's bytes and the options that change episodes."""
    digest = hashlib.sha256()
    if config_path:
        with open(config_path, "rb") as file:
            digest.update(file.read())
    digest.update(b"\0")
    digest.update(json.dumps(options, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:_HASH_CHARS]


def data_hash(path: str) -> str | None:
    """Fingerprint of a dataset file's bytes (``None`` for standard input or a pipe)."""
    import stat

    if path == "-":
        return None
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        digest = hashlib.sha256()
        with open(path, "rb") as file:
            while chunk := file.read(1 << 20):
                digest.update(chunk)
    except OSError:
        return None  # the reader reports an unreadable file itself
    return digest.hexdigest()[:_HASH_CHARS]


def record_key(record: Mapping[str, Any]) -> tuple[int, int]:
    """``(index, repeat)`` of a record (``repeat`` 0 when absent)."""
    return int(record["index"]), int(record.get("repeat") or 0)


#: A resumed record in memory: ``(interaction, end_reason, turns, user_turns, scores,
#: final_score, errors, sample_id, usage, interaction_usage)``; errors and sample_id for
#: records with errors only, each usage (:func:`.record.usage_counts`) for records that
#: have one.
Compact = tuple[Any, ...]
_SHARED_LIMIT = 4096  # distinct compact values shared between records, at most


def _compact(data: Mapping[str, Any]) -> Compact:
    """What the summary needs of a stored record (no messages, no ids)."""
    final, errors = data.get("final_score"), data.get("errors")
    interaction = data.get("interaction")
    return (
        sys.intern(interaction) if isinstance(interaction, str) else None,
        sys.intern(str(data.get("end_reason") or "error")),
        int(data.get("turns") or 0),
        int(data.get("user_turns") or 0),
        tuple(float(s) for s in data.get("scores") or [] if isinstance(s, (int, float))),
        float(final) if isinstance(final, (int, float)) else None,
        [dict(error_entry(e)) for e in errors] if errors else None,
        data.get("sample_id") if errors else None,
        usage_counts(data.get("usage")),
        usage_counts(interaction_calls(data.get("extras"))),
    )


class ResumeState:
    """What an existing record file holds: the latest record of each ``(index, repeat)``.

    A file may hold millions of records, so each keeps only the counters the
    summary needs, and equal ones (most records of a run look alike) share one
    tuple: a small fraction of a whole record.
    """

    def __init__(self) -> None:
        self.records: dict[tuple[int, int], Compact] = {}
        self.lines = 0
        self.unmarked = 0  # records without fingerprints (written by an older version)
        self._shared: dict[Compact, Compact] = {}

    def keep(self, key: tuple[int, int], data: Mapping[str, Any]) -> None:
        """Keep ``data`` as the latest record of ``key``."""
        value = _compact(data)
        if value[6] is None:  # no errors: hashable, and likely equal to another
            shared = self._shared.get(value)
            if shared is not None:
                value = shared
            elif len(self._shared) < _SHARED_LIMIT:
                self._shared[value] = value
        self.records[key] = value

    def done(self, retry_errors: bool = False) -> set[tuple[int, int]]:
        """Keys not to run again (errored ones too, unless ``retry_errors``)."""
        if not retry_errors:
            return set(self.records)
        return {key for key, value in self.records.items() if not value[6]}

    def episodes(self, keys: Container[tuple[int, int]]) -> Iterator[EpisodeRecord]:
        """The kept records of ``keys``, as :class:`EpisodeRecord` counters (no messages)."""
        for (index, repeat), value in self.records.items():
            if (index, repeat) in keys:
                record = EpisodeRecord(index, value[7], repeat)
                record.interaction, record.end_reason, record.turns = value[:3]
                record.user_turns, record.final_score = value[3], value[5]
                record.scores = list(value[4])
                if value[6]:
                    record.errors = [dict(e) for e in value[6]]
                if value[8] is not None:
                    record.usage = usage_of_counts(value[8])
                if value[9] is not None:  # as an extra holding the interaction's calls
                    record.extras = extras_of_counts(value[9])
                yield record


def read_records(
    path: str, config: str, data: str | None, *, samples: int | None = None
) -> ResumeState:
    """Read ``path``'s records; refuse them when they come from another config or dataset.

    A line that is not a usable record (:func:`.record.record_problem`;
    ``samples``: the dataset's size, which every ``index`` must be below) is
    refused with its line number.
    """
    from .record import record_problem

    state = ResumeState()
    try:
        file = open(path, "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        return state
    except OSError as exc:
        raise DatasetError(f"cannot read {path} to resume: {exc.strerror or exc}") from None
    with file:
        for number, record in iter_records(file, path):
            if isinstance(record, BadLine) and record.torn:
                sys.stderr.write(f"note: {record}; that sample runs again\n")
                break
            problem = record.problem if isinstance(record, BadLine) else None
            if not isinstance(record, BadLine):
                problem = record_problem(record, samples)
            if problem is not None or isinstance(record, BadLine):
                raise DatasetError(
                    f"{path}:{number}: not a record of `interactions run` ({problem}); "
                    "--resume needs the --output file of an earlier run (or a new file name)"
                )
            key = record_key(record)
            _check_fingerprints(state, record, f"{path}:{number}", config, data)
            state.keep(key, record)
            state.lines += 1
    return state


def _check_fingerprints(
    state: ResumeState, record: Mapping[str, Any], where: str, config: str, data: str | None
) -> None:
    """Refuse ``record`` when it comes from another config or dataset; count unmarked ones."""
    seen_config = record.get("config_hash")
    seen_data = record.get("data_hash")
    if seen_config is None and seen_data is None:
        state.unmarked += 1
    elif seen_config != config:
        raise DatasetError(
            f"{where}: this record was made with another config or other "
            "run options (policy, its options, turn limits, default interaction, --repeat); "
            "resume with the same ones, or write to a new --output file"
        )
    elif data is not None and seen_data is not None and seen_data != data:
        raise DatasetError(
            f"{where}: this record was made from another dataset than "
            "--data; resume with the same data, or write to a new --output file"
        )
