"""verl >= 0.9: an agent loop that plays any installed interaction.

verl 0.8 removed its interaction module; multi-turn rollouts now run through
*agent loops*, chosen per sample by the dataset's ``agent_name`` column. This
module is that bridge: importing it registers :class:`InteractionAgentLoop` with
verl under the agent name ``interactions``. The project's ``verl.plugins`` entry
point (:mod:`interactions_core.integrations.verl_plugin`) arranges that import in
every verl process, so installing the project is enough for rows whose
``agent_name`` is ``interactions``. Per-entry options go in the YAML file named by
``actor_rollout_ref.rollout.agent.agent_loop_config_path``::

    - name: interactions
      _target_: interactions_core.integrations.verl.InteractionAgentLoop
      interaction_config: path/to/interactions.yaml

Without that entry, the interactions config is ``$INTERACTIONS_CONFIG`` when set,
else every installed interaction by name with its default options.

The loop is verl's own ``ToolAgentLoop`` (so configured tools keep working) with
one change: an assistant turn without tool calls goes to the sample's interaction
(``extra_info.interaction_kwargs.name``, else the config's ``default:``), whose
feedback is appended as a ``user`` turn with ``response_mask`` 0, until the
interaction terminates or verl's limits are reached. The last turn the limits
allow is still judged, so the reward reflects the final answer. The sample's
reward is the interaction's ``calculate_score``; the per-turn scores, the
interaction's name and why the episode ended go to ``extra_fields``.

The model's tokens enter the sequence exactly as the server returned them (verl's
own merge helpers are used, never a decode and re-encode), so log-probs stay
aligned with them. Sessions are finalized on every path. A plugin that raises
ends only its own sample (reward 0.0, the error in ``extra_fields``); an unknown
interaction name is a configuration error and raises, naming the available ones.

Supported verl releases: :data:`SUPPORTED_VERL`, each tested by ``nox -s verl``.

This module is the turn step, the episode's outcome and the token bookkeeping of
appended turns; the interactions shared by a worker process are in
:mod:`interactions_core.integrations` (which needs no verl: this is the only
module that imports it). The old path ``interactions_core.compat.verl_agent_loop``
is an alias of this module.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Mapping
from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopOutput, register
from verl.experimental.agent_loop.tool_agent_loop import AgentState, ToolAgentLoop

from ..errors import InteractionCallError
from ..runtime.session import Session, call_error, stops_the_run
from ..runtime.step import ERROR, RESPONSE_LENGTH, end_reason
from . import check_cluster_once, interactions_for

__all__ = [
    "AGENT_NAME",
    "CONFIG_ENV",
    "SUPPORTED_VERL",
    "InteractionAgentLoop",
    "check_cluster_once",
    "interactions_for",
]

#: The agent name this loop registers under (the dataset's ``agent_name`` value).
AGENT_NAME = "interactions"
#: The interactions config used when the agent-loop entry names none (or there is no
#: entry: the ``verl.plugins`` entry point registers the loop without one).
CONFIG_ENV = "INTERACTIONS_CONFIG"
#: The verl releases this adapter is tested against.
SUPPORTED_VERL = ">=0.9.0,<0.10"

logger = logging.getLogger(__name__)


def _resolve_path(path: str) -> str:
    """A relative path resolved as verl resolves its own config paths (cwd, then verl's root)."""
    try:
        from verl.utils.import_utils import resolve_config_path
    except ImportError:  # pragma: no cover - present in every supported release
        return path
    try:
        return str(resolve_config_path(path))
    except FileNotFoundError:
        return path  # loading it then says the file cannot be read, naming it


class InteractionAgentLoop(ToolAgentLoop):
    """verl's tool agent loop with an interaction playing the user's side.

    ``interaction_config`` is a path to an interactions-core config (verl's
    format or the by-name one); without it, the path in ``$INTERACTIONS_CONFIG``;
    without either, every installed interaction is available by name.
    ``ray_check: true`` runs :func:`check_cluster_once` when the first
    trajectory of a worker process starts. verl builds one instance per
    trajectory, so the per-episode state lives on the instance while the
    interactions are shared per process.
    """

    def __init__(
        self,
        *args: Any,
        interaction_config: str | None = None,
        ray_check: bool = False,
        ray_pool: Mapping[str, int] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        if ray_check:
            check_cluster_once()
        interaction_config = interaction_config or os.environ.get(CONFIG_ENV) or None
        if interaction_config:
            interaction_config = _resolve_path(str(interaction_config))
        self.catalog = interactions_for(interaction_config, dict(ray_pool or {}))
        self._session: Session | None = None
        self._interaction_name = ""
        self._kwargs: dict[str, Any] = {}
        self._turn_scores: list[float] = []
        self._end_reason = ""
        self._error: str | None = None

    # -- the episode ---------------------------------------------------------------

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        extra_info = kwargs.get("extra_info") or {}
        interaction_kwargs = dict(extra_info.get("interaction_kwargs") or {})
        name, interaction = self.catalog.get(interaction_kwargs.get("name"))
        interaction_kwargs["name"] = name
        self._interaction_name = name
        self._kwargs = interaction_kwargs
        self._session = Session(interaction, name=name)
        score: float | None = None
        try:
            output = await super().run(sampling_params, **kwargs)
            if self._error is None and self._session.is_open:
                try:
                    score = await self._session.score()
                except BaseException as exc:
                    self._fault(exc, "calculate_score")
        finally:
            problem = await self._session.finalize()
            if problem is not None:
                logger.warning("%s", problem)
        output.reward_score = 0.0 if self._error is not None or score is None else score
        output.extra_fields.update(
            turn_scores=list(self._turn_scores),
            interaction_name=name,
            interaction_end_reason=self._end_reason or ERROR,
        )
        if self._error is not None:
            output.extra_fields["interaction_error"] = self._error
        return output

    def _fail(self, exc: InteractionCallError) -> None:
        """End the episode because the plugin failed: only this sample is affected."""
        self._error = str(exc)
        self._end_reason = ERROR
        logger.warning("interaction episode failed: %s", exc)

    def _fault(self, exc: BaseException, method: str) -> None:
        """Record what a plugin call raised, whatever its class; re-raise a real stop.

        ``SystemExit``, ``KeyboardInterrupt`` or a ``CancelledError`` raised *by the
        plugin* end this sample only; a cancellation of the rollout itself (the task
        was asked to stop) goes on up, after the session is finalized.
        """
        if isinstance(exc, InteractionCallError):
            self._fail(exc)
            return
        if stops_the_run(exc):
            raise exc
        session = self._session
        instance_id = session.instance_id if session is not None else "<unstarted>"
        self._fail(call_error(self._interaction_name, instance_id, method, exc))

    async def _handle_pending_state(
        self, agent_data: Any, sampling_params: dict[str, Any]
    ) -> AgentState:
        state = await super()._handle_pending_state(agent_data, sampling_params)
        session = self._session
        assert session is not None
        # verl's request id names the session, as verl's own loop did; with full
        # determinism verl reuses ids across trajectories, so make them unique.
        session.instance_id = f"{agent_data.request_id}-{uuid.uuid4().hex[:8]}"
        try:
            await session.start(**self._kwargs)
        except BaseException as exc:
            # The model still answers once, so the sample has a well-formed response
            # (reward 0.0, the error in extra_fields); nothing judges it.
            self._fault(exc, "start_interaction")
        return state

    async def _handle_generating_state(
        self, agent_data: Any, sampling_params: dict[str, Any], ignore_termination: bool = False
    ) -> AgentState:
        before = len(agent_data.messages)
        state = await super()._handle_generating_state(
            agent_data, sampling_params, ignore_termination
        )
        if len(agent_data.messages) == before:
            # verl appended no assistant message: a limit stopped it before the
            # message was built, or verl 0.9.0 tokenizes without Continuous Token.
            await append_assistant_message(self, agent_data)
        if state == AgentState.PROCESSING_TOOLS:
            return state
        return await self._interact(agent_data)

    async def _interact(self, agent_data: Any) -> AgentState:
        """Judge the latest assistant turn; append the feedback or end the episode."""
        session = self._session
        if session is None or not session.is_open or self._error is not None:
            return AgentState.TERMINATED
        last = agent_data.messages[-1]
        if not agent_data.tool_calls:
            # What the model said, without special tokens, as verl's old loop passed it.
            text = await self.loop.run_in_executor(
                None,
                lambda: self.tokenizer.decode(agent_data.response_ids, skip_special_tokens=True),
            )
            last["content"] = text
        try:
            result = await session.respond(list(agent_data.messages))
        except BaseException as exc:
            self._fault(exc, "generate_response")
            return AgentState.TERMINATED
        self._turn_scores.append(result.score)
        agent_data.turn_scores.append(result.score)
        # The runtime's one episode step decides the end (verl's limits of 0 mean none);
        # the feedback goes in through verl's token bookkeeping, not a plain append.
        end = end_reason(
            result.should_terminate,
            agent_data.assistant_turns,
            agent_data.user_turns,
            self.max_assistant_turns or None,
            self.max_user_turns or None,
            out_of_room=len(agent_data.response_mask) >= self.response_length,
        )
        if end is not None:
            self._end_reason = end
            return AgentState.TERMINATED
        return await self._append_feedback(agent_data, result.content)

    async def _append_feedback(self, agent_data: Any, feedback: str) -> AgentState:
        """Add the interaction's feedback as a ``user`` turn; the next state."""
        if not await append_user_turn(self, agent_data, feedback):
            self._end_reason = RESPONSE_LENGTH
            return AgentState.TERMINATED
        return AgentState.GENERATING


register(AGENT_NAME)(InteractionAgentLoop)


# -- appending turns verl's way --------------------------------------------------------
#
# verl's ``AgentData`` keeps a trajectory twice: as chat messages, and as token
# ids with a response mask (1 for the model's tokens, 0 for everything else) and
# optionally log-probs. Both must stay in step, and the model's tokens must stay
# exactly as the server returned them, or the log-probs stop lining up. So the
# interaction's feedback is appended with verl's own merge helper for non-model
# messages (whichever the installed release has), never by decoding and
# re-encoding the sequence.


async def append_assistant_message(loop: Any, agent_data: Any) -> None:
    """Add the model's last response as an assistant message (verl stopped before it did)."""
    active: dict[str, Any] = getattr(agent_data, "_active_tools", None) or loop.tools
    schemas = [tool.tool_schema for tool in active.values()]
    content, calls = await loop.tool_parser.extract_tool_calls(agent_data.response_ids, schemas)
    agent_data.tool_calls = calls
    agent_data.messages.append(_assistant_message(content, calls[: loop.max_parallel_calls]))


def _assistant_message(content: str | None, calls: list[Any]) -> dict[str, Any]:
    """The assistant message of ``content`` and its parsed tool calls, shaped as verl's own.

    As verl's tool loop writes it: the arguments parsed into a dict (kept as the
    model's text when they are not a JSON object, as verl 0.9.1 does), the call's
    id when the parser found one, and at most ``max_parallel_calls`` calls.
    """
    message: dict[str, Any] = {"role": "assistant", "content": content or ""}
    if calls:
        message["tool_calls"] = [_tool_call(call) for call in calls]
    return message


def _tool_call(call: Any) -> dict[str, Any]:
    """One parsed tool call in the chat format verl's messages use."""
    try:
        arguments: Any = json.loads(call.arguments)
    except (TypeError, ValueError):
        arguments = None
    if not isinstance(arguments, dict):
        arguments = call.arguments
    entry: dict[str, Any] = {
        "type": "function",
        "function": {"name": call.name, "arguments": arguments},
    }
    call_id = getattr(call, "tool_call_id", None)
    if call_id is not None:
        entry["id"] = call_id
    return entry


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
