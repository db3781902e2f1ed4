"""Config files: structure, line numbers, names, schemas, all-or-nothing loading."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from interactions_core import ConfigError, load_config, load_interactions
from interactions_core.compat.verl import initialize_interactions_from_config
from interactions_core.registry import Registry

GROUP = "interactions_core.interactions"

ACME = """
import attrs
from typing import Literal
from interactions_core import BaseInteraction, InteractionResult

CREATED = []

@attrs.define
class AcmeConfig:
    level: int = attrs.field(default=1, metadata={"help": "difficulty"})
    mode: Literal["a", "b"] = "a"

class AcmeInteraction(BaseInteraction):
    config_schema = AcmeConfig

    def __init__(self, config):
        super().__init__(config)
        CREATED.append(self.name)

    async def generate_response(self, instance_id, messages, **kwargs):
        return InteractionResult(True, "ok", 1.0)
"""


@pytest.fixture
def acme(make_dist, forget_modules):
    make_dist("acme-tasks", "1", {GROUP: {"acme": "acme_cfg:AcmeInteraction"}}, {"acme_cfg": ACME})


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def problems(source) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config(source)
    return info.value.problems


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


def test_every_problem_is_reported_with_its_line(acme, tmp_path):
    path = write(
        tmp_path,
        """
        interaction:
          - name: acme
            config:
              levle: 2
              mode: c
          - name: acmee
          - plugin: acme
            nmae: x
          - name: acme
        """,
    )
    found = problems(path)
    text = "\n".join(found)
    assert f"{path}:4: interaction[0].config.levle: unknown option 'levle'" in text
    assert "allowed options: level, mode" in text
    assert f"{path}:5: interaction[0].config.mode: option 'mode' must be 'a' | 'b'" in text
    assert (
        f"{path}:6: interaction[1].name: unknown interaction 'acmee'; did you mean 'acme'" in text
    )
    assert f"{path}:8: interaction[2]: unknown key 'nmae'" in text and "did you mean 'name'" in text
    assert "Duplicate interaction name 'acme' found" in text


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


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "the config is empty"),
        ("# only a comment\n", "the config is empty"),
        ("- a\n- b\n", "must be a mapping"),
        ("default: x\n", "missing the 'interaction:' list"),
        ("interaction: {name: x}\n", "must be a list"),
        ("interaction:\n  - 3\n", "each entry must be a mapping"),
        ("interaction:\n  - name: ''\n", "must be a non-empty string"),
        ("interaction:\n  - name: 5\n", "must be a non-empty string"),
        ("interaction:\n  - config: {}\n", "needs a 'name'"),
        ("interaction:\n  - name: a\n    config: [1]\n", "config must be a mapping"),
        ("interaction:\n  - name: a\n    plugin: b\n    class_name: c.D\n", "not both"),
        ("interactions: []\n", "did you mean 'interaction'"),
        ("interaction: [\n", "invalid YAML"),
        ("interaction: []\ninteraction: []\n", "duplicate key 'interaction'"),
        ("interaction: []\ndefault: 7\n", "'default' must be"),
    ],
)
def test_structural_errors(tmp_path, text, needle):
    path = write(tmp_path, text)
    assert any(needle in p for p in problems(path)), problems(path)


def test_empty_interaction_list_is_valid(tmp_path):
    assert load_interactions(write(tmp_path, "interaction: []\n")) == {}


def test_default_must_name_a_configured_entry(acme, tmp_path):
    path = write(tmp_path, "default: acm\ninteraction:\n  - name: acme\n")
    [problem] = problems(path)
    assert f"{path}:1:" in problem and "did you mean 'acme'" in problem


def test_python_tags_are_refused_without_running_anything(tmp_path):
    marker = tmp_path / "pwned"
    path = write(
        tmp_path,
        f"""
        interaction:
          - name: !!python/object/apply:os.system ["touch {marker}"]
        """,
    )
    [problem] = problems(path)
    assert "tag" in problem and "not allowed" in problem
    assert not marker.exists()


def test_alias_bomb_is_cheap(tmp_path):
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for i in range(1, 30):
        prev = f"*a{i - 1}"
        lines.append(f"a{i}: &a{i} [{', '.join([prev] * 9)}]")
    path = write(tmp_path, "\n".join(lines) + "\ninteraction: []\n")
    assert any("unknown top-level key 'a0'" in p for p in problems(path))


def test_files_that_are_not_text(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_bytes(b"\xff\xfe\x00garbage")
    assert "UTF-8" in problems(path)[0]
    assert "cannot read config" in problems(tmp_path / "missing.yaml")[0]


VERLISH = """
from interactions_core.compat.verl import BaseInteraction

class EchoInteraction(BaseInteraction):
    def __init__(self, config):
        super().__init__(config)
        self._instance_dict = {}

    async def generate_response(self, instance_id, messages, **kwargs):
        return True, messages[-1]["content"], 1.0, {}
"""


def test_verl_compat_loader_accepts_dotted_class_paths(tmp_path, site_dir, forget_modules):
    (site_dir / "verlish_mod.py").write_text(VERLISH)
    path = write(
        tmp_path,
        """
        interaction:
          - class_name: verlish_mod.EchoInteraction
            config: {anything: 1}
          - name: second
            class_name: verlish_mod.EchoInteraction
        """,
    )
    interactions = initialize_interactions_from_config(str(path))
    assert list(interactions) == ["echo", "second"]
    assert interactions["echo"].config == {"anything": 1, "name": "echo"}


def test_verl_duplicate_names_are_value_errors(tmp_path, site_dir, forget_modules):
    (site_dir / "verlish_mod.py").write_text(VERLISH)
    path = write(
        tmp_path,
        """
        interaction:
          - class_name: verlish_mod.EchoInteraction
          - name: echo
            class_name: verlish_mod.EchoInteraction
        """,
    )
    with pytest.raises(ValueError, match="Duplicate interaction name 'echo' found"):
        initialize_interactions_from_config(str(path))


def test_failed_dotted_import_leaves_no_half_module(tmp_path, site_dir, forget_modules):
    (site_dir / "verlish_bad.py").write_text("import json\nraise RuntimeError('half')\n")
    path = write(tmp_path, "interaction:\n  - class_name: verlish_bad.X\n")
    [problem] = problems(path)
    assert "half" in problem and f"{path}:2:" in problem
    assert "verlish_bad" not in sys.modules


def test_dotted_paths_can_be_refused(tmp_path, site_dir, monkeypatch, forget_modules):
    (site_dir / "verlish_mod.py").write_text(VERLISH)
    monkeypatch.setenv("INTERACTIONS_NO_CLASS_PATHS", "1")
    path = write(tmp_path, "interaction:\n  - class_name: verlish_mod.EchoInteraction\n")
    assert "refused" in problems(path)[0]
    assert "verlish_mod" not in sys.modules


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
