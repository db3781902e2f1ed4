"""The episode step: judge one assistant turn, append the feedback, decide the end.

Every front end plays the same step after the model answers: the episode loop
of ``interactions run``, ``interactions serve``, the verl agent loop, the
conformance checker and the session driver. It is written here once:

1. the interaction judges the conversation, whose last message is the assistant
   turn just added (``generate_response`` through the
   :class:`~interactions_core.runtime.session.Session`);
2. :func:`end_reason` decides whether the episode ends here, and why, checked in
   this order: the interaction says terminate (:data:`TERMINATED`); the
   trainer's sequence has no room left (:data:`RESPONSE_LENGTH`, only trainers
   that count tokens ask); ``max_assistant_turns`` assistant turns were judged
   (:data:`MAX_ASSISTANT_TURNS`); ``max_user_turns`` feedback messages were
   already appended (:data:`MAX_USER_TURNS`). The last turn a limit allows is
   always judged, so its score counts;
3. unless the episode ends, the feedback is appended as a ``user`` message.
   Feedback is never appended after the end.

A failing call ends the episode as :data:`ERROR` (the caller records it the way
its front end reports faults). The end reasons are plain strings, so records,
summaries and a trainer's ``extra_fields`` keep writing them as they are.

The step is cheap: it runs for every turn inside trainers, so it allocates only
the interaction's copy of the conversation (:func:`copy_messages`: what a plugin
edits never reaches the caller's list) and the feedback message, and never goes
through pluggy.
"""

from __future__ import annotations

from typing import Any

from .._interaction import InteractionResult
from .session import Session

__all__ = [
    "CANCELLED",
    "END_REASONS",
    "ERROR",
    "EXHAUSTED",
    "MAX_ASSISTANT_TURNS",
    "MAX_USER_TURNS",
    "RESPONSE_LENGTH",
    "SINGLE_TURN",
    "TERMINATED",
    "conclude_turn",
    "copy_messages",
    "end_reason",
    "judge",
]

#: The interaction said the episode is over.
TERMINATED = "terminated"
#: ``max_assistant_turns`` assistant turns were judged.
MAX_ASSISTANT_TURNS = "max_assistant_turns"
#: ``max_user_turns`` feedback messages were already appended.
MAX_USER_TURNS = "max_user_turns"
#: The policy had no more replies (it returned ``None``) before a turn.
EXHAUSTED = "exhausted"
#: No interaction: the first reply ends the episode.
SINGLE_TURN = "single_turn"
#: A call failed (the plugin raised or timed out, or the policy did).
ERROR = "error"
#: The run was stopped while the episode was playing.
CANCELLED = "cancelled"
#: A trainer's token budget for the response is used up (the verl agent loop).
RESPONSE_LENGTH = "response_length"

END_REASONS = (
    TERMINATED,
    MAX_ASSISTANT_TURNS,
    MAX_USER_TURNS,
    EXHAUSTED,
    SINGLE_TURN,
    ERROR,
    CANCELLED,
)
"""Every ``end_reason`` an episode record can carry, in the order summaries list them."""


def end_reason(
    should_terminate: bool,
    turns: int,
    user_turns: int,
    max_assistant_turns: int | None = None,
    max_user_turns: int | None = None,
    out_of_room: bool = False,
) -> str | None:
    """Why the episode ends after assistant turn ``turns`` was judged, or ``None``.

    ``user_turns`` counts the feedback messages appended so far (before this
    turn's); a limit of ``None`` is no limit. ``out_of_room`` says the trainer's
    sequence cannot take another turn.
    """
    if should_terminate:
        return TERMINATED
    if out_of_room:
        return RESPONSE_LENGTH
    if max_assistant_turns is not None and turns >= max_assistant_turns:
        return MAX_ASSISTANT_TURNS
    if max_user_turns is not None and user_turns >= max_user_turns:
        return MAX_USER_TURNS
    return None


def conclude_turn(
    result: InteractionResult,
    messages: list[dict[str, Any]],
    turns: int,
    user_turns: int,
    max_assistant_turns: int | None = None,
    max_user_turns: int | None = None,
) -> str | None:
    """Finish the step for judged assistant turn ``turns``: the end reason, or feedback.

    Returns why the episode ends here; or ``None``, after appending the
    interaction's feedback to ``messages`` as a ``user`` message (the caller
    counts one more user turn). For a caller that looks at the result before
    the feedback goes in (observers, the checker's rules).
    """
    if result.should_terminate:
        return TERMINATED
    if max_assistant_turns is not None or max_user_turns is not None:
        # The limits' order is :func:`end_reason`'s; without limits no call is needed.
        end = end_reason(False, turns, user_turns, max_assistant_turns, max_user_turns)
        if end is not None:
            return end
    messages.append({"role": "user", "content": result.content})
    return None


async def judge(
    session: Session,
    messages: list[dict[str, Any]],
    turns: int,
    user_turns: int,
    max_assistant_turns: int | None = None,
    max_user_turns: int | None = None,
) -> tuple[InteractionResult, str | None]:
    """The whole step for assistant turn ``turns``, the last message of ``messages``.

    Returns the interaction's result and :func:`conclude_turn`'s answer. Raises
    what :meth:`Session.respond` raises; the episode then ends as :data:`ERROR`.
    """
    result = await session.respond(copy_messages(messages))  # edits stay in the plugin's copy
    end = conclude_turn(result, messages, turns, user_turns, max_assistant_turns, max_user_turns)
    return result, end


#: The types a message's field may hold for a shallow copy to be a whole one.
_FLAT = frozenset({str, int, float, bool, type(None)})


def copy_messages(messages: list[Any]) -> list[Any]:
    """A copy of the conversation for a plugin: editing it never reaches the record.

    The record shows what the policy saw; a plugin that rewrites
    ``messages[0]["content"]``, appends to the list, or edits a field inside a
    message (a tool call's ``arguments``, decoded in place) changes only its copy.
    A message of plain values only (the common ``role`` and ``content``) is copied
    shallow; any other, deep: a shallow copy shared the nested fields, which a
    served conversation then grew by past ``--max-episode-chars``.
    """
    return [
        m.copy() if type(m) is dict and _FLAT.issuperset(map(type, m.values())) else _deep(m)
        for m in messages
    ]


def _deep(message: Any) -> Any:
    """A deep copy of ``message``: JSON-shaped data (dicts, lists and plain values, the
    shape of every message from a dataset or a client) by a walk of its own, which skips
    the memo of shared parts :func:`copy.deepcopy` keeps and such data does not need
    (every served step copies its conversation); anything else, or data nested past ``_PLAIN_DEPTH``
    levels (a cycle, say), by :func:`copy.deepcopy`."""
    try:
        return _plain_copy(message, _PLAIN_DEPTH)
    except _NotPlain:
        import copy

        return copy.deepcopy(message)


#: Levels :func:`_plain_copy` walks (datasets and served prompts nest at most 100).
_PLAIN_DEPTH = 128


class _NotPlain(Exception):
    """Raised by :func:`_plain_copy` for a part it does not copy."""


def _plain_copy(value: Any, depth: int) -> Any:
    kind = type(value)
    if kind in _FLAT:
        return value
    if depth == 0:
        raise _NotPlain
    if kind is dict:
        return {k: _plain_copy(v, depth - 1) for k, v in value.items()}
    if kind is list:
        return [_plain_copy(v, depth - 1) for v in value]
    raise _NotPlain
