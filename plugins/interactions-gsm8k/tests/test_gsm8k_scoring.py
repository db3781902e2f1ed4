"""The pure scoring functions: extraction rules, ground-truth normalisation, scores."""

from __future__ import annotations

from typing import Any

import pytest
from interactions_gsm8k import compute_score, extract_answer, normalize_ground_truth
from interactions_gsm8k.scoring import TAIL_CHARS


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("She makes 9 * 2 = $18.\n#### 18", "18"),
        ("#### 1,234", "1234"),
        ("#### 1,000,000", "1000000"),
        ("#### -5", "-5"),
        ("#### 2.5", "2.5"),
        ("first #### 17 then #### 18", "18"),  # the last marker wins
        ("#### 18 and later a stray 99", "18"),  # numbers after the marker are ignored
        ("#### 18.", "18."),  # strict keeps what follows the marker verbatim
        ("#### $18", None),  # the number must follow "#### " directly
        ("####18", None),
        ("The answer is 18", None),
        ("", None),
    ],
)
def test_strict_extraction(text: str, expected: str | None) -> None:
    assert extract_answer(text, "strict") == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The answer is 18", "18"),
        ("The answer is 18.", "18"),  # trailing period dropped
        ("It costs 1,234.", "1234"),  # thousands separators dropped
        ("Total: $1,000,000", "1000000"),
        ("The change is -7 degrees", "-7"),
        ("about 3.5 hours", "3.5"),
        ("18, 19, and finally 20.", "20"),
        ("A: 18\nDone.", "18"),  # a lone "." is not a number
        ("#### 42", "42"),
        ("values ..., -., and ,", None),  # punctuation-only tokens are not numbers
        ("no numbers here", None),
        ("", None),
    ],
)
def test_flexible_extraction(text: str, expected: str | None) -> None:
    assert extract_answer(text, "flexible") == expected


@pytest.mark.parametrize("method", ["strict", "flexible"])
def test_only_the_tail_is_searched(method: Any) -> None:
    padding = "x" * TAIL_CHARS
    assert extract_answer("#### 18 " + padding, method) is None
    # The same answer just inside the window is found.
    inside = "#### 18" + "x" * (TAIL_CHARS - len("#### 18"))
    assert len(inside) == TAIL_CHARS
    assert extract_answer("#### 99 " * 50 + inside, method) == "18"


def test_strict_marker_cut_by_the_window_is_not_found() -> None:
    text = "#### 18" + "x" * (TAIL_CHARS - 2)  # the tail starts at "18", without the marker
    assert extract_answer(text, "strict") is None
    assert extract_answer(text, "flexible") == "18"


def test_default_method_is_strict() -> None:
    assert extract_answer("The answer is 18") is None
    assert extract_answer("#### 18") == "18"


def test_unknown_method_is_an_error() -> None:
    with pytest.raises(ValueError, match="strict, flexible"):
        extract_answer("#### 18", "fuzzy")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("18", "18"),
        ("  1,234 \n", "1234"),
        ("18.0", "18.0"),  # strings are taken as written: no numeric equivalence
        (18, "18"),
        (-3, "-3"),
        (18.0, "18"),
        (1e6, "1000000"),
        (2.5, "2.5"),
        (None, None),
    ],
)
def test_normalize_ground_truth(value: Any, expected: str | None) -> None:
    assert normalize_ground_truth(value) == expected


@pytest.mark.parametrize("value", [True, [18], {"answer": 18}, b"18"])
def test_normalize_ground_truth_rejects_other_types(value: Any) -> None:
    with pytest.raises(TypeError, match="ground_truth must be a str, int or float"):
        normalize_ground_truth(value)


@pytest.mark.parametrize("ground_truth", ["18", 18, 18.0, " 18 "])
def test_compute_score_accepts_every_ground_truth_type(ground_truth: Any) -> None:
    assert compute_score("so the answer is\n#### 18", ground_truth) == 1.0
    assert compute_score("so the answer is\n#### 19", ground_truth) == 0.0


def test_compute_score_compares_strings() -> None:
    assert compute_score("#### 18", "18.0") == 0.0
    assert compute_score("#### 18.0", 18) == 0.0
    assert compute_score("#### 1,234", "1,234") == 1.0


def test_compute_score_methods() -> None:
    text = "The total is 1,234."
    assert compute_score(text, 1234, "strict") == 0.0
    assert compute_score(text, 1234, "flexible") == 1.0


@pytest.mark.parametrize(
    ("text", "ground_truth"),
    [("#### 18", 18), ("#### 19", 18), ("", 18), ("#### 18", None), ("nothing", "18")],
)
@pytest.mark.parametrize("method", ["strict", "flexible"])
def test_compute_score_is_always_a_float(text: str, ground_truth: Any, method: Any) -> None:
    assert type(compute_score(text, ground_truth, method)) is float
