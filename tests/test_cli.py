"""The CLI as users run it: a subprocess, exit codes, JSON shape, no tracebacks."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

GROUP = "interactions_core.interactions"
GOOD = """
from interactions_core import BaseInteraction, InteractionResult
import attrs

SIDE_EFFECT = __import__("pathlib").Path(__file__).with_name("imported.flag").touch()

@attrs.define
class Options:
    rounds: int = attrs.field(default=2, metadata={"help": "how many rounds"})

class AcmeInteraction(BaseInteraction):
    '''Says ok to everything.'''
    config_schema = Options

    async def generate_response(self, instance_id, messages, **kwargs):
        return InteractionResult(True, "ok", 1.0)
"""


def cli(*args: str, site: Path | None = None, env: dict[str, str] | None = None):
    environ = dict(os.environ)
    if site is not None:
        environ["PYTHONPATH"] = os.pathsep.join([str(site), environ.get("PYTHONPATH", "")])
    environ.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-m", "interactions_core", *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=120,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


@pytest.fixture
def site(make_dist, site_dir):
    make_dist(
        "acme-tasks", "1.2", {GROUP: {"acme": "acme_cli:AcmeInteraction"}}, {"acme_cli": GOOD}
    )
    make_dist(
        "acme-broken",
        "0.1",
        {GROUP: {"acme_broken": "acme_boom:Nope"}},
        {"acme_boom": "raise ImportError('no module named numpyy')\n"},
    )
    return site_dir


def test_list_json_shape_and_no_imports(site):
    proc = cli("list", "--json", site=site)
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    acme = rows["acme"]
    for key in ("name", "distribution", "version", "target", "status", "error"):
        assert key in acme
    assert (acme["distribution"], acme["version"], acme["status"], acme["error"]) == (
        "acme-tasks",
        "1.2",
        "ok",
        None,
    )
    assert rows["acme_broken"]["status"] == "ok"  # not known to be broken without --check
    assert not (site / "imported.flag").exists()  # listing imported no plugin code


def test_list_check_marks_broken_and_fails(site):
    proc = cli("list", "--check", "--json", site=site)
    assert proc.returncode == 1
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    assert rows["acme"]["status"] == "ok"
    assert rows["acme_broken"]["status"] == "broken"
    assert "numpyy" in rows["acme_broken"]["error"]


def test_list_table(site):
    proc = cli("list", site=site)
    assert proc.returncode == 0
    header = proc.stdout.splitlines()[0].split()
    assert header == ["NAME", "DISTRIBUTION", "VERSION", "TARGET", "STATUS"]
    assert any(
        line.split()[:3] == ["acme", "acme-tasks", "1.2"] for line in proc.stdout.splitlines()
    )


def test_list_respects_allow_list(site):
    proc = cli("list", "--json", site=site, env={"INTERACTIONS_PLUGINS": ""})
    assert {r["status"] for r in json.loads(proc.stdout)} <= {"disabled"}


def test_show_text_and_json(site):
    proc = cli("show", "acme", site=site)
    assert proc.returncode == 0, proc.stderr
    assert "Says ok to everything." in proc.stdout and "rounds: int" in proc.stdout
    data = json.loads(cli("show", "acme-tasks:acme", "--json", site=site).stdout)
    assert data["config_schema"] == [
        {
            "name": "rounds",
            "type": "int",
            "required": False,
            "default": 2,
            "help": "how many rounds",
        }
    ]


def test_show_errors_are_one_paragraph(site):
    proc = cli("show", "acm", site=site)
    assert proc.returncode == 1 and "did you mean 'acme'" in proc.stderr
    proc = cli("show", "acme_broken", site=site)
    assert proc.returncode == 1 and "numpyy" in proc.stderr


def test_check_valid_and_invalid(site, tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text("default: acme\ninteraction:\n  - name: acme\n    config: {rounds: 3}\n")
    proc = cli("check", str(good), site=site)
    assert proc.returncode == 0, proc.stderr
    assert "OK, 1 interaction" in proc.stdout and "acme-tasks:acme" in proc.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("interaction:\n  - name: acme\n    config: {rounds: many}\n  - name: acmee\n")
    proc = cli("check", str(bad), site=site)
    assert proc.returncode == 1
    assert f"{bad}:3: interaction[0].config.rounds" in proc.stderr
    assert f"{bad}:4:" in proc.stderr and "did you mean 'acme'" in proc.stderr


def test_check_missing_file_and_usage_errors(tmp_path):
    proc = cli("check", str(tmp_path / "nope.yaml"))
    assert proc.returncode == 1 and "cannot read config" in proc.stderr
    assert cli("frobnicate").returncode == 2
    assert cli().returncode == 2


def test_cache_commands(site, fresh_cache):
    cli("list", site=site)
    path = cli("cache", "path").stdout.strip()
    assert Path(path).is_dir()
    assert re.search(r"removed [1-9]\d* cache files?\n", cli("cache", "clear", site=site).stdout)
    assert not [p for p in Path(path).iterdir() if p.name.startswith(("index-", "hooks-"))]


def test_plugin_warnings_are_one_line_and_w_error_is_not_a_crash(make_dist, site_dir, tmp_path):
    make_dist("acme-future", "1.0", {GROUP: {"acme_future": "acme_fut:AcmeInteraction"}},
              {"acme_fut": GOOD}, requires=["interactions-core>=5"])  # fmt: skip
    config = tmp_path / "c.yaml"
    config.write_text("interaction:\n  - name: acme_future\n")
    proc = cli("check", str(config), site=site_dir)
    assert proc.returncode == 0
    assert "interactions: warning: plugin acme-future declares it supports" in proc.stderr
    assert "warnings.warn" not in proc.stderr and "IncompatibleCoreWarning" not in proc.stderr
    environ = dict(os.environ, PYTHONPATH=str(site_dir))
    strict = subprocess.run(
        [sys.executable, "-W", "error::UserWarning", "-m", "interactions_core", "check",
         str(config)], capture_output=True, text=True, env=environ, timeout=120,
    )  # fmt: skip
    assert strict.returncode == 1 and "raised as an error by the -W option" in strict.stderr
    assert "unexpected" not in strict.stderr and "Traceback" not in strict.stderr


def test_unknown_name_with_everything_disabled_says_so(site):
    proc = cli("show", "nothing_like_it", site=site, env={"INTERACTIONS_PLUGINS": ""})
    assert proc.returncode == 1
    assert "disabled by INTERACTIONS_PLUGINS / INTERACTIONS_DISABLE" in proc.stderr
    assert "No interactions are installed" not in proc.stderr
    proc = cli("show", "acme", site=site, env={"INTERACTIONS_PLUGINS": ""})
    assert "is disabled: INTERACTIONS_PLUGINS is set but empty" in proc.stderr
    proc = cli("list", site=site, env={"INTERACTIONS_PLUGINS": ""})
    assert "): disabled: INTERACTIONS_PLUGINS is set but empty" in proc.stdout, proc.stdout
    assert "disabled: disabled" not in proc.stdout
    proc = cli("list", site=site, env={"INTERACTIONS_DISABLE": "acme"})
    assert "): disabled by INTERACTIONS_DISABLE" in proc.stdout, proc.stdout


BREAKS_SPEC = """
from interactions_core import BaseInteraction
import attrs

@attrs.define
class Options:
    tags: tuple[str, ...] = ()

class Tagged(BaseInteraction):
    config_schema = Options

    async def generate_response(self, instance_id, messages, **kwargs):
        return True, "ok", 1.0, {}

class Sync(BaseInteraction):
    def generate_response(self, instance_id, messages, **kwargs):
        return True, "ok", 1.0, {}

    def calculate_score(self):
        return 0.0
"""


def test_list_check_prints_a_spec_problem_as_lines(make_dist, site_dir):
    make_dist("acme-sync", "1.0", {GROUP: {"acme_sync": "acme_spec:Sync"}},
              {"acme_spec": BREAKS_SPEC})  # fmt: skip
    proc = cli("list", "--check", site=site_dir)
    assert proc.returncode == 1
    assert "\\n" not in proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    problems = [line.strip() for line in lines if line.lstrip().startswith("- ")]
    assert any("generate_response" in p for p in problems), proc.stdout
    assert any("calculate_score" in p for p in problems), proc.stdout


def test_a_string_where_a_list_is_expected_is_called_a_list(make_dist, site_dir, tmp_path):
    make_dist("acme-tagged", "1.0", {GROUP: {"acme_tagged": "acme_spec:Tagged"}},
              {"acme_spec": BREAKS_SPEC})  # fmt: skip
    config = tmp_path / "c.yaml"
    config.write_text("interaction:\n  - name: acme_tagged\n    config:\n      tags: red\n")
    proc = cli("check", str(config), site=site_dir)
    assert proc.returncode == 1
    assert "option 'tags' must be list[str], got str 'red'" in proc.stderr + proc.stdout
    assert "tuple" not in proc.stderr + proc.stdout


def test_a_distribution_whose_entry_points_are_not_utf8_is_left_out_not_fatal(site):
    """One installed distribution's entry_points.txt in latin-1 made every command (`list`,
    `check`, `run`, `data`, `show`) end with "unexpected UnicodeDecodeError"."""
    info = site / "oddly_saved-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: oddly-saved\nVersion: 1.0\n")
    (info / "entry_points.txt").write_bytes(f"[{GROUP}]\ncaf\xe9 = x:Y\n".encode("latin-1"))
    proc = cli("list", "--json", site=site)
    assert proc.returncode == 0, proc.stderr
    names = {r["name"] for r in json.loads(proc.stdout)}
    assert "acme" in names and not any(n.startswith("caf") for n in names)
    assert "oddly_saved-1.0.dist-info" in proc.stderr and "save its entry_points.txt as UTF-8" in (
        proc.stderr
    )
    assert "unexpected" not in proc.stderr
    assert cli("show", "acme", site=site).returncode == 0


def test_a_distribution_with_a_malformed_entry_point_line_is_left_out_not_fatal(site):
    """A line without "=" in any section of one distribution's entry_points.txt made
    importlib raise TypeError, and every command ended with "unexpected TypeError"."""
    info = site / "badly_written-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: badly-written\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[console_scripts]\nfoo\n")
    proc = cli("list", "--json", site=site)
    assert proc.returncode == 0, proc.stderr
    assert "acme" in {r["name"] for r in json.loads(proc.stdout)}
    assert "badly_written-0.1.dist-info" in proc.stderr and "unexpected" not in proc.stderr
