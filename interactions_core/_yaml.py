"""A safe YAML reader that remembers the line of every value.

Configs are read by this module and nothing else. It is built on PyYAML's safe
loader and walks the node graph itself: no tag outside YAML's plain data types is
accepted (``!!python/...`` tags are refused before anything is constructed), each
node is converted once (an alias bomb costs what its text costs, not its
expansion), duplicate keys are errors, and every value remembers its line, so the
config structure (:mod:`interactions_core._config`) can point at the line of each
problem. A value holding verl's OmegaConf interpolation (``${...}``) is resolved
as verl resolves it, or refused (see below).
"""

from __future__ import annotations

import os
from typing import Any

from .errors import ConfigError

__all__ = [
    "MAX_CONFIG_BYTES",
    "MAX_EXPANDED_VALUES",
    "Lines",
    "check_expansion",
    "find_interpolation",
    "read_config_file",
    "read_yaml",
    "resolve_interpolations",
    "short_repr",
]

#: Configs are small; a larger file is almost certainly the wrong file.
MAX_CONFIG_BYTES = 4 * 1024 * 1024
#: Most values a document may expand to through aliases (the data handed to plugins
#: is shared, but anything that copies or prints it pays the full expansion).
MAX_EXPANDED_VALUES = 1_000_000
_PLAIN_TAGS = {
    "tag:yaml.org,2002:" + t for t in ("str", "int", "float", "bool", "null", "timestamp", "binary")
}
_MAP_TAG = "tag:yaml.org,2002:map"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_SEQ_TAG = "tag:yaml.org,2002:seq"
#: Tags whose plain scalars YAML 1.1 may write in base 60 (``1:30``).
_NUMBER_TAGS = {"tag:yaml.org,2002:int", "tag:yaml.org,2002:float"}

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
        if node is None:
            return None, {}
        converter = _Converter(source)
        return converter.value(node, (), 0), converter.lines
    except RecursionError:
        raise ConfigError([f"{source}: YAML nested too deeply"]) from None
    except yaml.YAMLError as exc:  # a syntax error, or e.g. a '<<' merge of a scalar
        raise _invalid(exc, source) from None


def _invalid(exc: Any, source: str) -> ConfigError:
    """PyYAML's error as a :class:`ConfigError` at its line."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if hasattr(exc, "problem_mark"):
        line = f"{source}:{mark.line + 1}" if mark else source
        return ConfigError([f"{line}: invalid YAML: {exc.problem or exc.context}"])
    return ConfigError([f"{source}: invalid YAML: {exc}"])


def _refuse_tag(where: str, tag: str) -> ConfigError:
    return ConfigError(
        [f"{where}: YAML tag {tag!r} is not allowed; configs are plain data (no Python objects)"]
    )


class _Converter:
    """Turns PyYAML's node graph into plain data, converting each node once.

    Aliased nodes are shared (``memo``), so an alias bomb costs what its text
    costs; ``<<`` merges are counted against :data:`MAX_EXPANDED_VALUES`.
    """

    def __init__(self, source: str) -> None:
        import yaml

        self.source = source
        self.lines: Lines = {}
        self.memo: dict[int, Any] = {}
        self.constructor = yaml.constructor.SafeConstructor()
        self.merged = 0  # values copied by '<<' merges, bounded like an alias expansion

    def where(self, node: Any) -> str:
        return f"{self.source}:{node.start_mark.line + 1}"

    def value(self, node: Any, path: tuple[Any, ...], depth: int) -> Any:
        import yaml

        if depth > 100:
            raise ConfigError([f"{self.where(node)}: YAML nested too deeply"])
        self.lines.setdefault(path, node.start_mark.line + 1)
        if id(node) in self.memo:
            return self.memo[id(node)]
        if isinstance(node, yaml.MappingNode):
            return self.mapping(node, path, depth)
        if isinstance(node, yaml.SequenceNode):
            if node.tag != _SEQ_TAG:
                raise _refuse_tag(self.where(node), node.tag)
            seq: list[Any] = []
            self.memo[id(node)] = seq
            seq.extend(self.value(item, (*path, i), depth + 1) for i, item in enumerate(node.value))
            return seq
        if node.tag not in _PLAIN_TAGS:
            raise _refuse_tag(self.where(node), node.tag)
        if node.tag in _NUMBER_TAGS and ":" in node.value and len(node.value) > 64:
            # YAML 1.1's base 60 (1:30 is 90): PyYAML's cost grows with the square of it
            raise ConfigError(
                [
                    f"{self.where(node)}: a base-60 number of {len(node.value):,} characters "
                    "(YAML reads 1:30:00 as 5400); quote it if it is text"
                ]
            )
        try:
            value = self.constructor.construct_object(node)
        except (yaml.YAMLError, ValueError, TypeError) as exc:
            raise ConfigError([f"{self.where(node)}: invalid value: {exc}"]) from None
        self.memo[id(node)] = value
        return value

    def mapping(self, node: Any, path: tuple[Any, ...], depth: int) -> dict[Any, Any]:
        if node.tag != _MAP_TAG:
            raise _refuse_tag(self.where(node), node.tag)
        out: dict[Any, Any] = {}
        self.memo[id(node)] = out
        own: set[Any] = set()
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                self.merge(out, own, value_node, path, depth)
                continue
            key = self.value(key_node, (*path, "<key>"), depth + 1)
            at = self.where(key_node)
            if not isinstance(key, (str, int, float, bool)) and key is not None:
                raise ConfigError([f"{at}: mapping keys must be plain scalars"])
            if key in own:
                raise ConfigError([f"{at}: duplicate key {short_repr(key)}"])
            own.add(key)  # an explicit key overrides a merged one (YAML's merge rule)
            # A problem with a key points at the key's line, not at the block below it.
            self.lines.setdefault((*path, key), key_node.start_mark.line + 1)
            out[key] = self.value(value_node, (*path, key), depth + 1)
        return out

    def merge(
        self, out: dict[Any, Any], own: set[Any], value_node: Any, path: tuple[Any, ...], depth: int
    ) -> None:
        """Apply a ``<<`` merge key: earlier mappings win, explicit keys override."""
        import yaml

        where = self.where(value_node)
        sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
        for src in sources:
            if not isinstance(src, yaml.MappingNode):
                raise ConfigError(
                    [f"{where}: invalid YAML: a '<<' merge needs a mapping or a list of mappings"]
                )
            items = self.value(src, (*path, "<<"), depth + 1)
            self.merged += len(items)
            if self.merged > MAX_EXPANDED_VALUES:
                raise ConfigError(
                    [f"{where}: YAML merge keys expand this document too far (a YAML bomb?)"]
                )
            for key, value in items.items():
                if key not in out and key not in own:
                    out[key] = value


def check_expansion(root: Any, where: str) -> None:
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


def short_repr(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters, without building a huge repr first."""
    if isinstance(value, (list, dict)):
        return f"a {type(value).__name__} of {len(value)} items"
    text = repr(value[: limit + 1] if isinstance(value, (str, bytes)) else value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def read_config_file(source: str | os.PathLike[str]) -> tuple[Any, Lines, str]:
    """Read a config file: ``(data, lines, path)``, or :class:`ConfigError` saying why not.

    Refuses what is not a small UTF-8 YAML text (size, encoding, NUL bytes) before
    parsing anything.
    """
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
        # A named pipe nobody writes to: opened without waiting, it reads as empty (and
        # is told so) where a plain open() had waited for a writer, silent, for ever.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        os.set_blocking(fd, True)  # a pipe with its writer (`<(...)`) is read to its end
        with os.fdopen(fd, "rb") as fh:
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


# -- OmegaConf interpolation in configs, as verl reads them -------------------------
# verl loads interaction configs with ``OmegaConf.load`` and resolves them, so a
# value such as ``${oc.env:JUDGE_URL}`` or ``${..base_url}`` reaches the
# interaction resolved. A config written for verl must mean the same here: when it
# holds an interpolation, it is resolved with omegaconf (installed alongside verl),
# and when omegaconf is not installed the config is refused with a message, never
# passed through literally. Configs without ``${`` never import omegaconf.


def find_interpolation(data: Any) -> tuple[tuple[Any, ...], str] | None:
    """The key path and text of the first string holding ``${``, or ``None``.

    Every value is looked at: a scan that gave up after a number of values let an
    interpolation hidden behind them through as literal text. What it costs is
    bounded by :func:`check_expansion`, which the config passes first.
    """
    stack: list[tuple[tuple[Any, ...], Any]] = [((), data)]
    seen: set[int] = set()  # a value aliases share is looked at once (a 1 MB string 20,000
    while stack:  # times took 17 s); the data is held meanwhile, so no id is reused
        path, node = stack.pop()
        if id(node) in seen:
            continue
        if isinstance(node, str):
            if "${" in node:
                return path, node
            if len(node) > 64:
                seen.add(id(node))
            continue
        seen.add(id(node))
        if isinstance(node, dict):
            stack.extend(((*path, key), value) for key, value in node.items())
        elif isinstance(node, list):
            stack.extend(((*path, i), value) for i, value in enumerate(node))
    return None


def resolve_interpolations(data: Any, where: str) -> Any:
    """``data`` with OmegaConf interpolations resolved; :class:`ConfigError` if it cannot be.

    ``where`` names the config (file and line) in messages.
    """
    found = find_interpolation(data)
    if found is None:
        return data
    path, text = found
    field = ".".join(str(p) for p in path) or "the config"
    try:
        from omegaconf import OmegaConf
    except ImportError:
        raise ConfigError(
            [
                f"{where}: {field} uses OmegaConf interpolation {text!r}, which verl resolves "
                "with omegaconf; install it (pip install omegaconf) to resolve it the same "
                "way, or write the value out"
            ]
        ) from None
    try:
        resolved = OmegaConf.to_container(OmegaConf.create(data), resolve=True)
    except Exception as exc:
        raise ConfigError(
            [f"{where}: cannot resolve the interpolation in {field} ({text!r}): {exc}"]
        ) from exc
    return resolved
