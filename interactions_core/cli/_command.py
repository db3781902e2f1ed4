"""A subcommand declared as data, and built into argparse the same way for every command.

Each subcommand module states its command once, as a :class:`Command` named
``COMMAND`` beside its ``run(args) -> int``; ``build_parser`` hands both to
:meth:`Command.add_to`. The ``add_parser`` / ``add_argument`` /
``set_defaults`` calls are therefore written here only, and a module reads as
what its command takes rather than as argparse plumbing. Nothing is imported at
run time: argparse is only touched when the parser is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence

__all__ = ["Arg", "Command", "Subparsers", "flag"]


class Subparsers(Protocol):
    """What ``ArgumentParser.add_subparsers()`` returns, as far as a command uses it."""

    def add_parser(self, name: str, **options: Any) -> argparse.ArgumentParser: ...


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
