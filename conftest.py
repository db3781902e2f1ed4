"""Fixtures shared by the core's and the bundled plugins' tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
#: The shared data folder sits beside the checkout; tests never copy it.
SHARED_DATA = ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def _shared_cache_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One index cache for the whole run, never the user's own.

    The index key includes ``sys.path`` and its mtimes, so tests with their own
    generated distributions get their own entries; sharing the folder only spares
    every test the cold scan (and the import of heavy hook plugins it implies).
    """
    return tmp_path_factory.mktemp("xdg-cache-shared")


@pytest.fixture(autouse=True)
def _isolated_environment(_shared_cache_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No allow/deny lists from the caller's shell, and a cache outside the user's home."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(_shared_cache_home))
    for var in (
        "INTERACTIONS_PLUGINS",
        "INTERACTIONS_DISABLE",
        "INTERACTIONS_NO_CACHE",
        "INTERACTIONS_NO_CLASS_PATHS",
    ):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def fresh_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache folder of the test's own, for tests about the cache itself."""
    folder = tmp_path_factory.mktemp("xdg-cache")
    monkeypatch.setenv("XDG_CACHE_HOME", str(folder))
    return folder


@pytest.fixture
def gsm8k_data() -> Path:
    """The GSM8K folder of the shared data; skips the test when it is absent."""
    folder = SHARED_DATA / "gsm8k"
    if not (folder / "test.jsonl").is_file():
        if os.environ.get("INTERACTIONS_REQUIRE_SHARED_DATA"):
            pytest.fail(f"shared GSM8K data not found at {folder}; CI requires it")
        pytest.skip(f"shared GSM8K data not found at {folder} (it lives beside the checkout)")
    return folder
