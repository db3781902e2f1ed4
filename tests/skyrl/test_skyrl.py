"""interactions/<name> environments on skyrl-gym's released wheel, driven as SkyRL drives them.

Every trajectory is played through :mod:`skyrl_driver`: SkyRL's generator pattern,
many environments at once from a pool of executor threads.
"""

from __future__ import annotations

import asyncio
import gc
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import skyrl_gym
from skyrl_driver import play
from skyrl_gym.envs.base_text_env import BaseTextEnv

from interactions_core import InteractionResult, SessionInteraction
from interactions_core.errors import DisabledError, InteractionsError
from interactions_core.integrations import computes_only, skyrl
from interactions_core.registry import get_registry
from interactions_core.runtime import SampleError

WRONG = "Let me think. 2 + 2 = 5.\n#### {wrong}"
RIGHT = "Checking again step by step.\n#### {right}"
FEEDBACK = "Your response is incorrect! You need to reflect on your answer and try again."


@pytest.fixture(autouse=True)
def _clean_skyrl_registry() -> Any:
    """Each test registers what it needs; nothing of ours stays in skyrl_gym's registry."""
    yield
    for env_id in [i for i in skyrl_gym.registry if i.startswith(skyrl.PREFIX)]:
        del skyrl_gym.registry[env_id]


_ROWS: list[dict[str, Any]] = []


@pytest.fixture
def gsm8k_rows(tmp_path_factory: pytest.TempPathFactory, gsm8k_data: Path) -> list[dict[str, Any]]:
    """48 rows of the shared GSM8K test split, written by ``interactions data gsm8k`` (once)."""
    if not _ROWS:
        out = tmp_path_factory.mktemp("rows") / "gsm8k.jsonl"
        command = [sys.executable, "-m", "interactions_core", "data", "gsm8k", "--input"]
        command += [str(gsm8k_data / "test.jsonl"), "--output", str(out), "--limit", "48"]
        subprocess.run(command, check=True, capture_output=True, text=True)
        _ROWS.extend(json.loads(line) for line in out.read_text(encoding="utf-8").splitlines())
    return _ROWS


def _truth(row: dict[str, Any]) -> str:
    return str(row["extra_info"]["interaction_kwargs"]["ground_truth"])


def _wrong_then_right(row: dict[str, Any]) -> list[str]:
    truth = _truth(row)
    return [WRONG.format(wrong=int(truth) + 1), RIGHT.format(right=truth)]


def test_every_installed_interaction_is_registered_once() -> None:
    ids = skyrl.register_interactions()
    assert ids == [skyrl.PREFIX + name for name in get_registry().names()]
    assert {"interactions/gsm8k", "interactions/weather"} <= set(ids)
    assert skyrl.register_interactions() == ids  # a second call changes nothing
    spec = skyrl_gym.spec("interactions/gsm8k")
    assert spec.entry_point == skyrl.ENTRY_POINT
    assert spec.kwargs == {"interaction": "gsm8k"}


def test_the_deny_list_keeps_an_interaction_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INTERACTIONS_DISABLE", "weather")
    ids = skyrl.register_interactions()
    assert "interactions/gsm8k" in ids
    assert "interactions/weather" not in ids
    assert "interactions/weather" not in skyrl_gym.registry
    with pytest.raises(DisabledError):
        skyrl.register_interactions(["weather"])


def test_the_allow_list_registers_only_what_it_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INTERACTIONS_PLUGINS", "gsm8k")
    assert skyrl.register_interactions() == ["interactions/gsm8k"]


def test_an_id_registered_by_someone_else_is_an_error_naming_it() -> None:
    skyrl_gym.register(id="interactions/gsm8k", entry_point="skyrl_gym.envs.gsm8k.env:GSM8kEnv")
    with pytest.raises(InteractionsError, match=r"GSM8kEnv.*deregister"):
        skyrl.register_interactions(["gsm8k"])


def test_rows_written_by_interactions_data_play_wrong_then_right_concurrently(
    gsm8k_rows: list[dict[str, Any]],
) -> None:
    skyrl.register_interactions()
    jobs = [("interactions/gsm8k", row, _wrong_then_right(row)) for row in gsm8k_rows]
    trajectories = play(jobs, workers=8)
    assert len(trajectories) == 48
    for t in trajectories:
        assert t.rewards == [0.0, 1.0]
        assert t.done
        assert t.observations == [[{"role": "user", "content": FEEDBACK}], []]
        assert t.metadata[-1]["end_reason"] == "terminated"
        assert t.metadata[-1]["final_score"] == 1.0
        assert t.metrics == {"turns": 2, "final_score": 1.0, "error": 0.0}
    assert isinstance(trajectories[0].env, BaseTextEnv)
    assert skyrl.caller_for("gsm8k").interaction.open_sessions == 0


def test_skyrls_own_rows_give_the_ground_truth_from_reward_spec(
    gsm8k_rows: list[dict[str, Any]],
) -> None:
    skyrl.register_interactions(["gsm8k"])
    jobs = []
    for row in gsm8k_rows[:16]:
        own = {
            "prompt": row["prompt"],
            "env_class": "interactions/gsm8k",
            "reward_spec": {"method": "rule", "ground_truth": _truth(row)},
            "data_source": "openai/gsm8k",
        }
        jobs.append(("interactions/gsm8k", own, _wrong_then_right(row)))
    for t in play(jobs):
        assert t.rewards == [0.0, 1.0]


def test_the_turn_limit_ends_the_episode_and_its_last_turn_is_judged(
    gsm8k_rows: list[dict[str, Any]],
) -> None:
    skyrl.register_interactions(["gsm8k"])
    row = gsm8k_rows[0]
    wrong = _wrong_then_right(row)[0]
    (limited,) = play([("interactions/gsm8k", row, [wrong] * 5)], max_turns=2)
    assert limited.rewards == [0.0, 0.0]
    assert limited.done
    assert limited.metadata[-1]["end_reason"] == "max_assistant_turns"
    assert limited.observations[-1] == []
    # The environment's own config wins over the generator's max_turns.
    (own,) = play([("interactions/gsm8k", row, [wrong] * 5)], env_config={"max_turns": 3})
    assert own.rewards == [0.0, 0.0, 0.0]


class AwaitingJudge(SessionInteraction):
    """Awaits before judging, like a judge model: played on the shared loop."""

    seen: list[tuple[str, int]] = []

    def new_session(self, ground_truth: Any = None, **kwargs: Any) -> Any:
        return {"truth": str(ground_truth)}

    async def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        await asyncio.sleep(0.005)
        loop = asyncio.get_running_loop()
        AwaitingJudge.seen.append((threading.current_thread().name, id(loop)))
        correct = messages[-1]["content"].endswith(state["truth"])
        return InteractionResult(correct, "right" if correct else "try again", float(correct))


def test_an_interaction_that_awaits_runs_on_one_loop_shared_by_all_envs() -> None:
    get_registry().add("awaiting_judge", AwaitingJudge)
    skyrl.register_interactions(["awaiting_judge"])
    assert not computes_only(skyrl.caller_for("awaiting_judge").interaction)
    threads_before = threading.active_count()
    rows = [{"prompt": [{"role": "user", "content": f"q{i}"}], "reward_spec": {"ground_truth": i}}
            for i in range(40)]  # fmt: skip
    jobs = [("interactions/awaiting_judge", r, ["#### x", f"#### {i}"]) for i, r in enumerate(rows)]
    trajectories = play(jobs, workers=16)
    assert [t.rewards for t in trajectories] == [[0.0, 1.0]] * 40
    feedback = [{"role": "user", "content": "try again"}]
    assert [t.observations[0] for t in trajectories] == [feedback] * 40
    threads, loops = zip(*AwaitingJudge.seen, strict=True)
    assert set(threads) == {"interactions-shared-loop"}
    assert len(set(loops)) == 1
    # One loop thread at most was added, whatever the number of environments and steps.
    assert threading.active_count() <= threads_before + 1
    assert skyrl.caller_for("awaiting_judge").interaction.open_sessions == 0


def test_an_interaction_that_only_computes_is_judged_inline() -> None:
    assert computes_only(skyrl.caller_for("gsm8k").interaction)


class Exploding(SessionInteraction):
    """Raises on the second turn: only its own episode ends."""

    def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        if sum(m["role"] == "assistant" for m in messages) > 1:
            raise RuntimeError("judge crashed")
        return InteractionResult(False, "again", 0.5)


def test_a_failing_plugin_ends_only_its_episode_with_reward_zero() -> None:
    get_registry().add("exploding", Exploding)
    skyrl.register_interactions(["exploding", "gsm8k"])
    boom = {"prompt": [{"role": "user", "content": "q"}]}
    fine = {"prompt": [{"role": "user", "content": "q"}], "reward_spec": {"ground_truth": "4"}}
    failed, ok = play(
        [
            ("interactions/exploding", boom, ["a", "b", "c"]),
            ("interactions/gsm8k", fine, ["#### 4"]),
        ]
    )
    assert failed.rewards == [0.5, 0.0]
    assert failed.done
    assert failed.metadata[-1]["end_reason"] == "error"
    assert "judge crashed" in failed.metadata[-1]["error"]
    assert failed.metrics["error"] == 1.0
    assert ok.rewards == [1.0]
    assert skyrl.caller_for("exploding").interaction.open_sessions == 0


def test_close_and_dropping_an_env_finalize_an_unfinished_episode() -> None:
    skyrl.register_interactions(["gsm8k"])
    interaction = skyrl.caller_for("gsm8k").interaction
    row = {"reward_spec": {"ground_truth": "4"}, "max_turns": 5}
    env = skyrl_gym.make("interactions/gsm8k", env_config={}, extras=row)
    env.init([{"role": "user", "content": "q"}])
    env.step("#### 3")
    assert interaction.open_sessions == 1
    env.close()
    env.close()
    assert interaction.open_sessions == 0
    dropped = skyrl_gym.make("interactions/gsm8k", env_config={}, extras=row)
    dropped.init([{"role": "user", "content": "q"}])
    assert interaction.open_sessions == 0  # the session starts with the first step
    dropped.step("#### 3")
    assert interaction.open_sessions == 1
    del dropped
    gc.collect()
    # The release runs on the shared loop: wait for it there.
    from interactions_core.integrations import shared_loop

    asyncio.run_coroutine_threadsafe(asyncio.sleep(0), shared_loop()).result(5)
    assert interaction.open_sessions == 0


def test_a_step_after_the_end_says_so() -> None:
    skyrl.register_interactions(["gsm8k"])
    env = skyrl_gym.make("interactions/gsm8k", extras={"reward_spec": {"ground_truth": "4"}})
    env.init([])
    assert env.step("#### 4")["done"]
    with pytest.raises(InteractionsError, match="after the episode ended"):
        env.step("#### 4")


def test_bad_rows_and_options_say_what_to_do() -> None:
    skyrl.register_interactions(["gsm8k"])
    other = {"extra_info": {"interaction_kwargs": {"name": "weather"}}}
    with pytest.raises(SampleError, match="set env_class to 'interactions/weather'"):
        skyrl_gym.make("interactions/gsm8k", extras=other)
    with pytest.raises(SampleError, match="must be a mapping"):
        skyrl_gym.make("interactions/gsm8k", extras={"interaction_kwargs": ["gsm8k"]})
    with pytest.raises(ValueError, match=r"unknown option.*'max_turn'.*max_turns, timeout"):
        skyrl_gym.make("interactions/gsm8k", env_config={"max_turn": 3}, extras={})
    with pytest.raises(ValueError, match="positive whole number"):
        skyrl_gym.make("interactions/gsm8k", extras={"max_turns": 0})


class Hanging(SessionInteraction):
    """Never answers: the environment's ``timeout`` ends its episode."""

    async def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        await asyncio.sleep(60)


def test_a_hanging_interaction_times_out_and_ends_only_its_episode() -> None:
    get_registry().add("hanging", Hanging)
    skyrl.register_interactions(["hanging"])
    row = {"prompt": [{"role": "user", "content": "q"}]}
    (t,) = play([("interactions/hanging", row, ["a", "b"])], env_config={"timeout": 0.2})
    assert t.rewards == [0.0]
    assert t.done
    assert t.metadata[0]["end_reason"] == "error"
    assert "timed out after 0.2 s" in t.metadata[0]["error"]
    assert skyrl.caller_for("hanging").interaction.open_sessions == 0
