"""The hub and served episodes without a server (no OpenEnv needed), and the CLI's checks."""

from __future__ import annotations

import gc
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from interactions_core import InteractionResult
from interactions_core.cli import main
from interactions_core.cli.serve import host_warning, is_loopback
from interactions_core.errors import InteractionsError
from interactions_core.integrations.trl import environment_factory
from interactions_core.serve import (
    AuthError,
    BadActionError,
    BadResetError,
    CapacityError,
    Hub,
    ServedEpisode,
    ServeError,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_plugins import Logged

CONFIG = {"default": "gsm8k", "interaction": [{"name": "gsm8k"}, {"name": "weather"}]}


def hub(**options: object) -> Hub:
    return Hub.from_config(CONFIG, **options)  # type: ignore[arg-type]


async def test_an_episode_follows_verls_multi_turn_semantics() -> None:
    h = hub()
    episode = ServedEpisode(h)
    first = await episode.start("what is 9 * 2?", {"ground_truth": "18"})
    assert first == {
        "messages": [{"role": "user", "content": "what is 9 * 2?"}],
        "feedback": "",
        "turn": 0,
        "final_score": None,
        "interaction": "gsm8k",
        "reward": None,
        "done": False,
    }
    wrong = await episode.step("#### 17")
    assert (wrong["reward"], wrong["done"], wrong["turn"]) == (0.0, False, 1)
    assert wrong["messages"][-1]["role"] == "user"  # the feedback follows a turn that goes on
    right = await episode.step("#### 18")
    assert (right["reward"], right["done"], right["final_score"]) == (1.0, True, 1.0)
    assert right["messages"][-1] == {"role": "assistant", "content": "#### 18"}
    assert h.tracker.open == 0 and h.tracker.finalized == 1
    with pytest.raises(BadActionError, match="the episode ended after turn 2"):
        await episode.step("#### 18")


async def test_capacity_routing_token_and_drain() -> None:
    h = hub(max_sessions=1, token="t")
    a, b = ServedEpisode(h), ServedEpisode(h)
    with pytest.raises(AuthError, match="no token was given"):
        await a.start(None, {"name": "gsm8k"})
    with pytest.raises(BadResetError, match="did you mean 'weather'"):
        await a.start(None, {"name": "wether"}, "t")
    with pytest.raises(BadResetError, match="interaction_kwargs must be a mapping"):
        await a.start(None, ["gsm8k"], "t")
    with pytest.raises(BadResetError, match=r"prompt\[0\] must be a chat message"):
        await a.start(["hi"], None, "t")
    await a.start(None, {"name": "gsm8k", "ground_truth": "1"}, "t")
    with pytest.raises(CapacityError, match="1 of 1 sessions are open"):
        await b.start(None, {"name": "gsm8k"}, "t")
    assert h.open_sessions == 1 and h.tracker.open == 1
    assert await h.drain() == 1
    assert h.open_sessions == 0 and h.tracker.open == 0
    assert h.describe()["accepting"] is True
    await h.wait_idle(0.1)
    assert h.describe()["accepting"] is False  # /interactions says what resets will hear
    with pytest.raises(CapacityError, match="shutting down"):
        await b.start(None, {"name": "gsm8k"}, "t")


async def test_a_plugin_error_ends_the_episode_and_finalizes(tmp_path: Path) -> None:
    events = tmp_path / "events.log"
    h = Hub({"logged": Logged({"name": "logged", "log": str(events)})}, default="logged")
    episode = ServedEpisode(h)
    await episode.start(None, {"ground_truth": "x"})
    with pytest.raises(ServeError, match=r"the plugin exploded\. The episode is over"):
        await episode.step("boom")
    assert events.read_text().split() == [
        "start",
        episode.instance_id,
        "finalize",
        episode.instance_id,
    ]
    assert h.tracker.open == 0 and h.busy == 0


def test_no_name_and_no_default_is_a_teaching_error() -> None:
    h = Hub.from_config({"interaction": [{"name": "gsm8k"}]})
    with pytest.raises(BadResetError, match="no 'name' and no default interaction is set"):
        h.route({"ground_truth": "1"})


def test_host_checks() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.org")
    assert host_warning("127.0.0.1", None) is None
    warning = host_warning("0.0.0.0", None)
    assert warning is not None and "no authentication" in warning
    assert "INTERACTIONS_SERVE_TOKEN" in warning
    guarded = host_warning("0.0.0.0", "t")
    assert guarded is not None and "shared token" in guarded


def test_serve_without_openenv_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "openenv" else real(name, *a)
    )
    config = tmp_path / "c.yaml"
    config.write_text("interaction:\n  - name: gsm8k\n")
    assert main(["serve", str(config)]) == 1
    err = capsys.readouterr().err
    assert "pip install 'openenv>=0.10' 'uvicorn>=0.24'" in err
    assert "Traceback" not in err


def test_serve_with_a_bad_port_is_a_clear_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("interaction:\n  - name: gsm8k\n")
    assert main(["serve", str(config), "--port", "70000"]) == 1
    assert "--port must be between 0 and 65535" in capsys.readouterr().err


def test_trl_adapter_in_process_finalizes_every_session() -> None:
    factory = environment_factory(CONFIG)
    h = factory._backend.hub
    env = factory()
    tools = [n for n in vars(type(env).__mro__[1]) if not n.startswith("_")]
    assert sorted(tools) == ["answer", "get_reward", "reset"]  # TRL's tools: answer only
    row = {
        "prompt": [{"role": "user", "content": "9*2?"}],
        "interaction_kwargs": {"name": "gsm8k", "ground_truth": "18"},
    }
    assert env.reset(**row) is None
    assert env.answer("#### 17").startswith("Your response is incorrect")
    assert env.answer("#### 18") == "Your response is correct!"
    with pytest.raises(InteractionsError, match="the episode is over"):
        env.answer("#### 18")
    assert env.get_reward() == 1.0
    # verl's layout (extra_info.interaction_kwargs) works too; unfinished episodes end at
    # get_reward with the last turn's score.
    env.reset(prompt=None, extra_info={"interaction_kwargs": {"ground_truth": "18"}})
    env.answer("#### 1")
    assert h.tracker.open == 1
    assert env.get_reward() == 0.0
    assert h.tracker.open == 0
    # A dropped instance has its session finalized.
    env.reset(**row)
    assert h.tracker.open == 1
    del env
    gc.collect()
    deadline = time.monotonic() + 10
    while h.tracker.open and time.monotonic() < deadline:  # finalized on the adapter's loop
        time.sleep(0.01)
    assert h.tracker.open == 0 and h.tracker.started == h.tracker.finalized == 3


def test_trl_factory_needs_a_config_or_a_url() -> None:
    with pytest.raises(InteractionsError, match="exactly one of CONFIG"):
        environment_factory()
    from interactions_core.integrations.trl import InteractionsEnvironment

    with pytest.raises(InteractionsError, match="use environment_factory"):
        InteractionsEnvironment()


class StartFails(Logged):
    async def start_interaction(self, instance_id: str | None = None, **kwargs: object) -> str:
        raise LookupError("no such problem")


async def test_a_failed_start_starts_no_episode_and_holds_no_slot() -> None:
    h = Hub({"fails": StartFails({"name": "fails"})}, default="fails", max_sessions=1)
    episode = ServedEpisode(h)
    with pytest.raises(ServeError, match="raised LookupError: no such problem; no episode"):
        await episode.start()
    assert h.open_sessions == 0 and h.tracker.open == 0
    with pytest.raises(BadActionError, match="no episode has been started"):
        await episode.step("x")


async def test_an_episodes_conversation_is_bounded_and_the_bound_ends_it_cleanly() -> None:
    """Every observation carries the whole conversation: its size has a limit."""
    h = hub(max_episode_chars=200)
    episode = ServedEpisode(h)
    with pytest.raises(BadResetError, match=r"the prompt holds 201 characters, over .* 200"):
        await episode.start("x" * 201, {"ground_truth": "18"})
    assert h.tracker.started == 0
    await episode.start("what is 9 * 2?", {"ground_truth": "18"})  # 14 characters
    wrong = await episode.step("#### 17")
    held = sum(len(m["content"]) for m in wrong["messages"])
    assert held == episode.chars  # the prompt, the answer and the feedback
    with pytest.raises(BadActionError, match=r"over this server's limit of 200") as refused:
        await episode.step("#### 18" + " " * (200 - held))
    assert "session finalized" in str(refused.value)
    assert h.tracker.open == 0 and h.tracker.finalized == 1
    with pytest.raises(BadActionError, match="call reset"):
        await episode.step("#### 18")
    # A reset starts afresh within the bound, and the default bound is generous.
    again = await episode.start("what is 9 * 2?", {"ground_truth": "18"})
    assert again["turn"] == 0 and episode.chars == 14
    assert hub().max_episode_chars == 2_000_000


async def test_messages_count_against_the_bound_whatever_their_text(tmp_path: Path) -> None:
    """400,000 empty messages (a 12 MB reset) counted no characters: the server held
    360 MB for the session and sent 11 MB at every step. A role, or a field beside
    the content, as long as the bound was not counted either."""
    h = hub()
    episode = ServedEpisode(h)
    empty = [{"role": "user", "content": ""}] * 400_000
    with pytest.raises(BadResetError, match=r"400,000 messages, over .* limit of 7,812 "):
        await episode.start(empty, {"ground_truth": "18"})
    with pytest.raises(BadResetError, match=r"role is 15,000,000 characters long"):
        await episode.start([{"role": "u" * 15_000_000, "content": ""}], {"ground_truth": "1"})
    named = [{"role": "user", "content": "", "name": "n" * 2_000_000}]
    with pytest.raises(BadResetError, match=r"holds 2,000,004 characters, over"):
        await episode.start(named, {"ground_truth": "1"})
    assert h.tracker.started == 0 and h.open_sessions == 0
    # Turns add messages too: under a small bound, 256 messages at most.
    small = verbose_hub(1_000, tmp_path / "log")
    episode = ServedEpisode(small)
    await episode.start([{"role": "user", "content": ""}] * 250, {"size": 0})
    for _ in range(3):
        await episode.step("")
    assert len(episode.messages) == 256
    with pytest.raises(BadActionError, match=r"past 256 messages, this server's limit"):
        await episode.step("")
    assert small.tracker.open == 0 and small.open_sessions == 0


class Verbose(Logged):
    """Feedback of ``size`` characters to every answer; the answer "stop" ends the episode."""

    async def generate_response(
        self, instance_id: str, messages: list[dict[str, Any]], **kwargs: Any
    ) -> InteractionResult:
        answer = messages[-1]["content"]
        return InteractionResult(answer == "stop", "f" * int(kwargs["size"]), 0.5)


def verbose_hub(limit: int, log: Path) -> Hub:
    plugin = Verbose({"name": "verbose", "log": str(log)})
    return Hub({"verbose": plugin}, default="verbose", max_episode_chars=limit)


def observed(observation: dict[str, Any]) -> int:
    """The characters of text an observation carries: its messages and its feedback."""
    return sum(len(m["content"]) for m in observation["messages"]) + len(observation["feedback"])


async def test_a_plugins_feedback_counts_against_the_bound_twice_as_it_is_sent(
    tmp_path: Path,
) -> None:
    """The feedback is in the conversation and in ``feedback``: the observation is bounded."""
    log = tmp_path / "log"
    h = verbose_hub(200, log)
    episode = ServedEpisode(h)
    await episode.start("qq", {"size": 97})  # 2 + 4 + 97 in the conversation, 97 again
    fits = await episode.step("fits")
    assert observed(fits) == 200 and episode.chars == 103 and not fits["done"]
    await episode.start("qq", {"size": 98})  # one character more: over
    with pytest.raises(ServeError, match=r"would take this step's observation to 202 ") as over:
        await episode.step("over")
    message = str(over.value)
    assert "the interaction's feedback (98 characters)" in message
    assert "over this server's limit of 200 (--max-episode-chars)" in message
    assert "the episode is over and its session finalized; call reset" in message
    assert h.tracker.open == 0 and h.tracker.finalized == 2 and h.open_sessions == 0
    assert log.read_text().count("finalize") == 2
    assert all(len(m["content"]) < 98 for m in episode.messages)  # not kept either
    with pytest.raises(BadActionError, match="the episode ended with an error: call reset"):
        await episode.step("again")


async def test_a_huge_feedback_ends_the_episode_even_on_its_last_turn(tmp_path: Path) -> None:
    """The last turn's feedback is not appended, but ``feedback`` carries it all the same."""
    h = verbose_hub(1_000, tmp_path / "log")
    episode = ServedEpisode(h)
    await episode.start("q", {"size": 995})  # 1 + 4 + 995: exactly the limit
    last = await episode.step("stop")
    assert last["done"] and observed(last) == 1_000 and last["final_score"] == 0.25
    await episode.start("q", {"size": 50_000_000})  # 50 MB of feedback, as reported
    with pytest.raises(ServeError, match=r"feedback \(50,000,000 characters\).* of 1,000 "):
        await episode.step("stop")
    assert h.tracker.open == 0 and h.tracker.finalized == 2
    assert not episode.done and episode.final_score is None
    await episode.start("q", {"size": 5})  # the connection plays on
    assert (await episode.step("stop"))["done"]


async def test_a_plugin_editing_the_conversation_changes_only_its_copy() -> None:
    """What the client is sent (and counted against the bound) is the conversation itself."""
    from odd_plugins import Editor

    h = Hub({"editor": Editor({"name": "editor"})}, default="editor", max_episode_chars=100_000)
    episode = ServedEpisode(h)
    await episode.start("the prompt", {})
    for turn in range(1, 4):  # each step appends 90,000 characters to the plugin's list
        seen = await episode.step("answer")
        assert seen["messages"][0] == {"role": "user", "content": "the prompt"}
        assert [m["content"] for m in seen["messages"][1:]] == ["answer", "go on"] * turn
        assert observed(seen) == episode.chars + len("go on") < 100_000


def nested(depth: int, kind: str) -> object:
    """A value ``depth`` lists (or objects) deep, built without recursion."""
    value: object = "x"
    for _ in range(depth):
        value = [value] if kind == "list" else {"a": value}
    return value


@pytest.mark.parametrize("depth", [900, 5_000, 100_000])
@pytest.mark.parametrize("kind", ["list", "dict"])
@pytest.mark.parametrize("where", ["content", "extra", "interaction_kwargs"])
async def test_a_reset_nested_too_deeply_is_refused_before_any_session(
    depth: int, kind: str, where: str
) -> None:
    """A deep value would start a session whose first observation cannot be serialised."""
    h = hub(max_sessions=1)
    episode = ServedEpisode(h)
    deep = nested(depth, kind)
    message: dict[str, object] = {"role": "user", "content": "what is 9 * 2?"}
    kwargs: dict[str, object] = {"ground_truth": "18"}
    if where == "content":
        message["content"] = deep
    elif where == "extra":
        message["extra"] = deep
    else:
        kwargs["deep"] = deep
    what = "interaction_kwargs" if where == "interaction_kwargs" else r"prompt\[0\]"
    with pytest.raises(BadResetError, match=rf"^{what} nests .* more than 100 levels deep"):
        await episode.start([message], kwargs)
    assert (h.tracker.started, h.open_sessions) == (0, 0)
    first = await episode.start("what is 9 * 2?", {"ground_truth": "18"})  # the one slot is free
    assert first["turn"] == 0 and h.open_sessions == 1


async def test_a_prompt_at_the_nesting_limit_is_played() -> None:
    h = hub()
    episode = ServedEpisode(h)
    deepest = {"role": "user", "content": nested(100, "list")}  # the message, then 100 lists
    first = await episode.start([deepest], {"ground_truth": "18", "extra": nested(100, "dict")})
    assert first["messages"] == [deepest] and h.open_sessions == 1
    with pytest.raises(BadResetError, match="more than 100 levels"):
        await episode.start([{"role": "user", "content": nested(101, "list")}], {})
    assert h.open_sessions == 1  # a refused reset leaves the episode in progress playing
    await episode.end()
    assert h.open_sessions == 0
