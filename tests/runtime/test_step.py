"""The one episode step (``runtime.step``): its decision, and that every front end plays it."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest
from runtime_fakes import Recorder, sample

from interactions_core import InteractionResult
from interactions_core.cli import main
from interactions_core.runtime import END_REASONS, EpisodeLoop, ReplayPolicy
from interactions_core.runtime.step import (
    MAX_ASSISTANT_TURNS,
    MAX_USER_TURNS,
    RESPONSE_LENGTH,
    TERMINATED,
    conclude_turn,
    end_reason,
)
from interactions_core.serve import Hub, ServedEpisode


@pytest.mark.parametrize(
    ("args", "limits", "expected"),
    [
        ((False, 1, 0), {}, None),
        ((True, 1, 0), {"max_assistant_turns": 1, "max_user_turns": 0}, TERMINATED),
        ((False, 1, 0), {"out_of_room": True, "max_assistant_turns": 1}, RESPONSE_LENGTH),
        ((False, 2, 1), {"max_assistant_turns": 2, "max_user_turns": 1}, MAX_ASSISTANT_TURNS),
        ((False, 1, 0), {"max_assistant_turns": 2}, None),
        ((False, 2, 1), {"max_user_turns": 1}, MAX_USER_TURNS),
        ((False, 2, 1), {"max_user_turns": 2}, None),
    ],
)
def test_the_end_is_decided_in_the_documented_order(
    args: tuple[bool, int, int], limits: dict[str, Any], expected: str | None
) -> None:
    assert end_reason(*args, **limits) == expected


def test_the_end_reasons_are_the_records_strings() -> None:
    assert END_REASONS == (
        "terminated",
        "max_assistant_turns",
        "max_user_turns",
        "exhausted",
        "single_turn",
        "error",
        "cancelled",
    )


def test_feedback_is_appended_only_when_the_episode_goes_on() -> None:
    messages = [{"role": "assistant", "content": "a"}]
    going_on = InteractionResult(False, "try again", 0.0)
    assert conclude_turn(going_on, messages, 1, 0) is None
    assert messages[-1] == {"role": "user", "content": "try again"}
    messages.append({"role": "assistant", "content": "b"})
    assert conclude_turn(going_on, messages, 2, 1, max_user_turns=1) == MAX_USER_TURNS
    assert messages[-1] == {"role": "assistant", "content": "b"}
    assert conclude_turn(InteractionResult(True, "done", 1.0), messages, 3, 1) == TERMINATED
    assert messages[-1] == {"role": "assistant", "content": "b"}


LIMITS = [
    {},
    {"max_assistant_turns": 2},
    {"max_user_turns": 1},
    {"max_user_turns": 2, "max_assistant_turns": 3},
]


async def _served(replies: list[str], limits: dict[str, Any]) -> dict[str, Any]:
    hub = Hub(
        {"rec": Recorder()},
        max_turns=limits.get("max_assistant_turns"),
        max_user_turns=limits.get("max_user_turns"),
    )
    episode = ServedEpisode(hub)
    observation = await episode.start([{"role": "user", "content": "question"}], {"name": "rec"})
    scores = []
    for reply in replies:
        observation = await episode.step(reply)
        scores.append(observation["reward"])
        if observation["done"]:
            break
    assert hub.tracker.open == 0 or not observation["done"]
    return {"messages": observation["messages"], "scores": scores, "done": observation["done"]}


@pytest.mark.parametrize("limits", LIMITS)
async def test_serve_and_the_loop_play_the_same_step(limits: dict[str, Any]) -> None:
    replies = ["a", "b", "c", "d"]
    loop = EpisodeLoop(ReplayPolicy(), {"rec": Recorder()}, **limits)
    record = await loop.run(sample(replies, kwargs={"name": "rec"}))
    served = await _served(replies, limits)
    assert served["messages"] == record.messages
    assert served["scores"] == record.scores
    assert served["done"] == (record.end_reason != "exhausted")
    if record.end_reason != "exhausted":
        # the last turn a limit allows is judged, and no feedback follows the end
        assert len(record.scores) == record.turns
        assert record.messages[-1]["role"] == "assistant"


async def test_serve_honours_max_user_turns() -> None:
    hub = Hub({"rec": Recorder()}, max_user_turns=1)
    assert hub.describe()["max_user_turns"] == 1
    assert "max 1 user turns" in hub.summary()
    episode = ServedEpisode(hub)
    await episode.start("question", {"name": "rec", "answer": "never"})
    first = await episode.step("a")
    assert not first["done"] and first["messages"][-1] == {"role": "user", "content": "wrong #1"}
    second = await episode.step("b")
    assert second["done"] and second["reward"] == 0.0 and second["final_score"] == 0.5
    assert second["messages"][-1] == {"role": "assistant", "content": "b"}
    assert second["feedback"] == "wrong #2"  # the judged turn's feedback is reported, not appended
    assert hub.tracker.open == 0


def test_serve_refuses_a_bad_max_user_turns() -> None:
    with pytest.raises(ValueError, match="max_user_turns"):
        Hub({"rec": Recorder()}, max_user_turns=0)


def test_interactions_serve_passes_max_user_turns_to_the_hub(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import interactions_core.cli.serve as serve_command

    served: list[Hub] = []
    fake_app = types.ModuleType("interactions_core.serve.app")
    fake_app.run = lambda hub, *args, **kwargs: served.append(hub)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "interactions_core.serve.app", fake_app)
    monkeypatch.setattr(serve_command, "_require_openenv", lambda: None)
    config = tmp_path / "c.yaml"
    config.write_text("interaction:\n  - name: gsm8k\n")
    assert main(["serve", str(config), "--max-turns", "3", "--max-user-turns", "1"]) == 0
    assert (served[0].max_turns, served[0].max_user_turns) == (3, 1)
