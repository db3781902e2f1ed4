"""``interactions data``: list dataset builders, or run one and write its rows."""

from __future__ import annotations

import argparse
import os
import sys

from ..errors import cut_text
from ._command import Arg, Command, flag, own_stdout, positive_int, printable, printable_lines

#: The command's own options. They may also follow BUILDER, among the builder's
#: options: :func:`_split` picks them out there by these same declarations.
_OWN_OPTIONS = [
    Arg("--output", "-o", metavar="FILE", help="where to write the rows ('-': standard output)"),
    Arg("--format", choices=("jsonl", "parquet"), help="output format (default: suffix)"),
    flag("--overwrite", "replace an existing --output file"),
    Arg("--limit", type=positive_int, metavar="N", help="write the first N rows only (N >= 1)"),
    Arg(
        "--agent-name",
        metavar="NAME",
        help="write verl's agent_name column with NAME on every row (e.g. 'interactions', "
        "the verl agent loop of interactions_core.integrations.verl)",
    ),
    flag("--json", "list builders as JSON"),
]
_BUILDER = Arg("builder", metavar="BUILDER", nargs="?", help="the builder to run")
#: Everything after BUILDER, hidden from --help: the builder's options and maybe ours.
_REST = Arg("options", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)

COMMAND = Command(
    "data",
    help="list dataset builders, or build a dataset",
    description="Without BUILDER, list the dataset builders plugins provide. With one, "
    "run it and write its rows (verl's sample shape) to --output: JSONL, or parquet with "
    "pyarrow. Options after BUILDER are the builder's own, written --name value; "
    "'interactions data BUILDER --help' lists them.",
    arguments=[_BUILDER, *_OWN_OPTIONS, _REST],
)


def _split(rest: list[str], args: argparse.Namespace) -> list[str]:
    """Pick the command's own options out of what follows BUILDER; return the builder's."""
    own = {name: option for option in _OWN_OPTIONS for name in option.names}
    out: list[str] = []
    i = 0
    while i < len(rest):
        token = rest[i]
        key, eq, value = token.partition("=")
        option = own.get(key)
        if option is not None and not option.is_flag:
            if not eq:
                if i + 1 >= len(rest):
                    from ..errors import ConfigError

                    raise ConfigError([f"{key} needs a value"])
                value = rest[i + 1]
                i += 1
            setattr(args, option.dest, _converted(option, key, value))
        elif token in own and own[token].is_flag:
            setattr(args, own[token].dest, True)
        else:
            out.append(token)
        i += 1
    return out


def _converted(option: Arg, key: str, value: str) -> object:
    """``value`` through the option's ``type`` check; a bad one is a config error."""
    convert = option.options.get("type")
    if convert is None:
        return value
    try:
        return convert(value)
    except argparse.ArgumentTypeError as exc:
        from ..errors import ConfigError

        raise ConfigError([f"{key}: {exc}"]) from None


def _list(as_json: bool) -> int:
    from ..registry import get_registry
    from ..runtime.datasets import list_builders

    registry = get_registry()
    builders = list_builders(registry)
    for pid, told in registry.hook_failures().items():  # on stderr: --json stays a list
        note = f"note: hook plugin {pid} failed, so its dataset builders are missing: {told}"
        sys.stderr.write(printable(cut_text(note, 1000)) + "\n")
    if as_json:
        from ._command import print_json

        print_json([b.as_dict() for b in builders])
        return 0
    own_stdout()  # a hook plugin, imported for its builders, may have replaced sys.stdout
    if not builders:
        print("No dataset builders installed. Plugins provide them (see docs/run.md).")
        return 0
    from ._command import table

    print(
        table(
            ("name", "distribution", "description"),
            [[b.name, b.distribution, b.description or ""] for b in builders],
        )
    )
    return 0


def _help(info: object) -> int:
    import inspect

    from ..errors import shown
    from ..runtime.datasets import BuilderInfo, builder_options

    assert isinstance(info, BuilderInfo)
    lines = [f"{info.name}  ({info.plugin})", ""]
    doc = inspect.getdoc(info.builder)
    if doc:
        lines += ["  " + line if line else "" for line in doc.splitlines()] + [""]
    lines.append("options:")
    for name, param in builder_options(info.builder).items():
        default = info.defaults.get(name, param.default)
        told = "required" if default is param.empty else f"default {shown(default)}"
        lines.append(f"  --{name.replace('_', '-')}  ({told})")
    own_stdout()
    print(printable_lines("\n".join(lines)))  # the builder's own text, escaped
    return 0


def run(args: argparse.Namespace) -> int:
    import itertools

    from ..errors import ConfigError, InteractionsError
    from ..runtime.datasets import get_builder, parse_cli_options, run_builder, write_rows
    from ..runtime.records import refuse_existing, same_file

    if not args.builder:
        return _list(args.json)
    rest = _split(list(args.options or []), args)
    info = get_builder(args.builder)
    if "--help" in rest or "-h" in rest:
        return _help(info)
    options = parse_cli_options(rest)
    if not args.output:
        raise ConfigError(["--output FILE is required (where to write the rows)"])
    if args.output == "-":  # standard output, as `run --data -` reads standard input
        if os.path.exists("/dev/stdout"):
            args.output = "/dev/stdout"
            args.format = args.format or "jsonl"
        else:
            raise ConfigError(["--output - (standard output) needs /dev/stdout; name a file"])
    for name, value in options.items():  # --overwrite replaces the output, never an input
        if isinstance(value, str) and os.path.exists(value) and same_file(value, args.output):
            raise ConfigError(
                [
                    f"--output {args.output} is the --{name.replace('_', '-')} file: writing it "
                    "would destroy the input; write the rows to another file"
                ]
            )
    refuse_existing(args.output, args.overwrite)
    rows = run_builder(info, options)  # exceptions the builder raises come out named
    if args.limit is not None:
        rows = itertools.islice(rows, min(args.limit, sys.maxsize))  # as many as there are
    if args.agent_name:
        agent_name = args.agent_name
        rows = ({**row, "agent_name": agent_name} for row in rows)
    try:
        count = write_rows(rows, args.output, format=args.format, overwrite=args.overwrite)
    except (ValueError, TypeError, OSError) as exc:
        if isinstance(exc, InteractionsError):
            raise
        # the rows could not be written as the format needs (e.g. mixed types for parquet)
        from ..errors import exception_kind, exception_text

        # pyarrow quotes the value it could not convert: a row's field may be megabytes
        told = cut_text(exception_text(exc), 2_000)
        raise ConfigError([f"builder {info.name!r} failed: {exception_kind(exc)}: {told}"]) from exc
    sys.stderr.write(f"wrote {count} row{'s' if count != 1 else ''} to {args.output}\n")
    return 0
