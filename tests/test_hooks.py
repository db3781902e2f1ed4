"""``_hooks.py``: hook plugins asked to register interactions, each isolated from the others."""

from __future__ import annotations

import sys

import pytest
from core_helpers import PLUGINS, suite_dist

from interactions_core import hookimpl
from interactions_core._hooks import BUILTIN_PLUGIN, PluginHost
from interactions_core._index import plugin_id
from interactions_core._names import Selection
from interactions_core.registry import Registry


def test_registration_hook_contributes_named_interactions(make_dist, forget_modules):
    suite_dist(make_dist)
    registry = Registry.from_environment()
    entries = {e.name: e for e in registry.entries() if e.name.startswith("suite/")}
    assert sorted(entries) == ["suite/alpha", "suite/beta"]
    assert entries["suite/beta"].kind == "hook"
    assert entries["suite/beta"].distribution == "hooky-suite"
    instance = registry.create("suite/beta")
    assert instance.config["task"] == "beta" and instance.name == "suite/beta"


def test_broken_hook_plugin_is_reported_and_isolated(make_dist, forget_modules):
    suite_dist(make_dist)
    make_dist(
        "hooky-broken",
        "1",
        {PLUGINS: {"bad": "hooky_broken"}},
        {"hooky_broken": "raise ImportError('missing dependency foo')\n"},
    )
    registry = Registry.from_environment()
    assert {"suite/alpha", "suite/beta"} <= {e.name for e in registry.entries()}
    [problem] = [p for p in registry.plugin_problems() if p.distribution == "hooky-broken"]
    assert problem.status == "broken" and "missing dependency foo" in problem.error


def test_hook_that_does_not_match_the_spec_is_refused(make_dist, forget_modules):
    make_dist(
        "hooky-wrong",
        "1",
        {PLUGINS: {"wrong": "hooky_wrong"}},
        {
            "hooky_wrong": """
from interactions_core import hookimpl

@hookimpl
def register_interactions(register, surprise):
    pass
"""
        },
    )
    registry = Registry.from_environment()
    [problem] = [p for p in registry.plugin_problems() if p.distribution == "hooky-wrong"]
    assert "surprise" in problem.error


def test_registration_that_raises_fails_loudly_on_use(make_dist, forget_modules):
    make_dist(
        "hooky-raises",
        "1",
        {PLUGINS: {"r": "hooky_raises"}},
        {
            "hooky_raises": """
from interactions_core import hookimpl

@hookimpl
def register_interactions(register):
    raise RuntimeError("registry service down")
"""
        },
    )
    registry = Registry.from_environment()
    [problem] = [p for p in registry.plugin_problems() if p.distribution == "hooky-raises"]
    assert "registry service down" in problem.error
    with pytest.raises(Exception, match="unknown interaction"):
        registry.load("r/anything")


def test_observer_hooks_cost_nothing_when_unimplemented(make_dist, forget_modules):
    suite_dist(make_dist)
    host = Registry.from_environment().plugin_host
    assert host.observer("on_turn") is None


# -- the host itself, with in-process plugin objects ----------------------------------


class Observer:
    """An in-process plugin: registers two names and records every turn it observes."""

    def __init__(self) -> None:
        self.turns: list[tuple[str, int]] = []

    @hookimpl
    def register_interactions(self, register):
        register("obs/a", dict, defaults={"k": 1}, description="first")
        register("obs/b", list)

    @hookimpl
    def on_turn(self, interaction_name, instance_id, turn, messages, result):
        self.turns.append((interaction_name, turn))


class Failing:
    @hookimpl
    def register_interactions(self, register):
        register("fail/a", dict)
        raise RuntimeError("no service")


def test_the_host_collects_registrations_per_plugin_and_calls_observers() -> None:
    host = PluginHost([], Selection())
    assert host.observer("on_turn") is None
    observer = Observer()
    host.register_object(observer, name="local:obs")
    host.register_object(Failing(), name="local:fail")
    collected = host.collect("register_interactions")
    assert list(collected) == ["local:obs"]
    first, second = collected["local:obs"]
    assert (first.name, first.obj, first.defaults, first.description) == (
        "obs/a",
        dict,
        {"k": 1},
        "first",
    )
    assert (
        first.target == "builtins:dict" and second.defaults == {} and second.plugin == "local:obs"
    )
    assert host.error_message("local:fail") == "RuntimeError: no service"
    assert host.collect("register_interactions") is collected  # asked once
    call = host.observer("on_turn")
    assert call is not None
    call(interaction_name="t", instance_id="i", turn=3, messages=[], result=None)
    assert observer.turns == [("t", 3)]


def test_a_disabled_or_broken_record_is_never_imported() -> None:
    records = [
        {"group": PLUGINS, "dist": "fake-off", "name": "off", "value": "fake_off_mod"},
        {"group": PLUGINS, "dist": "fake-bad", "name": "bad", "value": "x", "error": "malformed"},
        {"group": "interactions_core.interactions", "dist": "d", "name": "n", "value": "m:C"},
    ]
    host = PluginHost(records, Selection.from_env({"INTERACTIONS_DISABLE": "fake-off"}))
    assert list(host.records) == ["fake-off:off", "fake-bad:bad"]
    assert host.excluded("fake-off:off") == "disabled by INTERACTIONS_DISABLE"
    assert host.collect("register_interactions") == {}
    assert "fake_off_mod" not in sys.modules
    assert host.error_message("fake-bad:bad") == "ValueError: malformed"
    assert plugin_id(records[0]) == "fake-off:off"


def test_the_core_registers_its_policies_through_the_same_hook() -> None:
    host = PluginHost([], Selection())
    registrations = host.collect("register_policies")
    assert sorted(r.name for r in registrations[BUILTIN_PLUGIN]) == ["human", "openai", "replay"]
    replay = next(r for r in registrations[BUILTIN_PLUGIN] if r.name == "replay")
    assert replay.builtin and replay.distribution == "interactions-core"
    assert replay.target == "interactions_core.runtime.policies.base:ReplayPolicy"
    assert replay.load().__name__ == "ReplayPolicy"  # a target string is imported on use


def test_the_allow_list_never_hides_the_cores_own_policies() -> None:
    registry = Registry.from_classes({}, selection=Selection.from_env({"INTERACTIONS_PLUGINS": ""}))
    assert {p.name: p.status for p in registry.policies()} == {
        "human": "ok",
        "openai": "ok",
        "replay": "ok",
    }
