"""The one atomic-write helper and the one lock helper (``interactions_core._files``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from interactions_core._files import lock, replacing, write_atomically


def test_a_file_is_replaced_whole_and_no_temporary_file_stays(tmp_path: Path) -> None:
    path = tmp_path / "out.html"
    path.write_text("old")
    write_atomically(path, b"new")
    assert path.read_text() == "new"
    assert os.listdir(tmp_path) == ["out.html"]


def test_a_failed_write_keeps_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "data.jsonl"
    path.write_text("old")
    with pytest.raises(RuntimeError), replacing(path) as tmp:
        Path(tmp).write_text("half")
        raise RuntimeError("the builder failed")
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["data.jsonl"]


def test_without_overwrite_a_file_that_appeared_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "data.jsonl"
    with pytest.raises(FileExistsError), replacing(path, overwrite=False) as tmp:
        Path(tmp).write_text("mine")
        path.write_text("theirs")  # written meanwhile by someone else
    assert path.read_text() == "theirs"
    assert os.listdir(tmp_path) == ["data.jsonl"]


def test_the_permissions_are_those_of_a_plain_open(tmp_path: Path) -> None:
    umask = os.umask(0o022)
    try:
        write_atomically(tmp_path / "f", b"x")
    finally:
        os.umask(umask)
    assert (tmp_path / "f").stat().st_mode & 0o777 == 0o644


def test_a_held_lock_is_busy_for_another_taker(tmp_path: Path) -> None:
    pytest.importorskip("fcntl")
    path = tmp_path / "build.lock"
    with lock(path) as first:
        assert first is True
        with lock(path, timeout=0.05) as second:  # another open file description
            assert second is False
    with lock(path) as again:
        assert again is True


def test_a_clash_of_temporary_names_draws_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from interactions_core import _files

    draws = iter([b"\x00" * 6, b"\x00" * 6, b"\x01" * 6])
    monkeypatch.setattr(_files.os, "urandom", lambda n: next(draws))
    taken = tmp_path / f".out.json.{'00' * 6}.tmp"
    taken.write_text("someone else's")
    name = _files.temporary_next_to(tmp_path / "out.json")
    assert name == str(tmp_path / f".out.json.{'01' * 6}.tmp")
    assert taken.read_text() == "someone else's" and Path(name).read_bytes() == b""


def test_a_planted_link_is_never_written_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from interactions_core import _files

    victim = tmp_path / "victim"
    victim.write_text("keep")
    monkeypatch.setattr(_files.os, "urandom", lambda n: b"\x02" * n)
    (tmp_path / f".out.json.{'02' * 6}.tmp").symlink_to(victim)
    with pytest.raises(FileExistsError, match="no unused temporary name"):
        _files.temporary_next_to(tmp_path / "out.json")
    assert victim.read_text() == "keep"


def test_keys_whose_text_collides_keep_every_value() -> None:
    # {1: "a", "1": "b"} as JSON kept one value, silently: both keys are the text "1".
    from interactions_core._files import json_safe

    assert json_safe({1: "a", "1": "b"}) == {"1": "a", "1 (str)": "b"}
    assert json_safe({"None": "d", None: "c"}) == {"None": "d", "None (NoneType)": "c"}
    three = json_safe({"1 (int)": "x", "1": "y", 1: "z", (1,): "w"})
    assert sorted(three.values()) == ["w", "x", "y", "z"], three
