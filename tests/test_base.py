"""``_interaction.py``: the base classes and the session store behind the API."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from core_helpers import VerlStyle

from interactions_core import InteractionResult, SessionError
from interactions_core._interaction import SessionInteraction, derive_name

LIFECYCLE = ("start_interaction", "generate_response", "calculate_score", "finalize_interaction")


def bundled_classes() -> list[type]:
    from interactions_gsm8k import Gsm8kInteraction
    from interactions_weather import WeatherInteraction

    return [Gsm8kInteraction, WeatherInteraction]


@pytest.mark.parametrize("cls", bundled_classes(), ids=lambda c: c.__name__)
def test_bundled_plugins_use_only_the_documented_api(cls: type) -> None:
    """No lifecycle override and no access to the store: the benchmarks measure this API."""
    assert issubclass(cls, SessionInteraction)
    for method in LIFECYCLE:
        assert getattr(cls, method) is getattr(SessionInteraction, method), method
    source = inspect.getsource(inspect.getmodule(cls))
    assert "_sessions" not in source and "session_state" not in source


class Recorder(SessionInteraction):
    """Records what the base class passes to the documented methods."""

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__(config)
        self.calls: list[tuple[str, Any]] = []

    def new_session(self, **kwargs: Any) -> Any:
        self.calls.append(("new_session", kwargs))
        return kwargs.get("state")

    async def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        self.calls.append(("respond", (state, kwargs)))
        return InteractionResult(False, "again", 0.0)

    async def score(self, state: Any, **kwargs: Any) -> float:
        self.calls.append(("score", (state, kwargs)))
        return 0.5

    def end_session(self, state: Any) -> None:
        self.calls.append(("end_session", state))


async def test_kwargs_reach_the_documented_methods() -> None:
    r = Recorder({})
    sid = await r.start_interaction("s", state="x", query="q")
    await r.generate_response(sid, [], temperature=0.5)
    await r.generate_response(sid, [])
    assert await r.calculate_score(sid, final=True) == 0.5
    await r.calculate_score(sid)
    assert r.calls == [
        ("new_session", {"state": "x", "query": "q"}),
        ("respond", ("x", {"temperature": 0.5})),
        ("respond", ("x", {})),
        ("score", ("x", {"final": True})),
        ("score", ("x", {})),
    ]


async def test_end_session_runs_once_even_for_a_none_state() -> None:
    r = Recorder({})
    await r.start_interaction("s")  # new_session returns None: still a live session
    assert r.open_sessions == 1
    with pytest.raises(SessionError, match="already has a live session"):
        await r.start_interaction("s")
    await r.finalize_interaction("s")
    await r.finalize_interaction("s")
    assert [c for c in r.calls if c[0] == "end_session"] == [("end_session", None)]
    assert r.open_sessions == 0


async def test_unknown_sessions_raise_session_error_everywhere() -> None:
    r = Recorder({"name": "rec"})
    with pytest.raises(SessionError, match="'rec' has no open session 'nope'"):
        await r.generate_response("nope", [])
    with pytest.raises(SessionError, match="call start_interaction first"):
        await r.calculate_score("nope")
    with pytest.raises(SessionError):
        r.session_state("nope")
    await r.finalize_interaction("nope")  # harmless


async def test_fresh_ids_are_drawn_when_none_is_given() -> None:
    r = Recorder({})
    ids = {await r.start_interaction() for _ in range(3)}
    assert len(ids) == 3 and r.open_sessions == 3


class PlainRecorder(Recorder):
    """The same methods written as plain functions: called, not awaited."""

    def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        self.calls.append(("respond", (state, kwargs)))
        return (len(messages) > 1, "plain", 1.0, {})

    def score(self, state: Any, **kwargs: Any) -> float:
        self.calls.append(("score", (state, kwargs)))
        return 0.25


async def test_plain_and_async_documented_methods_are_told_apart_per_class() -> None:
    assert (Recorder._awaits_respond, Recorder._awaits_score) == (True, True)
    assert (PlainRecorder._awaits_respond, PlainRecorder._awaits_score) == (False, False)
    r = PlainRecorder({})
    sid = await r.start_interaction("s", state="x")
    assert await r.generate_response(sid, [{}], temperature=0.5) == (False, "plain", 1.0, {})
    assert await r.generate_response(sid, [{}, {}]) == (True, "plain", 1.0, {})
    assert await r.calculate_score(sid, final=True) == 0.25
    assert ("respond", ("x", {"temperature": 0.5})) in r.calls
    assert ("score", ("x", {"final": True})) in r.calls


async def test_a_session_without_end_session_is_dropped_once() -> None:
    class Quiet(SessionInteraction):
        def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
            return InteractionResult(True, "", 0.0)

    q = Quiet({})
    assert not Quiet._ends_sessions
    await q.start_interaction("a")
    await q.start_interaction("b")
    await q.finalize_interaction("a")
    await q.finalize_interaction("a")  # harmless
    assert q.open_sessions == 1
    with pytest.raises(SessionError):
        await q.generate_response("a", [])


class Counter(SessionInteraction):
    def new_session(self, **kwargs):
        return {"target": kwargs.get("target"), "turns": 0}

    async def respond(self, state, messages, **kwargs):
        state["turns"] += 1
        done = messages[-1]["content"] == state["target"]
        return InteractionResult(done, f"turn {state['turns']}", float(done))

    async def score(self, state, **kwargs):
        return float(state["turns"])


async def test_session_state_is_per_session_and_dropped_on_finalize():
    c = Counter({})
    a = await c.start_interaction("a", target="x")
    b = await c.start_interaction(target="y")
    assert b != a and c.open_sessions == 2
    await c.generate_response(a, [{"role": "assistant", "content": "no"}])
    result = await c.generate_response(a, [{"role": "assistant", "content": "x"}])
    assert result == (True, "turn 2", 1.0, {})
    terminate, content, score, _extra = await c.generate_response(
        b, [{"role": "assistant", "content": "y"}]
    )
    assert (terminate, content, score) == (True, "turn 1", 1.0)
    assert await c.calculate_score(a) == 2.0
    await c.finalize_interaction(a)
    await c.finalize_interaction(a)  # idempotent
    await c.finalize_interaction(b)
    assert c.open_sessions == 0
    with pytest.raises(SessionError, match="no open session"):
        await c.generate_response(a, [])


async def test_reusing_a_live_instance_id_is_an_error():
    c = Counter({"name": "counter"})
    await c.start_interaction("same", target="x")
    with pytest.raises(SessionError, match="already has a live session 'same'"):
        await c.start_interaction("same", target="other")
    assert c.session_state("same")["target"] == "x"  # not overwritten


def test_names_follow_verl():
    assert derive_name("my_pkg.mod.Gsm8kInteraction") == "gsm8k"
    assert derive_name("Weather") == "weather"
    assert derive_name("Interaction") == "interaction"
    assert VerlStyle({"name": "custom"}).name == "custom"
    assert VerlStyle({}).name == "verlstyle"


# -- last_assistant_text -------------------------------------------------------------


def test_last_assistant_text_reads_every_shape_of_content() -> None:
    from interactions_core import last_assistant_text

    assert last_assistant_text([]) == ""
    assert last_assistant_text([{"role": "user", "content": "hi"}]) == ""
    said = [{"role": "assistant", "content": "first"}, {"role": "user", "content": "again"}]
    assert last_assistant_text(said) == "first"  # the last *assistant* message
    assert last_assistant_text([*said, {"role": "assistant", "content": None}]) == ""
    parts = [
        {"type": "text", "text": "The answer "},
        {"type": "image_url", "image_url": {"url": "data:..."}},
        "is ",
        {"text": "#### 42"},  # no type: read as text
        {"type": "text", "text": None},
    ]
    assert last_assistant_text([{"role": "assistant", "content": parts}]) == "The answer is #### 42"
    assert last_assistant_text([{"role": "assistant", "content": 7}]) == ""
    assert last_assistant_text(["not a message", {"role": "assistant", "content": "x"}]) == "x"


async def test_async_new_session_and_end_session_are_awaited() -> None:
    """An async end_session (closing a sandbox) was never awaited, and an async
    new_session handed respond a coroutine as its state; `check` said OK to both."""
    from interactions_core import InteractionResult, SessionInteraction

    ended: list[Any] = []

    class Async(SessionInteraction):
        async def new_session(self, **kwargs: Any) -> dict[str, Any]:
            return {"opened": True, **kwargs}

        async def respond(self, state: Any, messages: Any, **kwargs: Any) -> Any:
            return InteractionResult(True, f"state {sorted(state)}", 1.0)

        async def end_session(self, state: Any) -> None:
            ended.append(state)

    interaction = Async({})
    await interaction.start_interaction("s", ground_truth="4")
    result = await interaction.generate_response("s", [{"role": "assistant", "content": "x"}])
    assert result.content == "state ['ground_truth', 'opened']"
    await interaction.finalize_interaction("s")
    assert ended == [{"opened": True, "ground_truth": "4"}]
