"""Importing a plugin's class and building an instance: the parts with no catalog in them.

* :func:`import_target` imports ``module:attr`` and, when that fails, the
  message points at the fault: the exception, the ``file:line`` in the plugin's
  own code (:func:`describe`), and for an entry point naming an attribute its
  module lacks, a did-you-mean and how to fix it (:class:`MissingAttributeError`).
* :func:`load_class_path` imports verl's dotted ``class_name`` paths after the
  trust checks that guard them: a config is data, but a dotted path makes it
  import code.
* :func:`warn_if_incompatible` reads which core versions a plugin declares
  (its ``Requires-Dist`` on ``interactions-core``, checked with ``packaging``)
  and warns when the running core is not one of them.
* :func:`instantiate` is the one way to build an instance from a class and its
  options; :func:`check_options` the one validator of the options a callable
  (a policy's constructor, a dataset builder) accepts.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
import types
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ._names import Selection, normalize, suggest
from .errors import (
    DisabledError,
    IncompatibleCoreWarning,
    InteractionValidationError,
    PluginLoadError,
    TrustError,
    warn,
)

if TYPE_CHECKING:
    from .registry import Entry, Registry

__all__ = [
    "CLASS_PATHS_VAR",
    "CORE_DISTRIBUTION",
    "ImportAborted",
    "MissingAttributeError",
    "check_core_requirement",
    "check_options",
    "core_requirement",
    "describe",
    "import_failure",
    "import_target",
    "instantiate",
    "keyword_options",
    "load_class_path",
    "plugin_frame",
    "satisfies",
    "warn_if_incompatible",
]

CORE_DISTRIBUTION = "interactions-core"
CLASS_PATHS_VAR = "INTERACTIONS_NO_CLASS_PATHS"
_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


# -- importing, and pointing at the fault ---------------------------------------


class ImportAborted(Exception):
    """A plugin module raised ``SystemExit``/``KeyboardInterrupt``/... while being imported."""


class MissingAttributeError(AttributeError):
    """An entry point's ``module:attr`` names an attribute the module does not define."""

    def __init__(self, module: types.ModuleType, attr: str, target: str) -> None:
        self.module = module
        self.attr = attr
        self.target = target
        super().__init__(f"module {module.__name__!r} has no attribute {attr!r}")

    def suggestion(self) -> str:
        """``; did you mean 'X'?`` over the module's public classes (or a few of them)."""
        classes = sorted(
            name
            for name, value in vars(self.module).items()
            if isinstance(value, type) and not name.startswith("_")
        )
        hint = suggest(self.attr, classes, n=2, cutoff=0.5)
        if hint:
            return hint
        if classes:
            more = " ..." if len(classes) > 8 else ""
            return f"; the module's classes: {', '.join(classes[:8])}{more}"
        return ""

    def hint(self) -> str:
        """What is wrong with the entry point, a did-you-mean, and what to do."""
        return (
            f"entry point {self.target!r} names {self.attr!r}, which module "
            f"{self.module.__name__!r} does not define{self.suggestion()} (fix the entry "
            "point in the plugin's pyproject.toml and reinstall)"
        )


def import_target(target: str) -> Any:
    """Import ``module:attr.path`` (or ``module``) with ``importlib.import_module``.

    A failed import leaves nothing behind in ``sys.modules`` (the import system
    removes a module whose body raised), unlike verl's ``exec_module`` loader.
    """
    module_name, _, attr_path = target.partition(":")
    try:
        obj: Any = importlib.import_module(module_name.strip())
    except Exception:
        raise
    except BaseException as exc:
        # SystemExit, KeyboardInterrupt or another BaseException raised by the
        # module's code is that plugin's fault, not a reason to stop the program.
        from .errors import Interrupted, exception_kind, exception_text

        if issubclass(type(exc), Interrupted):  # (not its own __class__: plugin code)
            raise
        text = exception_text(exc)
        raise ImportAborted(
            f"importing {module_name.strip()} raised {exception_kind(exc)}"
            + (f": {text}" if text else "")
        ) from exc
    for attr in filter(None, attr_path.strip().split(".")):
        try:
            obj = getattr(obj, attr)
        except AttributeError:
            if not isinstance(obj, types.ModuleType):
                raise
            raise MissingAttributeError(obj, attr, target.strip()) from None
    return obj


def _internal(filename: str) -> bool:
    return (
        filename.startswith(_PACKAGE)
        or filename.startswith("<frozen importlib")
        or "importlib" + os.sep in filename
    )


#: ``SyntaxError``'s own ``filename`` and ``lineno``: a plugin's subclass cannot replace them.
_SYNTAX_FILE = SyntaxError.__dict__["filename"]
_SYNTAX_LINE = SyntaxError.__dict__["lineno"]


def plugin_frame(exc: BaseException) -> str | None:
    """``file:line`` of the failure in plugin code, or ``None`` when there is none.

    A ``SyntaxError`` carries its own location (the file that does not parse);
    otherwise it is the last frame of the traceback outside importlib and this
    package (so the plugin's own line, or the line of the plugin that imported
    a failing dependency when the dependency's frames follow it).
    """
    from .errors import traceback_of

    kind = type(exc)  # never the exception's own __class__, which may raise
    if issubclass(kind, SyntaxError):
        filename, lineno = _SYNTAX_FILE.__get__(exc, kind), _SYNTAX_LINE.__get__(exc, kind)
        if filename and type(filename) is str:
            return f"{filename}:{lineno if type(lineno) is int else '?'}"
    found = None
    tb = traceback_of(exc)
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if not _internal(filename):
            found = f"{filename}:{tb.tb_lineno}"
        tb = tb.tb_next
    return found


def fault_location(exc: BaseException) -> dict[str, str]:
    """Where in plugin code ``exc`` was raised, for an error record: ``{"at": "file:line"}``.

    Empty when no frame of the traceback is the plugin's (a timeout, a failure
    inside the core). With ``INTERACTIONS_DEBUG=1`` the whole traceback is kept
    too, under ``"traceback"``, so a record shows what a debugger would.
    """
    found: dict[str, str] = {}
    where = plugin_frame(exc)
    if where:
        found["at"] = where
    if os.environ.get("INTERACTIONS_DEBUG", "").strip() not in ("", "0"):
        from .errors import formatted_traceback

        found["traceback"] = formatted_traceback(exc)
    return found


def describe(exc: BaseException) -> str:
    """One line: the exception and where in the plugin it was raised (or the entry-point fix).

    Its message is cut to what a record keeps: a plugin's of 100 kB went whole into
    ``list --check`` and its ``--json``.
    """
    from .errors import MAX_MESSAGE, cut_text, exception_kind, exception_text

    if issubclass(type(exc), MissingAttributeError):
        return exc.hint()  # type: ignore[attr-defined]
    where = plugin_frame(exc)
    text = cut_text(exception_text(exc), MAX_MESSAGE)
    return f"{exception_kind(exc)}: {text}" + (f" (at {where})" if where else "")


def import_failure(what: str, exc: BaseException) -> str:
    """The message for ``what`` (e.g. ``interaction 'x' (dist 1.0)``) failing with ``exc``.

    With ``INTERACTIONS_DEBUG=1`` the whole traceback follows.
    """
    if issubclass(type(exc), MissingAttributeError):
        return f"{what} failed to load: {exc.hint()}"  # type: ignore[attr-defined]
    message = f"{what} failed to import: {describe(exc)}"
    if os.environ.get("INTERACTIONS_DEBUG", "").strip() not in ("", "0"):
        from .errors import formatted_traceback

        message += "\n" + formatted_traceback(exc)
    else:
        message += " (set INTERACTIONS_DEBUG=1 to see the whole traceback)"
    return message


# -- verl's dotted class paths ----------------------------------------------------


def _disabled_class(
    path: str, module: str, attr: str, disabled: Iterable[Entry], klass: Any
) -> None:
    """Refuse a dotted path that reaches a disabled interaction's class by another route.

    Before importing (``klass`` is ``None``): the path is the entry point's own
    target (``pkg.mod.Class`` for ``pkg.mod:Class``), refused without importing.
    After importing: the class imported is the disabled interaction's class.
    """
    for entry in disabled:
        target_module, _, target_attr = entry.target.partition(":")
        target_module, target_attr = target_module.strip(), target_attr.strip()
        if klass is None:
            if (module, attr) != (target_module, target_attr):
                continue
        else:
            found: Any = sys.modules.get(target_module)
            for part in filter(None, target_attr.split(".")):
                found = getattr(found, part, None)
            if found is None or found is not klass:
                continue
        raise DisabledError(
            f"dotted class path {path!r} is the class of interaction {entry.describe()}, "
            f"which is {entry.error or 'disabled'}; a disabled interaction is refused by "
            "any route (remove it from INTERACTIONS_DISABLE to use it)"
        )


def _trusted_parts(path: str, selection: Selection) -> tuple[str, str]:
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
    reason = selection.excluded(path, module_name.split(".")[0])
    if reason is not None:
        raise DisabledError(f"dotted class path {path!r} is {reason}")
    return module_name, attr


def load_class_path(path: str, registry: Registry | None = None, *, strict: bool = True) -> Any:
    """Import a verl-style dotted class path (``pkg.mod.Class``) after the trust checks.

    Refused when ``INTERACTIONS_NO_CLASS_PATHS`` is set (configs are data; only
    installed distributions are trusted), when the allow/deny lists (the
    ``registry``'s, else the environment's) exclude the path or its top-level
    package, or, given the ``registry``, when it names the class of a disabled
    interaction. With ``strict=False`` (the verl drop-in) a class that breaks the
    spec is returned with a :class:`~interactions_core.errors.LegacyInteractionWarning`.
    """
    selection = registry.selection if registry is not None else Selection.from_env()
    module_name, attr = _trusted_parts(path, selection)
    disabled = [] if registry is None else registry.disabled()
    _disabled_class(path, module_name, attr, disabled, None)
    try:
        klass = import_target(f"{module_name}:{attr}")
    except Exception as exc:
        if isinstance(exc, MissingAttributeError):
            raise PluginLoadError(
                f"cannot import class_name {path!r}: {exc}{exc.suggestion()}"
            ) from exc
        raise PluginLoadError(import_failure(f"class_name {path!r}", exc)) from exc
    from ._spec import validate_interaction_class

    _disabled_class(path, module_name, attr, disabled, klass)
    try:
        validate_interaction_class(klass, f"class_name {path!r}")
    except InteractionValidationError as exc:
        if strict:
            raise
        from .errors import LegacyInteractionWarning

        warn(
            f"{exc}\n  (loaded anyway, as verl's loader would: calls the spec promises may fail)",
            LegacyInteractionWarning,
            stacklevel=3,
        )
    return klass


# -- which core versions a plugin supports ----------------------------------------

_warned: set[tuple[str, str, str]] = set()


def satisfies(version: str, specifier: str) -> bool | None:
    """Whether ``version`` satisfies ``specifier`` (``">=0.1,<0.2"``), by PEP 440.

    ``None`` when either cannot be parsed; an empty specifier is satisfied by
    everything. Pre-releases of the running core count as that version.
    """
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        return SpecifierSet(specifier).contains(Version(version), prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return None


def core_requirement(metadata_path: str) -> str | None:
    """The specifier a distribution's metadata puts on interactions-core, as written.

    ``metadata_path`` is the ``*.dist-info`` (or ``*.egg-info``) folder. Only
    unconditional requirements count (not ``; extra == "test"`` ones). Returns
    ``""`` for an unversioned dependency and ``None`` when there is none.
    """
    from importlib.metadata import PathDistribution
    from pathlib import Path

    from packaging.requirements import InvalidRequirement, Requirement

    for line in PathDistribution(Path(metadata_path)).requires or []:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if normalize(requirement.name) != CORE_DISTRIBUTION:
            continue
        if requirement.marker is not None and "extra" in str(requirement.marker):
            continue
        written = line.split(";", 1)[0].strip()[len(requirement.name) :].strip()
        if written.startswith("["):
            written = written.partition("]")[2]
        return written.strip().strip("()").replace(" ", "")
    return None


def check_core_requirement(
    distribution: str, metadata_path: str, core_version: str | None = None
) -> str | None:
    """The warning text when ``distribution`` does not support the running core, else ``None``."""
    if normalize(distribution) == CORE_DISTRIBUTION or not metadata_path:
        return None
    specifier = core_requirement(metadata_path)
    if not specifier:
        return None
    if core_version is None:
        from . import __version__

        core_version = __version__
    if satisfies(core_version, specifier) is not False:
        return None
    return (
        f"plugin {distribution} declares it supports {CORE_DISTRIBUTION} {specifier}, but "
        f"{CORE_DISTRIBUTION} {core_version} is running"
    )


def warn_if_incompatible(
    distribution: str,
    version: str,
    metadata_path: str,
    interaction: str | None = None,
    *,
    stacklevel: int = 3,
) -> bool:
    """Warn (once per plugin version) when ``distribution`` does not support this core.

    Called when a class is first loaded from a distribution (never by listing).
    Returns whether a warning was issued. Never raises: unreadable metadata means
    no warning.
    """
    try:
        problem = check_core_requirement(distribution, metadata_path)
    except Exception:
        return False
    if problem is None:
        return False
    from . import __version__ as core_version

    key = (distribution, version, core_version)
    if key in _warned:
        return False
    _warned.add(key)
    what = f"interaction {interaction!r}" if interaction else "its interactions"
    specifier = core_requirement(metadata_path)
    warn(
        f"{problem} ({distribution} {version}); {what} may not work. Install an "
        f"{CORE_DISTRIBUTION} version the plugin supports (pip install "
        f"'{CORE_DISTRIBUTION}{specifier}'), or a release of {distribution} that supports "
        f"{CORE_DISTRIBUTION} {core_version}.",
        IncompatibleCoreWarning,
        stacklevel=stacklevel,
    )
    return True


# -- options and instances ---------------------------------------------------------


def instantiate(cls: Any, options: Mapping[str, Any]) -> Any:
    """Build an instance the way verl does: ``cls(config=options)``.

    A class whose parameter has another name gets the mapping positionally.
    """
    try:
        inspect.signature(cls).bind(config={})
    except (TypeError, ValueError):
        return cls(dict(options))
    return cls(config=dict(options))


def keyword_options(func: Any) -> dict[str, inspect.Parameter]:
    """The options ``func`` accepts: its parameters that can be given by keyword."""
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return {}
    return {n: p for n, p in params.items() if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}


def _takes_any(func: Any) -> bool:
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return True  # nothing to check against: the callable decides
    return any(p.kind == p.VAR_KEYWORD for p in params)


def check_options(
    label: str,
    func: Any,
    options: Mapping[str, Any],
    *,
    provided: Mapping[str, Any] | None = None,
    render: Callable[[str], str] = repr,
) -> list[str]:
    """Every problem with calling ``func(**options)``, each prefixed by ``label``.

    Unknown options get a did-you-mean and the list of what exists; required
    options missing are named; a callable taking ``**kwargs`` validates its own.
    ``provided`` (default ``options``) is what counts for required options (a
    builder's registered defaults fill some); ``render`` spells an option the
    way the user wrote it (``--max-rows`` on the command line).
    """
    accepted = keyword_options(func)
    problems = []
    if not _takes_any(func):
        known = ", ".join(render(k) for k in accepted) or "none"
        for key in options:
            if key not in accepted:
                hint = suggest(key, accepted, n=1, render=render)
                problems.append(f"{label}: unknown option {render(key)}{hint} (options: {known})")
    provided = options if provided is None else provided
    for key, p in accepted.items():
        if p.default is p.empty and key not in provided:
            problems.append(f"{label}: option {render(key)} is required")
    return problems
