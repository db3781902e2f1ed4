"""The weather interaction through verl's async lifecycle."""

from __future__ import annotations

import asyncio
from importlib import metadata
from typing import Any

import attrs
import pytest
from interactions_weather import WeatherConfig, WeatherInteraction

from interactions_core import InteractionResult
from interactions_core.errors import ConfigError, SessionError

FOUND = "Thank you for your weather query!"
MISSING = "Please use the weather tool to get the weather information."

QUESTION = {"role": "user", "content": "What is the weather in Paris?"}
CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [{"type": "function", "function": {"name": "get_weather"}}],
}
TOOL = {"role": "tool", "content": '{"temperature": 21}'}
ANSWER = {"role": "assistant", "content": "It is 21 degrees in Paris."}


@pytest.fixture
def weather() -> WeatherInteraction:
    return WeatherInteraction({"name": "weather"})


class Untouchable(dict):  # type: ignore[type-arg]
    """A message that fails the test if the interaction looks at it."""

    def get(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the scan went past the last tool message")

    def __getitem__(self, key: Any) -> Any:
        raise AssertionError("the scan went past the last tool message")


async def test_tool_message_found(weather: WeatherInteraction) -> None:
    sid = await weather.start_interaction("s")
    result = await weather.generate_response(sid, [QUESTION, CALL, TOOL, ANSWER])
    assert isinstance(result, InteractionResult)
    should_terminate, content, score, extra = result
    assert (should_terminate, content, score) == (True, FOUND, 1.0)
    assert type(score) is float
    assert dict(extra) == {}
    assert await weather.calculate_score(sid) == 1.0


@pytest.mark.parametrize(
    "messages",
    [[], [QUESTION], [QUESTION, ANSWER], [QUESTION, CALL, {"role": "user", "content": "tool"}]],
)
async def test_no_tool_message(weather: WeatherInteraction, messages: list[dict[str, Any]]) -> None:
    sid = await weather.start_interaction("s")
    should_terminate, content, score, extra = await weather.generate_response(sid, messages)
    assert (should_terminate, content, score) == (True, MISSING, 0.0)  # also stops
    assert type(score) is float
    assert dict(extra) == {}
    assert type(await weather.calculate_score(sid)) is float


async def test_scan_stops_at_the_last_tool_message(weather: WeatherInteraction) -> None:
    earlier = Untouchable(role="tool", content="first")
    messages: list[dict[str, Any]] = [QUESTION, earlier, ANSWER, CALL, TOOL, ANSWER, QUESTION]
    sid = await weather.start_interaction("s")
    assert (await weather.generate_response(sid, messages)).score == 1.0


async def test_tool_text_equal_to_verls_sentinel_still_counts(weather: WeatherInteraction) -> None:
    sid = await weather.start_interaction("s")
    messages: list[dict[str, Any]] = [QUESTION, CALL, {"role": "tool", "content": "no tool call"}]
    assert await weather.generate_response(sid, messages) == (True, FOUND, 1.0, {})


async def test_no_turn_can_change_another_turns_extra(weather: WeatherInteraction) -> None:
    a = await weather.start_interaction("a")
    b = await weather.start_interaction("b")
    first = await weather.generate_response(a, [TOOL])
    second = await weather.generate_response(b, [TOOL])
    assert first == second and isinstance(first.extra, dict)
    with pytest.raises(TypeError, match="read-only"):
        first.extra["note"] = 1
    assert (await weather.generate_response(a, [])).extra == {}


async def test_calculate_score_tracks_the_last_turn(weather: WeatherInteraction) -> None:
    sid = await weather.start_interaction("s")
    assert await weather.calculate_score(sid) == 0.0
    await weather.generate_response(sid, [QUESTION, CALL, TOOL])
    assert await weather.calculate_score(sid) == 1.0
    await weather.generate_response(sid, [QUESTION])
    score = await weather.calculate_score(sid)
    assert (score, type(score)) == (0.0, float)


async def test_sessions_are_isolated(weather: WeatherInteraction) -> None:
    async def episode(sid: str, messages: list[dict[str, Any]]) -> float:
        await weather.start_interaction(sid)
        await asyncio.sleep(0)
        await weather.generate_response(sid, messages)
        await asyncio.sleep(0)
        return await weather.calculate_score(sid)

    scores = await asyncio.gather(episode("a", [QUESTION, TOOL]), episode("b", [QUESTION]))
    assert scores == [1.0, 0.0]


async def test_session_lifecycle(weather: WeatherInteraction) -> None:
    sid = await weather.start_interaction("s", name="weather", query="Paris?")
    with pytest.raises(SessionError):
        await weather.start_interaction("s")
    assert weather.open_sessions == 1
    await weather.finalize_interaction(sid)
    assert weather.open_sessions == 0
    with pytest.raises(SessionError):
        await weather.generate_response(sid, [TOOL])
    await weather.finalize_interaction(sid)  # harmless


async def test_respond_path(weather: WeatherInteraction) -> None:
    sid = await weather.start_interaction("s")
    state = weather.session_state(sid)
    assert not hasattr(state, "__dict__")
    assert await weather.respond(state, [TOOL]) == (True, FOUND, 1.0, {})
    assert await weather.score(state) == 1.0


def test_config() -> None:
    assert WeatherInteraction().name == "weather"
    assert WeatherInteraction({"name": "tools"}).settings == WeatherConfig()
    assert attrs.fields(WeatherConfig) == ()


def test_options_are_rejected() -> None:
    with pytest.raises(ConfigError, match=r"unknown option 'city'.*takes no options"):
        WeatherInteraction({"name": "weather", "city": "Paris"})


def test_registered_under_the_entry_point_group() -> None:
    try:
        dist = metadata.distribution("interactions-weather")
    except metadata.PackageNotFoundError:
        pytest.skip("interactions-weather is not installed")
    (entry_point,) = [
        ep for ep in dist.entry_points if ep.group == "interactions_core.interactions"
    ]
    expected = ("weather", "interactions_weather:WeatherInteraction")
    assert (entry_point.name, entry_point.value) == expected
    assert entry_point.load() is WeatherInteraction
    assert dist.version == "0.1.0"


def test_the_writing_plugins_guide_shows_this_code_line_for_line() -> None:
    """docs/writing-plugins.md walks through this interaction; its copy cannot drift."""
    from pathlib import Path

    import interactions_weather.interaction as module

    guide = Path(__file__).resolve().parents[3] / "docs" / "writing-plugins.md"
    if not guide.is_file():
        pytest.skip("the guide is not beside this plugin (an installed copy)")
    source = Path(module.__file__).read_text(encoding="utf-8")
    code = source[source.index("from typing import Any") :].rstrip("\n")
    assert f"```python\n{code}\n```" in guide.read_text(encoding="utf-8")
