"""Concurrent start-up: many workers on one shared cache folder, and caches that cannot be written.

Fifty ``python -m interactions_core list --json`` processes are started together
(all spawned, then all waited for) against a fresh, a stale and a corrupt index
cache. Every one must print the right names; the cache must end valid (a later
run with the metadata scan forbidden succeeds) and no temporary file may be left.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from interactions_core import _index
from interactions_core.registry import Registry

INTERACTIONS = "interactions_core.interactions"
PLUGINS = "interactions_core.plugins"
WORKERS = 50

CLASS = """
from interactions_core import BaseInteraction, InteractionResult

class Echo(BaseInteraction):
    async def generate_response(self, instance_id, messages, **kwargs):
        return InteractionResult(True, "echo", 1.0)
"""

HOOKS = """
from interactions_core import hookimpl
from acme_conc_0 import Echo

@hookimpl
def register_interactions(register):
    register("conc-hooked-a", Echo)
    register("conc-hooked-b", Echo)
"""

#: Run instead of the CLI to prove the cache is valid: any metadata scan fails the run.
NO_SCAN = (
    "import sys\n"
    "import interactions_core._index as d\n"
    "def scan():\n"
    "    sys.stderr.write('SCANNED\\n'); raise SystemExit(97)\n"
    "d.scan = scan\n"
    "from interactions_core.cli import main\n"
    "sys.exit(main(['list', '--json']))\n"
)


@pytest.fixture
def world(make_dist, site_dir: Path, tmp_path: Path) -> dict[str, Path]:
    for i in range(5):
        make_dist(
            f"acme-conc-{i}",
            "1.0",
            {
                INTERACTIONS: {
                    f"conc-{i}-a": f"acme_conc_{i}:Echo",
                    f"conc-{i}-b": f"acme_conc_{i}:Echo",
                }
            },
            {f"acme_conc_{i}": CLASS},
        )
    make_dist(
        "acme-conc-hooks",
        "1.0",
        {PLUGINS: {"hooks": "acme_conc_hooks"}},
        {"acme_conc_hooks": HOOKS},
    )
    work = tmp_path / "work"  # the processes' cwd (on sys.path, so it must not change)
    work.mkdir()
    cache = tmp_path / "cache"
    cache.mkdir()
    return {"site": site_dir, "work": work, "cache": cache}


def env_for(world: dict[str, Path], **extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(world["site"]),
        "XDG_CACHE_HOME": str(world["cache"]),
        "PYTHONDONTWRITEBYTECODE": "1",  # __pycache__ in the site folder would change its mtime
        # Other hook plugins installed beside the core may be slow to import (reasoning-gym
        # pulls in matplotlib): keep them out, this measures the core's start-up.
        "INTERACTIONS_DISABLE": "interactions-reasoning-gym",
    }
    env.update(extra)
    return env


def start_together(world: dict[str, Path], n: int, **extra: str) -> list[tuple[int, str, str]]:
    """Spawn ``n`` list processes, then wait for all; return (code, stdout, stderr) each."""
    env = env_for(world, **extra)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "interactions_core", "list", "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=world["work"],
        )
        for _ in range(n)
    ]
    out = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=120)
        out.append((proc.returncode, stdout, stderr))
    return out


def names_of(stdout: str) -> set[str]:
    return {row["name"] for row in json.loads(stdout)}


def reference(world: dict[str, Path]) -> set[str]:
    [(code, stdout, stderr)] = start_together(world, 1, INTERACTIONS_NO_CACHE="1")
    assert code == 0, stderr
    return names_of(stdout)


def assert_cache_valid(world: dict[str, Path], expected: set[str]) -> None:
    assert not list(world["cache"].rglob("*.tmp")), "a temporary file was left behind"
    files = list((world["cache"] / "interactions-core").glob("index-*.json"))
    assert files, "no index was written"
    proc = subprocess.run(
        [sys.executable, "-c", NO_SCAN],
        capture_output=True,
        text=True,
        env=env_for(world),
        cwd=world["work"],
        timeout=60,
    )
    assert proc.returncode == 0 and "SCANNED" not in proc.stderr, proc.stderr
    assert names_of(proc.stdout) == expected


def check_all(results: list[tuple[int, str, str]], expected: set[str]) -> None:
    for code, stdout, stderr in results:
        assert code == 0, stderr
        assert "Traceback" not in stderr and "warning" not in stderr, stderr
        assert names_of(stdout) == expected


def test_fresh_cache(world: dict[str, Path]) -> None:
    expected = reference(world)
    assert {"conc-0-a", "conc-4-b", "conc-hooked-a", "conc-hooked-b"} <= expected
    started = time.perf_counter()
    check_all(start_together(world, WORKERS), expected)
    elapsed = time.perf_counter() - started
    assert elapsed < 45, f"{WORKERS} processes took {elapsed:.1f} s"
    assert_cache_valid(world, expected)


def test_stale_cache(world: dict[str, Path], make_dist) -> None:
    check_all(start_together(world, 2), reference(world))  # warm it
    make_dist("acme-conc-late", "1.0", {INTERACTIONS: {"conc-late": "acme_conc_0:Echo"}})
    expected = reference(world)
    assert "conc-late" in expected
    check_all(start_together(world, WORKERS), expected)
    assert_cache_valid(world, expected)


def test_corrupt_and_truncated_cache(world: dict[str, Path]) -> None:
    expected = reference(world)
    check_all(start_together(world, 1), expected)
    [index] = list((world["cache"] / "interactions-core").glob("index-*.json"))
    whole = index.read_bytes()
    index.write_bytes(whole[: len(whole) // 2])  # a torn write from a crashed older version
    check_all(start_together(world, WORKERS // 2), expected)
    index.write_bytes(b"\x00garbage" * 100)
    check_all(start_together(world, WORKERS // 2), expected)
    assert_cache_valid(world, expected)


# -- a cache that cannot be written --------------------------------------------------------


def one_warning(stderr: str) -> None:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("interactions-core: warning: cannot write the index cache")
    assert lines[0].endswith("continuing without the cache")


def test_cache_home_is_a_regular_file(world: dict[str, Path], tmp_path: Path) -> None:
    expected = reference(world)
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    for code, stdout, stderr in start_together(world, 3, XDG_CACHE_HOME=str(blocker)):
        assert code == 0, stderr
        assert names_of(stdout) == expected
        one_warning(stderr)  # the index and the hook registrations both fail: one warning


def mounted(target: Path, options: str) -> bool:
    target.mkdir(exist_ok=True)
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(target)],
        capture_output=True,
        check=False,
    )
    return proc.returncode == 0


@pytest.mark.skipif(sys.platform != "linux", reason="tmpfs mounts are Linux-only")
@pytest.mark.parametrize("kind", ["full", "read-only"])
def test_full_or_read_only_filesystem(world: dict[str, Path], tmp_path: Path, kind: str) -> None:
    """A real tmpfs: full (every write fails with ENOSPC) or mounted read-only (EROFS)."""
    expected = reference(world)
    target = tmp_path / "mnt"
    if not mounted(target, "size=16k" if kind == "full" else "ro,size=16k"):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        if kind == "full":
            (target / "interactions-core").mkdir()
            with open(target / "filler", "wb") as fh:
                try:
                    fh.write(b"\0" * 65536)
                    fh.flush()
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC
        for code, stdout, stderr in start_together(world, 3, XDG_CACHE_HOME=str(target)):
            assert code == 0, stderr
            assert names_of(stdout) == expected
            one_warning(stderr)
        leftovers = list(target.rglob("*.tmp"))
        assert not leftovers, leftovers
    finally:
        subprocess.run(["umount", "-l", str(target)], check=False)


def test_no_space_in_process(
    world: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    forget_modules,
) -> None:
    """``os.replace`` failing with ENOSPC: no cache, one warning, the temporary file removed."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(world["cache"]))
    monkeypatch.setattr(_index, "_warned", False)

    def no_space(src: str, dst: str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", no_space)
    names = {e.name for e in Registry.from_environment().entries()}
    assert {"conc-0-a", "conc-hooked-a"} <= names
    names = {e.name for e in Registry.from_environment().entries()}  # again: still one warning
    assert {"conc-0-a", "conc-hooked-a"} <= names
    one_warning(capsys.readouterr().err)
    assert not list(world["cache"].rglob("*.tmp"))
    assert not list(world["cache"].rglob("index-*"))


def test_cache_cleared_while_workers_start(world: dict[str, Path]) -> None:
    """``interactions cache clear`` racing with starting workers: nobody notices."""
    expected = reference(world)
    env = env_for(world)
    procs = []
    for i in range(40):
        args = ["cache", "clear"] if i % 8 == 0 else ["list", "--json"]
        procs.append(
            (
                args,
                subprocess.Popen(
                    [sys.executable, "-m", "interactions_core", *args],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    env=env,
                    cwd=world["work"],
                ),
            )
        )
    for args, proc in procs:
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0 and "Traceback" not in stderr, stderr
        if args[0] == "list":
            assert names_of(stdout) == expected
    assert not list(world["cache"].rglob("*.tmp"))


SLOW_HOOKS = """
import os, time
from interactions_core import hookimpl
from acme_conc_0 import Echo

# Count imports: one file per importing process.
open(os.path.join(os.environ["IMPORT_LOG"], str(os.getpid())), "w").close()
time.sleep(0.3)  # a heavy plugin library being imported

@hookimpl
def register_interactions(register):
    register("conc-slow", Echo)
"""


def test_a_cold_start_runs_hook_plugins_once_not_once_per_worker(
    world: dict[str, Path], make_dist, tmp_path: Path
) -> None:
    make_dist("acme-conc-slow", "1.0", {PLUGINS: {"slow": "acme_conc_slow"}},
              {"acme_conc_slow": SLOW_HOOKS})  # fmt: skip
    log = tmp_path / "imports"
    log.mkdir()
    results = start_together(world, 20, IMPORT_LOG=str(log))
    assert all(code == 0 for code, _, _ in results), results
    assert all("conc-slow" in names_of(out) for _, out, _ in results)
    # The build lock lets one worker scan and import; the others read its index.
    assert len(list(log.iterdir())) == 1
