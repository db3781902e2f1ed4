"""Datasets: reading samples one at a time, and reporting bad rows.

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

:func:`write_rows` writes a dataset (``interactions data``) in one piece: under
a temporary name next to its destination, moved into place only when
complete, so a builder that fails half-way never leaves a partial file that a
later run would read as the whole dataset. Records and traces are
:mod:`interactions_core.runtime.records`.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
import sys
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from .._files import replacing
from .errors import DatasetError
from .records import LineWriter, is_special_file, refuse_existing

__all__ = ["BadRow", "SampleReader", "check_row", "data_format", "write_rows"]

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
    checked = _checked(rows, strict)
    if is_special_file(path):  # /dev/null: write to it directly, never replace it
        return _write(fmt, os.fspath(path), checked)
    try:
        with replacing(path, overwrite=overwrite) as tmp:
            return _write(fmt, tmp, checked)
    except FileExistsError:
        refuse_existing(path, False)
        raise
    except DatasetError:
        raise
    except OSError as exc:
        raise DatasetError(f"cannot write {os.fspath(path)}: {exc.strerror or exc}") from None


def _checked(rows: Iterable[Mapping[str, Any]], strict: bool) -> Iterator[Mapping[str, Any]]:
    """``rows``, raising at the first invalid one when ``strict``."""
    for number, row in enumerate(rows, start=1):
        problem = check_row(row) if strict else None
        if problem is None and strict:
            found = non_finite_field(row)
            if found is not None:
                problem = f"field {found[0]} is {found[1]}, which JSON cannot hold"
        if problem is not None:
            raise DatasetError(f"row {number} produced by the builder is invalid: {problem}")
        yield row


def _write(fmt: str, path: str, rows: Iterable[Mapping[str, Any]]) -> int:
    """Write ``rows`` to ``path`` in format ``fmt`` (``jsonl`` or ``parquet``); the count."""
    if fmt == "jsonl":
        count = 0
        with LineWriter(path, overwrite=True) as writer:
            for row in rows:
                writer.write(row)
                count += 1
        return count
    pq = _import_parquet()
    import pyarrow as pa

    table = pa.Table.from_pylist([dict(r) for r in rows])
    pq.write_table(table, path)
    return int(table.num_rows)
