"""``interactions check CONFIG``: validate a config without running anything."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from ._command import Command, config_file, flag, own_stdout

if TYPE_CHECKING:
    import argparse

COMMAND = Command(
    "check",
    help="validate a config file",
    description="Validate a config: structure, interaction names (with did-you-mean), each "
    "entry's options against the plugin's schema. Nothing is instantiated. Exit 0 when "
    "valid, 1 with every problem listed on stderr otherwise.",
    arguments=[
        config_file("path to the YAML config"),
        flag(
            "--no-class-paths",
            "refuse verl-style dotted class_name paths (same as INTERACTIONS_NO_CLASS_PATHS=1)",
        ),
    ],
)


def run(args: argparse.Namespace) -> int:
    import os

    from .._classes import CLASS_PATHS_VAR
    from ..errors import ConfigError, printable, printable_lines
    from ..loader import load_config

    if args.no_class_paths:
        os.environ[CLASS_PATHS_VAR] = "1"
    try:
        loaded = load_config(args.config)
    except ConfigError as exc:
        sys.stderr.write(printable(f"{args.config}: invalid config") + "\n")
        for problem in exc.problems:
            sys.stderr.write(f"  {printable_lines(problem)}\n")
        return 1
    own_stdout()  # the plugins, imported to be checked, may have replaced sys.stdout
    n = len(loaded.entries)
    print(printable(f"{args.config}: OK, {n} interaction{'s' if n != 1 else ''}"))
    for r in loaded.entries:
        marker = "  (default)" if r.name == loaded.default else ""
        print(printable(f"  {r.name}: {r.origin}{marker}"))
    return 0
