"""``interactions new NAME``: scaffold an installable plugin distribution."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._command import Arg, Command

if TYPE_CHECKING:
    import argparse

COMMAND = Command(
    "new",
    help="create a new plugin distribution",
    description="Create a complete, installable plugin distribution for the interaction "
    "NAME: pyproject.toml with the entry point, a package with an interaction class "
    "(config schema and a working example behaviour), tests that use the conformance "
    "checker, and a README. NAME is normalised to a Python identifier (my-task -> "
    "my_task). Nothing is written when NAME is invalid, DIR is not empty, or NAME "
    "is already installed.",
    arguments=[
        Arg("name", metavar="NAME", help="the interaction name, e.g. my_task"),
        Arg(
            "--dir",
            metavar="DIR",
            help="where to create it (default: ./interactions-NAME); must be new or empty",
        ),
    ],
)


def run(args: argparse.Namespace) -> int:
    from ..scaffold import create_plugin, plugin_names

    names = plugin_names(args.name)
    try:
        folder = create_plugin(args.name, args.dir)
    except OSError as exc:
        from ..errors import InteractionsError

        where = exc.filename or args.dir or "the plugin folder"
        raise InteractionsError(
            f"cannot create {where}: {exc.strerror or exc} (choose another --dir or name)"
        ) from None
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    spec = folder.as_posix() if folder.is_absolute() else f"./{folder.as_posix()}"
    lines = [f"Created {names.dist} in {folder}:", *(f"  {f}" for f in files)]
    lines += [
        "",
        "Next steps:",
        f"  pip install -e '{spec}[test]'",
        f"  interactions list            # shows {names.name}",
        f"  pytest {folder}",
        f"Then edit {names.package}/interaction.py; see docs/writing-plugins.md.",
    ]
    print("\n".join(lines))
    return 0
