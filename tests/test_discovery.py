"""Discovery and the registry against real generated distributions."""

from __future__ import annotations

import sys

import pytest

from interactions_core.errors import (
    ConflictError,
    DisabledError,
    PluginLoadError,
    UnknownInteractionError,
)
from interactions_core.registry import Registry

GROUP = "interactions_core.interactions"

GOOD = """
from interactions_core import BaseInteraction, InteractionResult

IMPORTED = True

class Acme(BaseInteraction):
    async def generate_response(self, instance_id, messages, **kwargs):
        return InteractionResult(True, "ok", 1.0)
"""


def by_name(registry: Registry, name: str):
    return [e for e in registry.entries() if e.name == name]


def test_listing_reads_metadata_without_importing(make_dist, forget_modules):
    make_dist("acme-tasks", "2.1", {GROUP: {"acme": "acme_mod:Acme"}}, {"acme_mod": GOOD})
    registry = Registry.from_environment()
    [entry] = by_name(registry, "acme")
    assert (entry.distribution, entry.version, entry.target) == (
        "acme-tasks",
        "2.1",
        "acme_mod:Acme",
    )
    assert entry.status == "ok" and entry.error is None
    assert "acme_mod" not in sys.modules
    cls = registry.load("acme")
    assert "acme_mod" in sys.modules and cls.__name__ == "Acme"


def test_malformed_entry_point_is_broken_and_others_survive(make_dist, forget_modules):
    make_dist("acme-bad", "1", {GROUP: {"acme_bad": "not a target!", "acme_mod_only": "acme_x"}})
    make_dist("acme-tasks", "1", {GROUP: {"acme": "acme_mod:Acme"}}, {"acme_mod": GOOD})
    registry = Registry.from_environment()
    [bad] = by_name(registry, "acme_bad")
    [module_only] = by_name(registry, "acme_mod_only")
    assert bad.status == module_only.status == "broken"
    assert "malformed" in bad.error and "module:Class" in module_only.error
    with pytest.raises(PluginLoadError, match="broken"):
        registry.load("acme_bad")
    assert registry.load("acme").__name__ == "Acme"


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


def test_same_distribution_twice_on_sys_path_is_not_a_conflict(
    make_dist, tmp_path, monkeypatch, forget_modules
):
    make_dist("acme-tasks", "1", {GROUP: {"acme": "acme_mod:Acme"}}, {"acme_mod": GOOD})
    mirror = tmp_path / "lib64"
    mirror.mkdir()
    make_dist("acme-tasks", "1", {GROUP: {"acme": "acme_mod:Acme"}}, where=mirror)
    monkeypatch.syspath_prepend(str(mirror))
    registry = Registry.from_environment()
    assert [e.status for e in by_name(registry, "acme")] == ["ok"]


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


@pytest.mark.parametrize(
    ("allow", "deny", "expected"),
    [
        (None, None, {"acme": "ok", "acme_b": "ok"}),
        ("", None, {"acme": "disabled", "acme_b": "disabled"}),
        ("acme", None, {"acme": "ok", "acme_b": "disabled"}),
        ("acme-b-dist", None, {"acme": "disabled", "acme_b": "ok"}),
        ("acme,acme_b", "acme_b", {"acme": "ok", "acme_b": "disabled"}),
        (None, "acme-tasks", {"acme": "disabled", "acme_b": "ok"}),
    ],
)
def test_allow_and_deny_lists(make_dist, monkeypatch, allow, deny, expected):
    make_dist("acme-tasks", "1", {GROUP: {"acme": "acme_mod:Acme"}})
    make_dist("acme-b-dist", "1", {GROUP: {"acme_b": "acme_modb:Acme"}})
    if allow is not None:
        monkeypatch.setenv("INTERACTIONS_PLUGINS", allow)
    if deny is not None:
        monkeypatch.setenv("INTERACTIONS_DISABLE", deny)
    registry = Registry.from_environment()
    got = {e.name: e.status for e in registry.entries() if e.name in expected}
    assert got == expected
    for name, status in expected.items():
        if status == "disabled":
            with pytest.raises(DisabledError):
                registry.load(name)


def test_names_with_colons_are_rejected_at_listing(make_dist):
    make_dist("acme-tasks", "1", {GROUP: {"acme:odd": "acme_mod:Acme"}})
    [entry] = [e for e in Registry.from_environment().entries() if e.name == "acme:odd"]
    assert entry.status == "broken" and "':'" in entry.error


def test_in_memory_registry_needs_no_installation():
    from interactions_core import BaseInteraction, InteractionResult

    class Echo(BaseInteraction):
        async def generate_response(self, instance_id, messages, **kwargs):
            return InteractionResult(True, messages[-1]["content"], 1.0)

    registry = Registry.from_classes({"echo": Echo})
    instance = registry.create("echo", {})
    assert isinstance(instance, Echo) and instance.name == "echo"
