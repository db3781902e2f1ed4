"""The ``interactions`` command line.

One module per subcommand (``cli/list.py``, ``cli/show.py``, ...), each with
``register(subparsers)`` to declare its arguments and ``run(args) -> int``.
Command modules import their heavy dependencies inside ``run``, so building the
parser stays cheap. :func:`main` turns every framework error into a one-paragraph
message on stderr and a non-zero exit code: users never see a traceback unless
they ask for one with ``INTERACTIONS_DEBUG=1``.
"""

from __future__ import annotations

import importlib
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

__all__ = ["COMMANDS", "build_parser", "main"]

#: Subcommand modules, in the order ``--help`` lists them.
COMMANDS = ("list", "show", "check", "cache")


def build_parser() -> argparse.ArgumentParser:
    import argparse

    from .. import __version__

    parser = argparse.ArgumentParser(
        prog="interactions",
        description="Discover, inspect, check and run multi-turn RL interactions installed "
        "as plugins.",
    )
    parser.add_argument("--version", action="version", version=f"interactions-core {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f".{name}", __name__)
        module.register(sub)
    return parser


def _fail(message: str, code: int) -> int:
    sys.stderr.write(f"interactions: error: {message}\n")
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the process exit code."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(args_list)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    from ..errors import InteractionsError

    try:
        return int(args.run(args) or 0)
    except InteractionsError as exc:
        return _fail(str(exc), 1)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except BrokenPipeError:
        # e.g. `interactions list | head`: the reader went away; not an error.
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        except OSError:
            pass
        return 0
    except Exception as exc:  # a bug, ours or a plugin's: say so, briefly
        if os.environ.get("INTERACTIONS_DEBUG"):
            raise
        return _fail(
            f"unexpected {exc.__class__.__name__}: {exc}\n"
            "  (set INTERACTIONS_DEBUG=1 to see the traceback, and please report it)",
            1,
        )
