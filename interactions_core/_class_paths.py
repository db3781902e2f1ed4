"""verl's dotted class paths (``class_name: pkg.mod.Class``) and the trust checks that guard them.

A config is data, but a dotted path makes it import code. So a path is refused
when dotted paths are turned off (``INTERACTIONS_NO_CLASS_PATHS``), when the
allow/deny lists exclude it or its top-level package, and when it reaches the
class of a disabled interaction by another route (checked before importing when
the path is the entry point's own target, and on the imported class otherwise).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from ._selection import Selection
from .errors import DisabledError, InteractionValidationError, PluginLoadError, TrustError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .registry import Entry, Registry

__all__ = ["CLASS_PATHS_VAR", "load_class_path"]

CLASS_PATHS_VAR = "INTERACTIONS_NO_CLASS_PATHS"


def _disabled_targets(registry: Registry | None) -> list[Entry]:
    if registry is None:
        return []
    return [e for e in registry.entries() if e.status == "disabled" and e.target]


def _refuse_disabled_class(
    path: str, module_name: str, attr: str, disabled: list[Entry], klass: Any = None
) -> None:
    """Refuse a dotted path that reaches a disabled interaction's class by another route.

    Before importing (``klass`` is ``None``): the path is the entry point's own
    target (``pkg.mod.Class`` for ``pkg.mod:Class``), refused without importing.
    After importing: the class imported is the disabled interaction's class
    (a re-export, an alias module).
    """
    for entry in disabled:
        target_module, _, target_attr = entry.target.partition(":")
        target_module, target_attr = target_module.strip(), target_attr.strip()
        if klass is None:
            same = (module_name, attr) == (target_module, target_attr)
            if not same:
                continue
        else:
            module = sys.modules.get(target_module)
            found: Any = module
            for part in filter(None, target_attr.split(".")):
                found = getattr(found, part, None)
            if found is None or found is not klass:
                continue
        raise DisabledError(
            f"dotted class path {path!r} is the class of interaction {entry.describe()}, "
            f"which is {entry.error or 'disabled'}; a disabled interaction is refused by "
            "any route (remove it from INTERACTIONS_DISABLE to use it)"
        )


def _trusted_parts(path: str, selection: Selection | None) -> tuple[str, str]:
    """``(module, attribute)`` of ``path``, after the checks that need no import."""
    if os.environ.get(CLASS_PATHS_VAR, "").strip().lower() in ("1", "true", "yes", "on"):
        raise TrustError(
            f"dotted class path {path!r} refused: dotted class paths are turned off "
            f"({CLASS_PATHS_VAR}=1 or --no-class-paths). Install the "
            "interaction as a plugin and refer to it by name, or allow dotted paths."
        )
    module_name, dot, attr = path.rpartition(".")
    if not dot or not module_name or not attr:
        raise PluginLoadError(f"class_name {path!r} must be a dotted path 'package.module.Class'")
    reason = (selection or Selection.from_env()).excluded(path, module_name.split(".")[0])
    if reason is not None:
        raise DisabledError(f"dotted class path {path!r} is {reason}")
    return module_name, attr


def load_class_path(path: str, registry: Registry | None = None, *, strict: bool = True) -> Any:
    """Import a verl-style dotted class path (``pkg.mod.Class``) after the trust checks.

    Refused when ``INTERACTIONS_NO_CLASS_PATHS`` is set (configs are data; only
    installed distributions are trusted), when the allow/deny lists (the
    ``registry``'s, else the environment's) exclude the path or its top-level
    package, or, given the ``registry``, when it names the class of a disabled
    interaction (checked before importing when the path is the entry point's
    target, and on the imported class otherwise). With
    ``strict=False`` (the verl drop-in) a class that breaks the spec is returned
    with a :class:`~interactions_core.errors.LegacyInteractionWarning` naming the
    problems.
    """
    module_name, attr = _trusted_parts(path, registry.selection if registry else None)
    disabled = _disabled_targets(registry)
    _refuse_disabled_class(path, module_name, attr, disabled)
    from .plugins import import_target

    try:
        klass = import_target(f"{module_name}:{attr}")
    except Exception as exc:
        from ._fault import MissingAttributeError, import_failure

        if isinstance(exc, MissingAttributeError):
            raise PluginLoadError(
                f"cannot import class_name {path!r}: {exc}{exc.suggestion()}"
            ) from exc
        raise PluginLoadError(import_failure(f"class_name {path!r}", exc)) from exc
    from ._spec import validate_interaction_class

    _refuse_disabled_class(path, module_name, attr, disabled, klass)
    try:
        validate_interaction_class(klass, f"class_name {path!r}")
    except InteractionValidationError as exc:
        if strict:
            raise
        from .errors import LegacyInteractionWarning, warn

        warn(
            f"{exc}\n  (loaded anyway, as verl's loader would: calls the spec promises may fail)",
            LegacyInteractionWarning,
            stacklevel=3,
        )
    return klass
