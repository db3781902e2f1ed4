"""The records file of ``interactions run --output``: reading it, and resuming a run.

One reader (:func:`iter_records`) serves every consumer of a records file
(``--resume`` here, ``interactions report``), with one rule for damaged lines:

- blank lines are ignored;
- a last line without its newline that does not parse is a *torn write* (the
  process was killed mid-write): it is ignored, and the reader says so with a
  :class:`BadLine` whose ``torn`` is true. :class:`~.writers.LineWriter` cuts
  such a line off before it continues the file, and ends a whole last record
  that only lacks its newline;
- any other line that is not a JSON object is a bad line, reported with its
  line number; each consumer decides whether that is fatal.

Resuming: every record written by ``interactions run`` carries two short
fingerprints, ``config_hash`` (the config file's bytes and the options that
change what an episode does: policy and its options, turn limits, default
interaction) and ``data_hash`` (the dataset file's bytes).
:func:`read_records` refuses records made from another config or
dataset, and returns what is done, keyed by ``(index, repeat)`` (``repeat`` is
0 for records without one), so resuming also works for runs that play each
sample several times.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Iterator, Mapping
from typing import IO, Any, NamedTuple

from .errors import DatasetError
from .record import EpisodeRecord

__all__ = [
    "BadLine",
    "ResumeState",
    "config_hash",
    "data_hash",
    "iter_records",
    "read_records",
    "record_key",
]

_HASH_CHARS = 16


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
    loads = json.loads
    for number, line in enumerate(file, 1):
        if not line.strip():
            continue
        try:
            record = loads(line)
        except ValueError as exc:
            if not line.endswith(b"\n"):
                yield number, BadLine(path, number, "a torn last line", torn=True)
                return
            yield number, BadLine(path, number, f"not JSON ({exc})")
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


def _light_record(data: Mapping[str, Any]) -> EpisodeRecord:
    """An :class:`EpisodeRecord` with a stored record's counters (no messages kept)."""
    record = EpisodeRecord(int(data["index"]), data.get("sample_id"))
    record.interaction = data.get("interaction")
    record.instance_id = data.get("instance_id")
    record.end_reason = str(data.get("end_reason") or "error")
    record.turns = int(data.get("turns") or 0)
    record.user_turns = int(data.get("user_turns") or 0)
    record.scores = [float(s) for s in data.get("scores") or [] if isinstance(s, (int, float))]
    final = data.get("final_score")
    record.final_score = float(final) if isinstance(final, (int, float)) else None
    errors = data.get("errors") or []
    if errors:
        record.errors = [dict(e) if isinstance(e, Mapping) else {"message": str(e)} for e in errors]
    return record


class ResumeState:
    """What an existing record file holds: the latest record of each ``(index, repeat)``."""

    def __init__(self) -> None:
        self.records: dict[tuple[int, int], EpisodeRecord] = {}
        self.lines = 0
        self.unmarked = 0  # records without fingerprints (written by an older version)

    def done(self, retry_errors: bool = False) -> set[tuple[int, int]]:
        """Keys not to run again (errored ones too, unless ``retry_errors``)."""
        if not retry_errors:
            return set(self.records)
        return {key for key, record in self.records.items() if not record.errors}


def read_records(path: str, config: str, data: str | None) -> ResumeState:
    """Read ``path``'s records; refuse them when they come from another config or dataset."""
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
            try:
                if isinstance(record, BadLine):
                    raise ValueError(record.problem)
                key = record_key(record)
            except (ValueError, KeyError, TypeError):
                raise DatasetError(
                    f"{path}:{number}: not a record of `interactions run`; --resume needs "
                    "the --output file of an earlier run (or a new file name)"
                ) from None
            _check_fingerprints(state, record, f"{path}:{number}", config, data)
            state.records[key] = _light_record(record)
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
            "run options (policy, its options, turn limits, default interaction); "
            "resume with the same ones, or write to a new --output file"
        )
    elif data is not None and seen_data is not None and seen_data != data:
        raise DatasetError(
            f"{where}: this record was made from another dataset than "
            "--data; resume with the same data, or write to a new --output file"
        )
