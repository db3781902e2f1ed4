"""Writing a dataset (``interactions data``) atomically, as JSONL or parquet.

A dataset is written under a temporary name next to its destination and moved
into place only when complete, so a builder that fails half-way never leaves a
partial file that a later run would read as the whole dataset.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ..datasets import _import_parquet, check_row, data_format, non_finite_field
from ..errors import DatasetError
from ._lines import LineWriter
from ._targets import is_special_file, refuse_existing

__all__ = ["write_rows"]


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
    special = is_special_file(path)  # /dev/null: write to it directly, never replace it
    tmp = os.fspath(path) if special else _temporary_next_to(path)
    try:
        count = _write(fmt, tmp, _checked(rows, strict))
        if not special:
            _publish(tmp, os.fspath(path), overwrite)
    finally:
        if not special and os.path.exists(tmp):
            os.remove(tmp)
    return count


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


def _temporary_next_to(path: str | os.PathLike[str]) -> str:
    """An empty file beside ``path``, with the permissions a plain ``open()`` would give.

    Created exclusively under an unpredictable name, so nothing planted in
    advance (a symbolic link) can be written through.
    """
    import tempfile

    folder, base = os.path.split(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{base}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise DatasetError(f"cannot write {os.fspath(path)}: {exc.strerror or exc}") from None
    umask = os.umask(0)
    os.umask(umask)
    os.fchmod(fd, 0o666 & ~umask)
    os.close(fd)
    return tmp


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
