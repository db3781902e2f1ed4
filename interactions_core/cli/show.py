"""``interactions show NAME``: what one interaction is and how to configure it."""

from __future__ import annotations

from ..errors import shown
from ._command import Arg, Command, flag, own_stdout, printable_lines

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any

COMMAND = Command(
    "show",
    help="describe one interaction",
    description="Describe an interaction: its docstring, where it comes from and its config "
    "schema. NAME may be qualified as distribution:name.",
    arguments=[Arg("name", metavar="NAME"), flag("--json", "print a JSON object")],
)


def describe(name: str) -> dict[str, Any]:
    """Everything ``show`` prints, as data."""
    import inspect

    from .._config import describe as describe_schema
    from ..registry import get_registry

    registry = get_registry()
    entry = registry.resolve(name)
    cls = registry.load(entry)
    schema = getattr(cls, "config_schema", None)
    fields = describe_schema(schema) if schema is not None else None
    info = entry.as_dict()
    info.update(
        {
            "path": entry.path,
            "doc": inspect.getdoc(cls) or "",
            "defaults": entry.defaults,
            "description": entry.description,
            "config_schema": None
            if fields is None
            else [
                {
                    "name": f.name,
                    "type": f.type,
                    "required": f.required,
                    "default": f.default,
                    "help": f.help,
                }
                for f in fields
            ],
        }
    )
    return info


def run(args: argparse.Namespace) -> int:
    info = describe(args.name)
    if args.json:
        from ._command import print_json

        print_json(info)
        return 0
    lines = [
        f"{info['name']}  ({info['distribution']} {info['version']})".rstrip(),
        f"  target:  {info['target']}",
        f"  kind:    {info['kind']}",
    ]
    if info["path"]:
        lines.append(f"  from:    {info['path']}")
    if info["defaults"]:
        told = ", ".join(f"{shown(k)}: {shown(v)}" for k, v in info["defaults"].items())
        lines.append(f"  defaults: {{{told}}}")
    doc = info["description"] or info["doc"]
    if doc:
        lines += ["", *("  " + line if line else "" for line in doc.splitlines())]
    lines.append("")
    schema = info["config_schema"]
    if schema is None:
        lines.append("config: no schema declared (options are passed through unchecked)")
    elif not schema:
        lines.append("config: takes no options")
    else:
        lines.append("config:")
        for f in schema:
            default = "required" if f["required"] else f"default {shown(f['default'])}"
            lines.append(f"  {f['name']}: {f['type']}  ({default})")
            if f["help"]:
                lines.append(f"      {f['help']}")
    own_stdout()  # the plugin, imported to be described, may have replaced sys.stdout
    print(printable_lines("\n".join(lines)))  # the plugin's own text, escaped
    return 0
