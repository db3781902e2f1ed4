"""A subcommand declared as data, and built into argparse the same way for every command.

Each subcommand module states its command once, as a :class:`Command` named
``COMMAND`` beside its ``run(args) -> int``; ``build_parser`` hands both to
:meth:`Command.add_to`. The ``add_parser`` / ``add_argument`` /
``set_defaults`` calls are therefore written here only, and a module reads as
what its command takes rather than as argparse plumbing.

The options more than one subcommand takes are declared here once too:
``run`` and ``serve`` both take a config, ``--timeout`` and
``--default-interaction``; ``run``, ``serve`` and ``data`` count things that
must be at least 1. So the flag, the metavar and the error a user sees for a
bad value are the same in every command. The checks are argparse ``type=``
callables: a bad value becomes argparse's own usage error.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable, Sequence

from ..errors import (
    MOST_INT_BITS,
    class_name,
    printable,
    printable_lines,
    shown,
    stops_the_program,
)

# ``typing`` is imported for type checkers only: this module is on the path of a
# warm ``interactions list``, where importing ``typing`` alone costs about a
# third of a bare interpreter start (docs/performance.md).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Protocol, TextIO, TypeVar

    N = TypeVar("N", int, float)

    class Subparsers(Protocol):
        """What ``ArgumentParser.add_subparsers()`` returns, as far as a command uses it."""

        def add_parser(self, name: str, **options: Any) -> argparse.ArgumentParser: ...


__all__ = [
    "Arg",
    "Command",
    "Progress",
    "StdoutError",
    "checked_stdout",
    "config_file",
    "default_interaction",
    "duration",
    "finite_number",
    "flag",
    "kept_stdout",
    "leave_strays",
    "own_stdout",
    "pipe_note",
    "positive_int",
    "positive_seconds",
    "printable",
    "printable_lines",
    "stdout_reader_gone",
    "stdout_unwritable",
    "timeout",
    "turn_limit",
    "wait_seconds",
]


class Arg:
    """One argument: what ``ArgumentParser.add_argument`` is called with, kept until then."""

    __slots__ = ("names", "options")

    def __init__(self, *names: str, **options: Any) -> None:
        self.names = names
        self.options = options

    @property
    def dest(self) -> str:
        """The attribute of ``args`` the value goes to, named as argparse names it."""
        long = next((n for n in self.names if n.startswith("--")), self.names[0])
        return str(self.options.get("dest") or long.lstrip("-").replace("-", "_"))

    @property
    def is_flag(self) -> bool:
        """Whether it takes no value (declared with :func:`flag`)."""
        return bool(self.options.get("action") == "store_true")


def flag(name: str, help: str) -> Arg:
    """An option that is off unless given (``--json``, ``--overwrite``, ...)."""
    return Arg(name, action="store_true", help=help)


class Command:
    """A subcommand: its name, its line in ``interactions --help``, its own page, its arguments.

    ``help`` is the short text of the command list; ``description`` opens the
    command's own ``--help`` and its section of ``docs/cli-reference.md``. A
    command with ``subcommands`` (``interactions ray check``) prints its help
    and exits 2 when none is given.
    """

    __slots__ = ("arguments", "description", "help", "name", "subcommands")

    def __init__(
        self,
        name: str,
        *,
        help: str,
        description: str,
        arguments: Sequence[Arg] = (),
        subcommands: Sequence[Command] = (),
    ) -> None:
        self.name = name
        self.help = help
        self.description = description
        self.arguments = arguments
        self.subcommands = subcommands

    def add_to(
        self, subparsers: Subparsers, run: Callable[[argparse.Namespace], int]
    ) -> argparse.ArgumentParser:
        """Add this command to ``subparsers``; ``run`` runs it (or its subcommands)."""
        parser = subparsers.add_parser(self.name, help=self.help, description=self.description)
        for argument in self.arguments:
            parser.add_argument(*argument.names, **argument.options)
        if self.subcommands:
            nested = parser.add_subparsers(dest=f"{self.name}_command", metavar="SUBCOMMAND")
            for command in self.subcommands:
                command.add_to(nested, run)
            run = _PrintHelp(parser)
        parser.set_defaults(run=run)
        return parser


class _PrintHelp:
    """What a command with subcommands runs when none is given: its help, exit code 2."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser

    def __call__(self, args: argparse.Namespace) -> int:
        self.parser.print_help()
        return 2


# -- options several commands share -------------------------------------------


def _parsed(text: str, convert: Callable[[str], N], what: str) -> N:
    try:
        return convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None


def positive_int(text: str) -> int:
    """A count: an integer of at least 1 (``--concurrency``, ``--limit``, ...)."""
    value = _parsed(text, int, "an integer")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def turn_limit(text: str) -> int:
    """A turn limit: an integer from 1 to 100,000, the most turns an episode's record
    holds (``runtime.record.MAX_TURNS``, not imported: this module stays light)."""
    value = positive_int(text)
    if value > 100_000:
        raise argparse.ArgumentTypeError(
            f"must be at most 100,000 (the most turns an episode's record holds), not {value:,}"
        )
    return value


def _seconds(text: str, what: str) -> float:
    value = _parsed(text, float, what)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, not {text}")
    return value


def positive_seconds(text: str) -> float:
    """A duration in seconds, more than zero (the ``--timeout`` of a call)."""
    return _seconds(text, "a number")


def wait_seconds(text: str) -> float:
    """Like :func:`positive_seconds`, for a wait (``ray check --timeout``)."""
    return _seconds(text, "a number of seconds")


def finite_number(text: str) -> float:
    """Any finite number (a score threshold): not ``nan``, not ``inf``."""
    import math

    value = _parsed(text, float, "a number")
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, not {text}")
    return value


def config_file(help: str, *, optional: bool = False) -> Arg:
    """The ``CONFIG`` positional: the interactions config (YAML)."""
    if optional:
        return Arg("config", metavar="CONFIG", nargs="?", help=help)
    return Arg("config", metavar="CONFIG", help=help)


def timeout(outcome: str) -> Arg:
    """``--timeout SECONDS``: the bound on each interaction call, and what a timeout does."""
    return Arg(
        "--timeout",
        type=positive_seconds,
        metavar="SECONDS",
        help=f"bound on each interaction call; {outcome}",
    )


def default_interaction(what: str) -> Arg:
    """``--default-interaction NAME`` for the ``what`` (samples, resets) that name none."""
    return Arg(
        "--default-interaction",
        metavar="NAME",
        help=f"interaction for {what} whose interaction_kwargs has no name (overrides the "
        "config's 'default:')",
    )


# -- output helpers shared by the subcommands ----------------------------------


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A left-aligned plain-text table (no dependency, readable in any terminal)."""
    rows = [[printable(cell) for cell in row] for row in rows]  # a plugin's text: escaped
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines = ["  ".join(h.upper().ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for row in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)


#: Where JSON goes while a ``--json`` command runs (see :func:`json_output`).
_json_stream: Any = None

#: The standard output the running command began with (see :func:`own_stdout`).
_began_with: list[Any] = []


class kept_stdout:
    """While a command runs, remember the standard output it began with, for
    :func:`own_stdout`."""

    def __enter__(self) -> None:
        _began_with.append(sys.stdout)

    def __exit__(self, *exc_info: object) -> None:
        own_stdout()
        _began_with.pop()


def own_stdout() -> Any:
    """The standard output the command began with, put back as ``sys.stdout`` when
    plugin code replaced it (said once, on standard error).

    A plugin silencing a chatty library at import (``sys.stdout = io.StringIO()``, or
    ``None``) had swallowed the text summary of a run that then ended with exit 0, or
    ended it as an "unexpected" error of the program's own.
    """
    if not _began_with or _json_stream is not None:  # --json swaps it on purpose
        return sys.stdout
    began = _began_with[-1]
    if sys.stdout is not began:
        now = "None" if sys.stdout is None else class_name(type(sys.stdout))
        sys.stdout = began
        sys.stderr.write(
            f"interactions: warning: plugin code replaced sys.stdout (with {now}); the "
            "command's output goes to standard output all the same\n"
        )
    return began


class _FdWriter:
    """``write`` straight to a file descriptor, unbuffered (nothing left to flush later)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def write(self, text: str) -> None:
        data = memoryview(text.encode("utf-8"))
        while data:
            data = data[os.write(self.fd, data) :]


class json_output:
    """While a ``--json`` command runs, standard output is standard error, for Python
    (``sys.stdout``) and for the process (file descriptor 1).

    Plugin code imported or called by the command (a ``print`` at import, a
    chatty hook, ``os.write(1, ...)``, a child process writing to its inherited
    output) then cannot put text before or inside the JSON document, which
    :func:`print_json` writes to the real standard output, kept on a duplicate
    descriptor. When ``sys.stdout`` is not descriptor 1 (a caller capturing it) or
    there are no descriptors to duplicate, ``sys.stdout`` alone is swapped.
    """

    def __enter__(self) -> None:
        global _json_stream
        self._saved = (_json_stream, sys.stdout)
        self._fd: int | None = None
        _json_stream = sys.stdout
        try:
            sys.stdout.flush()
            if sys.stdout.fileno() != 1:  # output captured in the process: swapped alone
                raise ValueError
            self._fd = os.dup(1)
            os.dup2(2, 1)
            _json_stream = _FdWriter(self._fd)
        except (OSError, ValueError, AttributeError):  # closed or missing descriptors
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
        sys.stdout = sys.stderr

    def __exit__(self, *exc_info: object) -> None:
        global _json_stream
        previous, stdout = self._saved
        if self._fd is not None:
            sys.stderr.flush()  # what plugins wrote goes before the descriptor is back
            os.dup2(self._fd, 1)
            os.close(self._fd)
        if sys.stdout is sys.stderr:
            sys.stdout = stdout
        _json_stream = previous


def print_json(data: Any) -> None:
    """Print ``data`` as ``json.dumps(data, indent=2)`` (unknown types as their ``str``).

    The document is always valid JSON (RFC 8259): a float that is ``NaN`` or
    infinite, which ``json`` would print as the non-standard ``NaN`` or
    ``Infinity``, is printed as ``null``. What a plugin put in it (a builder's
    default, say) cannot fail the document: an integer too long to write, a key
    JSON cannot hold or a value whose ``str`` raises is shown as text.
    """
    import json

    text = json.dumps(_finite(data), indent=2, default=_text_of, allow_nan=False)
    try:
        (_json_stream or sys.stdout).write(text + "\n")
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise StdoutError(exc.errno, exc.strerror) from exc


class StdoutError(OSError):
    """Standard output refused what was written (``> /dev/full``, a full disk)."""


def stdout_unwritable(exc: BaseException) -> str | None:
    """What to say when ``exc`` is standard output refusing what is written to it, else
    ``None``; what is still printed then goes nowhere, so the flush at exit does not
    fail again. A full disk under ``> out.txt`` read as a bug ("unexpected OSError")."""
    if not isinstance(exc, StdoutError):
        return None
    stdout_reader_gone()
    return f"cannot write standard output: {exc.strerror or exc}"


class checked_stdout:
    """While a command runs, ``sys.stdout`` raises :class:`StdoutError` for what it
    cannot write, so the command's caller can tell a full disk from a bug."""

    def __enter__(self) -> _Checked:
        self._stream = sys.stdout
        checked = _Checked(self._stream)
        sys.stdout = checked  # type: ignore[assignment]
        return checked

    def __exit__(self, *exc_info: object) -> None:
        if isinstance(sys.stdout, _Checked):  # not replaced by plugin code meanwhile
            sys.stdout = self._stream


class _Checked:
    """A text stream's ``write`` and ``flush``, with write errors as :class:`StdoutError`;
    everything else is the stream's own."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        #: The first write error, kept: argparse swallows what its ``--help`` raises.
        self.failed: StdoutError | None = None

    def write(self, text: str) -> int:
        try:
            return int(self._stream.write(text))
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise self._failed(exc) from exc

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise self._failed(exc) from exc

    def _failed(self, exc: OSError) -> StdoutError:
        error = StdoutError(exc.errno, exc.strerror)
        if self.failed is None:
            self.failed = error
        return error

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


#: Keys ``json`` writes as they are; any other key is shown as text.
_JSON_KEYS = (str, int, float, bool, type(None))


def _finite(data: Any, depth: int = 0) -> Any:
    """``data`` ready for ``json.dumps``: every non-finite float replaced by ``None``
    (in lists, tuples, dicts), and what ``json`` would refuse (an integer too long
    for text, an odd key, nesting past 100 levels) shown by :func:`errors.shown`."""
    kind = type(data)
    if issubclass(kind, float):
        return data if math.isfinite(data) else None
    if issubclass(kind, int) and int.bit_length(data) > MOST_INT_BITS:
        return shown(data)
    if not issubclass(kind, dict | list | tuple):
        return data
    if depth >= 100:  # a default that holds itself
        return shown(data)
    if issubclass(kind, dict):
        return {
            (key if type(key) in _JSON_KEYS and not _too_long(key) else shown(key)): _finite(
                value, depth + 1
            )
            for key, value in dict.items(data)
        }
    return [_finite(value, depth + 1) for value in data]


def _too_long(key: Any) -> bool:
    return type(key) is int and key.bit_length() > MOST_INT_BITS


def _text_of(value: Any) -> str:
    """``str(value)`` for a type ``json`` does not know; :func:`errors.shown` when that raises."""
    try:
        text = str(value)
    except BaseException as exc:  # a plugin's __str__ may raise anything
        if stops_the_program(exc):
            raise
        return shown(value)
    return text if type(text) is str else shown(value)


def stdout_reader_gone() -> None:
    """Send what is still printed to nowhere: the reader of standard output went away.

    ``interactions list | head`` is not an error, and nor is a summary that finds its
    reader gone; the flush at exit would otherwise raise ``BrokenPipeError`` again.
    """
    try:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - kept open until exit
    except OSError:
        pass


def pipe_note(path: str, flag: str) -> str:
    """What stderr says while the named pipe ``path`` (given as ``flag``) awaits its reader."""
    return (
        f"interactions: waiting for a process to read the named pipe {path} ({flag}); "
        "start its reader, or stop with Ctrl-C\n"
    )


#: Seconds a finished command waits for threads and processes plugin code left running.
STRAY_GRACE = 2.0


def _strays() -> tuple[list[Any], list[Any]]:
    """The non-daemon threads (but the main one) and child processes still running."""
    import threading

    main_thread = threading.main_thread()
    threads = [t for t in threading.enumerate() if not t.daemon and t is not main_thread]
    multiprocessing = sys.modules.get("multiprocessing")
    children = (
        [p for p in multiprocessing.active_children() if not p.daemon]
        if (multiprocessing is not None)
        else []
    )
    return threads, children


def leave_strays(code: int) -> None:
    """Exit now if threads or processes plugin code started outlive the command by a moment.

    Python waits for every non-daemon thread (an executor's too) and child process
    before a process exits, with Ctrl-C ignored meanwhile: one a plugin started and
    never joined would keep a finished run (its summary printed, its records
    written) alive for as long as it likes, for ever in a CI job. After
    ``STRAY_GRACE`` seconds the command names them and exits without them: the
    threads end with it, child processes go on; log files are flushed, but other
    ``atexit`` handlers do not run.
    """
    import time

    threads, children = _strays()
    try:
        deadline = time.monotonic() + STRAY_GRACE
        for waited in [*threads, *children]:
            waited.join(max(0.0, deadline - time.monotonic()))
    except KeyboardInterrupt:
        code = 130
    threads = [t for t in threads if t.is_alive()]
    children = [p for p in children if p.is_alive()]
    if not threads and not children:
        return
    named = [repr(t.name) for t in threads] + [f"process {p.pid}" for p in children]
    sys.stderr.write(
        f"interactions: warning: {', '.join(named[:5])}{', ...' if len(named) > 5 else ''} "
        f"still running {STRAY_GRACE:g} s after the command ended (started by plugin code?); "
        "exiting without waiting (a plugin should join its threads and processes in "
        "finalize_interaction, or make them daemons)\n"
    )
    multiprocessing = sys.modules.get("multiprocessing")
    if multiprocessing is not None:  # daemon children end with us, as at a normal exit
        for child in multiprocessing.active_children():
            if child.daemon:
                child.terminate()
    logging = sys.modules.get("logging")
    if logging is not None:  # log files are flushed and closed, as at a normal exit
        logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


# -- the progress bar ----------------------------------------------------------


def duration(seconds: float) -> str:
    """``42s``, ``3m05s`` or ``2h07m``: an estimate, so no finer than it needs to be."""
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s // 60 % 60:02d}m"


class Progress:
    """A one-line progress bar on a terminal stream, redrawn at most 10 times a second."""

    def __init__(self, stream: TextIO, total: int | None) -> None:
        import time

        self.stream = stream
        self.total = total
        self.clock = time.monotonic
        self.started = self.clock()
        self.next_draw = 0.0

    def update(self, done: int, errors: int, force: bool = False) -> None:
        now = self.clock()
        if not force and now < self.next_draw:
            return
        self.next_draw = now + 0.1
        elapsed = max(now - self.started, 1e-9)
        rate = done / elapsed
        if self.total:
            frac = min(done / self.total, 1.0)
            filled = int(frac * 24)
            bar = f"[{'#' * filled}{'.' * (24 - filled)}] {done}/{self.total}"
        else:
            bar = f"{done} episodes"
        eta = ""
        if self.total and done and self.total > done:
            eta = f"  ETA {duration((self.total - done) / rate)}"
        self.stream.write(f"\r{bar}  {rate:,.0f}/s  errors {errors}{eta}\x1b[K")
        self.stream.flush()

    def close(self) -> None:
        self.stream.write("\r\x1b[K")
        self.stream.flush()
