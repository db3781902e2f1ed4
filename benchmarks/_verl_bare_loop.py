"""The verl adapter benchmark's baseline: the smallest agent loop making the adapter's calls.

Written on verl's ``AgentLoopBase`` helpers for one interaction: build the
prompt, generate, merge the tokens, call ``generate_response``, append the
feedback, and ``calculate_score`` at the end; no tools, no limits but the turn
count, no finalize guarantee, no routing. It imports verl, so
``bench_verl_adapter.py`` imports it only when it runs (verl's worker finds it by
the ``_target_`` of the agent-loop YAML).
"""

from __future__ import annotations

from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput

from interactions_core.integrations.verl import interactions_for

TURNS = 2  # assistant turns per episode: wrong, then right


class BareLoop(AgentLoopBase):
    """The same calls as the adapter, written out by hand for one interaction."""

    def __init__(self, *args: Any, interaction_config: str, **kwargs: Any) -> None:
        kwargs.pop("tools", None)
        super().__init__(*args, **kwargs)
        self.interaction = interactions_for(interaction_config).get("gsm8k")[1]

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        messages = list(kwargs["raw_prompt"])
        ikw = dict(kwargs["extra_info"]["interaction_kwargs"])
        request_id = f"bare-{id(self)}"
        await self.interaction.start_interaction(request_id, **ikw)
        ids = await self.ct_build_initial_tokens(messages)
        prompt_len = len(ids)
        mask: list[int] = []
        scores = []
        for _ in range(TURNS):
            out = await self.server_manager.generate(
                request_id=request_id, prompt_ids=ids, sampling_params=sampling_params
            )
            merged, mask, _ = await self.ct_merge_assistant_token(ids, out.token_ids, mask)
            ids = merged.token_ids
            text = self.tokenizer.decode(out.token_ids, skip_special_tokens=True)
            messages.append({"role": "assistant", "content": text})
            done, feedback, score, _extra = await self.interaction.generate_response(
                request_id, messages, **ikw
            )
            scores.append(score)
            if done:
                break
            previous = list(messages)
            messages.append({"role": "user", "content": feedback})
            merge = getattr(self, "ct_merge_context_msg", None) or self.ct_merge_non_assistant_msg
            merged, mask, _ = await merge(previous, messages, ids, mask)
            ids = merged.token_ids
        reward = await self.interaction.calculate_score(request_id)
        await self.interaction.finalize_interaction(request_id)
        return AgentLoopOutput(
            prompt_ids=ids[:prompt_len],
            response_ids=ids[prompt_len:],
            response_mask=mask,
            reward_score=reward,
            num_turns=1 + 2 * len(scores),
            metrics={},
            extra_fields={"turn_scores": scores},
        )
