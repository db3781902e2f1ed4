"""``_hook_index.py``: what hook plugins register, kept in the index and relearnt when needed."""

from __future__ import annotations

import sys

import pytest
from core_helpers import PLUGINS, SUITE, suite_dist

from interactions_core.errors import PluginLoadError
from interactions_core.registry import Registry


def test_hook_registrations_are_cached_so_warm_listing_imports_nothing(make_dist, forget_modules):
    suite_dist(make_dist)
    assert "suite/alpha" in {e.name for e in Registry.from_environment().entries()}
    del sys.modules["hooky_suite"]
    warm = Registry.from_environment()
    assert "suite/alpha" in {e.name for e in warm.entries()}
    assert "hooky_suite" not in sys.modules
    warm.load("suite/alpha")  # loading imports it on demand
    assert "hooky_suite" in sys.modules


def test_disabled_hook_plugin_is_never_imported(make_dist, monkeypatch, forget_modules):
    suite_dist(make_dist)
    monkeypatch.setenv("INTERACTIONS_DISABLE", "hooky-suite")
    registry = Registry.from_environment()
    assert not [e for e in registry.entries() if e.name.startswith("suite/")]
    assert "hooky_suite" not in sys.modules


def test_loading_a_stale_hook_name_explains_how_to_refresh(make_dist, forget_modules):
    suite_dist(make_dist)
    registry = Registry.from_environment()
    registry.entries()
    registry.index["hooks"]["hooky-suite:suite"]["names"].append(["suite/gone", "x:y", None])
    registry._entries = None
    with pytest.raises(PluginLoadError, match="cache clear"):
        registry.load("suite/gone")


def test_allow_listing_one_hook_name_loads_its_plugin(make_dist, monkeypatch, forget_modules):
    suite_dist(make_dist)
    Registry.from_environment().entries()  # the index learns what the plugin registers
    del sys.modules["hooky_suite"]
    monkeypatch.setenv("INTERACTIONS_PLUGINS", "suite/alpha")
    registry = Registry.from_environment()
    status = {e.name: e.status for e in registry.entries() if e.name.startswith("suite/")}
    assert status == {"suite/alpha": "ok", "suite/beta": "disabled"}
    assert registry.create("suite/alpha").config["task"] == "alpha"
    with pytest.raises(Exception, match="INTERACTIONS_PLUGINS"):
        registry.create("suite/beta")


# -- the incremental index: hook results outlive unrelated installs ------------------


def reimported(module: str) -> bool:
    """Forget ``module``, rebuild the registry, and tell whether listing imported it again."""
    sys.modules.pop(module, None)
    names = {e.name for e in Registry.from_environment().entries()}
    assert "suite/alpha" in names or "suite/gamma" in names, names
    return module in sys.modules


def bump(site_dir):
    """Make the next change of the site folder visible even within one mtime tick."""
    import os

    os.utime(site_dir, ns=(1, 1))


@pytest.mark.usefixtures("fresh_cache")
def test_an_unrelated_install_does_not_rerun_hook_plugins(make_dist, site_dir, forget_modules):
    suite_dist(make_dist)
    assert reimported("hooky_suite")  # cold: the hook plugin is asked once
    bump(site_dir)
    make_dist("acme-unrelated", "1", {"interactions_core.interactions": {"u": "acme_u:U"}})
    assert not reimported("hooky_suite")  # the index is rebuilt without asking it again
    registry = Registry.from_environment()
    assert "u" in {e.name for e in registry.entries()}
    assert registry.create("suite/beta").config["task"] == "beta"


@pytest.mark.usefixtures("fresh_cache")
def test_upgrading_the_hook_plugin_relearns_its_names(make_dist, site_dir, forget_modules):
    info = suite_dist_at(make_dist, "0.2", SUITE)
    assert reimported("hooky_suite")
    for f in info.iterdir():
        f.unlink()
    info.rmdir()
    bump(site_dir)
    suite_dist_at(make_dist, "0.3", SUITE.replace('("alpha", "beta")', '("gamma",)'))
    sys.modules.pop("hooky_suite", None)
    names = {e.name for e in Registry.from_environment().entries() if e.name.startswith("suite/")}
    assert names == {"suite/gamma"}


@pytest.mark.usefixtures("fresh_cache")
def test_installing_a_requirement_of_a_hook_plugin_relearns(make_dist, site_dir, forget_modules):
    make_dist(
        "hooky-suite",
        "0.2",
        {PLUGINS: {"suite": "hooky_suite"}},
        {"hooky_suite": SUITE},
        requires=["acme-tasklist>=1", "pytest; extra == 'test'"],
    )
    assert reimported("hooky_suite")
    bump(site_dir)
    make_dist("acme-tasklist", "1.0")
    assert reimported("hooky_suite")  # what it registers may come from that dependency
    bump(site_dir)
    make_dist("acme-other", "1.0")
    assert not reimported("hooky_suite")


def test_no_cache_keeps_no_hook_results(make_dist, monkeypatch, fresh_cache, forget_modules):
    monkeypatch.setenv("INTERACTIONS_NO_CACHE", "1")
    suite_dist(make_dist)
    assert reimported("hooky_suite") and reimported("hooky_suite")
    assert not list(fresh_cache.rglob("hooks-*"))


def suite_dist_at(make_dist, version, code):
    return make_dist(
        "hooky-suite", version, {PLUGINS: {"suite": "hooky_suite"}}, {"hooky_suite": code}
    )


@pytest.mark.usefixtures("fresh_cache")
def test_another_name_of_the_interpreter_reuses_hook_results(
    make_dist, monkeypatch, forget_modules
):
    """``python`` and ``python3`` of one venv have separate indexes but share hook results."""
    suite_dist(make_dist)
    assert reimported("hooky_suite")
    monkeypatch.setattr(sys, "executable", sys.executable + "-other-name")
    assert not reimported("hooky_suite")


@pytest.mark.usefixtures("fresh_cache")
def test_a_corrupt_hook_result_file_is_ignored_and_rewritten(
    make_dist, site_dir, fresh_cache, forget_modules
):
    suite_dist(make_dist)
    assert reimported("hooky_suite")
    [hooks_file] = fresh_cache.rglob("hooks-*.json")
    for garbage in (b"", b"\x00\xff not json", hooks_file.read_bytes()[:7]):
        hooks_file.write_bytes(garbage)
        bump(site_dir)
        make_dist(f"acme-x{len(garbage)}", "1")  # the index is rebuilt: results are needed
        assert reimported("hooky_suite")  # unreadable results: the plugin is asked again
    bump(site_dir)
    make_dist("acme-last", "1")
    assert not reimported("hooky_suite")  # and the rewritten file is trusted again


@pytest.mark.usefixtures("fresh_cache")
def test_a_failed_hook_plugin_is_retried_after_any_install(make_dist, site_dir, forget_modules):
    """A failure may be fixed by installing something it does not declare: no reuse."""
    make_dist(
        "hooky-needy",
        "1",
        {PLUGINS: {"needy": "hooky_needy"}},
        {"hooky_needy": "import acme_undeclared_dep\n" + SUITE},
    )
    registry = Registry.from_environment()
    [problem] = [p for p in registry.plugin_problems() if p.distribution == "hooky-needy"]
    assert "acme_undeclared_dep" in problem.error
    bump(site_dir)
    make_dist("acme-dep", "1", modules={"acme_undeclared_dep": "VALUE = 1\n"})
    names = {e.name for e in Registry.from_environment().entries()}
    assert {"suite/alpha", "suite/beta"} <= names
