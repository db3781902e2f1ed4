"""Routing: which interaction a sample (or a served reset) is played with.

A sample names its interaction in ``interaction_kwargs["name"]``; without a name
the config's ``default:`` is used. The episode loop and ``interactions serve``
choose the same way, through :func:`choose`; they differ only in the exception
they raise (a bad sample, a bad reset) and in what a missing
``interaction_kwargs`` means (a single-turn episode for the loop).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["choose"]


def choose(
    interactions: Mapping[str, Any],
    kwargs: Any,
    default: str | None,
    *,
    error: type[Exception] = ValueError,
    served: bool = False,
) -> tuple[str, Any, dict[str, Any]]:
    """``(name, interaction, kwargs)`` for ``interaction_kwargs``; ``kwargs`` is a fresh copy.

    The copy carries the chosen name (the default's, when the sample named
    none), as verl passes it. Raises ``error`` naming the choices when the
    kwargs are not a mapping, when there is no name and no default, or when the
    name is unknown (with a did-you-mean). ``served`` words the messages for a
    server ("served here") instead of a config ("configured").
    """
    if kwargs is None:
        kwargs = {}
    elif kwargs.__class__ is dict or isinstance(kwargs, Mapping):
        kwargs = dict(kwargs)
    else:
        raise error(
            "interaction_kwargs must be a mapping such as "
            f'{{"name": "gsm8k", "ground_truth": "72"}}, not {type(kwargs).__name__}'
        )
    name = kwargs.get("name")
    if name is None:
        if default is None:
            raise error(
                "interaction_kwargs has no 'name' and no default interaction is set; "
                f"name one of: {', '.join(interactions) or 'none'}, "
                "or set 'default:' in the config"
            )
        name = kwargs["name"] = default
    interaction = interactions.get(name) if isinstance(name, str) else None
    if interaction is None:
        from .._names import suggest

        where = "served here" if served else "configured"
        raise error(
            f"interaction {name!r} is not {where}{suggest(str(name), interactions, n=1) or '.'} "
            f"{'Served' if served else 'Configured'}: {', '.join(interactions) or 'none'}."
        )
    return name, interaction, kwargs
