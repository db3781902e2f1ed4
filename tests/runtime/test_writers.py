"""What may be written: existing files refused unless asked, devices as they are, same file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from interactions_core.errors import DatasetError
from interactions_core.runtime.datasets import write_rows
from interactions_core.runtime.records import (
    LineWriter,
    is_special_file,
    refuse_existing,
    same_file,
)


def test_an_existing_file_is_refused_unless_overwrite(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    refuse_existing(path, overwrite=False)  # absent: fine
    path.write_text("x")
    with pytest.raises(DatasetError, match=r"already exists.*pass --force"):
        refuse_existing(path, overwrite=False, flag="--force")
    refuse_existing(path, overwrite=True)


def test_a_directory_is_refused_even_with_overwrite(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="is a directory; give a file name"):
        refuse_existing(tmp_path, overwrite=True)


@pytest.mark.skipif(os.devnull != "/dev/null", reason="POSIX devices")
def test_a_device_is_special_and_written_as_it_is(tmp_path: Path) -> None:
    assert is_special_file(os.devnull)
    assert not is_special_file(tmp_path) and not is_special_file(tmp_path / "absent")
    refuse_existing(os.devnull, overwrite=False)  # never "already exists"
    rows = [{"prompt": [{"role": "user", "content": "q"}]}]
    assert write_rows(rows, os.devnull, format="jsonl") == 1
    with LineWriter(os.devnull) as writer:
        writer.write({"a": 1})


def test_same_file_through_a_link_and_before_it_exists(tmp_path: Path) -> None:
    target = tmp_path / "a.jsonl"
    target.write_text("")
    link = tmp_path / "b.jsonl"
    link.symlink_to(target)
    assert same_file(target, link)
    assert same_file(tmp_path / "new.jsonl", tmp_path / "." / "new.jsonl")  # neither exists
    assert not same_file(target, tmp_path / "new.jsonl")
