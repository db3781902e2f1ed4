"""The index cache folder is trusted only when it is the user's own and not writable by others."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from interactions_core import _index


@pytest.fixture
def cache_home(fresh_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(_index, "_checked", {}, raising=False)
    monkeypatch.setattr(_index, "_warned", False)
    return fresh_cache


#: A well-formed entry an attacker writes: a name pointing at a class of their choosing.
FORGED = {
    "group": "interactions_core.interactions",
    "name": "forged",
    "value": "attacker_mod:Attacker",
    "dist": "interactions-gsm8k",
    "version": "1.0",
    "path": "",
    "error": None,
}


def forge(folder: Path) -> None:
    """Rewrite every cached index the way an attacker would: a marker entry, nothing else."""
    for path in folder.glob("index-*.json"):
        stored = json.loads(path.read_text())
        stored["payload"] = {"entries": [FORGED], "hooks": {}}
        path.write_text(json.dumps(stored))


def entries() -> list[object]:
    return _index.load_index()["entries"]


def test_the_folder_is_created_private(cache_home: Path) -> None:
    entries()
    folder = cache_home / "interactions-core"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert list(folder.glob("index-*.json"))


def test_a_folder_others_can_write_is_not_trusted(
    cache_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    entries()
    folder = cache_home / "interactions-core"
    forge(folder)
    assert entries() == [FORGED]  # the forged file is what a trusting reader gets
    folder.chmod(0o777)
    monkeypatch.setattr(_index, "_checked", {}, raising=False)
    assert FORGED not in entries()
    err = capsys.readouterr().err
    assert "can be written by other users (mode 777)" in err
    assert f"chmod 700 {folder}" in err and "XDG_CACHE_HOME" in err
    assert err.count("warning") == 1


def test_a_folder_another_user_owns_is_not_trusted(
    cache_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    entries()
    forge(cache_home / "interactions-core")
    monkeypatch.setattr(_index, "_checked", {}, raising=False)
    me = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: me + 4242)
    assert FORGED not in entries()
    assert f"is owned by another user (uid {me}, you are {me + 4242})" in capsys.readouterr().err
