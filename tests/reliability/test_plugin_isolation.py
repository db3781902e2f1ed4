"""Plugins cannot corrupt machine-readable output or stop the tool at import.

Real ``interactions`` processes list, show, check and run tiny installed
plugins that print at import and in calls, call ``sys.exit``, raise
``KeyboardInterrupt`` or another ``BaseException`` while being imported, or
hang there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

INTERACTIONS = "interactions_core.interactions"
PLUGINS = "interactions_core.plugins"

CHATTY = """
print("CHATTY AT IMPORT")
from interactions_core import BaseInteraction, InteractionResult


class Chatty(BaseInteraction):
    '''Prints wherever it can.'''

    async def generate_response(self, instance_id, messages, **kwargs):
        print("CHATTY IN A CALL")
        return InteractionResult(True, "ok", 1.0)
"""

CHATTY_HOOKS = """
print("HOOKS AT IMPORT")
from interactions_core import BaseInteraction, InteractionResult, hookimpl


class Hooked(BaseInteraction):
    async def generate_response(self, instance_id, messages, **kwargs):
        return InteractionResult(True, "ok", 1.0)


@hookimpl
def register_interactions(register):
    print("HOOKS REGISTERING")
    register("hooked", Hooked)
"""

BAD_IMPORTS = {
    "exiter": "import sys\nsys.exit(3)\n",
    "interrupter": "raise KeyboardInterrupt('pressed by the plugin')\n",
    "weird": "class Weird(BaseException):\n    pass\nraise Weird('odd')\n",
    # an error whose message cannot be told: it was listed "ok", exit 0
    "unsayable": "class Unsayable(Exception):\n    def __str__(self):\n"
    "        raise GeneratorExit('from __str__')\nraise Unsayable()\n",
}


@pytest.fixture
def site(make_dist, site_dir: Path, forget_modules) -> Path:
    make_dist("acme-chatty", "1.0", {INTERACTIONS: {"chatty": "acme_chatty:Chatty"}},
              {"acme_chatty": CHATTY})  # fmt: skip
    make_dist("acme-chatty-hooks", "1.0", {PLUGINS: {"chatty-hooks": "acme_chatty_hooks"}},
              {"acme_chatty_hooks": CHATTY_HOOKS})  # fmt: skip
    for name, code in BAD_IMPORTS.items():
        make_dist(f"acme-{name}", "1.0", {INTERACTIONS: {name: f"acme_{name}:Thing"}},
                  {f"acme_{name}": code})  # fmt: skip
    make_dist("acme-hanger", "1.0", {INTERACTIONS: {"hanger": "acme_hanger:Thing"}},
              {"acme_hanger": "import time\ntime.sleep(3600)\n"})  # fmt: skip
    return site_dir


def cli(site: Path, tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {
        **os.environ,
        "PYTHONPATH": str(site),
        "XDG_CACHE_HOME": str(tmp_path / "fresh-cache"),  # a cold start: the index is built
        "INTERACTIONS_DISABLE": "interactions-reasoning-gym",
        "INTERACTIONS_IMPORT_TIMEOUT": "3",
        **env,
    }
    proc = subprocess.run(
        [sys.executable, "-m", "interactions_core", *args],
        capture_output=True, text=True, env=environ, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_plugin_prints_never_reach_json_output(site: Path, tmp_path: Path) -> None:
    proc = cli(site, tmp_path, "list", "--json")  # cold: the hook plugin is imported
    names = {row["name"] for row in json.loads(proc.stdout)}
    assert {"chatty", "hooked"} <= names
    assert "HOOKS AT IMPORT" in proc.stderr

    proc = cli(site, tmp_path, "show", "chatty", "--json")
    assert json.loads(proc.stdout)["name"] == "chatty"
    assert "CHATTY AT IMPORT" in proc.stderr

    proc = cli(site, tmp_path, "list", "--check", "--json")
    rows = {row["name"]: row for row in json.loads(proc.stdout)}
    assert rows["chatty"]["status"] == "ok"

    config = tmp_path / "config.yaml"
    config.write_text("interaction:\n  - name: chatty\n")
    data = tmp_path / "data.jsonl"
    row = {"prompt": [{"role": "user", "content": "hi"}], "responses": ["a"],
           "interaction_kwargs": {"name": "chatty"}}  # fmt: skip
    data.write_text(json.dumps(row) + "\n")
    proc = cli(site, tmp_path, "run", str(config), "--data", str(data), "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["episodes"] == 1
    assert "CHATTY IN A CALL" in proc.stderr


def test_list_check_reports_each_plugin_that_exits_interrupts_or_hangs(
    site: Path, tmp_path: Path
) -> None:
    began = time.monotonic()
    proc = cli(site, tmp_path, "list", "--check", "--json")
    assert time.monotonic() - began < 60
    assert proc.returncode == 1, proc.stderr
    rows = {row["name"]: row for row in json.loads(proc.stdout)}
    assert rows["chatty"]["status"] == "ok" and rows["hooked"]["status"] == "ok"
    assert "SystemExit: 3" in rows["exiter"]["error"]
    assert "KeyboardInterrupt: pressed by the plugin" in rows["interrupter"]["error"]
    assert "Weird: odd" in rows["weird"]["error"]
    assert "did not finish within 3 s" in rows["hanger"]["error"]
    assert "Unsayable: <no message: its __str__ raised GeneratorExit>" in rows["unsayable"]["error"]
    for name in ("exiter", "interrupter", "weird", "hanger", "unsayable"):
        assert rows[name]["status"] == "broken"


UNSAYABLE_HOOKS = """
from interactions_core import hookimpl


class Unsayable(Exception):
    def __str__(self):
        raise GeneratorExit("from __str__")


@hookimpl
def register_interactions(register):
    raise Unsayable()
"""


def test_a_hook_plugin_whose_error_cannot_be_told_breaks_no_command(
    make_dist, site_dir: Path, forget_modules, tmp_path: Path
) -> None:
    """A hook plugin's ``register_interactions`` raising an error whose ``__str__`` raises
    ``GeneratorExit`` printed a traceback from every command, a run of another plugin's
    interaction included (``SystemExit`` there: exit 5, nothing said)."""
    make_dist("acme-unsayable-hooks", "1.0", {PLUGINS: {"unsayable": "acme_unsayable_hooks"}},
              {"acme_unsayable_hooks": UNSAYABLE_HOOKS})  # fmt: skip
    proc = cli(site_dir, tmp_path, "list", "--json")
    assert proc.returncode == 0, proc.stderr
    assert "gsm8k" in {row["name"] for row in json.loads(proc.stdout)}
    examples = Path(__file__).resolve().parents[2] / "examples"
    proc = cli(site_dir, tmp_path, "run", str(examples / "config.yaml"), "--data",
               str(examples / "gsm8k_demo.jsonl"), "--json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["episodes"] > 0


@pytest.mark.skipif(sys.platform == "win32", reason="fcntl locks")
def test_a_held_index_lock_is_waited_for_a_bounded_time(site: Path, tmp_path: Path) -> None:
    import fcntl

    folder = tmp_path / "fresh-cache" / "interactions-core"
    folder.mkdir(parents=True)
    with open(folder / "build.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # a process stuck while building the index
        began = time.monotonic()
        proc = cli(site, tmp_path, "list", "--json", INTERACTIONS_LOCK_TIMEOUT="1")
        assert time.monotonic() - began < 30
    assert proc.returncode == 0
    assert "chatty" in {row["name"] for row in json.loads(proc.stdout)}
    assert "held the index lock" in proc.stderr and "INTERACTIONS_LOCK_TIMEOUT" in proc.stderr


def test_list_check_with_a_pattern_imports_only_what_it_lists(
    site: Path, tmp_path: Path, make_dist
) -> None:
    """`list --check gsm*` imported every installed plugin first: one that closes standard
    output at import failed the listing of names it did not match, and the hanger made
    every filtered check wait its full import timeout."""
    make_dist("acme-closer", "1.0", {INTERACTIONS: {"closer": "acme_closer:Thing"}},
              {"acme_closer": "import os\nos.close(1)\n"})  # fmt: skip
    began = time.monotonic()
    proc = cli(site, tmp_path, "list", "--check", "chatty")
    assert time.monotonic() - began < 30  # the hanger's 3 s were never waited for
    assert proc.returncode == 0, proc.stderr
    assert "chatty" in proc.stdout and "ok" in proc.stdout
    assert "exiter" not in proc.stdout + proc.stderr and "closer" not in proc.stdout


def test_list_check_cuts_a_plugins_error_of_100_kb(make_dist, site_dir: Path, tmp_path: Path,
                                                    forget_modules) -> None:  # fmt: skip
    """A plugin's import error of 100 kB went whole into the table and into --json."""
    code = "raise RuntimeError('\\x1b[31m' + 'A' * 100_000 + '\\nline2')\n"
    make_dist("acme-huge", "1.0", {INTERACTIONS: {"huge": "acme_huge:Thing"}},
              {"acme_huge": code})  # fmt: skip
    proc = cli(site_dir, tmp_path, "list", "--check", "--json", "huge")
    assert proc.returncode == 1, proc.stderr
    (row,) = json.loads(proc.stdout)
    assert row["status"] == "broken" and len(row["error"]) < 11_000, len(row["error"])
    assert "more characters]" in row["error"]
    proc = cli(site_dir, tmp_path, "list", "--check", "huge")
    assert proc.returncode == 1 and len(proc.stdout) < 12_000, len(proc.stdout)
    assert "\x1b" not in proc.stdout
