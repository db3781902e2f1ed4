"""``runtime.episode.choose``: the one rule by which a sample or a reset finds its interaction."""

from __future__ import annotations

import pytest

from interactions_core.errors import SampleError
from interactions_core.runtime.episode import choose

INTERACTIONS = {"gsm8k": "G", "weather": "W"}


def test_the_name_picks_and_the_kwargs_are_a_fresh_copy() -> None:
    kwargs = {"name": "weather", "city": "Paris"}
    name, interaction, copy = choose(INTERACTIONS, kwargs, None)
    assert (name, interaction, copy) == ("weather", "W", kwargs) and copy is not kwargs


def test_no_name_takes_the_default_and_says_so_in_the_kwargs() -> None:
    assert choose(INTERACTIONS, {"ground_truth": "7"}, "gsm8k") == (
        "gsm8k",
        "G",
        {"ground_truth": "7", "name": "gsm8k"},
    )
    assert choose(INTERACTIONS, None, "gsm8k")[0] == "gsm8k"


def test_bad_kwargs_raise_the_callers_error_naming_the_choices() -> None:
    with pytest.raises(SampleError, match=r"did you mean .gsm8k.\? Configured: gsm8k, weather"):
        choose(INTERACTIONS, {"name": "gsm9k"}, None, error=SampleError)
    with pytest.raises(KeyError, match="not served here; did you mean 'weather'"):
        choose(INTERACTIONS, {"name": "wether"}, None, error=KeyError, served=True)
    with pytest.raises(ValueError, match="no 'name' and no default interaction is set"):
        choose(INTERACTIONS, {}, None)
    with pytest.raises(ValueError, match="must be a mapping"):
        choose(INTERACTIONS, ["gsm8k"], None)
