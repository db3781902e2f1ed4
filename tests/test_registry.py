"""``registry.py``: names resolved to classes on demand (conflicts, errors, in-memory
catalogs); an interaction's class imported once, validated, failures remembered."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from core_helpers import GOOD, by_name

from interactions_core import hookimpl
from interactions_core._names import Selection
from interactions_core.errors import (
    ConflictError,
    DisabledError,
    InteractionValidationError,
    PluginLoadError,
    UnknownBuilderError,
    UnknownInteractionError,
    UnknownPolicyError,
)
from interactions_core.registry import Registry

GROUP = "interactions_core.interactions"


# -- names resolved to classes on demand -----------------------------------------------


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


# -- a class imported once, validated, failures remembered -----------------------------


def registry_of(site_dir: Path, modules: dict[str, str]) -> Registry:
    """A registry whose entry points are ``name = module:Thing``, one per module."""
    for module, code in modules.items():
        (site_dir / f"{module}.py").write_text(code)
    records = [
        {
            "group": GROUP,
            "name": module,
            "dist": "acme-tasks",
            "version": "1.0",
            "value": f"{module}:Thing",
            "path": "",
            "error": None,
        }
        for module in modules
    ]
    return Registry({"entries": records, "hooks": {}}, Selection(), save_index=False)


THING = (
    "from interactions_core import BaseInteraction\n"
    "class Thing(BaseInteraction):\n"
    "    async def generate_response(self, instance_id, messages, **kwargs):\n"
    "        return True, '', 1.0, {}\n"
)


def test_a_good_class_is_imported_once_and_kept(site_dir: Path, forget_modules: None) -> None:
    registry = registry_of(site_dir, {"acme_good": THING})
    klass = registry.load("acme_good")
    assert klass.__name__ == "Thing" and registry.load("acme_good") is klass
    assert registry.resolve("acme_good")._cls is klass


def test_an_import_failure_marks_the_entry_broken_for_good(
    site_dir: Path, forget_modules: None
) -> None:
    registry = registry_of(site_dir, {"acme_raises": "raise RuntimeError('half installed')\n"})
    with pytest.raises(PluginLoadError) as first:
        registry.load("acme_raises")
    assert isinstance(first.value.__cause__, RuntimeError)  # the original is never lost
    [entry] = registry.entries()
    assert entry.status == "broken" and "half installed" in (entry.error or "")
    (site_dir / "acme_raises.py").write_text(THING)  # fixed on disk: still broken in this registry
    with pytest.raises(PluginLoadError, match=r"^interaction 'acme_raises' .* is broken: "):
        registry.load(entry)


def test_a_class_that_breaks_the_spec_is_broken_with_the_reason(
    site_dir: Path, forget_modules: None
) -> None:
    registry = registry_of(site_dir, {"acme_bare": "class Thing:\n    pass\n"})
    with pytest.raises(InteractionValidationError) as info:
        registry.load("acme_bare")
    [entry] = registry.entries()
    assert entry.status == "broken" and entry.error == str(info.value)


def test_check_reports_a_hanging_import_and_goes_on(site_dir: Path, forget_modules: None) -> None:
    hang = "import threading\nthreading.Event().wait(5)\n"
    registry = registry_of(site_dir, {"acme_hangs": hang, "acme_fine": THING})
    entries = {e.name: e for e in registry.check(import_timeout=0.3)}
    assert entries["acme_fine"].status == "ok"
    assert entries["acme_hangs"].status == "broken"
    assert (entries["acme_hangs"].error or "").startswith(
        "importing it did not finish within 0.3 s (a plugin that hangs at import;"
    )


@pytest.mark.parametrize(
    ("value", "expected"), [(None, 60.0), ("2.5", 2.5), ("soon", 60.0), ("-1", 60.0)]
)
def test_the_import_timeout_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, value: Any, expected: float
) -> None:
    from interactions_core.registry import default_import_timeout as import_timeout

    if value is None:
        monkeypatch.delenv("INTERACTIONS_IMPORT_TIMEOUT", raising=False)
    else:
        monkeypatch.setenv("INTERACTIONS_IMPORT_TIMEOUT", value)
    assert import_timeout() == expected


# -- every kind through the one catalog -------------------------------------------------


class _BuilderPlugin:
    def __init__(self, distribution: str, *names: str) -> None:
        self.distribution, self.names = distribution, names

    @hookimpl
    def register_dataset_builders(self, register: Any) -> None:
        for name in self.names:
            register(name, lambda **options: [], description=f"{name} rows")


def _with_builders(selection: Selection, *plugins: _BuilderPlugin) -> Registry:
    registry = Registry.from_classes({}, selection=selection)
    for plugin in plugins:
        registry.plugin_host.register_object(plugin, name=f"{plugin.distribution}:hooks")
    return registry


def test_builders_follow_the_conflict_rule_and_the_lists() -> None:
    a, b = _BuilderPlugin("acme-a", "rows", "words"), _BuilderPlugin("acme-b", "rows")
    registry = _with_builders(Selection(), a, b)
    status = {b.qualified: b.status for b in registry.builders()}
    assert status == {"acme-a:rows": "conflict", "acme-b:rows": "conflict", "acme-a:words": "ok"}
    with pytest.raises(ConflictError, match="'acme-a:rows' or 'acme-b:rows'"):
        registry.builder("rows")
    assert registry.builder("acme-b:rows").distribution == "acme-b"
    deny = Selection.from_env({"INTERACTIONS_DISABLE": "acme-b"})
    registry = _with_builders(deny, a, b)
    assert registry.builder("rows").distribution == "acme-a"
    with pytest.raises(DisabledError, match="disabled by INTERACTIONS_DISABLE"):
        registry.builder("acme-b:rows")
    with pytest.raises(UnknownBuilderError, match=r"^unknown dataset builder 'word'; did you mean"):
        registry.builder("word")


def test_a_disabled_policy_is_reported_as_disabled() -> None:
    class Plugin:
        @hookimpl
        def register_policies(self, register: Any) -> None:
            register("echo", object)

    deny = Selection.from_env({"INTERACTIONS_DISABLE": "acme-echo"})
    registry = Registry.from_classes({}, selection=deny)
    registry.plugin_host.register_object(Plugin(), name="acme-echo:plug")
    with pytest.raises(DisabledError, match=r"policy 'echo' .* disabled by INTERACTIONS_DISABLE"):
        registry.policy("echo")
    with pytest.raises(UnknownPolicyError, match="1 installed policy is disabled"):
        registry.policy("nothing")


def test_create_builds_the_instance_the_loader_way() -> None:
    from interactions_core import BaseInteraction, InteractionResult

    class Keyword(BaseInteraction):
        def __init__(self, config: dict[str, Any]) -> None:
            super().__init__(config)

        async def generate_response(self, instance_id, messages, **kwargs):
            return InteractionResult(True, "", 1.0)

    registry = Registry.from_classes({"kw": Keyword})
    assert registry.create("kw", {"x": 1}).config == {"x": 1, "name": "kw"}
