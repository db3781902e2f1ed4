"""OmegaConf interpolation in configs, as verl reads them.

verl loads interaction configs with ``OmegaConf.load`` and resolves them, so a
value such as ``${oc.env:JUDGE_URL}`` or ``${..base_url}`` reaches the
interaction resolved. A config written for verl must mean the same here: when it
holds an interpolation, it is resolved with omegaconf (installed alongside verl),
and when omegaconf is not installed the config is refused with a message, never
passed through literally. Configs without ``${`` never import omegaconf.
"""

from __future__ import annotations

from typing import Any

from .errors import ConfigError

__all__ = ["find_interpolation", "resolve_interpolations"]

#: How many nodes a config may hold before the scan gives up (configs are small).
MAX_NODES = 200_000


def find_interpolation(data: Any) -> tuple[tuple[Any, ...], str] | None:
    """The key path and text of the first string holding ``${``, or ``None``."""
    stack: list[tuple[tuple[Any, ...], Any]] = [((), data)]
    seen = 0
    while stack:
        path, node = stack.pop()
        seen += 1
        if seen > MAX_NODES:
            return None
        if isinstance(node, str):
            if "${" in node:
                return path, node
        elif isinstance(node, dict):
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
