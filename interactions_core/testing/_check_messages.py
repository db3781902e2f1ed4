"""The ``messages`` check: odd but legal conversations get an answer, not a crash.

Trainers send what the model produced: an empty history, ``None`` content, a
list of content parts, a conversation with no assistant turn yet. A plugin that
only ever saw tidy strings crashes on them in the middle of a run; it should
answer, or refuse with a clear ``InteractionsError``.
"""

from __future__ import annotations

from typing import Any

from ..errors import InteractionsError
from ._check_results import check_result
from ._context import CheckContext, describe_exc, short

__all__ = ["check_messages", "odd_conversations"]


def odd_conversations() -> list[tuple[str, list[dict[str, Any]]]]:
    """(what it is, the messages passed to ``generate_response``), new on every call
    so that a plugin which edits the list it was given cannot change the next run."""
    return [
        ("an empty conversation", []),
        ("no assistant turn yet", [{"role": "user", "content": "hello"}]),
        ("assistant content None", [{"role": "assistant", "content": None}]),
        (
            "assistant content as a list of parts",
            [{"role": "assistant", "content": [{"type": "text", "text": "#### 1"}]}],
        ),
    ]


async def check_messages(ctx: CheckContext) -> None:
    """Each odd conversation, in a session of its own, gets a valid result or a clear refusal.

    Each call gets the episode's interaction kwargs, as in a run.
    """
    obj = ctx.instance()
    kwargs = ctx.episodes[0].kwargs
    for label, messages in odd_conversations():
        try:
            iid = await ctx.call(obj, "start_interaction", None, **kwargs)
        except Exception as exc:
            ctx.add("messages", f"start_interaction {describe_exc(exc)}")
            return
        try:
            raw = await ctx.call(obj, "generate_response", iid, messages, **kwargs)
        except InteractionsError:
            pass  # a clear, documented refusal is fine
        except Exception as exc:
            ctx.add(
                "messages",
                f"generate_response crashed on {label} ({short(messages)}): "
                f"{describe_exc(exc)}; return a result or raise an InteractionsError",
            )
        else:
            check_result(ctx, raw, f"on {label}")
        await ctx.finalize(obj, iid, f"on {label}")
