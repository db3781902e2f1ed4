"""The ``usersim`` interaction: a model plays the user, a judge scores the conversation.

One session per sample. After each assistant turn:

1. at ``max_turns`` the conversation is over: the judge scores it;
2. otherwise the simulator writes the user's next message. When it contains the
   end marker the user is done (satisfied or giving up): the marker is removed,
   the episode terminates and the judge scores the conversation;
3. otherwise the message is the feedback the runtime appends as the next
   ``user`` turn, scored by the judge when ``judge_turns`` is on (else 0.0).

The conversation's score is the last turn's score and the session's final score.
An episode the runtime ends first (its own turn limits) is judged when the final
score is asked for. Every call's tokens and latency go in the turn's ``extra``
(``extra["usersim"]``), and the session keeps the totals.

Built on the public plugin API only, so it is also a worked example of a
stateful, networked interaction.
"""

from __future__ import annotations

from typing import Any

from interactions_core import InteractionResult, SessionInteraction
from interactions_core.runtime.policies.openai import ChatClient

from .backends import Backend, LiveBackend, ReplayBackend, client_for
from .config import UserSimConfig
from .prompts import DEFAULT_PERSONA, DEFAULT_RUBRIC, render, simulator_messages, transcript
from .scorers import Scorer, load_scorer
from .scoring import parse_score

__all__ = ["UserSimInteraction", "UserSimSession"]


class UserSimSession:
    """One conversation: the sample's fields, its turn count, the calls' figures so far."""

    __slots__ = ("calls", "fields", "goal", "messages", "score", "turns")

    def __init__(self, fields: dict[str, Any]) -> None:
        self.fields = fields
        self.goal: str = fields["goal"]
        self.turns = 0
        self.score: float | None = None  # the conversation's, once judged
        self.messages: list[dict[str, Any]] = []  # the last conversation seen
        self.calls: list[dict[str, Any]] = []  # one entry per simulator or judge request

    def totals(self) -> dict[str, Any]:
        """Requests, tokens (``None`` when never reported) and latency over the session."""
        return _sum(self.calls)


def _sum(calls: list[dict[str, Any]]) -> dict[str, Any]:
    prompt = completion = None
    latency = 0.0
    for call in calls:
        if call["prompt_tokens"] is not None:
            prompt = (prompt or 0) + call["prompt_tokens"]
        if call["completion_tokens"] is not None:
            completion = (completion or 0) + call["completion_tokens"]
        latency += call["latency_s"] or 0.0
    return {
        "requests": len(calls),
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "latency_s": round(latency, 6),
    }


class UserSimInteraction(SessionInteraction):
    """A simulated user with a goal, ending by a marker or at ``max_turns``, and a judge."""

    config_schema = UserSimConfig
    settings: UserSimConfig

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__(config)
        self.backend: Backend = self._backend(self.settings)
        target = self.settings.scorer
        self.scorer: Scorer | None = load_scorer(target) if target else None

    @staticmethod
    def _backend(s: UserSimConfig) -> Backend:
        if s.mode == "replay":
            assert s.replay_file is not None  # the config's check
            return ReplayBackend(s.replay_file)

        def client(base_url: str, api_key_env: str | None) -> ChatClient:
            return client_for(
                base_url,
                api_key_env,
                max_in_flight=s.max_in_flight,
                timeout=s.timeout,
                retries=s.retries,
                backoff=s.backoff,
            )

        simulator = judge = client(s.base_url, s.api_key_env)
        judge_url = s.judge_base_url or s.base_url
        judge_key = s.judge_api_key_env or s.api_key_env
        if judge_url != s.base_url or judge_key != s.api_key_env:
            judge = client(judge_url, judge_key)  # the judge's own endpoint or key
        sampling = {"temperature": s.temperature, "top_p": s.top_p, "max_tokens": s.max_tokens}
        sampling["seed"] = s.seed
        params = {
            "simulator": {"model": s.model, **_set(sampling)},
            "judge": {
                "model": s.judge_model or s.model,
                **_set({"temperature": s.judge_temperature, "max_tokens": s.judge_max_tokens}),
            },
        }
        return LiveBackend(simulator, judge, params, s.record_file)

    # -- the session ------------------------------------------------------------------

    def new_session(self, **kwargs: Any) -> UserSimSession:
        """The sample's fields: ``goal`` (required), ``persona``, ``rubric`` and any other."""
        goal = kwargs.get("goal")
        if not isinstance(goal, str) or not goal.strip():
            raise ValueError(
                "usersim: the sample needs interaction_kwargs.goal, the simulated user's "
                f"goal as text (got {goal!r})"
            )
        fields = {"persona": DEFAULT_PERSONA, "rubric": DEFAULT_RUBRIC, **kwargs}
        fields["end_marker"] = self.settings.end_marker
        fields["scale"] = f"{self.settings.judge_scale:g}"
        return UserSimSession(fields)

    async def respond(
        self, state: UserSimSession, messages: list[dict[str, Any]], **kwargs: Any
    ) -> InteractionResult:
        """The simulated user's next message, or the end of the conversation and its score."""
        s = self.settings
        state.turns += 1
        state.messages = messages
        turn_calls: dict[str, Any] = {}
        if state.turns >= s.max_turns:
            return await self._finish(state, "", turn_calls, "max_turns")
        system = render(s.system_template, state.fields, "system_template")
        text = await self._call(
            state, "simulator", simulator_messages(system, messages), turn_calls
        )
        if s.end_marker in text:
            reply = text.replace(s.end_marker, "").strip()
            return await self._finish(state, reply, turn_calls, "user_ended")
        score = 0.0
        if s.judge_turns:
            score = await self._judge(state, "turn_judge", s.turn_judge_template, turn_calls)
        return InteractionResult(False, text, score, self._extra(state, turn_calls, None))

    async def _finish(
        self, state: UserSimSession, reply: str, turn_calls: dict[str, Any], why: str
    ) -> InteractionResult:
        """End the conversation: the judge scores it; that is this turn's and the final score."""
        state.score = await self._judge(state, "judge", self.settings.judge_template, turn_calls)
        extra = self._extra(state, turn_calls, why)
        if reply:
            extra["usersim"]["last_user_message"] = reply  # not appended: the episode is over
        return InteractionResult(True, reply, state.score, extra)

    async def score(self, state: UserSimSession, **kwargs: Any) -> float:
        """The conversation's score, judged now when the runtime ended it before the user did."""
        if state.score is None:
            if not state.messages:
                return 0.0  # no assistant turn was played: nothing to judge
            state.score = await self._judge(state, "judge", self.settings.judge_template, {})
        return state.score

    # -- the calls ------------------------------------------------------------------

    async def _judge(
        self, state: UserSimSession, call: str, template: str, turn_calls: dict[str, Any]
    ) -> float:
        if self.scorer is not None:
            return await self.scorer.score(state.messages, state.fields)
        fields = {**state.fields, "transcript": transcript(state.messages)}
        which = "judge_template" if call == "judge" else "turn_judge_template"
        prompt = [{"role": "user", "content": render(template, fields, which)}]
        reply = await self._call(state, call, prompt, turn_calls)
        what = f"the {call} after assistant turn {state.turns}"
        return parse_score(reply, self.settings.judge_scale, what)

    async def _call(
        self,
        state: UserSimSession,
        call: str,
        messages: list[dict[str, Any]],
        turn_calls: dict[str, Any],
    ) -> str:
        text, figures = await self.backend.ask(call, state.goal, state.turns, messages)
        if figures is not None:
            state.calls.append(figures)
            turn_calls[call] = figures
        return text

    @staticmethod
    def _extra(
        state: UserSimSession, turn_calls: dict[str, Any], ended: str | None
    ) -> dict[str, Any]:
        """The turn's ``extra``: this turn's calls, the session's totals, why it ended.

        ``usage`` lists the turn's requests in the shape the run summary adds up
        (its ``interaction calls`` lines); ``usersim`` has them by call, with totals.
        """
        usersim: dict[str, Any] = {"calls": turn_calls, "totals": state.totals()}
        if ended is not None:
            usersim["ended"] = ended
        usage = [{"call": name, **figures} for name, figures in turn_calls.items()]
        return {"usage": usage, "usersim": usersim}

    def close(self) -> None:
        """Close the idle kept-alive connections (sessions share them; a later request reopens)."""
        self.backend.close()


def _set(params: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if v is not None}
