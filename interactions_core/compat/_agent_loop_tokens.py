"""The conversation and its tokens in the verl agent loop: appending turns verl's way.

verl's ``AgentData`` keeps a trajectory twice: as chat messages, and as token
ids with a response mask (1 for the model's tokens, 0 for everything else) and
optionally log-probs. Both must stay in step, and the model's tokens must stay
exactly as the server returned them, or the log-probs stop lining up. So the
interaction's feedback is appended with verl's own merge helper for non-model
messages (whichever the installed release has), never by decoding and
re-encoding the sequence.

The functions take the running loop (verl's ``ToolAgentLoop``) and its
``agent_data``; this module itself does not import verl.
"""

from __future__ import annotations

from typing import Any

__all__ = ["append_assistant_message", "append_user_turn"]


async def append_assistant_message(loop: Any, agent_data: Any) -> None:
    """Add the model's last response as an assistant message (verl stopped before it did)."""
    active: dict[str, Any] = getattr(agent_data, "_active_tools", None) or loop.tools
    schemas = [tool.tool_schema for tool in active.values()]
    content, calls = await loop.tool_parser.extract_tool_calls(agent_data.response_ids, schemas)
    agent_data.tool_calls = calls
    agent_data.messages.append(loop._build_assistant_message(content, agent_data))


async def append_user_turn(loop: Any, agent_data: Any, content: str) -> bool:
    """Add ``content`` as a ``user`` turn whose tokens have mask 0.

    ``False`` when its tokens would exhaust the response budget: the token
    sequence is then left as it was.
    """
    previous = list(agent_data.messages)
    agent_data.messages.append({"role": "user", "content": content})
    merged = await _merge_context(loop, previous, agent_data)
    if merged is None:
        return False
    token_ids, mask, logprobs = merged
    agent_data.prompt_ids = token_ids
    agent_data.response_mask = mask
    if agent_data.response_logprobs:
        agent_data.response_logprobs = logprobs or []
    agent_data.user_turns += 1
    return True


async def _merge_context(
    loop: Any, previous: list[dict[str, Any]], agent_data: Any
) -> tuple[list[int], list[int], list[float] | None] | None:
    """verl's own helper for appending a non-model message, whichever release this is.

    Returns ``None`` when the appended tokens would exhaust the response budget.
    """
    logprobs = agent_data.response_logprobs or None
    schemas = getattr(agent_data, "_active_tool_schemas", loop.tool_schemas)
    merge = getattr(loop, "ct_merge_context_msg", None)  # verl 0.9.1
    if merge is None and getattr(loop, "enable_continuous_token", False):
        merge = loop.ct_merge_non_assistant_msg  # verl 0.9.0 with Continuous Token
    if merge is not None:
        result, mask, new_logprobs = await merge(
            previous,
            agent_data.messages,
            agent_data.prompt_ids,
            agent_data.response_mask,
            logprobs,
            tools=schemas,
        )
        if len(mask) >= loop.response_length:
            return None
        return list(result.token_ids), list(mask), new_logprobs
    # verl 0.9.0's default tokenization: render the new turn alone, as its tool loop does.
    appended = agent_data.messages[len(previous) :]
    ids = await loop.apply_chat_template(appended, remove_system_prompt=True)
    ids = list(getattr(loop, "turn_separator", []) or []) + list(ids)
    if len(agent_data.response_mask) + len(ids) >= loop.response_length:
        return None
    mask = list(agent_data.response_mask) + [0] * len(ids)
    new = [*logprobs, *([0.0] * len(ids))] if logprobs else None
    return list(agent_data.prompt_ids) + ids, mask, new
