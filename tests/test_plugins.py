"""``plugins.py``: hook plugins asked to register interactions, each isolated from the others."""

from __future__ import annotations

import pytest
from core_helpers import PLUGINS, suite_dist

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
