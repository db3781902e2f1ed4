"""Validation of implementations against the lifecycle spec, and the base classes."""

from __future__ import annotations

import pytest

from interactions_core import (
    BaseInteraction,
    InteractionResult,
    SessionError,
    SessionInteraction,
)
from interactions_core.base import derive_name
from interactions_core.errors import InteractionValidationError
from interactions_core.validation import validate_interaction_class


class VerlStyle(BaseInteraction):
    """Written exactly the verl way: own dict keyed by instance_id."""

    def __init__(self, config):
        super().__init__(config)
        self._instance_dict = {}

    async def start_interaction(self, instance_id=None, ground_truth=None, **kwargs):
        self._instance_dict[instance_id] = {"ground_truth": ground_truth}
        return instance_id

    async def generate_response(self, instance_id, messages, **kwargs):
        ok = messages[-1]["content"] == self._instance_dict[instance_id]["ground_truth"]
        return ok, "right" if ok else "wrong", 1.0 if ok else 0.0, {}

    async def calculate_score(self, instance_id, **kwargs):
        return 0.0

    async def finalize_interaction(self, instance_id, **kwargs):
        del self._instance_dict[instance_id]


def errors_of(cls) -> str:
    with pytest.raises(InteractionValidationError) as info:
        validate_interaction_class(cls, "interaction 'x' (dist 1.0, mod:Cls)")
    return str(info.value)


def test_verl_style_class_is_valid():
    validate_interaction_class(VerlStyle, "verl")


def test_missing_generate_response_is_named_with_its_signature():
    class Empty(BaseInteraction):
        pass

    message = errors_of(Empty)
    assert "interaction 'x' (dist 1.0, mod:Cls)" in message
    assert "async def generate_response(self, instance_id, messages, **kwargs)" in message


def test_sync_method_and_missing_kwargs_are_both_reported():
    class Bad(BaseInteraction):
        def generate_response(self, instance_id, messages):
            return True, "", 0.0, {}

    message = errors_of(Bad)
    assert "not async" in message and "**kwargs" in message


def test_wrong_parameter_names_and_required_extras():
    class Bad(BaseInteraction):
        async def generate_response(self, request_id, msgs, **kwargs):
            return True, "", 0.0, {}

        async def calculate_score(self, instance_id, mode, **kwargs):
            return 0.0

        async def start_interaction(self, instance_id, **kwargs):
            return instance_id

    message = errors_of(Bad)
    assert "the first must be (instance_id, messages)" in message
    assert "extra parameter 'mode' without a default" in message
    assert "instance_id a default" in message


def test_misspelled_method_is_suggested():
    class Typo(BaseInteraction):
        async def generate_response(self, instance_id, messages, **kwargs):
            return True, "", 0.0, {}

        async def finalise_interaction(self, instance_id, **kwargs):
            return None

    assert "'finalise_interaction' looks like a misspelling of 'finalize_interaction'" in (
        errors_of(Typo)
    )


def test_duck_typed_class_must_have_all_four_methods():
    class Duck:
        def __init__(self, config):
            pass

        async def generate_response(self, instance_id, messages, **kwargs):
            return True, "", 0.0, {}

    message = errors_of(Duck)
    for method in ("start_interaction", "calculate_score", "finalize_interaction"):
        assert f"{method} is missing" in message


def test_init_must_accept_config():
    class NoConfig(BaseInteraction):
        def __init__(self):
            super().__init__({})

        async def generate_response(self, instance_id, messages, **kwargs):
            return True, "", 0.0, {}

    assert "__init__(self, config)" in errors_of(NoConfig)


def test_session_interaction_must_implement_respond():
    class NoRespond(SessionInteraction):
        pass

    assert "respond is not implemented" in errors_of(NoRespond)


def test_not_a_class():
    assert "expected an interaction class" in errors_of(42)


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


def test_result_coercion_checks_types():
    assert InteractionResult.coerce((True, "x", 1, None)) == (True, "x", 1.0, {})
    assert type(InteractionResult.coerce([False, "x", 0.5, {}]).score) is float
    for bad, word in (
        ((1, "x", 1.0, {}), "should_terminate"),
        ((True, None, 1.0, {}), "content"),
        ((True, "x", "1", {}), "score"),
        ((True, "x"), "got tuple"),
        ((True, "x", 1.0, []), "extra"),
    ):
        with pytest.raises(TypeError, match=word):
            InteractionResult.coerce(bad)
    for score in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(ValueError, match="finite"):
            InteractionResult.coerce((True, "x", score, {}))
