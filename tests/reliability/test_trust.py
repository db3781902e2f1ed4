"""The trust model: installing a distribution is the act of trust; a config is data.

Every plugin module generated here leaves a ``<module>.imported`` file in the
folder ``$ACME_MARKS`` when its code runs, so a test can prove that code did
*not* run. (The marks live outside the site folder, and no bytecode is written
there: a new file in a ``sys.path`` folder changes the index cache's key.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from interactions_core import ConfigError, load_config
from interactions_core._classes import load_class_path
from interactions_core.compat.verl import initialize_interactions_from_config
from interactions_core.errors import DisabledError, TrustError
from interactions_core.registry import Registry, reset_registry

INTERACTIONS = "interactions_core.interactions"
PLUGINS = "interactions_core.plugins"
POLICIES = "interactions_core.policies"

MARK = (
    "import os as _o, pathlib as _p\n"
    "(_p.Path(_o.environ['ACME_MARKS']) / (__name__ + '.imported')).touch()\n"
)

INTERACTION = (
    MARK
    + """
from interactions_core import BaseInteraction, InteractionResult

class AcmeInteraction(BaseInteraction):
    async def generate_response(self, instance_id, messages, **kwargs):
        return InteractionResult(True, "ok", 1.0)
"""
)

HOOKS = (
    MARK
    + """
from interactions_core import BaseInteraction, InteractionResult, hookimpl

class Hooked(BaseInteraction):
    async def generate_response(self, instance_id, messages, **kwargs):
        return InteractionResult(True, "hooked", 1.0)

@hookimpl
def register_interactions(register):
    register("hooked", Hooked)

@hookimpl
def on_session_start(interaction_name, instance_id, kwargs):
    pass
"""
)

POLICY = (
    MARK
    + """
from interactions_core.runtime.policies.base import Policy

class AcmePolicy(Policy):
    def reply(self, state, messages):
        return None
"""
)


def imported(site: Path, module: str) -> bool:
    return (site.parent / "marks" / f"{module}.imported").exists()


@pytest.fixture
def site(make_dist, site_dir: Path, forget_modules, monkeypatch: pytest.MonkeyPatch) -> Path:
    (site_dir.parent / "marks").mkdir()
    monkeypatch.setenv("ACME_MARKS", str(site_dir.parent / "marks"))
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    make_dist(
        "acme-trust",
        "1.0",
        {INTERACTIONS: {"acme": "acme_trust:AcmeInteraction"}},
        {"acme_trust": INTERACTION},
    )
    make_dist("acme-hooks", "1.0", {PLUGINS: {"hooks": "acme_hooks"}}, {"acme_hooks": HOOKS})
    make_dist(
        "acme-policy",
        "1.0",
        {POLICIES: {"acme-policy": "acme_policy:AcmePolicy"}},
        {"acme_policy": POLICY},
    )
    (site_dir / "acme_dotted.py").write_text(INTERACTION)
    return site_dir


def cli(site: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environ = {**os.environ, "PYTHONPATH": str(site), **(env or {})}
    proc = subprocess.run(
        [sys.executable, "-m", "interactions_core", *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=120,
        cwd=site.parent,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def write_config(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(body)
    return path


# -- listing never runs interaction code ---------------------------------------------


def test_list_imports_no_interaction_code_cold_or_warm(site: Path) -> None:
    for args in (("list",), ("list", "--json"), ("list",)):  # cold cache, then warm
        proc = cli(site, *args)
        assert proc.returncode == 0, proc.stderr
        assert "acme" in proc.stdout
        assert not imported(site, "acme_trust")


def test_warm_list_imports_no_hook_plugin_either(site: Path) -> None:
    """A hook plugin's names are not in metadata: it is imported once, to build the index."""
    cli(site, "list")
    (site.parent / "marks" / "acme_hooks.imported").unlink()
    proc = cli(site, "list", "--json")
    assert "hooked" in {row["name"] for row in json.loads(proc.stdout)}
    assert not imported(site, "acme_hooks") and not imported(site, "acme_trust")


def test_a_hook_name_holding_a_lone_surrogate_keeps_the_cache_warm(site: Path, make_dist) -> None:
    """A name a hook plugin registered with a lone surrogate could not be encoded as UTF-8:
    the index cache was never written, so every command rebuilt the index and imported
    every hook plugin (1.5 to 2 s a listing, against 0.09 s warm)."""
    odd = HOOKS.replace('register("hooked", Hooked)', 'register("odd/\\udc80", Hooked)')
    make_dist("acme-oddnames", "1.0", {PLUGINS: {"odd": "acme_oddnames"}}, {"acme_oddnames": odd})
    first = cli(site, "list")
    assert first.returncode == 0 and "cannot write the index cache" not in first.stderr
    for module in ("acme_hooks", "acme_oddnames"):
        (site.parent / "marks" / f"{module}.imported").unlink()
    proc = cli(site, "list", "--json")
    assert "odd/\udc80" in {row["name"] for row in json.loads(proc.stdout)}
    assert not imported(site, "acme_hooks") and not imported(site, "acme_oddnames")


def test_list_check_is_the_explicit_opt_in(site: Path) -> None:
    proc = cli(site, "list", "--check")
    assert proc.returncode == 0, proc.stderr
    assert imported(site, "acme_trust")


# -- dotted class paths ----------------------------------------------------------------


DOTTED = "interaction:\n  - name: legacy\n    class_name: acme_dotted.AcmeInteraction\n"


def test_no_class_paths_env_refuses_without_importing(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INTERACTIONS_NO_CLASS_PATHS", "1")
    config = write_config(tmp_path, DOTTED)
    for load in (load_config, initialize_interactions_from_config):
        with pytest.raises(ConfigError, match="INTERACTIONS_NO_CLASS_PATHS") as info:
            load(str(config))
        assert f"{config}:3" in info.value.problems[0]
    with pytest.raises(TrustError):
        load_class_path("acme_dotted.AcmeInteraction")
    assert "acme_dotted" not in sys.modules and not imported(site, "acme_dotted")


def test_check_no_class_paths_flag_refuses_without_importing(site: Path, tmp_path: Path) -> None:
    config = write_config(tmp_path, DOTTED)
    proc = cli(site, "check", "--no-class-paths", str(config))
    assert proc.returncode == 1 and "INTERACTIONS_NO_CLASS_PATHS" in proc.stderr
    assert not imported(site, "acme_dotted")
    proc = cli(site, "check", str(config))  # control: without the flag the path is trusted
    assert proc.returncode == 0, proc.stderr
    assert imported(site, "acme_dotted")


@pytest.mark.parametrize(
    ("variable", "value", "reason"),
    [
        ("INTERACTIONS_DISABLE", "acme_dotted", "disabled by INTERACTIONS_DISABLE"),
        ("INTERACTIONS_DISABLE", "acme_dotted.AcmeInteraction", "disabled by INTERACTIONS_DISABLE"),
        ("INTERACTIONS_PLUGINS", "gsm8k", "not in INTERACTIONS_PLUGINS"),
        ("INTERACTIONS_PLUGINS", "", "set but empty"),
    ],
)
def test_allow_and_deny_lists_apply_to_dotted_paths(
    site: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    value: str,
    reason: str,
) -> None:
    monkeypatch.setenv(variable, value)
    reset_registry()
    with pytest.raises(ConfigError, match=reason):
        load_config(str(write_config(tmp_path, DOTTED)))
    with pytest.raises(DisabledError):
        load_class_path("acme_dotted.AcmeInteraction")
    assert "acme_dotted" not in sys.modules and not imported(site, "acme_dotted")


def test_allow_list_naming_the_dotted_path_allows_it(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INTERACTIONS_PLUGINS", "acme_dotted")
    reset_registry()
    assert load_config(str(write_config(tmp_path, DOTTED))).names == ["legacy"]
    assert imported(site, "acme_dotted")


# -- entry-point interactions, hook plugins and policies ------------------------------------


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("INTERACTIONS_DISABLE", "acme"),
        ("INTERACTIONS_DISABLE", "acme-trust"),
        ("INTERACTIONS_DISABLE", "Acme_Trust"),
        ("INTERACTIONS_DISABLE", "acme-trust:acme"),
        ("INTERACTIONS_PLUGINS", "gsm8k"),
        ("INTERACTIONS_PLUGINS", ""),
    ],
)
def test_lists_apply_to_entry_point_interactions(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    reset_registry()
    with pytest.raises(ConfigError, match=variable):
        load_config(str(write_config(tmp_path, "interaction:\n  - name: acme\n")))
    registry = Registry.from_environment()
    registry.check()
    [entry] = [e for e in registry.entries() if e.name == "acme"]
    assert entry.status == "disabled" and variable in (entry.error or "")
    assert not imported(site, "acme_trust")


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("INTERACTIONS_DISABLE", "acme-hooks"),
        ("INTERACTIONS_DISABLE", "hooks"),
        ("INTERACTIONS_DISABLE", "acme-hooks:hooks"),
        ("INTERACTIONS_PLUGINS", "acme"),
    ],
)
def test_a_disabled_hook_plugin_is_never_imported(
    site: Path, tmp_path: Path, variable: str, value: str
) -> None:
    env = {variable: value}
    for args in (("list",), ("list", "--json"), ("list", "--check"), ("run", "--list-policies")):
        proc = cli(site, *args, env=env)
        assert proc.returncode == 0, (args, proc.stderr)
        assert "hooked" not in proc.stdout
    config = write_config(tmp_path, "interaction:\n  - name: hooked\n")
    proc = cli(site, "check", str(config), env=env)
    assert proc.returncode == 1
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"prompt": [{"role": "user", "content": "hi"}], "responses": ["a"]}))
    if variable == "INTERACTIONS_DISABLE":
        proc = cli(site, "run", "--data", str(data), env=env)  # observers are looked up
        assert proc.returncode == 0, proc.stderr
    assert not imported(site, "acme_hooks")


def test_an_allowed_hook_plugin_is_used(site: Path, tmp_path: Path) -> None:
    config = write_config(tmp_path, "interaction:\n  - name: hooked\n")
    proc = cli(site, "check", str(config))
    assert proc.returncode == 0, proc.stderr
    assert imported(site, "acme_hooks")


@pytest.mark.parametrize("value", ["acme-policy", "acme-policy:acme-policy"])
def test_lists_apply_to_policies(site: Path, tmp_path: Path, value: str) -> None:
    env = {"INTERACTIONS_DISABLE": value}
    proc = cli(site, "run", "--list-policies", "--json", env=env)
    assert proc.returncode == 0
    assert "acme-policy" not in {row["name"] for row in json.loads(proc.stdout)}
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"prompt": [{"role": "user", "content": "hi"}]}) + "\n")
    proc = cli(site, "run", "--data", str(data), "--policy", "acme-policy", env=env)
    assert proc.returncode == 1 and "policy 'acme-policy'" in proc.stderr
    assert "is disabled by INTERACTIONS_DISABLE" in proc.stderr
    assert not imported(site, "acme_policy")
    proc = cli(site, "run", "--data", str(data), "--policy", "acme-policy")  # control
    assert proc.returncode == 0, proc.stderr
    assert imported(site, "acme_policy")


@pytest.mark.parametrize("route", ["acme_trust.AcmeInteraction", "acme_alias.Alias"])
def test_a_disabled_interaction_is_refused_by_its_class_path_too(
    site: Path, tmp_path: Path, route: str
) -> None:
    (site / "acme_alias.py").write_text("from acme_trust import AcmeInteraction as Alias\n")
    config = write_config(tmp_path, f"interaction:\n  - name: sneaky\n    class_name: {route}\n")
    proc = cli(site, "check", str(config), env={"INTERACTIONS_DISABLE": "acme"})
    assert proc.returncode == 1
    assert "disabled" in proc.stderr and "any route" in proc.stderr
    if route == "acme_trust.AcmeInteraction":
        assert not imported(site, "acme_trust")  # refused before importing
    proc = cli(site, "check", str(config))  # control: allowed without the deny-list
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("variable", ["INTERACTIONS_DISABLE", "INTERACTIONS_PLUGINS"])
def test_unknown_names_in_the_lists_are_warned_about(site: Path, variable: str) -> None:
    for args in (("list",), ("list", "--json")):
        proc = cli(site, *args, env={variable: "acme-trustt,acme_dotted,acme_trust.Other"})
        assert proc.returncode == 0
        assert "interactions: warning:" in proc.stderr
        assert "'acme-trustt'" in proc.stderr and "did you mean 'acme-trust'" in proc.stderr
        # a top-level package and a dotted path are legitimate entries, not typos
        assert "'acme_dotted'" not in proc.stderr and "acme_trust.Other" not in proc.stderr
    proc = cli(site, "list", env={variable: "acme"})
    assert "warning" not in proc.stderr
