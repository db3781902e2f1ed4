"""Did-you-mean for config options and choices, key lines, short name lists, driver spec errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from interactions_core.cli import main
from interactions_core.errors import ConformanceError
from interactions_core.naming import summarize
from interactions_core.testing.driver import SessionDriver


def check(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> list[str]:
    config = tmp_path / "c.yaml"
    config.write_text(text)
    assert main(["check", str(config)]) == 1
    return capsys.readouterr().err.splitlines()


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


def test_misspelt_key_before_a_block_points_at_its_own_line(tmp_path, capsys):
    lines = check(
        tmp_path, capsys, "interaction:\n  - name: gsm8k\n    confg:\n      method: flexible\n"
    )
    (problem,) = [ln for ln in lines if "confg" in ln]
    assert "c.yaml:3:" in problem and "did you mean 'config'?" in problem


def test_unknown_interaction_lists_suites_as_one_item(tmp_path, capsys):
    assert main(["show", "gsm8kk"]) == 1
    err = capsys.readouterr().err
    assert "did you mean 'gsm8k'?" in err
    installed = err.split("Installed", 1)[1]
    assert "gsm8k" in installed and "weather" in installed
    assert len(installed) < 200  # not a hundred generated names


def test_summarize() -> None:
    names = ["b", "a", *(f"rg/t{i}" for i in range(106)), "x/one", "x/two"]
    assert summarize(names) == "a, b, rg/* (106 names), x/one, x/two"
    assert summarize([f"n{i:02d}" for i in range(15)], limit=3) == "n00, n01, n02, ... and 12 more"


class SyncRespond:
    def __init__(self, config):
        self.config = config

    async def start_interaction(self, instance_id=None, **kwargs):
        return instance_id or "x"

    def generate_response(self, instance_id, messages, **kwargs):
        return True, "ok", 1.0, {}

    async def calculate_score(self, instance_id, **kwargs):
        return 1.0

    async def finalize_interaction(self, instance_id, **kwargs):
        return None


def test_session_driver_refuses_a_sync_respond_like_the_checker(
    session_driver, interaction_checker
):
    with pytest.raises(ConformanceError) as driver_error:
        session_driver(SyncRespond)
    with pytest.raises(ConformanceError) as checker_error:
        interaction_checker(SyncRespond)
    message = "[spec] generate_response is not async (write 'async def')"
    assert message in str(driver_error.value) and message in str(checker_error.value)
    with pytest.raises(ConformanceError):
        SessionDriver(SyncRespond({}))
