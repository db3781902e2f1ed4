"""Config schemas (in ``_config.py``): ``config:`` checked against its attrs schema, with hints."""

from __future__ import annotations

from typing import Literal

import attrs
import pytest
from core_helpers import check

from interactions_core._config import FieldInfo, build_settings, check_options, describe
from interactions_core.errors import ConfigError


def test_misspelt_option_and_choice_get_a_did_you_mean(tmp_path, capsys):
    lines = check(
        tmp_path,
        capsys,
        "interaction:\n  - name: gsm8k\n    config:\n      metod: strict\n      method: flexibel\n",
    )
    text = "\n".join(lines)
    assert "c.yaml:4: interaction[0].config.metod: unknown option 'metod' (did you mean " in text
    assert "'method'?); allowed options: method" in text
    assert "c.yaml:5: interaction[0].config.method:" in text
    assert "got str 'flexibel'; did you mean 'flexible'?" in text


def test_a_far_off_value_gets_no_guess(tmp_path, capsys):
    text = "\n".join(
        check(tmp_path, capsys, "interaction:\n  - name: gsm8k\n    config: {method: zz}\n")
    )
    assert "got str 'zz'" in text and "did you mean" not in text


# -- the schema functions, without a config file -------------------------------------


@attrs.define
class Judge:
    url: str = attrs.field(metadata={"help": "where the judge listens"})
    mode: Literal["strict", "loose"] = "strict"
    retries: int = 2
    weight: float = 1.0
    tags: list[str] = attrs.Factory(list)
    limit: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.ge(0))
    )


def test_types_are_checked_strictly_where_yaml_could_mislead() -> None:
    assert check_options(Judge, {"url": "u"}) == []
    assert check_options(Judge, {"url": "u", "weight": 2, "limit": None, "tags": ["a"]}) == []
    found = dict(check_options(Judge, {"url": "u", "retries": True, "tags": [1], "weight": "1"}))
    assert found["retries"] == "option 'retries' must be int, got bool True"
    assert found["tags"] == "option 'tags' must be list[str], got list [1]"
    assert found["weight"] == "option 'weight' must be float, got str '1'"


def test_missing_options_and_validators_are_reported() -> None:
    assert check_options(Judge, {}) == [(None, "missing required option 'url'")]
    [(key, problem)] = check_options(Judge, {"url": "u", "limit": -1})
    assert key is None and problem.startswith("invalid options: ") and "limit" in problem


def test_settings_are_built_or_every_problem_is_raised() -> None:
    settings = build_settings(Judge, {"url": "u", "mode": "loose"})
    assert (settings.url, settings.mode, settings.tags) == ("u", "loose", [])
    with pytest.raises(ConfigError) as info:
        build_settings(Judge, {"mode": "lose", "retrys": 3}, owner="judge")
    problems = info.value.problems
    assert len(problems) == 3 and all(p.startswith("interaction 'judge': ") for p in problems)
    assert any("did you mean 'loose'?" in p for p in problems)
    assert any("(did you mean 'retries'?)" in p for p in problems)


def test_describe_gives_readable_types_defaults_and_help() -> None:
    fields = {f.name: f for f in describe(Judge)}
    assert fields["url"] == FieldInfo("url", "str", True, None, "where the judge listens")
    assert fields["mode"].type == "'strict' | 'loose'" and fields["mode"].default == "strict"
    assert fields["tags"].type == "list[str]" and fields["tags"].default == []
    assert fields["limit"].type == "int | None" and not fields["limit"].required
