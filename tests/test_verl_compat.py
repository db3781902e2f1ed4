"""The verl <= 0.7 drop-in (``interactions_core.compat.verl``) where verl is not installed.

verl's released code is exercised by ``nox -s verl_legacy`` (tests/verl_legacy);
these tests pin what a user of a current environment (verl 0.8+ or none) gets.
"""

from __future__ import annotations

import asyncio
import json
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

from interactions_core import BaseInteraction, ConfigError, InteractionResult, Session
from interactions_core.cli import main
from interactions_core.compat.verl import (
    VerlPathWarning,
    get_interaction_class,
    initialize_interactions_from_config,
)
from interactions_core.errors import DisabledError, LegacyInteractionWarning
from interactions_core.loader import load_interactions

VERL_GSM8K = "verl.interactions.gsm8k_interaction.Gsm8kInteraction"
VERL_WEATHER = "verl.interactions.weather_interaction.WeatherInteraction"
VERL_BASE = "verl.interactions.base.BaseInteraction"
#: This module as the loader imports it, for dotted paths to the classes below.
HERE = __name__


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "interactions.yaml"
    path.write_text(text)
    return path


@pytest.fixture(autouse=True)
def _no_verl(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests describe an environment without verl's interaction module."""
    monkeypatch.setitem(sys.modules, "verl", None)


def test_verls_example_config_resolves_to_the_installed_plugins(tmp_path: Path) -> None:
    config = write(
        tmp_path,
        f"interaction:\n  - name: gsm8k\n    class_name: {VERL_GSM8K}\n    config: {{}}\n"
        f"  - class_name: {VERL_WEATHER}\n",
    )
    with pytest.warns(VerlPathWarning) as caught:
        found = initialize_interactions_from_config(config)
    assert list(found) == ["gsm8k", "weather"]  # the name derived as verl derives it
    assert type(found["gsm8k"]).__module__.startswith("interactions_gsm8k")
    assert type(found["weather"]).__module__.startswith("interactions_weather")
    notes = [str(w.message) for w in caught]
    assert any(
        "verl's interaction module is not installed" in n
        and "interactions-gsm8k:gsm8k" in n
        and "write 'plugin: gsm8k'" in n
        and f"{config}:3" in n
        for n in notes
    ), notes


def test_the_plain_loader_accepts_verls_paths_too(tmp_path: Path) -> None:
    config = write(tmp_path, f"interaction:\n  - class_name: {VERL_GSM8K}\n")
    with pytest.warns(VerlPathWarning):
        found = load_interactions(config)
    sid = asyncio.run(found["gsm8k"].start_interaction("s", ground_truth="3"))
    answer = [{"role": "assistant", "content": "#### 3"}]
    result = asyncio.run(found["gsm8k"].generate_response(sid, answer))
    assert result == (True, "Your response is correct!", 1.0, {})


def test_check_reports_the_note_and_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write(tmp_path, f"interaction:\n  - class_name: {VERL_GSM8K}\n")
    assert main(["check", str(config)]) == 0
    err = capsys.readouterr().err
    assert "interactions: warning:" in err and "plugin: gsm8k" in err


def test_a_disabled_plugin_is_refused_by_verls_path_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INTERACTIONS_DISABLE", "gsm8k")
    config = write(tmp_path, f"interaction:\n  - class_name: {VERL_GSM8K}\n")
    with pytest.raises(ConfigError) as info:
        initialize_interactions_from_config(config)
    assert "INTERACTIONS_DISABLE" in str(info.value)
    with pytest.raises(DisabledError):
        get_interaction_class(VERL_GSM8K)


def test_get_interaction_class_and_verls_base_path() -> None:
    with pytest.warns(VerlPathWarning):
        assert get_interaction_class(VERL_BASE) is BaseInteraction
    with pytest.warns(VerlPathWarning):
        gsm8k = get_interaction_class(VERL_GSM8K)
    assert gsm8k.__name__ == "Gsm8kInteraction"
    assert gsm8k.__module__.startswith("interactions_gsm8k")
    with pytest.warns(LegacyInteractionWarning):
        assert get_interaction_class(f"{HERE}.LegacyStyle") is LegacyStyle


def test_verls_errors_keep_their_types(tmp_path: Path) -> None:
    missing = write(
        tmp_path, "interaction:\n  - name: x\n    class_name: nowhere_pkg.mod.Missing\n"
    )
    with pytest.raises(ModuleNotFoundError) as info:
        initialize_interactions_from_config(missing)
    assert isinstance(info.value, ValueError) and "nowhere_pkg" in str(info.value)
    duplicate = write(
        tmp_path,
        "interaction:\n  - name: dup\n    plugin: gsm8k\n  - name: dup\n    plugin: weather\n",
    )
    with pytest.raises(ValueError, match="Duplicate interaction name 'dup' found"):
        initialize_interactions_from_config(duplicate)


class LegacyStyle(BaseInteraction):
    """Written against verl's own base class: no instance_id on the last two methods."""

    built_with: list[str] = []

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__(config)
        self._instance_dict: dict[str, Any] = {}

    async def start_interaction(self, instance_id: str | None = None, **kwargs: Any) -> str:
        assert instance_id is not None
        self._instance_dict[instance_id] = kwargs
        return instance_id

    async def generate_response(
        self, instance_id: str, messages: list[dict[str, Any]], **kwargs: Any
    ) -> tuple[bool, str, float, dict[str, Any]]:
        return True, "fine", 0.25, {"n": len(messages)}

    async def calculate_score(self) -> float:  # type: ignore[override]
        return 0.75

    async def finalize_interaction(self) -> None:  # type: ignore[override]
        LegacyStyle.built_with.append("finalized")


def test_legacy_signatures_load_with_a_warning_in_the_drop_in_only(tmp_path: Path) -> None:
    config = write(tmp_path, f"interaction:\n  - class_name: {HERE}.LegacyStyle\n")
    with pytest.raises(ConfigError) as strict:
        load_interactions(config)
    assert "calculate_score takes positional parameters ()" in str(strict.value)
    with pytest.warns(LegacyInteractionWarning, match="loaded anyway"):
        found = initialize_interactions_from_config(config)
    legacy = found["legacystyle"]
    LegacyStyle.built_with.clear()

    async def play() -> tuple[InteractionResult, float]:
        async with Session(legacy, instance_id="s") as session:
            await session.start(name="legacystyle")
            result = await session.respond([{"role": "assistant", "content": "x"}])
            score = await session.score()
        return result, score

    result, score = asyncio.run(play())
    assert result == (True, "fine", 0.25, {"n": 1}) and score == 0.75
    assert LegacyStyle.built_with == ["finalized"]  # called the way it was declared


class KeywordOnly(BaseInteraction):
    async def generate_response(self, instance_id: str, messages: Any, **kwargs: Any) -> Any:
        return InteractionResult(True, "", 0.0)


class OtherParameterName(BaseInteraction):
    def __init__(self, cfg: dict[str, Any]) -> None:
        super().__init__(cfg)

    async def generate_response(self, instance_id: str, messages: Any, **kwargs: Any) -> Any:
        return InteractionResult(True, "", 0.0)


def test_classes_are_built_with_config_keyword(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[Any] = []
    original = KeywordOnly.__init__

    def spy(self: Any, *args: Any, **kwargs: Any) -> None:
        seen.append((args, kwargs))
        original(self, *args, **kwargs)

    monkeypatch.setattr(KeywordOnly, "__init__", spy)
    config = write(
        tmp_path,
        "interaction:\n"
        f"  - name: kw\n    class_name: {HERE}.KeywordOnly\n    config: {{a: 1}}\n"
        f"  - name: other\n    class_name: {HERE}.OtherParameterName\n",
    )
    found = initialize_interactions_from_config(config)
    assert seen == [((), {"config": {"a": 1, "name": "kw"}})]
    assert found["other"].config == {"name": "other"}


def test_omegaconf_interpolation_is_refused_without_omegaconf(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "omegaconf", None)  # as on an install without verl
    config = write(
        tmp_path,
        "interaction:\n  - name: gsm8k\n    config:\n      method: ${oc.env:GSM8K_METHOD}\n",
    )
    with pytest.raises(ConfigError) as info:
        initialize_interactions_from_config(config)
    message = str(info.value)
    assert f"{config}:4" in message
    assert "OmegaConf interpolation '${oc.env:GSM8K_METHOD}'" in message
    assert "pip install omegaconf" in message


def test_data_writes_the_agent_name_column(
    gsm8k_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "rows.jsonl"
    code = main(
        [
            "data",
            "gsm8k",
            "--input",
            str(gsm8k_data / "test.jsonl"),
            "--agent-name",
            "interactions",
            "--limit",
            "5",
            "--output",
            str(out),
        ]
    )
    assert code == 0, capsys.readouterr().err
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 5 and {r["agent_name"] for r in rows} == {"interactions"}
    assert rows[0]["extra_info"]["interaction_kwargs"]["name"] == "gsm8k"


def test_no_warning_for_configs_that_name_plugins(tmp_path: Path) -> None:
    config = write(tmp_path, "interaction:\n  - name: gsm8k\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert list(initialize_interactions_from_config(config)) == ["gsm8k"]
