"""Config files: safe YAML with line numbers, and the config's structure.

The format is a superset of verl's::

    default: gsm8k                      # optional
    interaction:
      - name: gsm8k                     # alias samples use (interaction_kwargs.name)
        config: {}                      # plugin = name when neither is given
      - name: gsm8k_flexible
        plugin: gsm8k                   # a registered (entry-point) name
        config: {method: flexible}
      - name: legacy
        class_name: my_pkg.mod.MyInteraction   # verl's dotted path
        config: {}
      - name: judge
        replicas: 4                     # served by a pool of 4 Ray actors (docs/ray.md)
        resources: {CPU: 1}             # Ray resources of each replica

``replicas`` and ``resources`` matter only to the Ray integration
(:mod:`interactions_core.ray`); a plain load builds one local instance.

:func:`parse_config` checks the *structure* only (keys, types, names) and reports
every problem with its file and line. Resolving names against the installed
plugins and checking each ``config:`` against its schema is the loader's job
(:mod:`interactions_core.loader`).

The YAML reader is built on PyYAML's safe loader and walks the node graph itself:
no tag outside YAML's plain data types is accepted (``!!python/...`` tags are
refused before anything is constructed), each node is converted once (an alias
bomb costs what its text costs, not its expansion), duplicate keys are errors,
and every value remembers its line.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ._interpolation import find_interpolation, resolve_interpolations
from .errors import ConfigError

__all__ = ["MAX_CONFIG_BYTES", "ConfigEntry", "InteractionsConfig", "parse_config", "read_yaml"]

#: Configs are small; a larger file is almost certainly the wrong file.
MAX_CONFIG_BYTES = 4 * 1024 * 1024
#: Most values a document may expand to through aliases (the data handed to plugins
#: is shared, but anything that copies or prints it pays the full expansion).
MAX_EXPANDED_VALUES = 1_000_000
ENTRY_KEYS = ("name", "plugin", "class_name", "config", "replicas", "resources")
TOP_KEYS = ("interaction", "default")

_PLAIN_TAGS = {
    "tag:yaml.org,2002:" + t for t in ("str", "int", "float", "bool", "null", "timestamp", "binary")
}
_MAP_TAG = "tag:yaml.org,2002:map"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_SEQ_TAG = "tag:yaml.org,2002:seq"

Lines = dict[tuple[Any, ...], int]


def read_yaml(text: str, source: str = "<config>") -> tuple[Any, Lines]:
    """Parse one YAML document safely; return ``(data, lines)``.

    ``lines`` maps a path of keys/indexes (``("interaction", 0, "name")``) to the
    1-based line where that value starts. Raises :class:`ConfigError`.
    """
    import yaml

    try:
        # libyaml's parser when present: ~10x faster, and it bounds nesting itself.
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
        try:
            node = loader.get_single_node()
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f"{source}:{mark.line + 1}" if mark else source
        raise ConfigError([f"{line}: invalid YAML: {exc.problem or exc.context}"]) from None
    except yaml.YAMLError as exc:
        raise ConfigError([f"{source}: invalid YAML: {exc}"]) from None
    except RecursionError:
        raise ConfigError([f"{source}: YAML nested too deeply"]) from None
    if node is None:
        return None, {}
    lines: Lines = {}
    memo: dict[int, Any] = {}
    constructor = yaml.constructor.SafeConstructor()
    merged = [0]  # values copied by '<<' merges, bounded like an alias expansion

    def merge(
        out: dict[Any, Any], own: set[Any], value_node: Any, path: tuple[Any, ...], depth: int
    ) -> None:
        """Apply a ``<<`` merge key: earlier mappings win, explicit keys override."""
        where = f"{source}:{value_node.start_mark.line + 1}"
        sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
        for src in sources:
            if not isinstance(src, yaml.MappingNode):
                raise ConfigError(
                    [f"{where}: invalid YAML: a '<<' merge needs a mapping or a list of mappings"]
                )
            items = convert(src, (*path, "<<"), depth + 1)
            merged[0] += len(items)
            if merged[0] > MAX_EXPANDED_VALUES:
                raise ConfigError(
                    [f"{where}: YAML merge keys expand this document too far (a YAML bomb?)"]
                )
            for key, value in items.items():
                if key not in out and key not in own:
                    out[key] = value

    def convert(node: Any, path: tuple[Any, ...], depth: int) -> Any:
        if depth > 100:
            raise ConfigError([f"{source}:{node.start_mark.line + 1}: YAML nested too deeply"])
        lines.setdefault(path, node.start_mark.line + 1)
        if id(node) in memo:
            return memo[id(node)]
        where = f"{source}:{node.start_mark.line + 1}"
        if isinstance(node, yaml.MappingNode):
            if node.tag != _MAP_TAG:
                raise ConfigError(
                    [
                        f"{where}: YAML tag {node.tag!r} is not allowed; "
                        "configs are plain data (no Python objects)"
                    ]
                )
            out: dict[Any, Any] = {}
            memo[id(node)] = out
            own: set[Any] = set()
            for key_node, value_node in node.value:
                if key_node.tag == _MERGE_TAG:
                    merge(out, own, value_node, path, depth)
                    continue
                key = convert(key_node, (*path, "<key>"), depth + 1)
                if not isinstance(key, (str, int, float, bool)) and key is not None:
                    raise ConfigError(
                        [
                            f"{source}:{key_node.start_mark.line + 1}: "
                            f"mapping keys must be plain scalars"
                        ]
                    )
                if key in own:
                    raise ConfigError(
                        [f"{source}:{key_node.start_mark.line + 1}: duplicate key {_short(key)}"]
                    )
                own.add(key)  # an explicit key overrides a merged one (YAML's merge rule)
                # A problem with a key points at the key's line, not at the block below it.
                lines.setdefault((*path, key), key_node.start_mark.line + 1)
                out[key] = convert(value_node, (*path, key), depth + 1)
            return out
        if isinstance(node, yaml.SequenceNode):
            if node.tag != _SEQ_TAG:
                raise ConfigError(
                    [
                        f"{where}: YAML tag {node.tag!r} is not allowed; "
                        "configs are plain data (no Python objects)"
                    ]
                )
            seq: list[Any] = []
            memo[id(node)] = seq
            seq.extend(convert(item, (*path, i), depth + 1) for i, item in enumerate(node.value))
            return seq
        if node.tag not in _PLAIN_TAGS:
            raise ConfigError(
                [
                    f"{where}: YAML tag {node.tag!r} is not allowed; "
                    "configs are plain data (no Python objects)"
                ]
            )
        try:
            value = constructor.construct_object(node)
        except (yaml.YAMLError, ValueError, TypeError) as exc:
            raise ConfigError([f"{where}: invalid value: {exc}"]) from None
        memo[id(node)] = value
        return value

    try:
        data = convert(node, (), 0)
    except RecursionError:
        raise ConfigError([f"{source}: YAML nested too deeply"]) from None
    except yaml.MarkedYAMLError as exc:  # e.g. a '<<' merge of something not a mapping
        mark = exc.problem_mark or exc.context_mark
        line = f"{source}:{mark.line + 1}" if mark else source
        raise ConfigError([f"{line}: invalid YAML: {exc.problem or exc.context}"]) from None
    except yaml.YAMLError as exc:
        raise ConfigError([f"{source}: invalid YAML: {exc}"]) from None
    return data, lines


def _check_expansion(root: Any, where: str) -> None:
    """Refuse data that aliases expand past :data:`MAX_EXPANDED_VALUES`, or that contains itself.

    Converting the YAML shares aliased values instead of copying them, so reading a
    "billion laughs" document is cheap; but the ``interaction:`` list is handed to
    plugins, which may copy, print or serialise it. Counts every value once per
    reference, iteratively, without expanding anything.
    """
    sizes: dict[int, int] = {}
    active: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        value, done = stack.pop()
        if not isinstance(value, (list, dict)):
            continue
        children = list(value.values()) if isinstance(value, dict) else value
        if not done:
            if id(value) in active:
                raise ConfigError([f"{where}: a YAML alias refers to a value that contains it"])
            if id(value) in sizes:
                continue
            active.add(id(value))
            stack.append((value, True))
            stack.extend((c, False) for c in children)
            continue
        active.discard(id(value))
        total = 1 + len(children) + sum(sizes.get(id(c), 0) for c in children)
        sizes[id(value)] = min(total, MAX_EXPANDED_VALUES + 1)
        if total > MAX_EXPANDED_VALUES:
            raise ConfigError(
                [
                    f"{where}: YAML aliases expand this part of the config to more than "
                    f"{MAX_EXPANDED_VALUES:,} values; configs are small (is this a YAML bomb?)"
                ]
            )


def _short(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters, without building a huge repr first."""
    if isinstance(value, (list, dict)):
        return f"a {type(value).__name__} of {len(value)} items"
    text = repr(value[: limit + 1] if isinstance(value, (str, bytes)) else value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class ConfigEntry:
    """One item of the ``interaction:`` list, structurally valid."""

    __slots__ = (
        "class_name",
        "config",
        "explicit_name",
        "index",
        "line",
        "lines",
        "name",
        "plugin",
        "replicas",
        "resources",
    )

    def __init__(
        self,
        index: int,
        name: str | None,
        plugin: str | None,
        class_name: str | None,
        config: dict[str, Any],
        line: int | None,
        lines: Lines,
        replicas: int | None = None,
        resources: dict[str, float] | None = None,
    ) -> None:
        self.index = index
        self.explicit_name = name
        self.name = name  # filled in from the class or plugin when not explicit
        self.plugin = plugin
        self.class_name = class_name
        self.config = config
        self.line = line
        self.lines = lines  # key path within the entry -> line
        #: Ray pool size and per-replica resources (used by interactions_core.ray only).
        self.replicas = replicas
        self.resources = resources

    def where(self, source: str | None, *key: Any) -> str:
        line = self.lines.get(key) or self.line
        loc = f"{source}:{line}" if source and line else (source or "<config>")
        field = f"interaction[{self.index}]" + "".join(f".{k}" for k in key)
        return f"{loc}: {field}"


class InteractionsConfig:
    """A structurally valid config: its entries and the optional default name."""

    __slots__ = ("default", "default_line", "entries", "problems", "source")

    def __init__(
        self,
        entries: list[ConfigEntry],
        default: str | None,
        source: str | None,
        default_line: int | None = None,
        problems: list[str] | None = None,
    ):
        self.entries = entries
        #: Structural problems of entries left out of ``entries``; the loader adds its own.
        self.problems = problems or []
        self.default = default
        self.source = source
        self.default_line = default_line


def _did_you_mean(key: str, allowed: tuple[str, ...]) -> str:
    from .naming import suggest

    return suggest(key, allowed, n=1)


def _load_source(source: str | os.PathLike[str] | Mapping[str, Any]) -> tuple[Any, Lines, str]:
    if isinstance(source, Mapping):
        return dict(source), {}, "<mapping>"
    path = os.fspath(source)
    try:
        size = os.path.getsize(path)
        if size > MAX_CONFIG_BYTES:
            raise ConfigError(
                [
                    f"{path}: file is {size / 1e6:.1f} MB; configs are limited to "
                    f"{MAX_CONFIG_BYTES // (1024 * 1024)} MiB — is this the right file?"
                ]
            )
        with open(path, "rb") as fh:
            raw = fh.read(MAX_CONFIG_BYTES + 1)  # a device or FIFO has no size
        if len(raw) > MAX_CONFIG_BYTES:
            raise ConfigError(
                [f"{path}: more than {MAX_CONFIG_BYTES // (1024 * 1024)} MiB; is this a config?"]
            )
    except OSError as exc:
        raise ConfigError([f"cannot read config {path}: {exc.strerror or exc}"]) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            [f"{path}: not UTF-8 text (byte {exc.start}): save it as UTF-8"]
        ) from None
    if "\x00" in text:
        raise ConfigError([f"{path}: contains NUL bytes; it is not a YAML text file"])
    data, lines = read_yaml(text, path)
    return data, lines, path


def parse_config(source: str | os.PathLike[str] | Mapping[str, Any]) -> InteractionsConfig:
    """Read and structurally validate a config file path or an in-memory mapping.

    Raises :class:`ConfigError` when the document as a whole is unusable. Problems
    confined to single entries are collected in ``problems`` and those entries left
    out, so the loader can go on checking the others and report everything at once.
    """
    data, lines, where = _load_source(source)
    src = None if where == "<mapping>" else where

    def loc(*path: Any) -> str:
        line = lines.get(path)
        if src is None:
            return "<config>"
        return f"{src}:{line}" if line else src

    if data is None:
        raise ConfigError(
            [f"{loc()}: the config is empty; it needs an 'interaction:' list (see docs/config.md)"]
        )
    if not isinstance(data, dict):
        raise ConfigError(
            [
                f"{loc()}: the config must be a mapping with an 'interaction:' list, "
                f"not a {type(data).__name__}"
            ]
        )
    problems: list[str] = []
    for key in data:
        if key not in TOP_KEYS:
            problems.append(
                f"{loc(key)}: unknown top-level key {key!r}; allowed keys: "
                f"{', '.join(TOP_KEYS)}{_did_you_mean(str(key), TOP_KEYS)}"
            )
    default = data.get("default")
    if default is not None and (not isinstance(default, str) or not default.strip()):
        problems.append(f"{loc('default')}: 'default' must be a non-empty interaction name")
        default = None
    if "interaction" not in data:
        problems.append(f"{loc()}: missing the 'interaction:' list")
        raise ConfigError(problems)
    items = data["interaction"]
    if items is None:
        items = []
    if not isinstance(items, list):
        problems.append(
            f"{loc('interaction')}: 'interaction' must be a list of entries, "
            f"not a {type(items).__name__}"
        )
        raise ConfigError(problems)
    _check_expansion(items, loc("interaction"))
    found = find_interpolation(data)
    if found is not None:  # verl's ${...}: resolved as OmegaConf does, or refused
        data = resolve_interpolations(data, loc(*found[0]))
        items = data.get("interaction") or []
    by_entry: dict[int, Lines] = {}  # one pass: grouping per entry would be quadratic
    for p, ln in lines.items():
        if len(p) >= 2 and p[0] == "interaction" and isinstance(p[1], int):
            by_entry.setdefault(p[1], {})[p[2:]] = ln
    entries: list[ConfigEntry] = []
    for i, item in enumerate(items):
        base = ("interaction", i)
        entry_loc = f"{loc(*base)}: interaction[{i}]"
        if not isinstance(item, dict):
            problems.append(
                f"{entry_loc}: each entry must be a mapping with 'name', 'plugin', "
                f"'class_name' or 'config', not a {type(item).__name__}"
            )
            continue
        ok = True
        for key in item:
            if key not in ENTRY_KEYS:
                ok = False
                problems.append(
                    f"{loc(*base, key)}: interaction[{i}]: unknown key {key!r}; "
                    f"allowed keys: {', '.join(ENTRY_KEYS)}"
                    f"{_did_you_mean(str(key), ENTRY_KEYS)}"
                )
        values: dict[str, str | None] = {}
        for key in ("name", "plugin", "class_name"):
            value = item.get(key)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                ok = False
                problems.append(
                    f"{loc(*base, key)}: interaction[{i}].{key} must be a "
                    f"non-empty string, not {_short(value)}"
                )
                value = None
            values[key] = value.strip() if isinstance(value, str) else None
        if values["plugin"] and values["class_name"]:
            ok = False
            problems.append(
                f"{loc(*base)}: interaction[{i}]: give either 'plugin' (a registered "
                "name) or 'class_name' (a dotted path), not both"
            )
        if not (values["name"] or values["plugin"] or values["class_name"]):
            ok = False
            problems.append(
                f"{entry_loc}: needs a 'name' (the registered interaction to use) "
                "or a 'plugin' or 'class_name'"
            )
        config = item.get("config", {})
        if config is None:
            config = {}
        if not isinstance(config, dict):
            ok = False
            problems.append(
                f"{loc(*base, 'config')}: interaction[{i}].config must be a mapping, "
                f"not a {type(config).__name__}"
            )
        elif any(not isinstance(k, str) for k in config):
            ok = False
            problems.append(f"{loc(*base, 'config')}: interaction[{i}].config keys must be strings")
        replicas = item.get("replicas")
        if replicas is not None and (
            isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1
        ):
            ok = False
            problems.append(
                f"{loc(*base, 'replicas')}: interaction[{i}].replicas must be a positive "
                f"integer (the number of Ray actors serving it), not {_short(replicas)}"
            )
        resources = item.get("resources")
        if resources is not None:
            bad = not isinstance(resources, dict) or any(
                not isinstance(k, str)
                or isinstance(v, bool)
                or not isinstance(v, (int, float))
                or not v >= 0
                for k, v in resources.items()
            )
            if bad:
                ok = False
                problems.append(
                    f"{loc(*base, 'resources')}: interaction[{i}].resources must map Ray "
                    "resource names to non-negative numbers, e.g. {CPU: 1, GPU: 0.5}"
                )
            elif replicas is None:
                ok = False
                problems.append(
                    f"{loc(*base, 'resources')}: interaction[{i}].resources needs "
                    "'replicas: N' as well: resources are those of each pool replica"
                )
        if not ok:
            continue
        entry_lines = by_entry.get(i, {})
        entries.append(
            ConfigEntry(
                i,
                values["name"],
                values["plugin"],
                values["class_name"],
                dict(config),
                lines.get(base),
                entry_lines,
                replicas,
                dict(resources) if resources is not None else None,
            )
        )
    return InteractionsConfig(entries, default, src, lines.get(("default",)), problems)
