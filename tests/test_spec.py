"""One spec: the validator's rules and the base classes both come from ``_spec.py``."""

from __future__ import annotations

import inspect

from interactions_core import _spec as validation
from interactions_core._interaction import BaseInteraction, SessionInteraction
from interactions_core._spec import InteractionSpec, SessionSpec


def positional(func: object) -> list[tuple[str, object]]:
    params = list(inspect.signature(func).parameters.values())[1:]  # type: ignore[arg-type]
    return [(p.name, p.default) for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]


def test_the_validator_reads_its_rules_from_the_spec() -> None:
    assert validation.LIFECYCLE == (
        "start_interaction",
        "generate_response",
        "calculate_score",
        "finalize_interaction",
    )
    for spec in (InteractionSpec, SessionSpec):
        for name, func in vars(spec).items():
            if inspect.isfunction(func):
                names = tuple(n for n, _ in positional(func))
                assert validation._SPEC_PARAMS[name] == names
    assert set(validation._SPEC_PARAMS) == {*validation.LIFECYCLE, "respond", "score"}


def test_what_the_spec_writes_async_must_be_async() -> None:
    """The lifecycle is ``async def`` in the spec; ``respond``/``score`` are plain there."""
    assert set(validation.LIFECYCLE) == validation._MUST_AWAIT
    assert validation.expected_signature("respond") == (
        "def respond(self, state, messages, **kwargs) (plain or async)"
    )

    class Plain(SessionInteraction):
        def respond(self, state, messages, **kwargs):
            return True, "", 1.0, {}

        def score(self, state, **kwargs):
            return 1.0

    validation.validate_interaction_class(Plain, "plain")
    problems = validation._signature_problems("calculate_score", Plain.respond)
    assert "is not async (write 'async def')" in problems


def test_a_changed_spec_changes_what_is_accepted(monkeypatch) -> None:
    """Not a table of its own: edit the spec's signature and the validator follows."""

    class Spec(InteractionSpec):
        async def calculate_score(self, instance_id, mode="final", **kwargs):  # type: ignore[override]
            raise NotImplementedError

    monkeypatch.setattr(validation, "_SPEC", validation._spec_methods(Spec, SessionSpec))
    assert validation.expected_signature("calculate_score") == (
        "async def calculate_score(self, instance_id, mode='final', **kwargs)"
    )

    class NoDefault(BaseInteraction):
        async def generate_response(self, instance_id, messages, **kwargs):
            return True, "", 0.0, {}

        async def calculate_score(self, instance_id, mode, **kwargs):
            return 0.0

    problems = validation._signature_problems("calculate_score", NoDefault.calculate_score)
    assert any("must give mode a default" in p for p in problems)


def test_the_base_classes_implement_the_spec_signatures() -> None:
    for name, func in vars(InteractionSpec).items():
        if inspect.iscoroutinefunction(func):
            for base in (BaseInteraction, SessionInteraction):
                assert positional(getattr(base, name)) == positional(func), (base, name)
    for name in ("respond", "score"):
        assert positional(getattr(SessionInteraction, name)) == positional(
            getattr(SessionSpec, name)
        )


def test_the_root_exports_the_one_spec() -> None:
    import interactions_core

    assert interactions_core.InteractionSpec is InteractionSpec
    assert interactions_core.PluginSpec.__module__ == InteractionSpec.__module__
