"""Fixtures shared by the core's and the bundled plugins' tests."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
#: The shared data folder sits beside the checkout; tests never copy it.
SHARED_DATA = ROOT.parent / "shared" / "data"


@pytest.fixture(autouse=True)
def _isolated_environment(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
):
    """Give every test its own index cache and no allow/deny lists from the caller's shell."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
    for var in (
        "INTERACTIONS_PLUGINS",
        "INTERACTIONS_DISABLE",
        "INTERACTIONS_NO_CACHE",
        "INTERACTIONS_NO_CLASS_PATHS",
    ):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def gsm8k_data() -> Path:
    """The GSM8K folder of the shared data; skips the test when it is absent."""
    folder = SHARED_DATA / "gsm8k"
    if not (folder / "test.jsonl").is_file():
        pytest.skip(f"shared GSM8K data not found at {folder} (it lives beside the checkout)")
    return folder
