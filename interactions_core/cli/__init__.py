"""The ``interactions`` command line.

One module per subcommand (``cli/list.py``, ``cli/show.py``, ...), each with a
``COMMAND`` declaring its arguments (see ``_command.py``) and ``run(args) -> int``.
Command modules import their heavy dependencies inside ``run``, and :func:`main`
declares only the subcommand it is asked for, so building the parser stays cheap
(``interactions list`` imports none of the other command modules). :func:`main`
turns every framework error into a one-paragraph message on stderr and a non-zero
exit code: users never see a traceback unless they ask for one with
``INTERACTIONS_DEBUG=1``.
"""

from __future__ import annotations

import os
import sys

# ``typing`` is imported for type checkers only: this module is on the path of a
# warm ``interactions list``, where importing ``typing`` alone costs about a
# third of a bare interpreter start (docs/performance.md).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence

    from .._stop_signals import StopSignals

__all__ = ["COMMANDS", "build_parser", "compact_warnings", "main"]

#: Subcommand modules, in the order ``--help`` lists them.
COMMANDS = ("list", "show", "check", "run", "report", "data", "new", "cache", "serve", "ray")


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``interactions`` parser, with every subcommand, or only the one ``argv`` names.

    Given the command line, only the subcommand it runs is imported and declared
    (``interactions list`` never imports ``run`` or ``serve``); when it names none
    of them (``--help``, a typo, nothing), all are, so the help and argparse's
    ``invalid choice`` message list every command.
    """
    import argparse
    import importlib

    from .. import __version__

    parser = argparse.ArgumentParser(
        prog="interactions",
        description="Discover, inspect, check and run multi-turn RL interactions installed "
        "as plugins.",
    )
    parser.add_argument("--version", action="version", version=f"interactions-core {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _declared(argv):
        module = importlib.import_module(f".{name}", __name__)
        module.COMMAND.add_to(sub, module.run)
    return parser


def _declared(argv: Sequence[str] | None) -> Sequence[str]:
    """The subcommands to declare: the one ``argv`` runs when it names one, else all.

    The top-level options take no value, so the first argument that is not an
    option is the subcommand.
    """
    chosen = next((a for a in argv or () if not a.startswith("-")), None)
    return (chosen,) if chosen in COMMANDS else COMMANDS


def compact_warnings() -> None:
    """Show the framework's warnings as one ``interactions: warning:`` line, not Python's
    source listing; other warnings keep Python's display.

    Installed before any plugin code runs, so the first warning already reads so, and
    again by every call (a recording block in between may have replaced it).
    """
    import warnings

    default = warnings.showwarning
    if getattr(default, "_interactions_compact", False):
        return  # already in place

    def show(message, category, filename, lineno, file=None, line=None):  # type: ignore[no-untyped-def]
        if getattr(category, "__module__", "").startswith("interactions_core"):
            (file or sys.stderr).write(f"interactions: warning: {message}\n")
        else:
            default(message, category, filename, lineno, file, line)

    show._interactions_compact = True  # type: ignore[attr-defined]
    warnings.showwarning = show


def _fail(message: str, code: int) -> int:
    from ..errors import printable_lines  # a plugin's text never drives the terminal

    sys.stderr.write(f"interactions: error: {printable_lines(message)}\n")
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the process exit code."""
    # not list(): importing the "list" subcommand binds that name in this package
    args_list = [*(sys.argv[1:] if argv is None else argv)]
    compact_warnings()
    parser = build_parser(args_list)
    from ._command import checked_stdout, stdout_unwritable

    with checked_stdout() as out:
        try:  # --help and --version print, then raise SystemExit(0)
            args = parser.parse_args(args_list)
            if not getattr(args, "command", None):
                parser.print_help()
                sys.stdout.flush()
                if out.failed is None:
                    return 2
                raise out.failed
        except (SystemExit, OSError):
            try:
                sys.stdout.flush()
            except OSError:
                pass
            if out.failed is not None:  # argparse keeps quiet about it
                return _fail(stdout_unwritable(out.failed) or "", 1)
            raise
    code = _dispatch(args.run, args)
    if argv is None and "threading" in sys.modules:  # the process's own command line
        from ._command import leave_strays

        leave_strays(code)  # threads and processes plugin code left must not hold it
    return code


def _user_interrupts() -> StopSignals:
    """Ctrl-C and SIGTERM raise :class:`~interactions_core.errors.Interrupted` while a
    command runs.

    So a ``KeyboardInterrupt`` raised by plugin code (at import, in a call) can be
    told from the user's, and reported as that plugin's fault; and SIGTERM, which
    schedulers and ``timeout`` send, unwinds the command as Ctrl-C does: a file
    being written (``interactions data``) is not left behind half-made, as it was
    when SIGTERM's default action ended the process on the spot. A handler
    someone else installed (an inherited ``SIG_IGN``, say) is left alone.
    """
    from .._stop_signals import StopSignals

    return StopSignals(_raise_interrupted, keep_custom=True)


def _raise_interrupted(signum: int) -> None:
    from ..errors import Interrupted

    raise Interrupted()


def _dispatch(run: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a subcommand, turning every failure into a message and an exit code."""
    from ._command import checked_stdout, kept_stdout

    stops = _user_interrupts()
    try:
        with stops, checked_stdout(), kept_stdout():
            if getattr(args, "json", False):
                from ._command import json_output

                with json_output():
                    code = int(run(args) or 0)
            else:
                code = int(run(args) or 0)
            from ._command import own_stdout

            own_stdout()  # put back, when plugin code replaced it, before it is flushed
            try:  # a full disk is told here, not by Python's flush at exit
                sys.stdout.flush()
            except ValueError:  # closed by plugin code: the command has said so
                pass
            return code
    except KeyboardInterrupt:
        import signal

        if stops.signum == signal.SIGTERM:
            return _fail("terminated", 143)
        return _fail("interrupted", 130)
    except BrokenPipeError:
        from ._command import stdout_reader_gone

        stdout_reader_gone()  # e.g. `interactions list | head`: not an error
        return 0
    except Exception as exc:
        from ..errors import InteractionsError  # imported only when something failed

        if isinstance(exc, InteractionsError):
            return _fail(str(exc), 1)
        from ._command import stdout_unwritable

        unwritable = stdout_unwritable(exc)
        if unwritable is not None:
            return _fail(unwritable, 1)
        if isinstance(exc, Warning):  # a warning turned into an error with -W error
            return _fail(f"{exc} (a warning, raised as an error by the -W option)", 1)
        # A bug, ours or a plugin's: say so, briefly.
        if os.environ.get("INTERACTIONS_DEBUG"):
            raise
        from ..errors import exception_kind, exception_text

        return _fail(
            f"unexpected {exception_kind(exc)}: {exception_text(exc)}\n"
            "  (set INTERACTIONS_DEBUG=1 to see the traceback, and please report it)",
            1,
        )
