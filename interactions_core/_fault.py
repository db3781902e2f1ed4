"""Pointing at the fault when a plugin fails to import.

A plugin author whose module raises at import time needs the file and line in
*their* code, not the framework's frames or importlib's. :func:`import_failure`
builds that message: the exception, the last traceback frame outside the
import machinery and this package (for a ``SyntaxError``, the offending line
itself), and with ``INTERACTIONS_DEBUG=1`` the whole traceback. An entry point
naming an attribute its module lacks gets a did-you-mean over the module's
classes and says how to fix it: the entry point lives in the plugin's
``pyproject.toml``, and only a reinstall updates the installed metadata.
"""

from __future__ import annotations

import os
from types import ModuleType, TracebackType

__all__ = ["MissingAttributeError", "describe", "import_failure", "plugin_frame"]

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


class MissingAttributeError(AttributeError):
    """An entry point's ``module:attr`` names an attribute the module does not define."""

    def __init__(self, module: ModuleType, attr: str, target: str) -> None:
        self.module = module
        self.attr = attr
        self.target = target
        super().__init__(f"module {module.__name__!r} has no attribute {attr!r}")

    def suggestion(self) -> str:
        """``; did you mean 'X'?`` over the module's public classes (or a few of them)."""
        from ._naming import suggest

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


def _internal(filename: str) -> bool:
    return (
        filename.startswith(_PACKAGE)
        or filename.startswith("<frozen importlib")
        or "importlib" + os.sep in filename
    )


def plugin_frame(exc: BaseException) -> str | None:
    """``file:line`` of the failure in plugin code, or ``None`` when there is none.

    A ``SyntaxError`` carries its own location (the file that does not parse);
    otherwise it is the last frame of the traceback outside importlib and this
    package (so the plugin's own line, or the line of the plugin that imported
    a failing dependency when the dependency's frames follow it).
    """
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{exc.filename}:{exc.lineno}"
    found = None
    tb: TracebackType | None = exc.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if not _internal(filename):
            found = f"{filename}:{tb.tb_lineno}"
        tb = tb.tb_next
    return found


def _debug() -> bool:
    return os.environ.get("INTERACTIONS_DEBUG", "").strip() not in ("", "0")


def describe(exc: BaseException) -> str:
    """One line: the exception and where in the plugin it was raised (or the entry-point fix)."""
    if isinstance(exc, MissingAttributeError):
        return exc.hint()
    where = plugin_frame(exc)
    return f"{exc.__class__.__name__}: {exc}" + (f" (at {where})" if where else "")


def import_failure(what: str, exc: BaseException) -> str:
    """The message for ``what`` (e.g. ``interaction 'x' (dist 1.0)``) failing with ``exc``."""
    if isinstance(exc, MissingAttributeError):
        return f"{what} failed to load: {exc.hint()}"
    message = f"{what} failed to import: {describe(exc)}"
    if _debug():
        import traceback

        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        message += "\n" + text.rstrip()
    else:
        message += " (set INTERACTIONS_DEBUG=1 to see the whole traceback)"
    return message
