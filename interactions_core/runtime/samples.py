"""Reading a sample: its prompt, its id, and which interaction plays it with what kwargs.

verl keeps a sample's interaction kwargs and id under ``extra_info``; a sample
names its interaction in ``interaction_kwargs["name"]``, and without a name the
config's ``default:`` is used. The episode loop and ``interactions serve``
choose the interaction the same way, through :func:`choose`; they differ only in
the exception they raise (a bad sample, a bad reset) and in what a missing
``interaction_kwargs`` means (a single-turn episode for the loop).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import SampleError

__all__ = ["choose", "copy_messages", "interaction_kwargs_of", "prompt_of", "sample_id_of"]


def interaction_kwargs_of(sample: Mapping[str, Any]) -> Any:
    """The sample's ``interaction_kwargs``: ``extra_info``'s (verl) or the top-level one.

    ``extra_info``'s wins because it is the only one verl reads: a row then
    plays the same interaction here as in training. When both are present and
    name different interactions, an :class:`~interactions_core.errors.InteractionsWarning`
    says which is used and why, instead of a silent pick.
    """
    extra = sample.get("extra_info")
    if extra is not None and (extra.__class__ is dict or isinstance(extra, Mapping)):
        kwargs = extra.get("interaction_kwargs")
        if kwargs is not None:
            top = sample.get("interaction_kwargs")
            if top is not None:
                _warn_if_names_differ(kwargs, top)
            return kwargs
    return sample.get("interaction_kwargs")


def _warn_if_names_differ(used: Any, ignored: Any) -> None:
    """Warn when ``extra_info``'s and the top-level ``interaction_kwargs`` name different ones."""
    if not (isinstance(used, Mapping) and isinstance(ignored, Mapping)):
        return
    name, other = used.get("name"), ignored.get("name")
    if other is None or name == other:
        return
    import warnings

    from ..errors import InteractionsWarning

    warnings.warn(
        f"the sample names interaction {name!r} in extra_info.interaction_kwargs and "
        f"{other!r} in its top-level interaction_kwargs; using extra_info's ({name!r}), "
        "the one verl reads. Remove one of the two so that the row says what it plays.",
        InteractionsWarning,
        stacklevel=3,
    )


def sample_id_of(sample: Mapping[str, Any], index: int) -> Any:
    """``id`` of the row, else ``extra_info.index`` (verl's), else the row's position."""
    value = sample.get("id")
    if value is None:
        extra = sample.get("extra_info")
        if isinstance(extra, Mapping):
            value = extra.get("index")
    return index if value is None else value


def prompt_of(sample: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A copy of the sample's prompt that the episode may extend and plugins may edit."""
    prompt = sample.get("prompt")
    if prompt.__class__ is not list:
        raise SampleError(
            "the sample's 'prompt' must be a list of chat messages "
            '([{"role": ..., "content": ...}, ...])'
        )
    return [_copy_message(m) for m in prompt]


def copy_messages(messages: list[Any]) -> list[Any]:
    """A copy of the conversation for a plugin: editing it never reaches the record.

    The record shows what the policy saw; a plugin that rewrites
    ``messages[0]["content"]`` or appends to the list changes only its copy.
    """
    return [_copy_message(m) for m in messages]


def _copy_message(message: Any) -> Any:
    """A copy of a prompt message deep enough that editing it never reaches the sample."""
    if message.__class__ is dict:
        content = message.get("content")
        if content is None or content.__class__ is str:
            return message.copy()
    import copy

    return copy.deepcopy(message)


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
    if not isinstance(name, str):
        raise error(
            f"interaction_kwargs 'name' must be a string such as \"gsm8k\", "
            f"not {type(name).__name__} {name!r}"
            + (f"; write {name[0]!r}" if isinstance(name, list) and len(name) == 1 else "")
        )
    interaction = interactions.get(name)
    if interaction is None:
        from .._names import suggest

        where = "served here" if served else "configured"
        raise error(
            f"interaction {name!r} is not {where}{suggest(str(name), interactions, n=1) or '.'} "
            f"{'Served' if served else 'Configured'}: {', '.join(interactions) or 'none'}."
        )
    return name, interaction, kwargs
