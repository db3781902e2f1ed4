"""The install commands of docs/install.md, docs/writing-plugins.md and a scaffolded
plugin's README, run as written in fresh virtualenvs.

interactions-core is not on the package index, so these commands are the only way
to install it outside a development checkout: the core from a checkout path or a
wheel, then plugins, whose ``interactions-core`` dependency pip can satisfy only from
what is already installed (or given in the same command). Each test copies the
commands out of the pages, so a page that drifts from what works fails here.
Dependencies (pluggy, PyYAML, pytest...) come from the package index.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from packaging_proof import ROOT, Venv, build_wheels

INSTALL_PAGE = ROOT / "docs" / "install.md"
PLUGINS_PAGE = ROOT / "docs" / "writing-plugins.md"
#: What a scaffolded README says in place of the core's checkout folder.
CORE_PLACEHOLDER = "path/to/interactions-core"
#: The error pip gives for a plugin installed before the core (quoted in docs/install.md).
NO_CORE = "No matching distribution found for interactions-core"


def bash_blocks(text: str, section: str) -> list[str]:
    """The ```bash blocks under the Markdown heading ``section`` (up to the next one)."""
    match = re.search(rf"^#+ {re.escape(section)}\n(.*?)(?=^#+ |\Z)", text, re.M | re.S)
    assert match, f"no section {section!r}"
    return re.findall(r"^```bash\n(.*?)^```", match.group(1), re.M | re.S)


def shell(venv: Venv, script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``script`` under bash with the virtualenv activated, as a user would type it."""
    bindir = str(Path(venv.python).parent)
    env = {**venv.env, "VIRTUAL_ENV": str(venv.path)}
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=900,
    )


def ok(proc: subprocess.CompletedProcess[str], what: str) -> str:
    assert proc.returncode == 0, f"{what} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc.stdout


@pytest.mark.slow
def test_a_scaffolded_plugin_from_a_checkout(tmp_path: Path) -> None:
    """Core from the checkout, a bundled plugin, then ``interactions new`` and the new
    plugin installed and tested the way its README says, all in one fresh virtualenv."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "interactions-core").symlink_to(ROOT, target_is_directory=True)
    venv = Venv(tmp_path / "venv", tmp_path / "cache", sys.executable)

    # The order the page insists on: a plugin alone cannot find its core.
    alone = shell(venv, "pip install ./interactions-core/plugins/interactions-gsm8k", work)
    assert alone.returncode != 0 and NO_CORE in alone.stdout + alone.stderr, alone.stderr
    assert NO_CORE in INSTALL_PAGE.read_text(encoding="utf-8")

    [checkout] = bash_blocks(INSTALL_PAGE.read_text(encoding="utf-8"), "From a checkout")[:1]
    listed = ok(shell(venv, checkout, work), "docs/install.md 'From a checkout'")
    assert re.search(r"^gsm8k\s+interactions-gsm8k\s+0\.1\.0\s.*\sok$", listed, re.M), listed

    ok(shell(venv, "interactions new my_task", work), "interactions new my_task")
    plugin = work / "interactions-my-task"
    generate = bash_blocks(PLUGINS_PAGE.read_text(encoding="utf-8"), "1. Generate the distribution")
    fresh = [b for b in generate if "pip install ./interactions-core" in b]
    assert len(fresh) == 1, "docs/writing-plugins.md: the fresh-virtualenv block is gone"
    ok(shell(venv, fresh[0], work), "docs/writing-plugins.md's install in a fresh virtualenv")

    readme = (plugin / "README.md").read_text(encoding="utf-8")
    [install] = bash_blocks(readme, "Install and use")
    assert CORE_PLACEHOLDER in install, "the README no longer says to install the core first"
    install = install.replace(CORE_PLACEHOLDER, "../interactions-core")
    shown = ok(shell(venv, install, plugin), "the README's 'Install and use'")
    assert "my_task" in shown and "interactions-my-task" in shown, shown

    [tests] = bash_blocks(readme, "Test")
    out = ok(shell(venv, tests, plugin), "the README's 'Test' (the plugin's own tests)")
    summary = out.strip().splitlines()[-1]
    assert re.search(r"\b\d+ passed\b", summary), out
    assert not re.search(r"failed|skipped|error", summary), out  # the entry point test too


@pytest.mark.slow
def test_wheels_install_the_way_the_page_says(tmp_path: Path) -> None:
    """The wheels ``nox -s build`` writes, installed by path and with ``--find-links``."""
    sources = [
        ROOT,
        *(ROOT / "plugins" / p for p in ("interactions-gsm8k", "interactions-weather")),
    ]
    build_wheels(sources, tmp_path / "dist", [])
    blocks = bash_blocks(INSTALL_PAGE.read_text(encoding="utf-8"), "From wheels")
    by_path = "\n".join(line for line in blocks[0].splitlines() if line != "nox -s build")
    assert "nox -s build" in blocks[0] and "interactions_core-" in by_path
    [find_links] = [b for b in blocks if "--find-links" in b]

    venv = Venv(tmp_path / "venv", tmp_path / "cache", sys.executable)
    ok(shell(venv, by_path + "\ninteractions show gsm8k", tmp_path), "install by wheel path")
    other = Venv(tmp_path / "venv2", tmp_path / "cache", sys.executable)
    ok(shell(other, find_links, tmp_path), "install with --find-links")
    listed = ok(shell(other, "interactions list", tmp_path), "interactions list")
    assert re.search(r"^weather\s+interactions-weather\s", listed, re.M), listed
    assert "gsm8k" not in listed  # only what was named was installed
