"""``_spec.py``: implementations checked against the lifecycle spec, with clear errors."""

from __future__ import annotations

import pytest
from core_helpers import VerlStyle

from interactions_core import BaseInteraction, SessionInteraction
from interactions_core._spec import validate_interaction_class
from interactions_core.errors import ConformanceError, InteractionValidationError
from interactions_core.testing.driver import SessionDriver


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


class SyncRespond:
    def __init__(self, config):
        self.config = config

    async def start_interaction(self, instance_id=None, **kwargs):
        return instance_id or "x"

    def generate_response(self, instance_id, messages, **kwargs):
        return True, "ok", 1.0, {}

    async def calculate_score(self, instance_id, **kwargs):
        return 1.0

    async def finalize_interaction(self, instance_id, **kwargs):
        return None


def test_session_driver_refuses_a_sync_respond_like_the_checker(
    session_driver, interaction_checker
):
    with pytest.raises(ConformanceError) as driver_error:
        session_driver(SyncRespond)
    with pytest.raises(ConformanceError) as checker_error:
        interaction_checker(SyncRespond)
    message = "[spec] generate_response is not async (write 'async def')"
    assert message in str(driver_error.value) and message in str(checker_error.value)
    with pytest.raises(ConformanceError):
        SessionDriver(SyncRespond({}))
