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

With ``turn_rewards: true`` on the entry, each judged turn's score is placed at
that turn's last model token of the token-level scores verl trains on, and
``calculate_score`` replaces the score of the turn the response ends with (see
:func:`token_rewards`). verl's default trainer path (``trainer.use_v1``) reads
those scores from the loop's output itself; its legacy path builds them in the
rollout worker, so it also needs :class:`TurnRewardAgentLoopManager` as
``actor_rollout_ref.rollout.agent.agent_loop_manager_class`` (a key verl's
config file lacks, so the override starts with ``+``; the loop refuses
to run without it there, rather than train on the final score alone).

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
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from typing import Any

import numpy as np
import torch
from verl.experimental.agent_loop.agent_loop import (
    AgentLoopManager,
    AgentLoopOutput,
    AgentLoopWorker,
    register,
)
from verl.experimental.agent_loop.tool_agent_loop import AgentState, ToolAgentLoop

from ..errors import ConfigError, InteractionCallError
from ..runtime.session import Session, call_error, stops_the_run
from ..runtime.step import ERROR, RESPONSE_LENGTH, end_reason
from . import check_cluster_once, interactions_for

__all__ = [
    "AGENT_NAME",
    "CONFIG_ENV",
    "SUPPORTED_VERL",
    "TOKEN_REWARDS",
    "InteractionAgentLoop",
    "TurnRewardAgentLoopManager",
    "TurnRewardAgentLoopWorker",
    "check_cluster_once",
    "interactions_for",
    "place_token_rewards",
    "token_rewards",
]

#: The agent name this loop registers under (the dataset's ``agent_name`` value).
AGENT_NAME = "interactions"
#: The interactions config used when the agent-loop entry names none (or there is no
#: entry: the ``verl.plugins`` entry point registers the loop without one).
CONFIG_ENV = "INTERACTIONS_CONFIG"
#: The verl releases this adapter is tested against.
SUPPORTED_VERL = ">=0.9.0,<0.10"
#: The ``extra_fields`` key of a turn-rewards sample: the ``[position, reward]``
#: pairs (response token index, value) that make up its token-level scores.
TOKEN_REWARDS = "token_rewards"
#: Where a configuration error of the loop's options is, for its message.
_ENTRY = f"the agent-loop entry {AGENT_NAME!r}"

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

    ``turn_rewards: true`` puts each judged turn's score on that turn's last
    token instead of one score at the end (see the module docstring).
    """

    def __init__(
        self,
        *args: Any,
        interaction_config: str | None = None,
        ray_check: bool = False,
        ray_pool: Mapping[str, int] | None = None,
        turn_rewards: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        if not isinstance(turn_rewards, bool):
            raise ConfigError([f"turn_rewards must be true or false, not {turn_rewards!r}"], _ENTRY)
        self.turn_rewards = turn_rewards
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
        self._turn_positions: list[int] = []
        self._end_reason = ""
        self._error: str | None = None

    # -- the episode ---------------------------------------------------------------

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        if self.turn_rewards:
            _check_turn_rewards_reach_verl(kwargs)
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
        if self.turn_rewards:
            return self._turn_reward_output(output, score)
        return output

    def _turn_reward_output(self, output: AgentLoopOutput, score: float | None) -> AgentLoopOutput:
        """``output`` with its rewards spread over the judged turns' tokens.

        A failed episode keeps verl's shape of a failure: every token 0.0. The
        scalar ``reward_score`` becomes the sum of what lands, which is what verl
        puts at the last token if nothing spreads it (and what its metrics sum).
        """
        if self._error is not None or score is None:
            pairs: list[list[float]] = []
        else:
            pairs = token_rewards(
                self._turn_positions, self._turn_scores, score, output.response_mask
            )
        output.reward_score = float(sum(value for _, value in pairs))
        output.extra_fields[TOKEN_REWARDS] = pairs
        fields = {name: getattr(output, name) for name in type(output).model_fields}
        return _TurnRewardOutput.model_construct(set(output.model_fields_set), **fields)

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
        self._turn_positions.append(_last_model_token(agent_data.response_mask))
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


def _register_unless_configured() -> None:
    """Register the loop unless an agent-loop file's entry (with its options) already did.

    Imported after verl read that file, registering would drop the entry's options.
    """
    from verl.experimental.agent_loop import agent_loop

    existing = getattr(agent_loop, "_agent_loop_registry", {}).get(AGENT_NAME)
    if existing is None or "PlaceholderAgentLoop" in str(existing.get("_target_", "")):
        register(AGENT_NAME)(InteractionAgentLoop)


_register_unless_configured()


# -- per-turn rewards in verl's token-level scores --------------------------------------
#
# verl trains on ``rm_scores`` (one float per response token, becoming
# ``token_level_scores``), but an agent loop hands it one float, ``reward_score``,
# which verl writes at the response's last token. On the v1 trainer path the
# tensor is built by ``AgentLoopOutput.as_dict()`` on the loop's own output, so a
# subclass of the output places the turns; on the legacy path the worker builds
# the padded batch itself, so a worker subclass (reached through verl's
# ``agent_loop_manager_class`` option) rewrites each turn-rewards row of the
# batch it returns. Both read the same ``extra_fields[TOKEN_REWARDS]`` pairs.

#: Set while :class:`TurnRewardAgentLoopWorker` runs a batch: its loops' turn
#: rewards will be placed (asyncio tasks inherit it from the batch that made them).
_WORKER_PLACES_TURNS: ContextVar[bool] = ContextVar("interactions_turn_rewards", default=False)


def _last_model_token(response_mask: Sequence[int]) -> int:
    """Index of the last model token (mask 1) of the response so far; else its last token.

    The model's own token, not a template token after it: verl's GAE skips tokens
    of mask 0, so a reward placed on one would never reach an advantage.
    """
    for index in range(len(response_mask) - 1, -1, -1):
        if response_mask[index]:
            return index
    return max(len(response_mask) - 1, 0)


def token_rewards(
    positions: Sequence[int],
    turn_scores: Sequence[float],
    final_score: float,
    response_mask: Sequence[int],
) -> list[list[float]]:
    """The ``[position, reward]`` pairs of a turn-rewards sample, in response order.

    Each judged turn's score sits at that turn's last model token, except that
    ``final_score`` (``calculate_score``) *replaces* the score of the turn the
    response ends with. Every interaction this project ships returns the
    episode's score as the score of the turn that ends it, so adding the two
    would count that turn twice; and when verl's limits end the episode,
    ``calculate_score`` is the interaction's verdict on the whole conversation,
    which is what its last turn should earn. When the response does not end with
    a judged turn (a tool call was its last word), ``final_score`` is placed on
    its last model token beside the judged turns' scores. A position cut off by
    verl's response budget moves to the last model token kept. So the values sum
    to ``final_score`` plus the scores of the judged turns before the last one.
    """
    if not response_mask:
        return []
    last = _last_model_token(response_mask)
    placed = [(min(int(p), last), float(s)) for p, s in zip(positions, turn_scores, strict=True)]
    if placed and placed[-1][0] == last:
        placed.pop()
    placed.append((last, float(final_score)))
    totals: dict[int, float] = {}
    for index, value in placed:
        totals[index] = totals.get(index, 0.0) + value
    return [[index, totals[index]] for index in sorted(totals)]


def _scores_row(length: int, pairs: Sequence[Sequence[float]]) -> torch.Tensor:
    """A row of ``length`` token-level scores holding ``pairs`` and zeros elsewhere."""
    row = torch.zeros(length, dtype=torch.float32)
    for position, value in pairs:
        row[min(int(position), length - 1)] += float(value)
    return row


class _TurnRewardOutput(AgentLoopOutput):
    """A loop output whose ``rm_scores`` carry the turn rewards (verl's v1 path).

    verl's TransferQueue worker stores ``as_dict()`` of the loop's output as the
    sample, and its trainer uses that ``rm_scores`` as ``token_level_scores``.
    """

    def as_dict(self) -> dict[str, Any]:
        output = super().as_dict()
        pairs = self.extra_fields.get(TOKEN_REWARDS)
        if pairs is not None and "rm_scores" in output:
            output["rm_scores"] = _scores_row(len(output["rm_scores"]), pairs)
        return output


def place_token_rewards(batch: Any) -> None:
    """Rewrite the ``rm_scores`` rows of turn-rewards samples in a legacy worker's batch.

    ``batch`` is the ``DataProto`` verl's ``AgentLoopWorker.generate_sequences``
    returns: right-padded responses, so a response index is a column index, and
    every ``extra_fields`` key as a column of the non-tensor batch. Rows of other
    agent loops (no pairs) keep verl's own scores.
    """
    column = batch.non_tensor_batch.get(TOKEN_REWARDS)
    if column is None:
        # No turn-rewards sample in this worker's share of the batch: the column still
        # exists, because verl concatenates the workers' batches key by key.
        column = np.empty(len(batch), dtype=object)
        batch.non_tensor_batch[TOKEN_REWARDS] = column
    if "rm_scores" not in batch.batch.keys():  # noqa: SIM118 - a TensorDict
        return
    scores = batch.batch["rm_scores"]
    for index, pairs in enumerate(column):
        if pairs is not None:
            scores[index] = _scores_row(scores.size(1), pairs).to(scores.device)


class TurnRewardAgentLoopWorker(AgentLoopWorker):
    """verl's legacy rollout worker, placing turn rewards in the batch it returns.

    Only :meth:`generate_sequences`, the worker's entry point, is extended: the
    batch verl built is left as it is except for the ``rm_scores`` rows of
    samples that carry :data:`TOKEN_REWARDS`.
    """

    async def generate_sequences(self, batch: Any) -> Any:
        mark = _WORKER_PLACES_TURNS.set(True)
        try:
            output = await super().generate_sequences(batch)
        finally:
            _WORKER_PLACES_TURNS.reset(mark)
        place_token_rewards(output)
        return output


class TurnRewardAgentLoopManager(AgentLoopManager):
    """verl's legacy agent-loop manager with :class:`TurnRewardAgentLoopWorker` workers.

    For ``trainer.use_v1=false`` with ``turn_rewards: true``::

        +actor_rollout_ref.rollout.agent.agent_loop_manager_class=\
            interactions_core.integrations.verl.TurnRewardAgentLoopManager

    Not for the v1 path: that option replaces verl's TransferQueue manager there,
    and the v1 path needs no help (the loop's output places the turns itself).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        import ray

        self.agent_loop_workers_class = ray.remote(TurnRewardAgentLoopWorker)
        super().__init__(*args, **kwargs)


def _check_turn_rewards_reach_verl(run_kwargs: Mapping[str, Any]) -> None:
    """Refuse turn rewards where they would silently collapse to one final score.

    verl's v1 worker passes each trajectory's ``session_id`` to the loop and
    stores the loop's own output (which places the turns); the legacy worker
    places them only as :class:`TurnRewardAgentLoopWorker`.
    """
    if _WORKER_PLACES_TURNS.get() or "session_id" in run_kwargs:
        return
    raise ConfigError(
        [
            "turn_rewards: true on verl's legacy trainer path (trainer.use_v1=false) needs "
            "+actor_rollout_ref.rollout.agent.agent_loop_manager_class="
            "interactions_core.integrations.verl.TurnRewardAgentLoopManager; without it "
            "verl would train on the episode's summed score at the last token only"
        ],
        _ENTRY,
    )


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
