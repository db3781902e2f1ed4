"""``_config.py``: what a config file may say, each problem reported with its file and line."""

from __future__ import annotations

import pytest
from core_helpers import check, problems, write

from interactions_core import load_interactions


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


def test_an_unknown_default_among_thousands_names_a_few_of_them(tmp_path):
    # The message listed every configured name: 149,000 characters for 20,000.
    gsm8k = "interactions_gsm8k.Gsm8kInteraction"
    entries = "".join(f"  - name: a{i}\n    class_name: {gsm8k}\n" for i in range(3000))
    path = write(tmp_path, "default: nope\ninteraction:\n" + entries)
    [problem] = problems(path)
    assert "is not one of the configured interactions (a0, a1," in problem, problem[:300]
    assert "more)" in problem and len(problem) < 400, len(problem)


def test_misspelt_key_before_a_block_points_at_its_own_line(tmp_path, capsys):
    lines = check(
        tmp_path, capsys, "interaction:\n  - name: gsm8k\n    confg:\n      method: flexible\n"
    )
    (problem,) = [ln for ln in lines if "confg" in ln]
    assert "c.yaml:3:" in problem and "did you mean 'config'?" in problem


RAISING_SCHEMA = """
import attrs
from interactions_core import InteractionResult, SessionInteraction


def boom():
    raise RuntimeError("factory boom")


@attrs.frozen
class Cfg:
    low: int = 0
    high: int = 10
    extra: list = attrs.field(factory=boom)

    def __attrs_post_init__(self):
        assert self.low <= self.high, "low must not exceed high"


class Ranged(SessionInteraction):
    config_schema = Cfg

    async def respond(self, state, messages, **kwargs):
        return InteractionResult(True, "x", 1.0)
"""


@pytest.mark.parametrize(
    ("config", "told"),
    [
        ("{low: 5, high: 1, extra: []}", "options: AssertionError: low must not exceed high"),
        ("{low: 1, high: 5}", "options: RuntimeError: factory boom"),
    ],
)
def test_a_schema_constructor_that_raises_is_the_configs_located_problem(
    tmp_path, monkeypatch, capsys, config, told
):
    """Any exception but TypeError and ValueError from the schema's constructor (an assert
    in __attrs_post_init__, a raising factory) stopped `check` and `run` as "unexpected
    AssertionError ... please report it", naming neither the plugin nor the line."""
    from interactions_core.cli import main

    (tmp_path / "ranged_schema.py").write_text(RAISING_SCHEMA, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    path = tmp_path / "c.yaml"
    path.write_text(
        f"interaction:\n  - name: r\n    class_name: ranged_schema.Ranged\n    config: {config}\n",
        encoding="utf-8",
    )
    data = tmp_path / "d.jsonl"
    data.write_text('{"prompt": [{"role": "user", "content": "q"}]}\n', encoding="utf-8")
    for command in (["check", str(path)], ["run", str(path), "--data", str(data)]):
        assert main(command) == 1
        err = capsys.readouterr().err
        assert f"{path}:4: interaction[0].config: invalid {told}" in err, err
        assert "unexpected" not in err and "please report it" not in err
