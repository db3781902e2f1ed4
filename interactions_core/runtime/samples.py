"""Reading a sample: where verl keeps its interaction kwargs and id, and its prompt."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import SampleError

__all__ = ["interaction_kwargs_of", "prompt_of", "sample_id_of"]


def interaction_kwargs_of(sample: Mapping[str, Any]) -> Any:
    """The sample's ``interaction_kwargs``: ``extra_info``'s (verl) or the top-level one."""
    extra = sample.get("extra_info")
    if extra is not None and (extra.__class__ is dict or isinstance(extra, Mapping)):
        kwargs = extra.get("interaction_kwargs")
        if kwargs is not None:
            return kwargs
    return sample.get("interaction_kwargs")


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


def _copy_message(message: Any) -> Any:
    """A copy of a prompt message deep enough that editing it never reaches the sample."""
    if message.__class__ is dict:
        content = message.get("content")
        if content is None or content.__class__ is str:
            return message.copy()
    import copy

    return copy.deepcopy(message)
