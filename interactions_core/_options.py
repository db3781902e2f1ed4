"""Options of a callable: what a policy's constructor or a dataset builder accepts.

Policies (``--policy-option``) and dataset builders (``interactions data NAME
--opt``) both take their options from a signature. :func:`check_options` is the
one validator: unknown options with a did-you-mean and the list of what exists,
required options missing, every problem at once; a callable taking ``**kwargs``
validates its own options.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["check_options", "keyword_options"]


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

    ``provided`` (default ``options``) is what counts for required options (a
    builder's registered defaults fill some); ``render`` spells an option the
    way the user wrote it (``--max-rows`` on the command line).
    """
    from ._naming import suggest

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
