"""``InteractionAgentLoop`` driven through verl's own rollout workers.

Each test builds verl's worker from verl's generated trainer config, with an
``agent_loop_config_path`` YAML naming the adapter, and runs a batch through
``generate_sequences``: hydra instantiates the loop per trajectory, and the legacy
``AgentLoopWorker`` pads the outputs into a ``DataProto`` while the default v1
``AgentLoopWorkerTQ`` stores each trajectory in TransferQueue, read back by the
harness. Every test that builds a worker runs on both (``worker_kind``). Only the
model is scripted.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from harness import (
    TWO,
    ScriptedServer,
    column,
    make_worker,
    rollout,
    row,
    run_batch,
    spans,
    trainer_config,
    write_setup,
)

from interactions_core import Session, load_interactions
from interactions_core.integrations import verl as verl_agent_loop
from interactions_core.integrations.verl import InteractionAgentLoop, interactions_for

ROOT = Path(__file__).resolve().parents[2]
GSM8K = ROOT.parent / "shared" / "data" / "gsm8k"
ATTEMPTS = ("6b_finetuning", "6b_verification", "175b_finetuning", "175b_verification")

pytestmark = pytest.mark.both_workers


def test_registered_under_the_agent_name() -> None:
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry

    assert verl_agent_loop.AGENT_NAME == "interactions"
    target = _agent_loop_registry["interactions"]["_target_"]
    assert target == "interactions_core.integrations.verl.InteractionAgentLoop"


# -- real data --------------------------------------------------------------------


@pytest.fixture(scope="module")
def gsm8k_rows() -> list[dict[str, Any]]:
    path = GSM8K / "example_model_solutions.jsonl"
    if not path.is_file():
        pytest.fail(f"shared GSM8K data missing at {path}")
    rows = []
    with path.open() as handle:
        for line in handle:
            rows.append(json.loads(line))
            if len(rows) == 24:
                break
    return rows


def answer_of(row: dict[str, Any]) -> str:
    return row["ground_truth"].rsplit("A:", 1)[1].strip().replace(",", "")


async def local_episode(interaction: Any, question: str, truth: str, replies: list[str]) -> Any:
    """The episode played directly on the plugin, as verl's old loop called it."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
    scores = []
    async with Session(interaction) as session:
        await session.start(name="gsm8k", ground_truth=truth)
        for reply in replies:
            messages.append({"role": "assistant", "content": reply})
            result = await session.respond(messages)
            scores.append(result.score)
            if result.should_terminate:
                break
            messages.append({"role": "user", "content": result.content})
        final = await session.score()
    return scores, final


def test_gsm8k_recorded_solutions_match_the_plugin_run_locally(
    tmp_path: Path, model_dir: Path, tokenizer: Any, gsm8k_rows: list[dict[str, Any]]
) -> None:
    interactions_yaml = "interaction:\n  - name: gsm8k\n    config: {method: flexible}\n"
    loops = write_setup(tmp_path, interactions_yaml)
    by_question = {r["question"]: r for r in gsm8k_rows}

    def script(prompt: str, number: int) -> str:
        found = [r for q, r in by_question.items() if q in prompt]
        assert len(found) == 1, "the prompt must carry exactly one known question"
        return str(found[0][ATTEMPTS[number]]["solution"])

    server = ScriptedServer(tokenizer, script)
    config = trainer_config(
        model_dir, loops, prompt_length=512, response_length=4096, max_assistant_turns=4
    )
    worker = make_worker(config, server)
    batch = [row(r["question"], name="gsm8k", ground_truth=answer_of(r)) for r in gsm8k_rows]
    out = run_batch(worker, batch)

    local = load_interactions(tmp_path / "interactions.yaml")["gsm8k"]
    rewards = out.batch["rm_scores"].sum(dim=-1).tolist()
    for i, r in enumerate(gsm8k_rows):
        replies = [r[key]["solution"] for key in ATTEMPTS]
        scores, final = asyncio.run(local_episode(local, r["question"], answer_of(r), replies))
        assert list(out.non_tensor_batch["turn_scores"][i]) == scores
        assert rewards[i] == pytest.approx(final)
        # The recorded labels agree with the scores, attempt by attempt.
        labels = [1.0 if r[key]["is_correct"] else 0.0 for key in ATTEMPTS][: len(scores)]
        assert scores == labels
        reason = out.non_tensor_batch["interaction_end_reason"][i]
        assert reason == ("terminated" if final == 1.0 else "max_assistant_turns")
    assert set(column(out, "interaction_name")) == {"gsm8k"}
    assert sum(rewards) == sum(
        1 for r in gsm8k_rows if any(r[key]["is_correct"] for key in ATTEMPTS)
    )
    # Interactions are shared per worker process and every session was finalized.
    shared = interactions_for(tmp_path / "interactions.yaml").get("gsm8k")[1]
    assert shared.open_sessions == 0


# -- tokens and masks ---------------------------------------------------------------


def test_model_tokens_are_kept_verbatim_with_aligned_logprobs(
    tmp_path: Path, model_dir: Path, tokenizer: Any
) -> None:
    loops = write_setup(tmp_path, "default: gsm8k\ninteraction:\n  - name: gsm8k\n")
    replies = ["I think the total is #### 71", "  Let me redo it:\n18 + 54 = 72\n#### 72"]
    server = ScriptedServer(tokenizer, lambda prompt, n: replies[n])
    worker = make_worker(trainer_config(model_dir, loops, max_assistant_turns=5), server)
    out = run_batch(worker, [row("What is 18 + 54?", ground_truth="72")])

    mask = out.batch["response_mask"][0].tolist()
    responses = out.batch["responses"][0].tolist()
    logprobs = out.batch["rollout_log_probs"][0].tolist()
    model_spans = spans(mask, 1)
    assert len(model_spans) == 2
    for (start, end), sent in zip(model_spans, server.replies, strict=True):
        assert responses[start:end] == sent  # token in, token out: never re-encoded
    sent_logprobs = [-0.001 * (k + 1) for k in range(sum(len(r) for r in server.replies))]
    got = [logprobs[k] for start, end in model_spans for k in range(start, end)]
    assert got == pytest.approx(sent_logprobs)
    # Between the model's turns: exactly the interaction's feedback, never trained on.
    (fb_start, fb_end) = next(s for s in spans(mask, 0) if s[0] < model_spans[-1][0])
    between = tokenizer.decode(responses[fb_start:fb_end])
    assert "Your response is incorrect! You need to reflect on your answer" in between
    assert all(logprobs[k] == 0.0 for k in range(fb_start, fb_end))
    assert list(out.non_tensor_batch["turn_scores"][0]) == [0.0, 1.0]
    assert out.batch["rm_scores"][0].sum().item() == 1.0
    # verl counts the prompt, two assistant turns and one user turn.
    assert int(out.non_tensor_batch["__num_turns__"][0]) == 4
    # The second request continued from the first: prompt + reply + feedback.
    first, second = server.requests
    assert second["prompt_ids"][: len(first["prompt_ids"])] == first["prompt_ids"]


# -- routing, defaults, errors ------------------------------------------------------


def test_samples_route_by_name_and_fall_back_to_the_default(
    tmp_path: Path, model_dir: Path, tokenizer: Any
) -> None:
    loops = write_setup(tmp_path, TWO)
    # "A: 72" is right for the flexible extractor and wrong for the strict one.
    server = ScriptedServer(tokenizer, lambda prompt, n: "so A: 72")
    worker = make_worker(trainer_config(model_dir, loops, max_assistant_turns=1), server)
    out = run_batch(
        worker,
        [
            row("q1", name="strict", ground_truth="72"),
            row("q2", name="flexible", ground_truth="72"),
            row("q3", ground_truth="72"),  # no name: the config's default
        ],
    )
    assert column(out, "interaction_name") == ["strict", "flexible", "strict"]
    assert out.batch["rm_scores"].sum(dim=-1).tolist() == [0.0, 1.0, 0.0]


def test_an_unknown_name_fails_with_the_available_names(
    tmp_path: Path, model_dir: Path, tokenizer: Any
) -> None:
    loops = write_setup(tmp_path, TWO)
    server = ScriptedServer(tokenizer, lambda prompt, n: "#### 1")
    worker = make_worker(trainer_config(model_dir, loops), server)
    with pytest.raises(ValueError) as info:
        run_batch(worker, [row("q", name="flexibel", ground_truth="1")])
    message = str(info.value)
    assert "unknown interaction 'flexibel'" in message
    assert "strict, flexible" in message
    assert "did you mean 'flexible'" in message
    assert server.requests == []  # nothing was generated for a misconfigured sample


def test_without_a_config_every_installed_interaction_is_available_by_name(
    tmp_path: Path, model_dir: Path, tokenizer: Any
) -> None:
    loops = tmp_path / "agent_loops.yaml"
    loops.write_text(
        "- name: interactions\n"
        "  _target_: interactions_core.integrations.verl.InteractionAgentLoop\n"
    )
    server = ScriptedServer(tokenizer, lambda prompt, n: "#### 5")
    worker = make_worker(trainer_config(model_dir, loops, max_assistant_turns=2), server)
    out = run_batch(worker, [row("q", name="gsm8k", ground_truth="5")])
    assert column(out, "interaction_name") == ["gsm8k"]
    assert out.batch["rm_scores"][0].sum().item() == 1.0


def test_a_raising_plugin_fails_only_its_own_sample_and_leaks_nothing(
    tmp_path: Path, model_dir: Path, tokenizer: Any
) -> None:
    loops = write_setup(
        tmp_path,
        "interaction:\n  - name: fragile\n    class_name: verl_fakes.RaisingInteraction\n",
    )
    answers = {"q-boom": "boom", "q-ok": "it is 7"}

    def script(prompt: str, number: int) -> str:
        return next(text for key, text in answers.items() if key in prompt)

    server = ScriptedServer(tokenizer, script)
    worker = make_worker(trainer_config(model_dir, loops, max_assistant_turns=3), server)
    out = run_batch(
        worker,
        [
            row("q-boom", name="fragile", ground_truth="7"),
            row("q-ok", name="fragile", ground_truth="7"),
            row("q-ok", name="fragile", ground_truth="explode"),
        ],
    )
    assert column(out, "interaction_end_reason") == ["error", "terminated", "error"]
    error = out.non_tensor_batch["interaction_error"][0]
    assert "fragile" in error and "generate_response" in error
    assert "RuntimeError: the judge crashed on this answer" in error
    assert out.non_tensor_batch["interaction_error"][1] is None
    start_error = out.non_tensor_batch["interaction_error"][2]
    assert "start_interaction" in start_error and "cannot start a session" in start_error
    assert out.batch["rm_scores"].sum(dim=-1).tolist() == [0.0, 0.5, 0.0]
    # The sample whose session never started still has one well-formed model turn.
    mask = out.batch["response_mask"][2].tolist()
    assert len(spans(mask, 1)) == 1 and list(out.non_tensor_batch["turn_scores"][2]) == []
    shared = interactions_for(tmp_path / "interactions.yaml").get("fragile")[1]
    assert shared.open_sessions == 0


def test_cancelled_rollouts_finalize_their_sessions(
    tmp_path: Path, model_dir: Path, tokenizer: Any
) -> None:
    loops = write_setup(tmp_path, "default: gsm8k\ninteraction:\n  - name: gsm8k\n")

    class Stalling(ScriptedServer):
        async def generate(self, request_id: str, **kwargs: Any) -> Any:
            if self.calls.get(request_id):
                await asyncio.sleep(3600)  # the second turn never comes back
            return await super().generate(request_id, **kwargs)

    server = Stalling(tokenizer, lambda prompt, n: "#### 0")
    worker = make_worker(trainer_config(model_dir, loops, max_assistant_turns=5), server)
    shared = interactions_for(tmp_path / "interactions.yaml").get("gsm8k")[1]

    async def main() -> None:
        task = asyncio.create_task(
            rollout(worker, [row(f"q{i}", ground_truth="9") for i in range(4)])
        )
        while len(server.requests) < 4 or shared.open_sessions < 4:
            await asyncio.sleep(0.01)
        assert shared.open_sessions == 4
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert shared.open_sessions == 0


# -- limits -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("limits", "turns", "reason"),
    [
        ({"max_assistant_turns": 2}, 2, "max_assistant_turns"),
        ({"max_user_turns": 1}, 2, "max_user_turns"),
        ({"response_length": 48}, None, "response_length"),
    ],
)
def test_limits_end_the_episode_and_the_last_turn_is_still_judged(
    tmp_path: Path,
    model_dir: Path,
    tokenizer: Any,
    limits: dict[str, int],
    turns: int | None,
    reason: str,
) -> None:
    loops = write_setup(tmp_path, "default: gsm8k\ninteraction:\n  - name: gsm8k\n")
    server = ScriptedServer(tokenizer, lambda prompt, n: f"#### {n + 1}")  # never 9
    worker = make_worker(trainer_config(model_dir, loops, **limits), server)
    out = run_batch(worker, [row("q", ground_truth="9")])
    scores = list(out.non_tensor_batch["turn_scores"][0])
    assert column(out, "interaction_end_reason") == [reason]
    # Every assistant turn the model produced was judged, the last one included.
    assert scores == [0.0] * len(server.replies)
    if turns is not None:
        assert len(server.replies) == turns
    assert int(sum(out.batch["response_mask"][0].tolist())) == sum(map(len, server.replies)) or (
        reason == "response_length"
    )


# -- tools and an interaction in one episode ---------------------------------------


def test_tool_calls_go_to_tools_and_answers_to_the_interaction(
    tmp_path: Path, model_dir: Path, tokenizer: Any
) -> None:
    import yaml
    from verl_fakes import WEATHER_TOOL_SCHEMA, WeatherTool

    tools = tmp_path / "tools.yaml"
    tools.write_text(
        yaml.safe_dump(
            {
                "tools": [
                    {
                        "class_name": "verl_fakes.WeatherTool",
                        "config": {"type": "native"},
                        "tool_schema": WEATHER_TOOL_SCHEMA,
                    }
                ]
            }
        )
    )
    loops = write_setup(tmp_path, "default: weather\ninteraction:\n  - name: weather\n")
    call = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    replies = [call, "It is sunny in Paris."]
    server = ScriptedServer(tokenizer, lambda prompt, n: replies[n])
    WeatherTool.calls.clear()
    worker = make_worker(
        trainer_config(model_dir, loops, max_assistant_turns=4, tool_config_path=tools), server
    )
    out = run_batch(
        worker,
        [row("Weather in Paris?"), {**row("Weather in Paris?"), "index": 1}],
    )
    assert WeatherTool.calls == [{"city": "Paris"}, {"city": "Paris"}]
    # The tool turn went to the tool; the answer after it to the interaction, which
    # saw the tool's message and ended the episode with its full score.
    assert [list(s) for s in out.non_tensor_batch["turn_scores"]] == [[1.0], [1.0]]
    assert out.batch["rm_scores"].sum(dim=-1).tolist() == [1.0, 1.0]
    mask = out.batch["response_mask"][0].tolist()
    responses = out.batch["responses"][0].tolist()
    tool_span = spans(mask, 0)[0]
    assert "Sunny, 21 C in Paris" in tokenizer.decode(responses[tool_span[0] : tool_span[1]])


#: The tool calls of verl's assistant message for the call below: arguments parsed to a dict.
VERL_TOOL_CALLS = [
    {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
]


@pytest.mark.parametrize("max_turns", [1, 4], ids=["limit-before-verl-builds-it", "no-limit"])
def test_the_interaction_sees_tool_calls_as_verl_writes_them(
    tmp_path: Path, model_dir: Path, tokenizer: Any, max_turns: int
) -> None:
    """Whether verl or the adapter appended the assistant message, it has verl's shape.

    With a turn limit verl stops before building the message, and verl 0.9.0 without
    Continuous Token never builds it: the adapter does, and must match verl's own.
    """
    import yaml
    from verl_fakes import WEATHER_TOOL_SCHEMA, RecordingInteraction

    tools = tmp_path / "tools.yaml"
    tool = {
        "class_name": "verl_fakes.WeatherTool",
        "config": {"type": "native"},
        "tool_schema": WEATHER_TOOL_SCHEMA,
    }
    tools.write_text(yaml.safe_dump({"tools": [tool]}))
    loops = write_setup(
        tmp_path,
        "interaction:\n  - name: recorded\n    class_name: verl_fakes.RecordingInteraction\n",
    )
    call = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    replies = [call, "It is sunny in Paris."]
    server = ScriptedServer(tokenizer, lambda prompt, n: replies[n])
    RecordingInteraction.seen.clear()
    worker = make_worker(
        trainer_config(model_dir, loops, max_assistant_turns=max_turns, tool_config_path=tools),
        server,
    )
    out = run_batch(worker, [row("Weather in Paris?", name="recorded")])
    assert out.batch["rm_scores"].sum().item() == 1.0
    [messages] = RecordingInteraction.seen
    assistant = [m for m in messages if m["role"] == "assistant"]
    assert assistant[0]["tool_calls"] == VERL_TOOL_CALLS
    assert isinstance(assistant[0]["content"], str)
    assert "<tool_call>" not in assistant[0]["content"]  # the parser took the call out
    if max_turns == 1:
        assert len(assistant) == 1  # the limit ended it; the tool call was still judged
    else:
        assert [m["role"] for m in messages[-3:]] == ["assistant", "tool", "assistant"]
        assert assistant[1] == {"role": "assistant", "content": "It is sunny in Paris."}


def test_the_loop_class_is_the_documented_one() -> None:
    assert issubclass(InteractionAgentLoop, verl_agent_loop.ToolAgentLoop)


def test_interactions_are_built_once_per_worker_process(
    tmp_path: Path, model_dir: Path, tokenizer: Any
) -> None:
    from verl_fakes import CountingInteraction

    loops = write_setup(
        tmp_path,
        "interaction:\n  - name: counted\n    class_name: verl_fakes.CountingInteraction\n",
    )
    CountingInteraction.built = 0
    server = ScriptedServer(tokenizer, lambda prompt, n: "done")
    worker = make_worker(trainer_config(model_dir, loops), server)
    for _ in range(2):
        out = run_batch(worker, [row(f"q{i}", name="counted") for i in range(8)])
        assert out.batch["rm_scores"].sum().item() == 8.0
    assert CountingInteraction.built == 1  # 16 trajectories, one instance


def test_a_plugin_raising_any_exception_class_fails_only_its_sample(
    tmp_path: Path, model_dir: Path, tokenizer: Any
) -> None:
    loops = write_setup(
        tmp_path,
        "interaction:\n  - name: fragile\n    class_name: verl_fakes.RaisingInteraction\n",
    )
    answers = {"q-exit": "exit now", "q-cancel": "cancel it", "q-ok": "it is 7"}

    def script(prompt: str, number: int) -> str:
        return next(text for key, text in answers.items() if key in prompt)

    server = ScriptedServer(tokenizer, script)
    worker = make_worker(trainer_config(model_dir, loops, max_assistant_turns=3), server)
    out = run_batch(worker, [row(q, name="fragile", ground_truth="7") for q in answers])
    assert column(out, "interaction_end_reason") == ["error", "error", "terminated"]
    errors = list(out.non_tensor_batch["interaction_error"])
    assert "SystemExit: 3" in errors[0]
    assert "CancelledError" in errors[1]
    assert out.batch["rm_scores"].sum(dim=-1).tolist() == [0.0, 0.0, 0.5]
    shared = interactions_for(tmp_path / "interactions.yaml").get("fragile")[1]
    assert shared.open_sessions == 0


def test_the_old_import_path_is_the_same_class() -> None:
    """Agent-loop files written for earlier releases name the old path."""
    from interactions_core.compat.verl_agent_loop import InteractionAgentLoop as Old

    assert Old is InteractionAgentLoop
