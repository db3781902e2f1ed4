"""Statements the docs make about behaviour, checked against the behaviour.

Each test names the page and the claim. They were written when the claims were
corrected; a change in behaviour that makes one false fails here, so the page is
updated with it.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import pytest

from interactions_core import BaseInteraction, ConfigError, InteractionResult, load_config
from interactions_core.cli import main

ROOT = Path(__file__).resolve().parent.parent


def read(page: str) -> str:
    return (ROOT / page).read_text(encoding="utf-8")


# -- README.md: the tour's `interactions list` -------------------------------------


def test_readme_tour_rows_are_what_list_prints() -> None:
    text = read("README.md")
    block = text.split("## A 30-second tour", 1)[1].split("```console\n", 1)[1]
    shown = block.split("\n\n", 1)[0].splitlines()[1:]  # after the `$ interactions list` line
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["list"]) == 0
    printed = [line.rstrip() for line in out.getvalue().splitlines()]
    assert [line.rstrip() for line in shown] == printed  # the whole output, as printed
    assert any(line.startswith("rg/*") for line in printed)  # the suite, grouped on one line


# -- docs/policies.md: a `null` recorded reply ends the episode --------------------


async def test_a_null_replay_reply_ends_the_episode_as_exhausted() -> None:
    from interactions_gsm8k import Gsm8kInteraction

    from interactions_core.runtime import ReplayPolicy, run_episodes

    assert "a `null` reply is not an error, it ends" in read("docs/policies.md")
    sample = {
        "prompt": [{"role": "user", "content": "2 + 2?"}],
        "responses": ["#### 5", None, "#### 4"],
        "interaction_kwargs": {"name": "gsm8k", "ground_truth": "4"},
    }
    bad = {**sample, "responses": ["#### 5", 7]}
    summary = await run_episodes(
        [sample, bad],
        ReplayPolicy(),
        {"gsm8k": Gsm8kInteraction({"name": "gsm8k"})},
        keep_records=True,
    )
    null_record, bad_record = sorted(summary.records, key=lambda r: r.index)
    assert null_record.end_reason == "exhausted" and not null_record.errors
    assert null_record.turns == 1
    assert bad_record.end_reason == "error"


# -- docs/episodes.md: one rule when start_interaction raises ---------------------


class FailsAtStart(BaseInteraction):
    """Stores state, then fails in start_interaction; counts finalize calls."""

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__(config)
        self.finalized: list[str] = []

    async def start_interaction(self, instance_id: str | None = None, **kwargs: Any) -> str:
        raise RuntimeError("no backend")

    async def generate_response(
        self, instance_id: str, messages: list[dict[str, Any]], **kwargs: Any
    ) -> InteractionResult:
        return InteractionResult(True, "", 0.0)

    async def finalize_interaction(self, instance_id: str, **kwargs: Any) -> None:
        self.finalized.append(instance_id)


async def test_a_failed_start_opens_no_session_in_the_session_api_and_the_loop_alike() -> None:
    from interactions_core.runtime import InteractionCallError, ReplayPolicy, Session, run_episodes

    text = " ".join(read("docs/episodes.md").split())
    assert "a `start_interaction` that raises opened no session" in text.lower()
    concepts = " ".join(read("docs/concepts.md").split())
    assert "A `start_interaction` that raises opened no session, so it is not finalized" in (
        concepts
    )
    interaction = FailsAtStart({"name": "f"})
    with pytest.raises(InteractionCallError, match="start_interaction"):
        async with Session(interaction, instance_id="s-1") as session:
            await session.start()
    assert interaction.finalized == []
    sample = {"prompt": [], "responses": ["x"], "interaction_kwargs": {"name": "f"}}
    summary = await run_episodes([sample], ReplayPolicy(), {"f": interaction})
    assert summary.errors == 1 and interaction.finalized == []


# -- docs/cli.md: which outcomes do not start with `interactions: error:` ----------


def test_cli_error_forms(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = " ".join(read("docs/cli.md").split())
    assert "a `usage: interactions ...` line, then `interactions: error: ...` (exit 2)" in text
    assert "under `CONFIG: invalid config`" in text
    with pytest.raises(SystemExit) as usage:
        main(["list", "--frobnicate"])
    err = capsys.readouterr().err
    assert usage.value.code == 2 and err.startswith("usage: interactions")
    assert "interactions: error:" in err
    bad = tmp_path / "bad.yaml"
    bad.write_text("interaction:\n  - name: gsm8k\n    colour: red\n")
    assert main(["check", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{bad}: invalid config\n  ") and "colour" in err
    assert main(["show", "no-such-interaction"]) == 1
    assert capsys.readouterr().err.startswith("interactions: error: ")


# -- docs/config.md: what can stop a verl file ---------------------------------------


def test_a_verl_file_with_a_key_verl_ignored_is_refused(tmp_path: Path) -> None:
    assert "keys verl ignored silently, wrong types and empty names are errors here" in " ".join(
        read("docs/config.md").split()
    )
    path = tmp_path / "verl.yaml"
    path.write_text(
        "interaction:\n"
        "  - name: legacy\n"
        "    class_name: tests_doc_claims_mod.Legacy\n"
        "    config: {}\n"
        "    comment: verl never looked at this key\n"
    )
    with pytest.raises(ConfigError, match="comment"):
        load_config(path)
