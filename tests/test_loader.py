"""``loader.py``: from a config to interaction instances, all-or-nothing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from core_helpers import write

from interactions_core import ConfigError, load_config, load_interactions
from interactions_core.registry import Registry


def test_named_plugin_alias_and_options(acme, tmp_path):
    path = write(
        tmp_path,
        """
        default: acme_hard
        interaction:
          - name: acme
          - name: acme_hard
            plugin: acme
            config: {level: 3, mode: b}
        """,
    )
    loaded = load_config(path)
    assert loaded.default == "acme_hard"
    interactions = loaded.instantiate()
    assert list(interactions) == ["acme", "acme_hard"]
    hard = interactions["acme_hard"]
    assert hard.name == "acme_hard" and hard.config == {
        "level": 3,
        "mode": "b",
        "name": "acme_hard",
    }
    assert (hard.settings.level, hard.settings.mode) == (3, "b")


def test_nothing_is_instantiated_when_any_entry_is_invalid(acme, tmp_path):
    path = write(
        tmp_path,
        """
        interaction:
          - name: acme
          - name: nope_not_installed
        """,
    )
    with pytest.raises(ConfigError):
        load_interactions(path)
    assert sys.modules["acme_cfg"].CREATED == []


def test_mapping_sources_and_in_memory_registries():
    from interactions_core import BaseInteraction, InteractionResult

    class Hello(BaseInteraction):
        async def generate_response(self, instance_id, messages, **kwargs):
            return InteractionResult(True, "hi", 1.0)

    registry = Registry.from_classes({"hello": Hello})
    got = load_interactions(
        {"interaction": [{"name": "hello"}, {"name": "h2", "plugin": "hello"}]}, registry=registry
    )
    assert sorted(got) == ["h2", "hello"]


def test_a_class_name_that_fails_the_lifecycle_check_is_refused_at_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = tmp_path / "tests_doc_claims_mod.py"
    module.write_text(
        "class Legacy:\n"
        "    def __init__(self, config):\n"
        "        self.config = config\n"
        "    def generate_response(self, instance_id, messages):\n"  # sync, no **kwargs
        "        return True, '', 0.0, {}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    path = tmp_path / "verl.yaml"
    path.write_text("interaction:\n  - class_name: tests_doc_claims_mod.Legacy\n")
    with pytest.raises(Exception, match="generate_response"):
        load_config(path)  # checked when loaded, before anything is instantiated
