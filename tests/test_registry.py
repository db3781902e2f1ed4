"""``registry.py``: names resolved to classes on demand: conflicts, errors, in-memory registries."""

from __future__ import annotations

import sys

import pytest
from core_helpers import GOOD, by_name

from interactions_core.errors import (
    ConflictError,
    DisabledError,
    PluginLoadError,
    UnknownInteractionError,
)
from interactions_core.registry import Registry

GROUP = "interactions_core.interactions"


def test_import_failure_is_isolated_and_chained(make_dist, forget_modules):
    make_dist(
        "broken-dist",
        "0.3",
        {GROUP: {"acme_boom": "broken_mod:Boom"}},
        {"broken_mod": "raise RuntimeError('kaboom at import')\n"},
    )
    make_dist("acme-tasks", "1", {GROUP: {"acme": "acme_mod:Acme"}}, {"acme_mod": GOOD})
    registry = Registry.from_environment()
    with pytest.raises(PluginLoadError) as info:
        registry.load("acme_boom")
    assert "broken-dist 0.3" in str(info.value) and "kaboom at import" in str(info.value)
    assert isinstance(info.value.__cause__, RuntimeError)
    assert "broken_mod" not in sys.modules  # no half-initialised module left behind
    checked = {e.name: e for e in registry.check()}
    assert checked["acme_boom"].status == "broken"
    assert "kaboom" in checked["acme_boom"].error
    assert checked["acme"].status == "ok"


def test_conflict_names_both_and_qualified_name_resolves(make_dist, forget_modules):
    make_dist("acme-one", "1", {GROUP: {"acme": "acme_mod:Acme"}}, {"acme_mod": GOOD})
    make_dist("acme-two", "2", {GROUP: {"acme": "acme_mod2:Acme"}}, {"acme_mod2": GOOD})
    registry = Registry.from_environment()
    claims = by_name(registry, "acme")
    assert {e.status for e in claims} == {"conflict"}
    with pytest.raises(ConflictError) as info:
        registry.resolve("acme")
    message = str(info.value)
    assert "acme-one" in message and "acme-two" in message
    assert "'acme-one:acme'" in message and "'acme-two:acme'" in message
    assert registry.resolve("acme-two:acme").distribution == "acme-two"
    assert registry.load("acme_two:acme").__module__ == "acme_mod2"  # normalised dist name


def test_disabling_one_side_resolves_a_conflict(make_dist, monkeypatch, forget_modules):
    make_dist("acme-one", "1", {GROUP: {"acme": "acme_mod:Acme"}}, {"acme_mod": GOOD})
    make_dist("acme-two", "2", {GROUP: {"acme": "acme_mod2:Acme"}}, {"acme_mod2": GOOD})
    monkeypatch.setenv("INTERACTIONS_DISABLE", "acme-two")
    registry = Registry.from_environment()
    assert registry.resolve("acme").distribution == "acme-one"
    with pytest.raises(DisabledError, match="INTERACTIONS_DISABLE"):
        registry.resolve("acme-two:acme")


def test_unknown_name_suggests_close_matches(make_dist):
    make_dist("acme-tasks", "1", {GROUP: {"acme_math": "acme_mod:Acme"}})
    registry = Registry.from_environment()
    with pytest.raises(UnknownInteractionError) as info:
        registry.resolve("acme_mth")
    assert "did you mean 'acme_math'" in str(info.value)
    assert "interactions list" in str(info.value)


def test_in_memory_registry_needs_no_installation():
    from interactions_core import BaseInteraction, InteractionResult

    class Echo(BaseInteraction):
        async def generate_response(self, instance_id, messages, **kwargs):
            return InteractionResult(True, messages[-1]["content"], 1.0)

    registry = Registry.from_classes({"echo": Echo})
    instance = registry.create("echo", {})
    assert isinstance(instance, Echo) and instance.name == "echo"
