"""The on-disk index cache: warm hits, invalidation, corruption, opt-out."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from interactions_core import _index
from interactions_core.registry import Registry

GROUP = "interactions_core.interactions"

pytestmark = pytest.mark.usefixtures("fresh_cache")


def cache_files() -> list[Path]:
    folder = Path(_index.cache_dir())
    return sorted(folder.glob("index-*")) if folder.is_dir() else []


def names() -> set[str]:
    return {e.name for e in Registry.from_environment().entries()}


def forbid_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom() -> list[dict]:
        raise AssertionError("metadata was scanned although the cache is warm")

    monkeypatch.setattr(_index, "scan", boom)


def test_warm_index_is_served_from_the_cache(make_dist, monkeypatch):
    make_dist("acme-tasks", "1", {GROUP: {"acme": "acme_mod:Acme"}})
    assert "acme" in names()  # cold: scans and writes
    assert len(cache_files()) == 1
    forbid_scan(monkeypatch)
    assert "acme" in names()  # warm: no scan


def test_installing_or_removing_a_distribution_invalidates(make_dist, site_dir):
    make_dist("acme-tasks", "1", {GROUP: {"acme": "acme_mod:Acme"}})
    assert "acme_new" not in names()
    os.utime(site_dir, ns=(1, 1))  # make the next change visible even within one tick
    info = make_dist("acme-new", "1", {GROUP: {"acme_new": "acme_n:Acme"}})
    assert "acme_new" in names()
    for f in info.iterdir():
        f.unlink()
    info.rmdir()
    assert "acme_new" not in names()


def test_corrupt_cache_is_ignored_and_rewritten(make_dist, monkeypatch):
    make_dist("acme-tasks", "1", {GROUP: {"acme": "acme_mod:Acme"}})
    names()
    [path] = cache_files()
    for garbage in (b"", b"\x00\xff garbage", path.read_bytes()[:10]):
        path.write_bytes(garbage)
        assert "acme" in names()
    forbid_scan(monkeypatch)
    assert "acme" in names()  # the rewritten file is valid again


def test_a_cache_for_another_key_is_never_trusted(make_dist):
    make_dist("acme-tasks", "1", {GROUP: {"acme": "acme_mod:Acme"}})
    key = _index.current_key()
    bogus_key = [*key[:4], [-7 for _ in key[4]]]  # same file, other mtimes
    _index._store(bogus_key, {"entries": [], "hooks": {}})
    assert "acme" in names()


def test_no_cache_variable_disables_reads_and_writes(make_dist, monkeypatch):
    monkeypatch.setenv("INTERACTIONS_NO_CACHE", "1")
    make_dist("acme-tasks", "1", {GROUP: {"acme": "acme_mod:Acme"}})
    assert "acme" in names()
    assert cache_files() == []


def test_unwritable_cache_degrades_with_one_warning(make_dist, monkeypatch, tmp_path, capsys):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    monkeypatch.setattr(_index, "_warned", False)
    make_dist("acme-tasks", "1", {GROUP: {"acme": "acme_mod:Acme"}})
    assert "acme" in names()
    assert "acme" in names()
    err = capsys.readouterr().err
    assert err.count("warning") == 1 and "without the cache" in err


def test_writes_are_atomic_and_leave_no_temporary_files(make_dist):
    make_dist("acme-tasks", "1", {GROUP: {"acme": "acme_mod:Acme"}})
    names()
    folder = Path(_index.cache_dir())
    assert [p.name for p in folder.iterdir() if p.name.endswith(".tmp")] == []


def test_clear_removes_every_index(make_dist):
    make_dist("acme-tasks", "1", {GROUP: {"acme": "acme_mod:Acme"}})
    names()
    assert _index.clear() >= 1  # the index, and the hook results when any were learned
    assert cache_files() == []
    assert not list(Path(_index.cache_dir()).glob("hooks-*"))


def test_a_busy_working_folder_does_not_invalidate(make_dist, tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.syspath_prepend(str(work))  # what `python -m` puts first
    make_dist("acme-tasks", "1", {GROUP: {"acme": "acme_mod:Acme"}})
    assert "acme" in names()
    (work / "notes.txt").write_text("edited")  # changes the folder's mtime
    with monkeypatch.context() as m:
        forbid_scan(m)
        assert "acme" in names()
    make_dist("acme-here", "1", {GROUP: {"acme_here": "acme_h:Acme"}}, where=work)
    assert "acme_here" in names()  # metadata appearing in the folder still counts
