"""``options``: the one validator of what a policy or a dataset builder is given."""

from __future__ import annotations

from typing import Any

from interactions_core._classes import check_options, keyword_options


def build(*, city: str, days: int = 3, max_rows: int = 10) -> list[Any]:
    return []


def open_ended(**options: Any) -> list[Any]:
    return []


def test_every_problem_at_once_with_a_did_you_mean() -> None:
    problems = check_options("builder 'w'", build, {"citty": "Paris", "dayz": 2})
    assert problems == [
        "builder 'w': unknown option 'citty'; did you mean 'city'? "
        "(options: 'city', 'days', 'max_rows')",
        "builder 'w': unknown option 'dayz'; did you mean 'days'? "
        "(options: 'city', 'days', 'max_rows')",
        "builder 'w': option 'city' is required",
    ]


def test_defaults_can_provide_required_options_and_render_spells_flags() -> None:
    def flag(key: str) -> str:
        return "--" + key.replace("_", "-")

    problems = check_options(
        "builder 'w'", build, {"max_row": 1}, provided={"city": "Oslo"}, render=flag
    )
    assert problems == [
        "builder 'w': unknown option --max-row; did you mean --max-rows? "
        "(options: --city, --days, --max-rows)"
    ]


def test_a_kwargs_callable_checks_its_own_options() -> None:
    assert check_options("policy 'x'", open_ended, {"anything": 1}) == []
    assert keyword_options(open_ended) == {}
    assert list(keyword_options(build)) == ["city", "days", "max_rows"]
