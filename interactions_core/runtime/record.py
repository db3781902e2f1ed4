"""The record of one episode: what happened, as the ``--output`` JSONL line says it.

Its ``end_reason`` is one of :data:`END_REASONS`, defined with the episode step
(:mod:`.step`) that decides them.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Mapping
from typing import Any

from .._classes import fault_location
from .._files import MAX_NESTING, json_safe
from ..errors import (
    MAX_MESSAGE,
    cut_text,
    exception_kind,
    exception_text,
    made_by_runtime,
    plugin_exception,
)
from .step import END_REASONS, ERROR

__all__ = [
    "END_REASONS",
    "ERRORS_NOT_KEPT",
    "MAX_ERRORS",
    "MAX_TURNS",
    "WALL_OFFSET",
    "EpisodeRecord",
    "error_count",
    "error_entry",
    "error_kind",
    "extras_of_counts",
    "interaction_calls",
    "record_problem",
    "shorten_record",
    "usage_counts",
    "usage_of_counts",
]

#: The most errors one record keeps: a hook that raises on every turn of a long episode
#: had kept one entry per turn (6,000 of 10 kB: a 62 MB record, and 500 MB in memory).
#: Past it, one last entry counts the ones not kept.
MAX_ERRORS = 100
#: The ``type`` of that last entry.
ERRORS_NOT_KEPT = "ErrorsNotKept"

#: Add to a ``perf_counter`` reading to get wall-clock (epoch) seconds.
WALL_OFFSET = time.time() - time.perf_counter()


_NO_ERRORS: list[dict[str, Any]] = []  # shared and never appended to

#: The fields that can hold a plugin's or the policy's own objects: (field, where, what,
#: what is kept when it cannot be written).
_PLUGIN_VALUES: tuple[tuple[str, str, str, Any], ...] = (
    ("messages", "messages", "the conversation", []),
    ("extras", "extras", "a turn's extra", None),
    ("usage", "policy.usage", "the policy's usage", None),
    ("sample_id", "sample", "the sample's id", None),
)


#: The keys of an ``--output`` record, in the order they are written.
RECORD_FIELDS = (
    "index",
    "repeat",
    "sample_id",
    "interaction",
    "instance_id",
    "end_reason",
    "turns",
    "user_turns",
    "scores",
    "final_score",
    "errors",
    "started_at",
    "duration_s",
    "usage",
    "messages",
)


#: Text a record's values may repeat (the same string or long integer at many places)
#: and still count as plain data: past it they go through ``json_safe``, which refuses
#: more than a line holds, rather than to the writer, which would build it all first.
_AGAIN = 1 << 20


def _plain(obj: Any, seen: set[int], again: list[int], depth: int = 0) -> bool:
    """Whether ``obj`` is JSON data of the exact built-in types (``type``, which a class
    cannot fake), no list or mapping in it twice, under :data:`_AGAIN` of text repeated,
    no integer too long to print: no code of a plugin's runs to write, draw or count it,
    and it is written about as large as it looks. ``seen``: the ids of the lists,
    mappings, long strings and long integers met so far; ``again``: the characters of
    long text met again, and of short strings, numbers and constants in all (each at
    its longest printed form), past 16 MiB of which the value goes to ``json_safe``."""
    kind = type(obj)
    if kind is str:
        return _text(obj, seen, again)
    if kind is float or kind is bool or obj is None:  # counted at their longest form
        again[1] += 24 if kind is float else 5
        return again[1] <= 16 * _AGAIN
    if kind is int:
        bits = obj.bit_length()
        if bits <= 64:
            again[1] += 20
            return again[1] <= 16 * _AGAIN
        if bits >= 13_000 or id(obj) in seen:  # (str() allows 4,300 digits)
            again[0] += bits // 3
            return bits < 13_000 and again[0] <= _AGAIN
        seen.add(id(obj))
        return True
    if depth >= MAX_NESTING or id(obj) in seen:
        return False
    if kind is list:
        seen.add(id(obj))
        for value in obj:  # noqa: SIM110 - a loop, not all(): this runs for every record
            if not _plain(value, seen, again, depth + 1):
                return False
        return True
    if kind is dict:
        seen.add(id(obj))
        for key, value in obj.items():
            if type(key) is not str:
                return False
            if len(key) < 32:  # a short key (nearly every key), as _text counts it
                again[1] += len(key)
            elif not _text(key, seen, again):
                return False
            value_kind = type(value)
            if value_kind is str and len(value) < 32:  # (the same, without the calls)
                again[1] += len(value)
            elif not _plain(value, seen, again, depth + 1):
                return False
        return again[1] <= 16 * _AGAIN
    return False


def _text(text: str, seen: set[int], again: list[int]) -> bool:
    """The share of :func:`_plain` for one string, a value or a key: a short one counts
    each time (a short word a million times is a large line too), a long one each time
    it is met again."""
    size = len(text)
    if size < 32:
        again[1] += size
        return again[1] <= 16 * _AGAIN
    if id(text) in seen:
        again[0] += size
        return again[0] <= _AGAIN
    seen.add(id(text))
    return True


class EpisodeRecord:
    """What happened in one episode. ``to_dict()`` is the JSONL record."""

    __slots__ = (
        "duration_s",
        "end_reason",
        "errors",
        "extras",
        "final_score",
        "index",
        "instance_id",
        "interaction",
        "messages",
        "repeat",
        "sample_id",
        "scores",
        "stage",
        "started_at",
        "turns",
        "usage",
        "user_turns",
    )

    def __init__(self, index: int, sample_id: Any, repeat: int = 0) -> None:
        self.index = index
        self.repeat = repeat  # which of the sample's --repeat episodes (0-based)
        self.sample_id = sample_id
        self.interaction: str | None = None
        self.instance_id: str | None = None
        self.messages: list[dict[str, Any]] = []
        self.scores: list[float] = []
        self.turns = 0
        self.user_turns = 0
        self.end_reason = ERROR
        self.final_score: float | None = None
        self.errors: list[dict[str, Any]] = _NO_ERRORS  # replaced by a list on the first error
        self.started_at = 0.0  # a perf_counter reading; to_dict() gives epoch seconds
        self.duration_s = 0.0
        self.usage: dict[str, Any] | None = None  # the policy's accounting (tokens, latency)
        #: Each judged turn's ``extra`` (aligned with ``scores``), once any turn returned one.
        self.extras: list[dict[str, Any]] | None = None
        #: Where the episode is (a lifecycle method, ``policy.reply``, ...): an error's ``where``.
        self.stage = "sample"

    @property
    def ok(self) -> bool:
        """True when the episode ran without any error."""
        return not self.errors

    def add_error(self, where: str, exc: BaseException, about: str = "") -> None:
        """Record ``exc``, raised in ``where`` (a lifecycle method, ``policy.reply``, ...);
        ``about`` begins its message, saying what the runtime was doing."""
        entry: dict[str, Any] = {
            "where": where,
            "interaction": self.interaction,
            "instance_id": self.instance_id,
            "type": exception_kind(exc),
            "message": cut_text(about + exception_text(exc), MAX_MESSAGE),
        }
        cause = plugin_exception(exc)
        if made_by_runtime(exc):  # a plugin's own InteractionCallError is told as raised
            entry["where"] = exc.method  # type: ignore[attr-defined]
            entry["type"] = exception_kind(cause)
        entry.update(fault_location(cause))
        if self.errors is _NO_ERRORS:
            self.errors = []
        errors = self.errors
        if len(errors) < MAX_ERRORS:
            errors.append(entry)
            return
        if len(errors) == MAX_ERRORS:
            errors.append({"where": "record", "type": ERRORS_NOT_KEPT, "message": ""})
        left_out = errors[-1]["left_out"] = errors[-1].get("left_out", 0) + 1
        errors[-1]["message"] = (
            f"{left_out:,} more error(s) after the first {MAX_ERRORS} were not kept "
            f"(the last: {entry['where']}: {entry['type']})"
        )

    def keep_extra(self, extra: dict[str, Any]) -> None:
        """Keep the ``extra`` of the turn just judged (``{}`` fills earlier turns without one)."""
        if self.extras is None:
            self.extras = [{} for _ in range(len(self.scores) - 1)]
        self.extras.append(extra)

    def keep_plain(self) -> None:
        """Make what a plugin or the policy may have put in the record plain JSON data.

        The conversation (the policy, an ``on_turn`` hook may add to it), the turns'
        ``extra``, the policy's usage, the sample's id: objects whose methods (a
        ``__str__``, a mapping's ``items``) would otherwise run in the records
        writer, the report and the summary, where a slow one held and a raising one
        stopped every episode's records. They run here, once, and a failure of any
        class (a ``GeneratorExit``, the watchdog's break of a slow one, a value too
        large to write) is this episode's error, its field dropped. Data of the
        exact built-in types with no shared parts, the common case, is left as is.
        """
        seen: set[int] = set()  # one for the record: a value two fields share counts too
        again = [0, 0]
        for name, where, what, empty in _PLUGIN_VALUES:
            value = getattr(self, name)
            if _plain(value, seen, again):
                continue
            try:
                setattr(self, name, json_safe(value, text=True))
            except BaseException as exc:  # any class: it costs this episode only
                setattr(self, name, empty)
                self.add_error(where, exc, f"{what} cannot be written as JSON, dropped: ")
                self.end_reason = ERROR
                self.final_score = None

    def to_dict(self) -> dict[str, Any]:
        """The JSONL record: :data:`RECORD_FIELDS` in order, ``started_at`` in epoch seconds.

        ``extras`` (each turn's ``extra``) is written only when an interaction returned one.
        """
        record = {field: getattr(self, field) for field in RECORD_FIELDS}
        record["errors"] = list(self.errors)
        record["started_at"] = round(self.started_at + WALL_OFFSET, 6)
        if self.extras is not None:
            record["extras"] = self.extras
        return record

    def __repr__(self) -> str:
        return (
            f"<EpisodeRecord {self.index} {self.interaction!r} {self.end_reason} "
            f"turns={self.turns} final_score={self.final_score!r}>"
        )


# -- a record read back -------------------------------------------------------
#
# Whether a line read back from a records file is an episode record one can count.
#
# A records file is input like any other: edited by hand, produced by another
# program, or damaged. ``--resume`` and ``interactions report`` read it through
# one reader (:mod:`.records`), and both ask :func:`record_problem` before
# counting a record, so one wrong field (``turns: "x"``, ``final_score: 1e400``,
# ``index: -7``) is reported with its line instead of crashing the reader or
# making it allocate without bound. ``--resume`` refuses such a file (it would
# continue it); ``interactions report`` skips the line and shows it.
#
# The bounds are generous for real runs and small enough for memory:
# :data:`MAX_TURNS` turns per episode (the summary keeps one slot per turn).


#: The most assistant (or user) turns a record may claim; more is a damaged record.
MAX_TURNS = 100_000


#: The most errors a record cut to fit its line keeps (with a note of the rest).
_ERRORS_KEPT = 20


#: The largest ``index`` and ``repeat`` a record may hold.
_KEYS = 1 << 62
_NUMBERS = (int, float)


def _count(value: Any, name: str, limit: int) -> str | None:
    if value is None:
        return None
    if value.__class__ is not int or not 0 <= value <= limit:
        return f"'{name}' is {_show(value)}, not a whole number from 0 to {limit:,}"
    return None


def _score(value: Any, name: str) -> str | None:
    if value is None:
        return None
    try:
        finite = value.__class__ in (int, float) and math.isfinite(value)
    except OverflowError:  # an integer beyond any float (10**400)
        finite = False
    return None if finite else f"'{name}' is {_show(value)}, not a finite number"


def _typed(record: Mapping[str, Any], name: str, kind: type, what: str) -> str | None:
    value = record.get(name)
    if value is None or isinstance(value, kind):
        return None
    return f"'{name}' is {_show(value)}, not {what}"


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def record_problem(record: Mapping[str, Any], max_index: int | None = None) -> str | None:
    """What makes ``record`` unusable as an episode record, or ``None`` when it is usable.

    ``max_index``: the number of samples in the dataset (``--resume``); a record
    whose ``index`` is not below it belongs to another dataset.
    """
    # Asked once per line of files of millions of records: a record of the usual
    # shape is answered by one quick look; anything else is examined field by field.
    if _plainly_usable(record) and (max_index is None or record["index"] < max_index):
        return None
    index = record.get("index")
    if index is None:
        return "it has no 'index' (not a record of interactions run)"
    problem = _count(index, "index", _KEYS) or _count(record.get("repeat"), "repeat", _KEYS)
    if problem:
        return problem
    if max_index is not None and index >= max_index:
        return f"'index' is {index}, outside the dataset's {max_index:,} sample(s)"
    problem = _typed(record, "end_reason", str, "a string") or _typed(
        record, "interaction", str, "a name"
    )
    if problem:
        return problem
    sample_id = record.get("sample_id")
    if isinstance(sample_id, float) and not math.isfinite(sample_id):
        return f"'sample_id' is {sample_id!r}"
    problem = (
        _count(record.get("turns"), "turns", MAX_TURNS)
        or _count(record.get("user_turns"), "user_turns", MAX_TURNS)
        or _score(record.get("final_score"), "final_score")
        or _score(record.get("duration_s"), "duration_s")
    )
    if problem:
        return problem
    return _lists_problem(record)


#: Finite floats lie within these bounds (NaN compares false); an int beyond them is left
#: to the full check, which tells the ones that still convert to a finite float.
_FINITE = sys.float_info.max


def _plainly_usable(record: Mapping[str, Any]) -> bool:
    """Whether ``record`` passes every check of :func:`record_problem` by its plain types.

    True only when the field-by-field checks would find nothing (a test holds the
    two together); false may still be usable (an ``int`` score near the float limit).
    """
    get = record.get
    index, repeat = get("index"), get("repeat")
    turns, user_turns = get("turns"), get("user_turns")
    final, duration = get("final_score"), get("duration_s")
    end_reason, interaction = get("end_reason"), get("interaction")
    sample_id, scores = get("sample_id"), get("scores")
    errors, messages = get("errors"), get("messages")
    return (
        index.__class__ is int
        and 0 <= index <= _KEYS
        and (repeat is None or (repeat.__class__ is int and 0 <= repeat <= _KEYS))
        and (turns is None or (turns.__class__ is int and 0 <= turns <= MAX_TURNS))
        and (user_turns is None or (user_turns.__class__ is int and 0 <= user_turns <= MAX_TURNS))
        and (final is None or (final.__class__ in _NUMBERS and -_FINITE <= final <= _FINITE))
        and (
            duration is None or (duration.__class__ in _NUMBERS and -_FINITE <= duration <= _FINITE)
        )
        and (end_reason is None or end_reason.__class__ is str)
        and (interaction is None or interaction.__class__ is str)
        and (not isinstance(sample_id, float) or -_FINITE <= sample_id <= _FINITE)
        and (errors is None or errors.__class__ is list)
        and (messages is None or messages.__class__ is list)
        and (scores is None or (scores.__class__ is list and _plain_scores(scores)))
    )


def _plain_scores(scores: list[Any]) -> bool:
    if len(scores) > MAX_TURNS:
        return False
    for score in scores:
        if score.__class__ not in _NUMBERS or not -_FINITE <= score <= _FINITE:
            return False
    return True


def _lists_problem(record: Mapping[str, Any]) -> str | None:
    scores = record.get("scores")
    if scores is not None:
        if not isinstance(scores, list) or len(scores) > MAX_TURNS:
            return f"'scores' is {_show(scores)}, not a list of at most {MAX_TURNS:,} numbers"
        for score in scores:
            if _score(score, "scores"):
                return f"'scores' holds {_show(score)}, not a finite number"
    return _typed(record, "errors", list, "a list") or _typed(record, "messages", list, "a list")


def error_entry(error: Any) -> Mapping[str, Any]:
    """One entry of a record's ``errors`` as a mapping, whatever was recorded.

    The runtime writes ``{"where", "type", "message"}``; a record written by other
    code may hold plain text (or a number) instead. Every reader of records
    (``--resume``, the summary, ``interactions report``) takes such an entry as the
    message of an error of unknown origin, by this one rule.
    """
    return error if isinstance(error, Mapping) else {"message": str(error)}


def error_kind(error: Any) -> str:
    """``"where: Type"`` for one entry of a record's ``errors`` (see :func:`error_entry`).

    For example ``generate_response: ValueError``: where it was raised and what.
    """
    entry = error_entry(error)
    return f"{entry.get('where') or '?'}: {entry.get('type') or 'Error'}"


# -- usage, as the summary counts it ---------------------------------------------------
# A record's ``usage`` (the policy's) and the ``extra["usage"]`` of its turns (an
# interaction's own model requests) are what the summary adds up. Where a record is
# kept small (``--resume`` keeps counters, a record cut to fit its line drops its
# extras) they are kept in the form below, which the summary counts the same.

#: ``(prompt_tokens, completion_tokens, latencies, requests)``.
UsageCounts = tuple[Any, Any, tuple[Any, ...], int]


def interaction_calls(extras: Any) -> dict[str, Any] | None:
    """An episode's interaction requests, shaped as a policy's usage; ``None`` if it made none.

    An interaction that calls models reports each turn's requests in its
    ``extra["usage"]``: a list of ``{"prompt_tokens", "completion_tokens", "latency_s"}``.
    """
    if type(extras) is not list:
        return None
    calls = [
        call
        for extra in extras
        if type(extra) is dict and type(extra.get("usage")) is list
        for call in extra["usage"]
        if type(call) is dict
    ]
    if not calls:
        return None
    totals: dict[str, int | None] = {}
    for key in ("prompt_tokens", "completion_tokens"):
        counts = [c[key] for c in calls if type(c.get(key)) is int]
        totals[key] = sum(counts) if counts else None
    return {**totals, "turns": calls}


def usage_counts(usage: Any) -> UsageCounts | None:
    """What the summary adds up of a usage mapping, small; ``None`` when there is none."""
    if type(usage) is not dict:
        return None
    turns = usage.get("turns")
    requests = [turn for turn in (turns if type(turns) is list else ()) if type(turn) is dict]
    latencies = tuple(
        turn["latency_s"] for turn in requests if type(turn.get("latency_s")) in (int, float)
    )
    counts = [usage.get(key) for key in ("prompt_tokens", "completion_tokens")]
    prompt, completion = (c if type(c) is int else None for c in counts)
    return prompt, completion, latencies, len(requests)


def usage_of_counts(kept: UsageCounts) -> dict[str, Any]:
    """A usage mapping the summary counts as it counted the one :func:`usage_counts` read."""
    prompt, completion, latencies, requests = kept
    turns: list[dict[str, Any]] = [{"latency_s": latency} for latency in latencies]
    turns += [{} for _ in range(requests - len(latencies))]  # requests not timed
    return {"prompt_tokens": prompt, "completion_tokens": completion, "turns": turns}


def extras_of_counts(kept: UsageCounts) -> list[dict[str, Any]]:
    """Extras whose interaction requests (:func:`interaction_calls`) count as ``kept``: one
    turn's ``extra["usage"]``, the totals on its first request."""
    calls = usage_of_counts(kept)
    requests = calls.pop("turns") or [{}]
    requests[0] = {**requests[0], **calls}
    return [{"usage": requests}]


def shorten_record(record: Mapping[str, Any], limit: int) -> dict[str, Any]:
    """``record`` cut to fit a line of ``limit`` bytes, which every reader of records takes.

    A conversation can outgrow the line bound of ``--resume`` and ``interactions
    report`` (40 MB of feedback a turn, a prompt near the bound): its texts are
    cut, each with a note of what was left out, and ``extras`` are dropped; an id
    of megabytes is cut too, and a great many errors (or very long ones) are cut to
    the first 20, each field bounded. The counters (turns, scores, end reason,
    whether it errored) are kept, so the run and every reader of its records still
    agree on what happened.
    """
    import json

    messages = record.get("messages") or []
    each = max(256, limit // (8 * (len(messages) + 1)))  # 6 bytes a character at worst
    short = {**record, "messages": [_cut(message, each) for message in messages]}
    # The extras go, but for the interaction's requests they report: a resumed run's
    # summary counts them from the record, as the run's own did.
    calls = usage_counts(interaction_calls(short.pop("extras", None)))
    if calls is not None:
        short["extras"] = extras_of_counts(calls)
    if len(json.dumps(short, default=str)) > limit // 2:  # a great many messages
        note = f"[{len(messages):,} messages left out: the record would not fit a line]"
        short["messages"] = [{"role": "system", "content": note}]
    # What else a line can outgrow: an id of megabytes (the sample's, or the session's
    # a plugin's start_interaction chose), a great many errors.
    # Measured as ASCII JSON, the most a line can take (a line holding a lone surrogate
    # is written so): a character outside the BMP is 12 bytes there.
    for field in ("sample_id", "instance_id"):
        short[field] = _cut_id(short.get(field), limit // 64)
    errors = short.get("errors")
    if isinstance(errors, list) and len(json.dumps(errors, default=str)) > limit // 4:
        short["errors"] = _cut_errors(errors, _ERRORS_KEPT, limit // (8 * _ERRORS_KEPT))
    counted = usage_counts(short.get("usage"))
    if counted is not None and len(json.dumps(short, default=str)) > limit // 2:
        short["usage"] = usage_of_counts(counted)  # a policy's usage of megabytes: its counts
    if len(json.dumps(short, default=str)) > limit * 3 // 4:  # still: keep the counters only
        short = _counters_only(short)
    return short


#: What a record cut to its counters keeps whole (with ``scores``): numbers and short names.
_COUNTERS = (
    "index", "repeat", "interaction", "end_reason", "turns", "user_turns", "final_score",
    "started_at", "duration_s", "config_hash", "data_hash",
)  # fmt: skip


def _cut_id(value: Any, most: int) -> Any:
    """An id of at most ``most`` characters: a text cut; an id of another kind (a
    dataset's id may be a list or an object) whose JSON is longer, that JSON cut."""
    import json

    if isinstance(value, str):
        return cut_text(value, most)
    if value is None or type(value) in (int, float, bool):
        return value
    text = json.dumps(value, default=str)
    return value if len(text) <= most else cut_text(text, most)


def _counters_only(record: Mapping[str, Any]) -> dict[str, Any]:
    """The last resort of :func:`shorten_record`: what the summary and ``--resume`` count,
    ids and the first error cut to a few hundred characters, the conversation a note."""
    short = {field: record[field] for field in _COUNTERS if field in record}
    for field in ("sample_id", "instance_id"):
        short[field] = _cut_id(record.get(field), 200)
    short["scores"] = record.get("scores")
    usage, calls = (
        usage_counts(record.get("usage")),
        usage_counts(interaction_calls(record.get("extras"))),
    )
    if usage is not None:  # counted by the summary: kept as their counts
        short["usage"] = usage_of_counts(usage)
    if calls is not None:
        short["extras"] = extras_of_counts(calls)
    errors = record.get("errors")
    if isinstance(errors, list) and errors:
        short["errors"] = _cut_errors(errors, 1, 1000)
    else:
        short["errors"] = []
    note = "[the conversation was left out: the record would not fit a line]"
    short["messages"] = [{"role": "system", "content": note}]
    return short


def _cut_errors(errors: list[Any], keep: int, most: int) -> list[Any]:
    """The first ``keep`` of ``errors``, each text at most ``most`` characters, and one
    entry per kind of those left out, with their ``count``: every reader counts the
    record's errors by kind as the run did (a note of "N more errors left out", of no
    kind, had been counted once, as an error of unknown origin)."""
    kept = [_cut_error(error, most) for error in errors[:keep]]
    left: dict[tuple[str, str], int] = {}
    for error in errors[keep:]:
        entry = error_entry(error)
        where, kind = (cut_text(str(entry.get(k) or ""), 200) for k in ("where", "type"))
        left[where, kind] = left.get((where, kind), 0) + error_count(error)
    for (where, kind), n in left.items():
        note = f"[{n:,} more error(s) of this kind left out: the record would not fit a line]"
        kept.append({"where": where or "?", "type": kind or "Error", "message": note, "count": n})
    return kept


def error_count(error: Any) -> int:
    """How many errors one entry of a record's ``errors`` stands for: its ``count`` (an
    entry a record cut to fit its line made of those it left out), else one."""
    count = error.get("count") if isinstance(error, Mapping) else None
    return count if type(count) is int and 1 <= count <= 1 << 53 else 1


def _cut_error(error: Any, most: int) -> Any:
    """An entry of a record's ``errors`` with each text at most ``most`` characters."""
    if not isinstance(error, Mapping):
        return cut_text(str(error), most)
    return {k: cut_text(v, most) if isinstance(v, str) else v for k, v in error.items()}


def _cut(message: Any, most: int) -> Any:
    """``message`` with its content at most ``most`` characters, noting what was left out."""
    import json

    if not isinstance(message, Mapping):
        message = {"content": message}
    content = message.get("content")
    text = content if isinstance(content, str) else json.dumps(content, default=str)
    if len(text) <= most:
        return message
    note = f" [... {len(text) - most:,} characters left out: the record would not fit a line]"
    return {**message, "content": text[:most] + note}
