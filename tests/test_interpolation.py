"""``_config.py``: verl's OmegaConf interpolations found, and refused without omegaconf.

The base test install has no omegaconf (it comes with verl), so resolving is
covered by the verl sessions; here the scan, the pass-through and the refusal.
"""

from __future__ import annotations

import sys

import pytest

from interactions_core._yaml import find_interpolation, resolve_interpolations
from interactions_core.errors import ConfigError


def test_the_first_interpolation_is_found_with_its_key_path() -> None:
    data = {"interaction": [{"name": "a", "config": {"url": "${oc.env:JUDGE_URL}", "n": 3}}]}
    assert find_interpolation(data) == (
        ("interaction", 0, "config", "url"),
        "${oc.env:JUDGE_URL}",
    )
    assert find_interpolation(["$ {not one}", {"k": "$x"}, 7, None]) is None
    assert find_interpolation("${top}") == ((), "${top}")


def test_a_config_without_interpolation_is_returned_as_it_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "omegaconf", None)  # importing it would fail
    data = {"interaction": [{"name": "a", "config": {"price": "$5"}}]}
    assert resolve_interpolations(data, "c.yaml") is data


def test_without_omegaconf_an_interpolation_is_refused_by_field(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "omegaconf", None)
    data = {"interaction": [{"name": "a", "config": {"url": "${..base}"}}]}
    with pytest.raises(ConfigError) as info:
        resolve_interpolations(data, "c.yaml:4")
    [problem] = info.value.problems
    assert problem.startswith("c.yaml:4: interaction.0.config.url uses OmegaConf interpolation")
    assert "'${..base}'" in problem and "pip install omegaconf" in problem


def test_no_interpolation_hides_behind_many_values() -> None:
    """The scan gave up after 200,000 values and said "none": six lines of aliases made
    222,000, and `${oc.env:JUDGE_URL}` reached the plugin as literal text."""
    level: object = [0] * 10
    for _ in range(4):
        level = [level] * 10
    data = {"pad": [level] * 10, "url": "${oc.env:JUDGE_URL}"}  # "url" is scanned last
    assert find_interpolation(data) == (("url",), "${oc.env:JUDGE_URL}")
