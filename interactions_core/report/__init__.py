"""Run reports: one self-contained HTML file from the records of one or more runs.

``interactions report RECORDS... -o report.html`` and ``interactions run ...
--report report.html`` both end here. This module reads records in one pass
(two for a file that recorded a (sample, repeat) again) with bounded memory
(through the one records reader, :mod:`interactions_core.runtime.records`) and
writes the page whole (never half a report); :mod:`.page` lays out the page,
its tables, stylesheet and script; :mod:`.figures` writes every number the one
way and draws the plots as SVG.
See ``docs/report.md``.

A records file (``interactions run --output``) can hold 100,000 episodes with
whole conversations, far more than a page should carry. :class:`RunData` keeps
the run's figures as counters (:class:`~interactions_core.runtime.summary.SummaryStats`),
one float per episode for the duration plot, and only a bounded set of
conversations: the errored episodes first seen, the lowest final scores, and a
uniform random sample (reservoir sampling with a fixed seed, so the same file
gives the same report).
"""

from __future__ import annotations

import heapq
import json
import math
import os
import random
import stat
from array import array
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .._files import write_atomically
from ..errors import InteractionsError
from ..runtime.record import error_entry, record_problem
from ..runtime.records import BadLine, is_special_file, iter_records
from ..runtime.stats import GroupStats
from ..runtime.summary import SummaryStats
from .page import render

__all__ = ["RecordsError", "RunData", "read_records", "render", "write_report"]

#: Conversations kept per run: errored, worst-scoring and randomly sampled.
ERRORED_KEPT = 50
WORST_KEPT = 50
SAMPLE_KEPT = 150
#: Characters of one message kept in the report; longer ones are cut and marked.
MESSAGE_CHARS = 4000
#: Messages of one conversation shown: the first and the last half of these, and how
#: many were left out between them (an episode may hold a great many).
MESSAGES_SHOWN = 40
#: Errors of one episode shown (each field cut as a message is).
ERRORS_SHOWN = 20
#: Characters of a role shown (roles are short words; a record may say otherwise).
ROLE_CHARS = 40
#: Unreadable lines described in full.
BAD_LINES_SHOWN = 5
#: Characters of a sample id, an interaction name or an end reason shown.
NAME_CHARS = 200
#: Interactions (rows and curves) and error kinds shown per run: those with the most
#: episodes; the others are in the totals, and a note says how many there are.
GROUPS_SHOWN = 50


class RecordsError(InteractionsError, ValueError):
    """A records file cannot be read as the output of ``interactions run --output``."""


def _clip(text: Any) -> str:
    if not isinstance(text, str):
        text = "" if text is None else json.dumps(text, ensure_ascii=False, default=str)
    if len(text) > MESSAGE_CHARS:
        cut = len(text) - MESSAGE_CHARS
        return text[:MESSAGE_CHARS] + f"\n[... {cut:,} more characters not shown]"
    return text


def _short(value: Any) -> Any:
    """``value`` itself when its text is short (an id keeps its JSON type), else that text
    cut to ``NAME_CHARS``: one record's 200 KB id made 200 KB of page per view."""
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, default=str)
        except (ValueError, TypeError, RecursionError):  # an int past Python's digit limit
            return "<a value too large to show>"
    if len(text) <= NAME_CHARS:
        return value
    return text[:NAME_CHARS] + f"[... {len(text) - NAME_CHARS:,} more characters not shown]"


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _count(value: Any) -> int:
    return value if isinstance(value, int) and value > 0 else 0


def _messages_view(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The messages shown, each with its ``kind`` (prompt role, ``assistant``, ``feedback``),
    ``label`` and turn ``score``, labelled over the whole conversation before it is cut to
    ``MESSAGES_SHOWN`` (the first and last half, and a note of how many were left out);
    each message cut to ``MESSAGE_CHARS``."""
    messages = record.get("messages")
    kept = [m for m in messages if isinstance(m, Mapping)] if isinstance(messages, list) else []
    given = record.get("scores")
    scores: list[Any] = given if isinstance(given, list) else []
    prompt = len(kept) - _count(record.get("turns")) - _count(record.get("user_turns"))
    half, left = MESSAGES_SHOWN // 2, len(kept) - MESSAGES_SHOWN
    views: list[dict[str, Any]] = []
    turn = 0
    for k, message in enumerate(kept):
        role = str(message.get("role", "?"))[:ROLE_CHARS]
        kind, label, score = role, f"{role} (prompt)" if k < prompt else role, None
        if k >= prompt and role == "assistant":
            turn += 1
            label = f"assistant, turn {turn}"
            score = scores[turn - 1] if turn <= len(scores) else None
        elif k >= prompt and role == "user":
            kind, label = "feedback", f"interaction feedback after turn {turn}"
        if left <= 0 or k < half or k >= len(kept) - half:
            content = _clip(message.get("content"))
            views.append({"kind": kind, "label": label, "score": score, "content": content})
        elif k == half:
            note = f"[... {left:,} messages not shown]"
            views.append({"kind": "note", "label": "...", "score": None, "content": note})
    return views


def episode_view(record: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a record the report shows, with long messages and conversations cut."""
    return {
        "index": _short(record.get("index")),
        "sample_id": _short(record.get("sample_id")),
        "interaction": _short(record.get("interaction")),
        "end_reason": _short(record.get("end_reason")),
        "turns": record.get("turns"),
        "user_turns": record.get("user_turns"),
        "final_score": record.get("final_score"),
        "duration_s": record.get("duration_s"),
        "errors": [
            {k: _clip(entry.get(k)) for k in ("where", "type", "message")}
            for entry in map(error_entry, _listed(record.get("errors"))[:ERRORS_SHOWN])
        ],
        "messages": _messages_view(record),
    }


class RunData:
    """One run's figures and kept episodes, fed one record at a time."""

    def __init__(self, label: str, *, seed: int = 0) -> None:
        self.label = label
        self.stats = SummaryStats()
        self.durations = array("d")
        self.errored: list[dict[str, Any]] = []
        self._worst: list[tuple[float, int, dict[str, Any]]] = []  # min-heap of -score
        self._sample: list[tuple[int, dict[str, Any]]] = []
        self._random = random.Random(seed)
        self._eligible = 0  # episodes without error so far
        self._next_kept = 0  # the one of those the sample takes next
        self._w = 1.0
        self.seen = 0
        self.bad_lines = 0
        self.bad_examples: list[str] = []
        self.torn_line: str | None = None  # the note on a torn last line, if any
        self.superseded = 0  # records replaced by a later one of the same (sample, repeat)
        #: The (config_hash, data_hash) pairs of the records: more than one, and the file
        #: holds several runs (files joined with cat), which are counted as one.
        self.fingerprints: set[tuple[Any, Any]] = set()

    def note_bad_line(self, line: BadLine) -> None:
        """Count an unreadable line (a torn last line is only noted, not counted)."""
        if line.torn:
            self.torn_line = str(line)
            return
        self.bad_lines += 1
        if len(self.bad_examples) < BAD_LINES_SHOWN:
            self.bad_examples.append(str(line))

    def note_run_of(self, record: Mapping[str, Any]) -> None:
        """Note which run wrote ``record`` (its fingerprints), counted or replaced."""
        config_hash = record.get("config_hash")
        if config_hash is not None and len(self.fingerprints) < 10:
            self.fingerprints.add((config_hash, record.get("data_hash")))

    def add(self, record: Mapping[str, Any]) -> None:
        """Count one record and keep its conversation if it is one the report shows."""
        self.stats.add_dict(record)
        get = record.get
        duration = get("duration_s")
        if isinstance(duration, (int, float)) and duration >= 0:
            self.durations.append(float(duration))
        seen = self.seen
        self.seen = seen + 1
        if get("errors"):
            if len(self.errored) < ERRORED_KEPT:
                self.errored.append(episode_view(record))
            return
        final = get("final_score")
        if isinstance(final, (int, float)):
            worst, negated = self._worst, -float(final)
            if len(worst) < WORST_KEPT:
                heapq.heappush(worst, (negated, -seen, episode_view(record)))
            elif negated > worst[0][0]:  # a tie keeps the earlier episode (greater -seen)
                heapq.heapreplace(worst, (negated, -seen, episode_view(record)))
        # Reservoir sample (Li's Algorithm L: random draws only when an episode is
        # kept, not per episode); what is kept is the view, of bounded size.
        eligible = self._eligible
        self._eligible = eligible + 1
        if eligible == self._next_kept:
            if len(self._sample) < SAMPLE_KEPT:
                self._sample.append((seen, episode_view(record)))
                self._next_kept += 1
                if len(self._sample) == SAMPLE_KEPT:
                    self._w = math.exp(math.log(self._uniform()) / SAMPLE_KEPT)
                    self._skip()
            else:
                self._sample[self._random.randrange(SAMPLE_KEPT)] = (seen, episode_view(record))
                self._w *= math.exp(math.log(self._uniform()) / SAMPLE_KEPT)
                self._skip()

    def _uniform(self) -> float:
        """A uniform draw in (0, 1): never 0, whose logarithm is undefined."""
        return 1.0 - self._random.random()

    def _skip(self) -> None:
        """Choose the next episode to enter the full reservoir."""
        gap = math.floor(math.log(self._uniform()) / math.log1p(-self._w)) if self._w < 1 else 0
        self._next_kept += gap + 1

    @property
    def worst(self) -> list[dict[str, Any]]:
        """The lowest final scores among episodes without error, lowest first."""
        return [view for _, _, view in sorted(self._worst, key=lambda t: (-t[0], -t[1]))]

    @property
    def sample(self) -> list[dict[str, Any]]:
        """A uniform sample of the episodes without error, in file order."""
        return [view for _, view in sorted(self._sample, key=lambda t: t[0])]

    def shown_groups(self) -> tuple[list[tuple[str, GroupStats]], int]:
        """The interactions the page shows, by name (cut when long), and how many more.

        At most ``GROUPS_SHOWN``, those with the most episodes: records naming
        40,000 interactions made a table row and a curve each (a 29 MB page).
        """
        groups = self.stats.groups
        names = list(groups)
        if len(names) > GROUPS_SHOWN:
            names = heapq.nsmallest(GROUPS_SHOWN, names, key=lambda n: (-groups[n].episodes, n))
        names.sort()
        return [(_short(name), groups[name]) for name in names], len(groups) - len(names)

    def shown_error_kinds(self) -> tuple[list[tuple[str, int]], int]:
        """The error kinds the page shows (at most ``GROUPS_SHOWN``, the most frequent
        first) and how many more there are."""
        kinds = self.stats.total.errors_by_kind
        shown = heapq.nsmallest(GROUPS_SHOWN, kinds.items(), key=lambda kv: (-kv[1], kv[0]))
        return [(_short(kind), n) for kind, n in shown], len(kinds) - len(shown)


def _label(path: str, taken: set[str]) -> str:
    base = os.path.basename(path) or path
    label, n = base, 2
    while label in taken:
        label, n = f"{base} ({n})", n + 1
    taken.add(label)
    return label


def read_records(paths: Iterable[str]) -> list[RunData]:
    """Read each records file into a :class:`RunData` (one per file, in order).

    Lines are read by :func:`~interactions_core.runtime.records.iter_records`:
    blank lines are ignored, a torn last line is noted, and any other line that
    is not a JSON object is counted as unreadable and shown in the report. A
    file with no record at all, or whose first record lacks the record's
    fields, is refused: it is most likely the dataset (``--data``) rather than
    the ``--output`` file.

    After ``--retry-errors`` a file holds an errored record and, later, its
    replacement: as in the run's own summary, only the last record of each
    (sample, repeat) counts. Which line that is can be known only at the end of
    the file, so a file is counted in one reading while no (sample, repeat)
    comes twice (the common case); at the first that does (or at a first line
    that is no episode record, which a later record could replace), the reading
    goes on to the end only to find each one's last line, and the file is read
    again to count. A pipe, which cannot be read twice, is first copied to an
    unnamed temporary file (as large as what it carries) and read from there.
    """
    runs: list[RunData] = []
    taken: set[str] = set()
    for path in paths:
        label = _label(path, taken)
        try:
            handle = open(path, "rb")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise RecordsError(
                f"cannot read {path}: {exc.strerror or exc} (give the file written by "
                "interactions run --output)"
            ) from None
        with handle:
            _refuse_devices(handle, path)
            with _readable_twice(handle, path) as source:
                last: dict[int, int] = {}
                run = _read_run(source, path, label, None, last)
                if run is None:
                    source.seek(0)
                    run = _read_run(source, path, label, last or None, None)
        assert run is not None  # only a first reading (given ``found``) stops
        if not run.seen:
            what = f"{run.bad_lines} unreadable lines" if run.bad_lines else "no records"
            raise RecordsError(
                f"{path} has {what}; interactions report needs the records written by "
                "interactions run --output"
            )
        runs.append(run)
    return runs


def _readable_twice(handle: Any, path: str) -> Any:
    """``handle`` itself when it is a regular file; else what it carries, copied to an
    unnamed temporary file (deleted when closed), so every source is counted alike."""
    import contextlib

    if stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
        return contextlib.nullcontext(handle)
    import shutil
    import tempfile

    copy = tempfile.TemporaryFile()  # noqa: SIM115 - the caller closes it
    try:
        shutil.copyfileobj(handle, copy, 1 << 20)
    except OSError as exc:
        copy.close()
        raise RecordsError(
            f"cannot keep the records read from {path} in a temporary file: "
            f"{exc.strerror or exc} (give the records file itself)"
        ) from None
    copy.seek(0)
    return copy


def _read_run(
    handle: Any,
    path: str,
    label: str,
    last: dict[int, int] | None,
    found: dict[int, int] | None,
) -> RunData | None:
    """Count a file's records, skipping each that a later line of ``last`` replaces.

    Given ``found`` (an empty dict), this is a first reading, without ``last``:
    it notes each record's line there and returns ``None`` where knowing
    ``last`` could change what is counted, at a (sample, repeat) seen twice or
    at a first line that is no episode record. ``found`` then holds the line of
    each one's last record, or nothing when none comes twice.
    """
    run = RunData(label)
    records = iter_records(handle, path)
    for number, record in records:
        if isinstance(record, BadLine):
            run.note_bad_line(record)
            continue
        problem = record_problem(record)
        if problem is None:
            key = _key(record)
            run.note_run_of(record)
        elif run.seen or "end_reason" in record:
            run.note_bad_line(BadLine(path, number, problem))
            continue
        else:  # a first line that is no episode record: refused below
            key = -1
        if last is not None and last.get(key, number) != number:
            run.superseded += 1  # a later record of this (sample, repeat) counts
            continue
        if found is not None and problem is None:
            if key in found:
                found[key] = number
                _last_lines(records, found)
                return None
            found[key] = number
        if not run.seen and "end_reason" not in record:
            if found is not None:
                if not _last_lines(records, found):
                    found.clear()
                return None
            raise RecordsError(
                f"{path}:{number} is not an episode record (it has no 'end_reason'); "
                "interactions report reads the file written by interactions run "
                "--output, not the dataset"
            )
        run.add(record)
    return run


def _key(record: Mapping[str, Any]) -> int:
    """``(index, repeat)`` of a checked record packed in one int: less memory.

    ``index`` is below ``2 ** 63`` (:func:`record_problem`), so each pair has its
    own int; without a repeat it is the index itself.
    """
    repeat = record.get("repeat")
    return record["index"] + (repeat << 63) if repeat else record["index"]


def _last_lines(records: Iterable[tuple[int, Any]], last: dict[int, int]) -> bool:
    """Note in ``last`` the line of each usable record by its (sample, repeat).

    Returns whether a (sample, repeat) came twice, ``last`` counting as read before.
    """
    repeated = False
    for number, record in records:
        if not isinstance(record, BadLine) and record_problem(record) is None:
            key = _key(record)
            repeated = repeated or key in last
            last[key] = number
    return repeated


def _refuse_devices(handle: Any, path: str) -> None:
    """A device (``/dev/zero``) is no records file: it may never end, or never hold a line."""
    mode = os.fstat(handle.fileno()).st_mode
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        raise RecordsError(
            f"{path} is a device, not a records file; give the file written by "
            "interactions run --output"
        )


# -- the page, written whole ------------------------------------------------------


def write_report(
    runs: Sequence[RunData], path: str | os.PathLike[str], *, title: str | None = None
) -> int:
    """Render ``runs`` and write the page to ``path`` whole; return its size in bytes.

    The page is written under a temporary name and renamed into place, so a
    reader never sees half a report. A device or a named pipe (``/dev/stdout``
    piped on) is written to as it is: renaming onto it would replace it.
    """
    # A lone surrogate in a record (valid JSON) has no UTF-8 form: shown as its escape.
    data = render(runs, title=title).encode("utf-8", errors="backslashreplace")
    target = os.fspath(path)
    try:
        if is_special_file(target):
            with open(target, "wb") as handle:
                handle.write(data)
        else:
            write_atomically(target, data)
    except OSError as exc:
        raise RecordsError(f"cannot write the report {target}: {exc.strerror or exc}") from None
    return len(data)


def report_from_files(
    paths: Iterable[str], output: str | os.PathLike[str], *, title: str | None = None
) -> int:
    """Read records files and write their report (the ``interactions report`` command)."""
    return write_report(read_records(paths), output, title=title)
