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
``strict=True`` the first one raises :class:`~interactions_core.errors.DatasetError`.

:func:`write_rows` writes a dataset (``interactions data``) in one piece: under
a temporary name next to its destination, moved into place only when
complete, so a builder that fails half-way never leaves a partial file that a
later run would read as the whole dataset. Records and traces are
:mod:`interactions_core.runtime.records`.

Dataset builders are plugins that prepare the rows their interactions expect
(the contract is in ``docs/run.md``, "Dataset builders"):

* A hook plugin (entry-point group ``interactions_core.plugins``) implements::

      @hookimpl
      def register_dataset_builders(register):
          register("gsm8k", build_gsm8k, description="GSM8K -> verl multi-turn rows")

  ``register(name, builder, *, defaults=None, description=None)`` — ``name`` is
  the builder's name on the command line, ``builder`` a callable, ``defaults``
  option values applied before the user's, ``description`` a one-line summary
  (else the first line of the builder's docstring).

* The builder is called with keyword arguments only, ``builder(**options)``, and
  returns an iterable of rows (mappings) in the sample shape (``prompt``,
  ``extra_info.interaction_kwargs`` or ``interaction_kwargs``, other fields).
  Its keyword parameters are its options: ``interactions data NAME --input x
  --with-responses`` calls ``builder(input="x", with_responses=True)``. Values
  arrive as strings, converted to ``int``/``float``/``bool`` when the
  parameter's default has that type; a flag without a value is ``True``; a
  repeated option gives a list. Raise ``ValueError`` (or any
  ``InteractionsError``) with a helpful message for a bad option.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import math
import os
import stat
import sys
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from .._classes import check_options, keyword_options
from .._files import MAX_NESTING, MAX_VALUES, bounded_lines, line_too_long, replacing
from ..errors import (
    MAX_MESSAGE,
    ConfigError,
    DatasetError,
    InteractionsError,
    PluginLoadError,
    class_name,
    cut_text,
    exception_kind,
    exception_text,
    shown,
    stops_the_program,
)
from ..registry import BuilderInfo, Registry, get_registry
from .records import LineWriter, is_special_file, refuse_existing

__all__ = [
    "MAX_NESTING",
    "BadRow",
    "BuilderInfo",
    "SampleReader",
    "builder_options",
    "check_row",
    "data_format",
    "get_builder",
    "guard_rows",
    "list_builders",
    "parse_cli_options",
    "run_builder",
    "too_deep",
    "write_rows",
]

JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")
PARQUET_SUFFIXES = (".parquet", ".pq")
PARQUET_HINT = (
    "reading and writing parquet needs pyarrow: pip install 'pyarrow>=14' "
    "(what the [parquet] extra installs; see docs/install.md)"
)


#: ``--data -``: read the samples from standard input.
STDIN = "-"
#: Why a line over :data:`~interactions_core._files.MAX_LINE` is a bad row (it is
#: read past, never held): no sample needs that much, a file of another kind might.
TOO_LONG = (
    "{}, more than one row may hold: skipped without being held (JSONL holds one "
    "sample per line; convert a file that is one JSON array, or not text, first)"
)


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


def _not_a_file(path: str) -> str:
    """Why ``path``, which exists but is no file (nor a pipe), is not read as data.

    A device or a socket is not read as data (``/dev/zero`` never ends, a terminal
    waits): the shell's redirect onto ``--data -`` reads one when that is meant.
    """
    mode = os.stat(path).st_mode
    if stat.S_ISDIR(mode):
        return f"{path} is a directory, not a data file"
    kind = {stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device"}.get(
        stat.S_IFMT(mode), "a socket" if stat.S_ISSOCK(mode) else "not a file"
    )
    return (
        f"{path} is not a regular file ({kind}); --data reads a file, a named pipe, or "
        f"standard input: to read this one, redirect it there (--data - < {path})"
    )


def _not_utf8(raw: bytes, exc: UnicodeDecodeError) -> str:
    """Why a line is no sample: not UTF-8, and what the file may be instead."""
    reason = f"not UTF-8 text ({exc.reason} at byte {exc.start})"
    if raw.startswith(b"\x1f\x8b"):
        return reason + "; the file looks gzip-compressed: decompress it first"
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" in raw[:2]:  # "{" in UTF-16
        return reason + "; the file looks like UTF-16 or UTF-32: save it as UTF-8"
    return reason


def _import_parquet() -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise DatasetError(PARQUET_HINT) from None
    return pq


# MAX_NESTING (from ``_files``, where what a record may hold is decided too) bounds how
# many levels of lists and objects a sample's prompt message or interaction kwargs may
# nest, in a data file or a served reset: a deeper row is a bad row, named by its line.


def too_deep(value: object, limit: int = MAX_NESTING) -> bool:
    """Whether ``value`` nests lists, tuples or mappings more than ``limit`` levels.

    Walked with an explicit stack, depth first, so a value nested 100,000 levels (or
    one that contains itself) is answered at once instead of raising RecursionError.
    """
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


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
        if too_deep(message):
            return f"prompt[{i}] nests lists and objects more than {MAX_NESTING} levels deep"
    extra = row.get("extra_info")
    if extra is not None and not isinstance(extra, Mapping):
        return "'extra_info' must be an object"
    for where, kwargs in (
        ("extra_info.interaction_kwargs", extra.get("interaction_kwargs") if extra else None),
        ("interaction_kwargs", row.get("interaction_kwargs")),
    ):
        if kwargs is not None and not isinstance(kwargs, Mapping):
            return f"'{where}' must be an object"
        if kwargs is not None and too_deep(kwargs):
            return f"'{where}' nests lists and objects more than {MAX_NESTING} levels deep"
    return None


#: Levels a builder's row may nest: deeper, ``json`` itself gives up (a recursion
#: error), and a row that contains itself is endless.
MAX_ROW_DEPTH = 500

#: The most digits of an integer JSON is written with (Python's own limit for ``str``).
_MAX_INT_BITS = 14_000


class Unwritable(ValueError):
    """A value of a builder's row that JSON cannot hold as it is: ``where`` (``a.b[2]``)
    and ``what`` it is."""

    def __init__(self, where: str, what: str) -> None:
        super().__init__(f"{where}: {what}")
        self.where = where
        self.what = what


def plain_row(row: Any) -> Any:
    """A copy of ``row`` made of plain dicts, lists and JSON's scalars: what is checked
    and written, so the two are the same data. :class:`Unwritable` names the first
    value JSON cannot hold as it is: a NaN or infinite float, a set, bytes, an object,
    an integer of thousands of digits, a row nested past :data:`MAX_ROW_DEPTH` (one
    that contains itself).

    A dataset is data for another program: such a value written as its text (a set
    as ``"{1, 2}"``, a ``Mapping`` that is no ``dict`` as its ``repr``) would change it
    without a word. Each mapping's items are read once, here, by its type's own
    method (a ``dict`` subclass by ``dict``'s), so what is written is what was checked;
    and a builder that reuses one row, editing it between yields, writes each row as
    it was when yielded, in parquet too.
    """
    if _holds_over(row, MAX_VALUES):
        shared = "a part it shares counted each time it appears"
        raise Unwritable("<row>", f"a row of over {MAX_VALUES:,} values ({shared})")
    top: list[Any] = [None]
    # Each value's place, as (its parent's place, its key): made a text (``a.b[2]``)
    # only for the value refused, not for every value copied.
    stack: list[tuple[Any, Any, int, Any, Any]] = [(None, row, 0, top, 0)]
    copied = 0
    while stack:
        trail, obj, depth, parent, key = stack.pop()
        copied += 1
        if copied > MAX_VALUES:  # shared through mappings of a builder's own kind
            raise Unwritable("<row>", f"a row of over {MAX_VALUES:,} values")
        kind = type(obj)  # never the value's own __class__
        if kind is str or kind is bool or obj is None:
            parent[key] = obj
            continue
        if kind is float:
            if not math.isfinite(obj):
                raise Unwritable(_where(trail), repr(obj))
            parent[key] = obj
            continue
        if kind is int:
            if obj.bit_length() > _MAX_INT_BITS:
                raise Unwritable(_where(trail), f"an integer of {obj.bit_length():,} bits")
            parent[key] = obj
            continue
        if depth >= MAX_ROW_DEPTH:
            deep = f"nested over {MAX_ROW_DEPTH} levels (a row that contains itself?)"
            raise Unwritable(_where(trail), deep)
        if issubclass(kind, (dict, Mapping)):
            pairs = list(dict.items(obj) if issubclass(kind, dict) else obj.items())
            mapping: dict[str, Any] = {}
            for k, _ in pairs:
                if type(k) is not str:
                    place = f"{_where(trail, '')}[{class_name(type(k))}]"
                    raise Unwritable(place, "a key that is not text")
                mapping[k] = None  # the order the items came in
            parent[key] = mapping
            stack.extend(reversed([((trail, k), v, depth + 1, mapping, k) for k, v in pairs]))
        elif issubclass(kind, (list, tuple)):
            values = list(list.__iter__(obj) if issubclass(kind, list) else tuple.__iter__(obj))
            items: list[Any] = [None] * len(values)
            parent[key] = items
            stack.extend(
                reversed([((trail, i), v, depth + 1, items, i) for i, v in enumerate(values)])
            )
        else:
            raise Unwritable(_where(trail), f"a {class_name(kind)}")
    return top[0]


def _where(trail: Any, root: str = "<row>") -> str:
    """The place ``trail`` names in a row, as ``a.b[2]``; ``root`` for the row itself."""
    keys = []
    while trail is not None:
        trail, key = trail
        keys.append(key)
    text = ""
    for key in reversed(keys):
        text += f"[{key}]" if type(key) is int else (f".{key}" if text else key)
    return cut_text(text, 200) if text else root  # a place 500 levels deep is a long one


def _holds_over(row: Any, most: int) -> bool:
    """Whether ``row`` holds over ``most`` values as JSON would write it: a list or
    object it holds twice is written twice. Each is measured once (by its identity), so
    a row of 31 lists, each holding the next twice, is found out at once: copying it had
    taken 2.7 GB and a minute before any check. Only ``dict``, ``list`` and ``tuple``
    are measured (by their own methods); other mappings are counted as :func:`plain_row`
    copies them."""
    sizes: dict[int, int] = {}
    held: list[Any] = []  # kept alive while measured: an id is not reused meanwhile
    stack: list[tuple[Any, bool]] = [(row, False)]
    while stack:
        obj, measured = stack.pop()
        children = _containers(obj)
        if children is None:
            continue
        key = id(obj)
        if not measured:
            if key in sizes:
                continue
            sizes[key] = 1  # in progress: a cycle counts once (the depth bound ends it)
            held.append(obj)
            stack.append((obj, True))
            stack.extend((child, False) for child in children if id(child) not in sizes)
            continue
        total = 1 + sum(sizes.get(id(child), 1) for child in _containers(obj) or ())
        if total > most:
            return True
        sizes[key] = total
    return False


def _containers(obj: Any) -> list[Any] | None:
    """The values of a ``dict``, ``list`` or ``tuple`` (read by the type's own method)."""
    kind = type(obj)
    if issubclass(kind, dict):
        return list(dict.values(obj))
    if issubclass(kind, list):
        return list(list.__iter__(obj))
    if issubclass(kind, tuple):
        return list(tuple.__iter__(obj))
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
        self.stream = self.path == STDIN or _is_pipe(self.path)
        if not self.stream and os.path.exists(self.path) and not os.path.isfile(self.path):
            raise DatasetError(_not_a_file(self.path))  # a directory, a device
        self.format = data_format(self.path, format)
        self.strict = strict
        self.limit = limit
        self.max_examples = max_examples
        self.skipped = 0
        self.rows = 0
        self.bad_rows: list[BadRow] = []
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
            for number, raw in enumerate(bounded_lines(f), start=1):
                if raw is None:
                    self._bad(number, TOO_LONG.format(line_too_long()))
                    continue
                if not raw.strip():
                    continue
                try:
                    # decoded here: json.loads would guess UTF-16 or UTF-32 line by line
                    row = json.loads(raw.decode("utf-8-sig"))
                except UnicodeDecodeError as exc:
                    self._bad(number, _not_utf8(raw, exc))
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
        if not strict:
            yield row
            continue
        try:
            plain = plain_row(row)
            problem = check_row(plain)
        except Unwritable as exc:
            problem = (
                f"field {exc.where} is {exc.what}, which JSON cannot hold as it is "
                "(convert it in the builder)"
            )
        except Exception as exc:  # a builder's mapping whose items() raises, say
            kind, text = exception_kind(exc), cut_text(exception_text(exc), 200)
            problem = f"field <row> is unreadable ({kind}: {text})"
        if problem is not None:
            raise DatasetError(f"row {number} produced by the builder is invalid: {problem}")
        yield plain


def _write(fmt: str, path: str, rows: Iterable[Mapping[str, Any]]) -> int:
    """Write ``rows`` to ``path`` in format ``fmt`` (``jsonl`` or ``parquet``); the count."""
    if fmt == "jsonl":
        count = 0

        def too_long(row: Any, limit: int) -> Any:  # a line `run` would skip as too long
            raise DatasetError(
                f"row {count + 1} produced by the builder would be a JSON line over "
                f"{limit >> 20} MiB, longer than `interactions run` reads; make it smaller "
                "in the builder"
            )

        with LineWriter(path, overwrite=True, shorten=too_long) as writer:
            for row in rows:
                writer.write(row)
                count += 1
        return count
    pq = _import_parquet()
    import pyarrow as pa

    table = pa.Table.from_pylist([dict(r) for r in rows])
    pq.write_table(table, path)
    return int(table.num_rows)


# -- dataset builders: plugins that prepare rows --------------------------------------


def list_builders(registry: Registry | None = None) -> list[BuilderInfo]:
    """Every registered builder, sorted by name (hook plugins are imported).

    The catalog's list (:meth:`Registry.builders`): the allow/deny lists and the
    conflict rule apply to builders as to interactions.
    """
    return (registry if registry is not None else get_registry()).builders()


def get_builder(name: str, registry: Registry | None = None) -> BuilderInfo:
    """The builder called ``name`` (or ``distribution:name``)."""
    return (registry if registry is not None else get_registry()).builder(name)


def builder_options(builder: Any) -> dict[str, inspect.Parameter]:
    """The builder's options: its keyword parameters."""
    return keyword_options(builder)


def _convert(name: str, value: Any, param: inspect.Parameter | None, given: bool = True) -> Any:
    """``value`` of option ``name`` as the type of the builder's default for it.

    ``given``: the user passed it; else it is a default the plugin registered, and a
    value that does not convert is told as the plugin's (it had been blamed on an
    option the user never passed).
    """
    if param is None or param.default is param.empty or param.default is None:
        return value
    if isinstance(value, list):
        return [_convert(name, v, param, given) for v in value]
    kind = type(param.default)
    if not isinstance(value, str) or kind is str:
        return value
    try:
        if kind is bool:
            lowered = value.strip().lower()
            if lowered in ("1", "true", "yes", "on"):
                return True
            if lowered in ("0", "false", "no", "off"):
                return False
            raise ValueError(value)
        if kind is int:
            return int(value)
        if kind is float:
            number = float(value)
            if not math.isfinite(number):  # "nan" and "inf" parse, but are no value
                raise ValueError(value)
            return number
    except ValueError:
        flag = f"--{name.replace('_', '-')}"
        told = f"{shown(value)} is not a valid {kind.__name__}"
        if given:
            raise ConfigError([f"option {flag}: {told}"]) from None
        raise ConfigError(
            [
                f"the default the plugin registered for {flag}: {told} (a bug in the "
                f"plugin; pass {flag} to give a value)"
            ]
        ) from None
    return value


def parse_cli_options(args: list[str]) -> dict[str, Any]:
    """Parse builder options written ``--name value``.

    ``["--input", "x", "--flag", "--k", "a", "--k", "b"]`` gives
    ``{"input": "x", "flag": True, "k": ["a", "b"]}``; ``--key=value`` works too.
    """
    out: dict[str, Any] = {}
    i = 0
    while i < len(args):
        token = args[i]
        if not token.startswith("--") or token == "--":
            raise ConfigError(
                [f"unexpected argument {token!r}: builder options are written --name value"]
            )
        key, eq, value = token[2:].partition("=")
        key = key.replace("-", "_")
        if not eq:
            if i + 1 < len(args) and not args[i + 1].startswith("--"):
                value = args[i + 1]
                i += 1
            else:
                value = True  # type: ignore[assignment]
        if key in out:
            previous = out[key]
            out[key] = [*previous, value] if isinstance(previous, list) else [previous, value]
        else:
            out[key] = value
        i += 1
    return out


def run_builder(info: BuilderInfo, options: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    """Call the builder with ``defaults`` then ``options``; check the options first."""
    accepted = builder_options(info.builder)
    merged = {**info.defaults, **options}
    problems = check_options(
        f"builder {info.name!r}", info.builder, options, provided=merged, render=_flag
    )
    if problems:
        raise ConfigError(problems)
    merged = {k: _convert(k, v, accepted.get(k), k in options) for k, v in merged.items()}
    try:
        rows = info.builder(**merged)
    except BaseException as exc:  # any class: a builder's sys.exit() is its own fault
        if stops_the_program(exc):
            raise
        raise _failed(info, exc) from exc
    if not isinstance(rows, Iterable) or isinstance(rows, (str, bytes, Mapping)):
        if inspect.iscoroutine(rows):
            rows.close()  # refused: Python would also warn that it was never awaited
        raise PluginLoadError(
            f"builder {info.qualified} returned {type(rows).__name__}; it must return an "
            "iterable of rows (mappings)"
        )
    return guard_rows(info, rows)


def _failed(info: BuilderInfo, exc: BaseException) -> Exception:
    """The error to show for an exception the builder raised (its message, its name).

    Told by ``type()``, with text the builder's exception cannot fake or break
    (:func:`~interactions_core.errors.exception_text`); a ``SystemExit``,
    ``KeyboardInterrupt`` or ``GeneratorExit`` it raises is its bug like any other
    (a stray ``sys.exit()`` had ended the command with exit 0 and no file).
    """
    kind = type(exc)
    if issubclass(kind, InteractionsError):
        return exc  # type: ignore[return-value]
    text = cut_text(exception_text(exc), MAX_MESSAGE)
    if issubclass(kind, (ValueError, OSError)):  # the documented way to say what to fix
        return ConfigError([f"builder {info.name!r} failed: {text}"])
    # anything else is a bug in the plugin: name the plugin and the exception type
    return ConfigError(
        [
            f"builder {info.name!r} failed: {exception_kind(exc)}: {text} (a bug in the "
            f"plugin {info.plugin}; report it to its authors)"
        ]
    )


def guard_rows(info: BuilderInfo, rows: Iterable[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
    """Iterate ``rows``; an exception the builder raises mid-stream becomes a named error."""
    try:
        iterator = iter(rows)
    except BaseException as exc:
        if stops_the_program(exc):
            raise
        raise _failed(info, exc) from exc
    while True:
        try:
            row = next(iterator)
        except StopIteration:
            return
        except BaseException as exc:  # any class: see _failed
            if stops_the_program(exc):
                raise
            raise _failed(info, exc) from exc
        yield row


def _flag(option: str) -> str:
    """An option's name as the command line spells it: ``max_rows`` is ``--max-rows``."""
    return "--" + option.replace("_", "-")
