"""Routing messages a dataset author meets: a name not a string, two kwargs that disagree."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from interactions_core.cli import main
from interactions_core.errors import InteractionsWarning, SampleError
from interactions_core.runtime.episode import choose, interaction_kwargs_of

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_CONFIG = str(ROOT / "examples" / "config.yaml")
INTERACTIONS = {"gsm8k": "G", "weather": "W"}
PROMPT = [{"role": "user", "content": "What is 6 * 7?"}]


def test_a_name_in_a_list_is_told_to_be_a_string() -> None:
    with pytest.raises(
        SampleError, match=r"'name' must be a string .*not list \['gsm8k'\]; write 'gsm8k'"
    ):
        choose(INTERACTIONS, {"name": ["gsm8k"]}, None, error=SampleError)
    with pytest.raises(SampleError, match=r"'name' must be a string .*not int 3$"):
        choose(INTERACTIONS, {"name": 3}, None, error=SampleError)


def test_two_kwargs_naming_different_interactions_warn_which_is_used() -> None:
    row = {
        "interaction_kwargs": {"name": "weather"},
        "extra_info": {"interaction_kwargs": {"name": "gsm8k", "ground_truth": "42"}},
    }
    with pytest.warns(
        InteractionsWarning, match=r"using extra_info's \('gsm8k'\), the one verl reads"
    ):
        assert interaction_kwargs_of(row)["name"] == "gsm8k"


def test_two_kwargs_that_agree_do_not_warn() -> None:
    row = {
        "interaction_kwargs": {"name": "gsm8k"},
        "extra_info": {"interaction_kwargs": {"name": "gsm8k"}},
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert interaction_kwargs_of(row) == {"name": "gsm8k"}


def test_the_run_reports_a_listed_name_as_the_episodes_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "rows.jsonl"
    row = {"prompt": PROMPT, "extra_info": {"interaction_kwargs": {"name": ["gsm8k"]}}}
    data.write_text(json.dumps(row) + "\n")
    out = tmp_path / "records.jsonl"
    main(["run", EXAMPLE_CONFIG, "--data", str(data), "--output", str(out)])
    text = out.read_text() + capsys.readouterr().err
    assert "'name' must be a string" in text and "is not configured" not in text


@pytest.mark.parametrize("key", ["instance_id", "messages", "self"])
def test_a_key_the_runtime_passes_itself_is_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str
) -> None:
    """`interaction_kwargs` holding `instance_id` failed the plugin's call ("got multiple
    values for argument 'instance_id'"), told as the plugin's TypeError; `messages`
    started the episode and failed its first step."""
    data = tmp_path / "rows.jsonl"
    kwargs = {"name": "gsm8k", "ground_truth": "42", key: "x"}
    row = {"prompt": PROMPT, "responses": ["#### 42"], "interaction_kwargs": kwargs}
    data.write_text(json.dumps(row) + "\n")
    out = tmp_path / "records.jsonl"
    assert main(["run", EXAMPLE_CONFIG, "--data", str(data), "--output", str(out)]) == 1
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    (error,) = record["errors"]
    assert error["type"] == "SampleError" and record["turns"] == 0, error
    assert f"interaction_kwargs hold '{key}', a name the runtime passes itself" in error["message"]
    assert "TypeError" not in capsys.readouterr().err
