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
