"""What the simulator and the judge are sent: templates filled, roles swapped, transcripts.

The simulator is a chat model asked to *be* the user, so it must see the
conversation from the user's side: its own earlier messages (the conversation's
``user`` turns) as ``assistant`` and the assistant's as ``user``, under a system
prompt that gives it the goal. The judge reads the conversation as a plain
transcript inside one message, so no chat template can confuse who said what.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from typing import Any

from interactions_core import last_assistant_text

__all__ = ["DEFAULT_PERSONA", "DEFAULT_RUBRIC", "render", "simulator_messages", "transcript"]

DEFAULT_PERSONA = "an ordinary user of this service"
DEFAULT_RUBRIC = (
    "Full marks when the assistant fully achieved the user's goal, none when it did not."
)

_SWAPPED = {"user": "assistant", "assistant": "user"}


def render(template: str, fields: Mapping[str, Any], which: str) -> str:
    """``template`` with ``{name}`` fields filled from ``fields``.

    A field the template names and ``fields`` lacks is a ``ValueError`` saying
    which template and which key, so a sample missing a key the config's template
    needs fails its own episode with the fix in the message.
    """
    try:
        return string.Formatter().vformat(template, (), fields)
    except KeyError as exc:
        key = exc.args[0]
        raise ValueError(
            f"usersim: {which} uses {{{key}}}, which the sample does not give: add "
            f"{key!r} to its interaction_kwargs or remove it from the template"
        ) from None
    except (IndexError, ValueError) as exc:
        raise ValueError(
            f"usersim: {which} is not a valid str.format template ({exc}); "
            "write literal braces as {{ and }}"
        ) from None


def text_of(content: Any) -> str:
    """A message's text, read the way the core reads it (:func:`last_assistant_text`)."""
    return last_assistant_text([{"role": "assistant", "content": content}])


def simulator_messages(system: str, messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The conversation seen by the simulated user: its system prompt, roles swapped.

    The conversation's own system prompt (the assistant's instructions) and tool
    messages are not the user's to see and are left out.
    """
    swapped: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for message in messages:
        role = _SWAPPED.get(str(message.get("role")))
        if role is not None:
            swapped.append({"role": role, "content": text_of(message.get("content"))})
    return swapped


def transcript(messages: Sequence[Mapping[str, Any]]) -> str:
    """The conversation as ``USER:`` / ``ASSISTANT:`` paragraphs, for the judge."""
    lines = []
    for message in messages:
        role = message.get("role")
        if role in ("user", "assistant"):
            lines.append(f"{str(role).upper()}: {text_of(message.get('content'))}")
    return "\n\n".join(lines)
