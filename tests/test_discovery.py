"""``_discovery.py``: what is installed, read from metadata of real generated distributions."""

from __future__ import annotations

import sys

import pytest
from core_helpers import GOOD, by_name

from interactions_core.errors import PluginLoadError
from interactions_core.registry import Registry

GROUP = "interactions_core.interactions"


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


def test_names_with_colons_are_rejected_at_listing(make_dist):
    make_dist("acme-tasks", "1", {GROUP: {"acme:odd": "acme_mod:Acme"}})
    [entry] = [e for e in Registry.from_environment().entries() if e.name == "acme:odd"]
    assert entry.status == "broken" and "':'" in entry.error
