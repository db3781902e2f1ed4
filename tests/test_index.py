"""``_index.py``: discovery from the metadata of real generated distributions, the on-disk
index (warm hits, invalidation, corruption, opt-out) and what hook plugins register,
kept in it and relearnt when needed."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from core_helpers import GOOD, PLUGINS, SUITE, by_name, suite_dist

from interactions_core import _index
from interactions_core.errors import PluginLoadError
from interactions_core.registry import Registry

GROUP = "interactions_core.interactions"


# -- discovery: what is installed, from metadata ---------------------------------------


def test_listing_reads_metadata_without_importing(make_dist, forget_modules):
    make_dist("acme-tasks", "2.1", {GROUP: {"acme": "acme_mod:Acme"}}, {"acme_mod": GOOD})
    registry = Registry.from_environment()
    [entry] = by_name(registry, "acme")
    assert (entry.distribution, entry.version, entry.target) == (
        "acme-tasks",
        "2.1",
        "acme_mod:Acme",
    )
    assert entry.status == "ok" and entry.error is None
    assert "acme_mod" not in sys.modules
    cls = registry.load("acme")
    assert "acme_mod" in sys.modules and cls.__name__ == "Acme"


def test_malformed_entry_point_is_broken_and_others_survive(make_dist, forget_modules):
    make_dist("acme-bad", "1", {GROUP: {"acme_bad": "not a target!", "acme_mod_only": "acme_x"}})
    make_dist("acme-tasks", "1", {GROUP: {"acme": "acme_mod:Acme"}}, {"acme_mod": GOOD})
    registry = Registry.from_environment()
    [bad] = by_name(registry, "acme_bad")
    [module_only] = by_name(registry, "acme_mod_only")
    assert bad.status == module_only.status == "broken"
    assert "malformed" in bad.error and "module:Class" in module_only.error
    with pytest.raises(PluginLoadError, match="broken"):
        registry.load("acme_bad")
    assert registry.load("acme").__name__ == "Acme"


def test_same_distribution_twice_on_sys_path_is_not_a_conflict(
    make_dist, tmp_path, monkeypatch, forget_modules
):
    make_dist("acme-tasks", "1", {GROUP: {"acme": "acme_mod:Acme"}}, {"acme_mod": GOOD})
    mirror = tmp_path / "lib64"
    mirror.mkdir()
    make_dist("acme-tasks", "1", {GROUP: {"acme": "acme_mod:Acme"}}, where=mirror)
    monkeypatch.syspath_prepend(str(mirror))
    registry = Registry.from_environment()
    assert [e.status for e in by_name(registry, "acme")] == ["ok"]


def test_names_with_colons_are_rejected_at_listing(make_dist):
    make_dist("acme-tasks", "1", {GROUP: {"acme:odd": "acme_mod:Acme"}})
    [entry] = [e for e in Registry.from_environment().entries() if e.name == "acme:odd"]
    assert entry.status == "broken" and "':'" in entry.error


# -- the on-disk index: warm hits, invalidation, corruption, opt-out -------------------


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


# -- what hook plugins register, kept in the index -------------------------------------


def test_hook_registrations_are_cached_so_warm_listing_imports_nothing(make_dist, forget_modules):
    suite_dist(make_dist)
    assert "suite/alpha" in {e.name for e in Registry.from_environment().entries()}
    del sys.modules["hooky_suite"]
    warm = Registry.from_environment()
    assert "suite/alpha" in {e.name for e in warm.entries()}
    assert "hooky_suite" not in sys.modules
    warm.load("suite/alpha")  # loading imports it on demand
    assert "hooky_suite" in sys.modules


def test_disabled_hook_plugin_is_never_imported(make_dist, monkeypatch, forget_modules):
    suite_dist(make_dist)
    monkeypatch.setenv("INTERACTIONS_DISABLE", "hooky-suite")
    registry = Registry.from_environment()
    assert not [e for e in registry.entries() if e.name.startswith("suite/")]
    assert "hooky_suite" not in sys.modules


def test_loading_a_stale_hook_name_explains_how_to_refresh(make_dist, forget_modules):
    suite_dist(make_dist)
    registry = Registry.from_environment()
    registry.entries()
    registry.index["hooks"]["hooky-suite:suite"]["names"].append(["suite/gone", "x:y", None])
    registry._entries = None
    with pytest.raises(PluginLoadError, match="cache clear"):
        registry.load("suite/gone")


def test_allow_listing_one_hook_name_loads_its_plugin(make_dist, monkeypatch, forget_modules):
    suite_dist(make_dist)
    Registry.from_environment().entries()  # the index learns what the plugin registers
    del sys.modules["hooky_suite"]
    monkeypatch.setenv("INTERACTIONS_PLUGINS", "suite/alpha")
    registry = Registry.from_environment()
    status = {e.name: e.status for e in registry.entries() if e.name.startswith("suite/")}
    assert status == {"suite/alpha": "ok", "suite/beta": "disabled"}
    assert registry.create("suite/alpha").config["task"] == "alpha"
    with pytest.raises(Exception, match="INTERACTIONS_PLUGINS"):
        registry.create("suite/beta")


# -- the incremental index: hook results outlive unrelated installs ------------------


def reimported(module: str) -> bool:
    """Forget ``module``, rebuild the registry, and tell whether listing imported it again."""
    sys.modules.pop(module, None)
    names = {e.name for e in Registry.from_environment().entries()}
    assert "suite/alpha" in names or "suite/gamma" in names, names
    return module in sys.modules


def bump(site_dir):
    """Make the next change of the site folder visible even within one mtime tick."""
    import os

    os.utime(site_dir, ns=(1, 1))


@pytest.mark.usefixtures("fresh_cache")
def test_an_unrelated_install_does_not_rerun_hook_plugins(make_dist, site_dir, forget_modules):
    suite_dist(make_dist)
    assert reimported("hooky_suite")  # cold: the hook plugin is asked once
    bump(site_dir)
    make_dist("acme-unrelated", "1", {"interactions_core.interactions": {"u": "acme_u:U"}})
    assert not reimported("hooky_suite")  # the index is rebuilt without asking it again
    registry = Registry.from_environment()
    assert "u" in {e.name for e in registry.entries()}
    assert registry.create("suite/beta").config["task"] == "beta"


@pytest.mark.usefixtures("fresh_cache")
def test_upgrading_the_hook_plugin_relearns_its_names(make_dist, site_dir, forget_modules):
    info = suite_dist_at(make_dist, "0.2", SUITE)
    assert reimported("hooky_suite")
    for f in info.iterdir():
        f.unlink()
    info.rmdir()
    bump(site_dir)
    suite_dist_at(make_dist, "0.3", SUITE.replace('("alpha", "beta")', '("gamma",)'))
    sys.modules.pop("hooky_suite", None)
    names = {e.name for e in Registry.from_environment().entries() if e.name.startswith("suite/")}
    assert names == {"suite/gamma"}


@pytest.mark.usefixtures("fresh_cache")
def test_installing_a_requirement_of_a_hook_plugin_relearns(make_dist, site_dir, forget_modules):
    make_dist(
        "hooky-suite",
        "0.2",
        {PLUGINS: {"suite": "hooky_suite"}},
        {"hooky_suite": SUITE},
        requires=["acme-tasklist>=1", "pytest; extra == 'test'"],
    )
    assert reimported("hooky_suite")
    bump(site_dir)
    make_dist("acme-tasklist", "1.0")
    assert reimported("hooky_suite")  # what it registers may come from that dependency
    bump(site_dir)
    make_dist("acme-other", "1.0")
    assert not reimported("hooky_suite")


@pytest.mark.usefixtures("fresh_cache")
def test_a_requirements_version_comes_from_the_scan_under_any_spelling(
    make_dist, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scan's own distributions answer (importlib's search per name walked every
    ``sys.path`` entry again); ``Acme_Tasklist`` and ``acme-tasklist`` are one name."""
    make_dist("acme-tasklist", "1.4")
    make_dist(
        "hooky-suite", "0.2", {PLUGINS: {"suite": "hooky_suite"}}, {"hooky_suite": SUITE},
        requires=["Acme_Tasklist>=1", "acme-missing"],
    )  # fmt: skip
    import importlib.metadata

    def no_search(name: str) -> object:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", no_search)
    records = _index.scan()
    key = next(r["hook_key"] for r in records if r["dist"] == "hooky-suite")
    assert key[-1] == [["Acme_Tasklist", "1.4"], ["acme-missing", None]]


def count_parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record the metadata folders whose headers are parsed from now on."""
    parsed: list[str] = []
    real = _index._read_headers

    def counting(dist):
        name = Path(str(dist._path)).name
        if name.startswith("acme"):  # not the distributions of the interpreter running this
            parsed.append(name)
        return real(dist)

    monkeypatch.setattr(_index, "_read_headers", counting)
    return parsed


def versions() -> dict[str, str]:
    """The version of each generated distribution's interaction, by name."""
    entries = Registry.from_environment().entries()
    return {e.name: e.version for e in entries if e.distribution.startswith("acme")}


@pytest.mark.usefixtures("fresh_cache")
def test_an_unrelated_install_parses_no_metadata_again(make_dist, site_dir, monkeypatch):
    make_dist("acme-tasks", "1.0", {GROUP: {"acme": "acme_mod:Acme"}})
    make_dist("acme-more", "3.1", {GROUP: {"more": "acme_more:More"}})
    parsed = count_parses(monkeypatch)
    assert versions()["acme"] == "1.0"
    assert sorted(parsed) == ["acme_more-3.1.dist-info", "acme_tasks-1.0.dist-info"]
    parsed.clear()
    bump(site_dir)
    make_dist("acme-unrelated", "1")
    assert versions() == {"acme": "1.0", "more": "3.1"}  # the index was rebuilt ...
    assert parsed == []  # ... from what earlier scans read of the unchanged folders


@pytest.mark.usefixtures("fresh_cache")
def test_a_folder_changed_since_it_was_read_is_read_again(make_dist, site_dir, monkeypatch):
    """A reinstall in the same folder changes its mtime: the new metadata is what counts."""
    info = make_dist("acme-tasks", "1.0", {GROUP: {"acme": "acme_mod:Acme"}})
    assert versions()["acme"] == "1.0"
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-tasks\nVersion: 1.5\n")
    os.utime(info, ns=(5, 5))
    bump(site_dir)
    make_dist("acme-unrelated", "1")
    parsed = count_parses(monkeypatch)
    assert versions()["acme"] == "1.5"
    assert parsed == [info.name]


@pytest.mark.usefixtures("fresh_cache")
def test_stored_metadata_facts_of_the_wrong_shape_are_read_again(
    make_dist, site_dir, fresh_cache, monkeypatch
):
    import json

    info = make_dist("acme-tasks", "1.0", {GROUP: {"acme": "acme_mod:Acme"}})
    assert versions()["acme"] == "1.0"
    [hooks_file] = fresh_cache.rglob("hooks-*.json")
    stored = json.loads(hooks_file.read_text())
    fact = stored["dists"][str(info)]
    for bad in ([fact[0], 7, "9.9", []], [fact[0], "evil", "9.9", [1]], fact[:3], "x"):
        stored["dists"][str(info)] = bad
        hooks_file.write_text(json.dumps(stored))
        bump(site_dir)
        make_dist(f"acme-x{len(str(bad))}", "1")
        parsed = count_parses(monkeypatch)
        assert versions()["acme"] == "1.0"
        assert parsed == [info.name]


def test_no_cache_keeps_no_hook_results(make_dist, monkeypatch, fresh_cache, forget_modules):
    monkeypatch.setenv("INTERACTIONS_NO_CACHE", "1")
    suite_dist(make_dist)
    assert reimported("hooky_suite") and reimported("hooky_suite")
    assert not list(fresh_cache.rglob("hooks-*"))


def suite_dist_at(make_dist, version, code):
    return make_dist(
        "hooky-suite", version, {PLUGINS: {"suite": "hooky_suite"}}, {"hooky_suite": code}
    )


@pytest.mark.usefixtures("fresh_cache")
def test_another_name_of_the_interpreter_reuses_hook_results(
    make_dist, monkeypatch, forget_modules
):
    """``python`` and ``python3`` of one venv have separate indexes but share hook results."""
    suite_dist(make_dist)
    assert reimported("hooky_suite")
    monkeypatch.setattr(sys, "executable", sys.executable + "-other-name")
    assert not reimported("hooky_suite")


@pytest.mark.usefixtures("fresh_cache")
def test_a_corrupt_hook_result_file_is_ignored_and_rewritten(
    make_dist, site_dir, fresh_cache, forget_modules
):
    suite_dist(make_dist)
    assert reimported("hooky_suite")
    [hooks_file] = fresh_cache.rglob("hooks-*.json")
    for garbage in (b"", b"\x00\xff not json", hooks_file.read_bytes()[:7]):
        hooks_file.write_bytes(garbage)
        bump(site_dir)
        make_dist(f"acme-x{len(garbage)}", "1")  # the index is rebuilt: results are needed
        assert reimported("hooky_suite")  # unreadable results: the plugin is asked again
    bump(site_dir)
    make_dist("acme-last", "1")
    assert not reimported("hooky_suite")  # and the rewritten file is trusted again


@pytest.mark.usefixtures("fresh_cache")
@pytest.mark.parametrize(
    "bad", ["boom", [1, 2], {"names": 5}, {"names": "abc"}, {"names": [["a", "b"]]}]
)
def test_a_hook_result_of_the_wrong_shape_is_asked_again(
    make_dist, site_dir, fresh_cache, forget_modules, bad
):
    """A hand-edited result stopped every command with "unexpected AttributeError" once
    the index was rebuilt, until `interactions cache clear`."""
    import json

    suite_dist(make_dist)
    assert reimported("hooky_suite")
    [hooks_file] = fresh_cache.rglob("hooks-*.json")
    stored = json.loads(hooks_file.read_text())
    stored["results"] = {key: bad for key in stored["results"]}
    hooks_file.write_text(json.dumps(stored))
    bump(site_dir)
    make_dist("acme-unrelated", "1")
    assert reimported("hooky_suite")  # listed, the plugin asked again


@pytest.mark.usefixtures("fresh_cache")
@pytest.mark.parametrize("bad", [[], {"entries": {}, "hooks": {}}, {"entries": [1], "hooks": {}}])
def test_a_cached_index_of_the_wrong_shape_is_rebuilt(make_dist, bad):
    import json

    make_dist("acme-tasks", "1", {GROUP: {"acme": "acme_mod:Acme"}})
    assert "acme" in names()
    [path] = cache_files()
    stored = json.loads(path.read_text())
    stored["payload"] = bad
    path.write_text(json.dumps(stored))
    assert "acme" in names()


@pytest.mark.usefixtures("fresh_cache")
def test_a_cache_file_nested_too_deeply_to_read_is_rebuilt(make_dist, site_dir, fresh_cache):
    """Valid JSON 1,000 levels deep stopped every command with "unexpected RecursionError"."""
    make_dist("acme-tasks", "1", {GROUP: {"acme": "acme_mod:Acme"}})
    assert "acme" in names()
    deep = "[" * 100_000 + "]" * 100_000
    for path in [*cache_files(), *fresh_cache.rglob("hooks-*.json")]:
        path.write_text('{"format": 4, "key": ' + deep + ', "dists": ' + deep + "}")
    bump(site_dir)
    make_dist("acme-unrelated", "1")
    assert "acme" in names()


@pytest.mark.usefixtures("fresh_cache")
def test_metadata_rewritten_in_place_is_read_again_at_the_next_rebuild(make_dist, site_dir):
    """`setup.py develop` rewrites an .egg-info in place: its folder keeps its mtime."""
    info = make_dist("acme-tasks", "1.0", {GROUP: {"acme": "acme_mod:Acme"}})
    assert versions()["acme"] == "1.0"
    folder_time = info.stat().st_mtime_ns
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-tasks\nVersion: 1.1\n")
    os.utime(info, ns=(folder_time, folder_time))
    bump(site_dir)
    make_dist("acme-unrelated", "1")
    assert versions()["acme"] == "1.1"


@pytest.mark.usefixtures("fresh_cache")
def test_a_failed_hook_plugin_is_retried_after_any_install(make_dist, site_dir, forget_modules):
    """A failure may be fixed by installing something it does not declare: no reuse."""
    make_dist(
        "hooky-needy",
        "1",
        {PLUGINS: {"needy": "hooky_needy"}},
        {"hooky_needy": "import acme_undeclared_dep\n" + SUITE},
    )
    registry = Registry.from_environment()
    [problem] = [p for p in registry.plugin_problems() if p.distribution == "hooky-needy"]
    assert "acme_undeclared_dep" in problem.error
    bump(site_dir)
    make_dist("acme-dep", "1", modules={"acme_undeclared_dep": "VALUE = 1\n"})
    names = {e.name for e in Registry.from_environment().entries()}
    assert {"suite/alpha", "suite/beta"} <= names


@pytest.mark.usefixtures("fresh_cache")
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("name", 123),
        ("group", None),
        ("value", ["acme_mod:Acme"]),
        ("dist", {}),
        ("version", 1.0),
        ("path", False),
        ("error", 7),
        ("hook_key", "key"),
        ("hook_key", [1]),
    ],
)
def test_a_cached_entry_with_a_field_of_the_wrong_type_is_rebuilt(make_dist, field, value):
    """Valid JSON whose entry has `"name": 123` stopped every command until
    `interactions cache clear` (an unexpected TypeError)."""
    import json

    make_dist("acme-tasks", "1", {GROUP: {"acme": "acme_mod:Acme"}})
    assert "acme" in names()
    [path] = cache_files()
    stored = json.loads(path.read_text())
    for entry in stored["payload"]["entries"]:
        entry[field] = value
    path.write_text(json.dumps(stored))
    assert "acme" in names()


@pytest.mark.usefixtures("fresh_cache")
def test_a_cache_file_that_is_a_named_pipe_is_replaced_not_waited_on(
    make_dist, site_dir, fresh_cache
):
    """Every command hung, silent, waiting for a writer to the named pipe there."""
    import os
    import threading

    make_dist("acme-tasks", "1", {GROUP: {"acme": "acme_mod:Acme"}})
    assert "acme" in names()
    pipes = [*cache_files(), *fresh_cache.rglob("hooks-*.json")]
    for path in pipes:
        path.unlink()
        os.mkfifo(path)
    bump(site_dir)
    make_dist("acme-unrelated", "1")
    found: list[list[str]] = []
    listing = threading.Thread(target=lambda: found.append(names()), daemon=True)
    listing.start()
    listing.join(60)
    if listing.is_alive():  # before: blocked opening a pipe; a writer lets it go
        for path in pipes:
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:  # no reader on that one
                pass
        listing.join(10)
    assert not listing.is_alive() and found and "acme" in found[0]
    assert not any(path.is_fifo() for path in cache_files())  # replaced by a cache file
