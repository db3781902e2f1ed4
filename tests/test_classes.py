"""``_classes.py``: importing a plugin's class with errors that point at the fault (the
plugin's file and line, did-you-mean, the chained cause); verl's dotted ``class_name``
paths via the loader and verl's drop-in; the core versions a plugin supports; the one
validator of what a policy or a dataset builder is given."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from core_helpers import problems, write

from interactions_core import __version__
from interactions_core import _classes as versions
from interactions_core._classes import (
    IncompatibleCoreWarning,
    check_core_requirement,
    check_options,
    core_requirement,
    keyword_options,
    satisfies,
)
from interactions_core.cli import main
from interactions_core.compat.verl import initialize_interactions_from_config
from interactions_core.errors import ConfigError, PluginLoadError
from interactions_core.loader import load_config
from interactions_core.registry import Registry, get_registry

GROUP = "interactions_core.interactions"


# -- errors that point at the fault ----------------------------------------------------


GOOD = """
class Gsm8kLikeInteraction:
    '''Fine.'''
    def __init__(self, config):
        self.config = config
    async def start_interaction(self, instance_id=None, **kwargs):
        return instance_id or "x"
    async def generate_response(self, instance_id, messages, **kwargs):
        return True, "ok", 1.0, {}
    async def calculate_score(self, instance_id, **kwargs):
        return 1.0
    async def finalize_interaction(self, instance_id, **kwargs):
        return None
"""


def test_import_failure_names_the_plugin_file_and_line(make_dist, forget_modules, monkeypatch):
    monkeypatch.delenv("INTERACTIONS_DEBUG", raising=False)
    make_dist(
        "broken-dist",
        entry_points={GROUP: {"acme_boom": "broken_fault:Boom"}},
        modules={"broken_fault": "import os\n\n\nvalue = {}['missing']\n"},
    )
    with pytest.raises(PluginLoadError) as info:
        get_registry().load("acme_boom")
    message = str(info.value)
    assert "KeyError: 'missing'" in message
    assert "broken_fault.py:4" in message
    assert "INTERACTIONS_DEBUG=1" in message
    assert isinstance(info.value.__cause__, KeyError)


def test_syntax_error_points_at_its_line(make_dist, forget_modules):
    make_dist(
        "broken-dist",
        entry_points={GROUP: {"acme_syntax": "broken_syntax:Boom"}},
        modules={"broken_syntax": "x = 1\ny = (\n"},
    )
    with pytest.raises(PluginLoadError, match=r"broken_syntax\.py:2"):
        get_registry().load("acme_syntax")


def test_debug_shows_the_whole_traceback(make_dist, forget_modules, monkeypatch):
    monkeypatch.setenv("INTERACTIONS_DEBUG", "1")
    make_dist(
        "broken-dist",
        entry_points={GROUP: {"acme_deep": "broken_deep:Boom"}},
        modules={
            "broken_deep": "import broken_helper\n",
            "broken_helper": "def f():\n    raise ValueError('deep down')\nf()\n",
        },
    )
    with pytest.raises(PluginLoadError) as info:
        get_registry().load("acme_deep")
    message = str(info.value)
    assert "Traceback (most recent call last)" in message
    assert "broken_helper.py" in message and "ValueError: deep down" in message
    assert "at " in message and "broken_helper.py:2" in message


def test_missing_attribute_gets_a_did_you_mean_and_the_fix(make_dist, forget_modules, capsys):
    make_dist(
        "acme-dist",
        entry_points={GROUP: {"acme_typo": "acme_fault:Gsm8kLikeInteracton"}},
        modules={"acme_fault": GOOD},
    )
    with pytest.raises(PluginLoadError) as info:
        get_registry().load("acme_typo")
    message = str(info.value)
    assert "did you mean 'Gsm8kLikeInteraction'?" in message
    assert "fix the entry point in the plugin's pyproject.toml and reinstall" in message
    assert main(["show", "acme_typo"]) == 1
    assert "did you mean 'Gsm8kLikeInteraction'?" in capsys.readouterr().err


def test_config_error_chains_the_cause(make_dist, forget_modules, tmp_path):
    make_dist(
        "broken-dist",
        entry_points={GROUP: {"acme_chain": "broken_chain:Boom"}},
        modules={"broken_chain": "raise RuntimeError('kaboom')\n"},
    )
    config = tmp_path / "c.yaml"
    config.write_text("interaction:\n  - name: acme_chain\n")
    with pytest.raises(ConfigError) as info:
        load_config(str(config))
    assert "broken_chain.py:1" in str(info.value)
    assert isinstance(info.value.__cause__, PluginLoadError)
    assert isinstance(info.value.__cause__.__cause__, RuntimeError)


def test_class_name_with_a_missing_class(make_dist, forget_modules, tmp_path):
    make_dist("acme-dist", modules={"acme_cls": GOOD})
    config = tmp_path / "c.yaml"
    config.write_text("interaction:\n  - class_name: acme_cls.Gsm8kLikeInteractio\n")
    with pytest.raises(ConfigError, match="did you mean 'Gsm8kLikeInteraction'"):
        load_config(str(config))


# -- verl's dotted class paths ---------------------------------------------------------


VERLISH = """
from interactions_core.compat.verl import BaseInteraction

class EchoInteraction(BaseInteraction):
    def __init__(self, config):
        super().__init__(config)
        self._instance_dict = {}

    async def generate_response(self, instance_id, messages, **kwargs):
        return True, messages[-1]["content"], 1.0, {}
"""


def test_verl_compat_loader_accepts_dotted_class_paths(tmp_path, site_dir, forget_modules):
    (site_dir / "verlish_mod.py").write_text(VERLISH)
    path = write(
        tmp_path,
        """
        interaction:
          - class_name: verlish_mod.EchoInteraction
            config: {anything: 1}
          - name: second
            class_name: verlish_mod.EchoInteraction
        """,
    )
    interactions = initialize_interactions_from_config(str(path))
    assert list(interactions) == ["echo", "second"]
    assert interactions["echo"].config == {"anything": 1, "name": "echo"}


def test_verl_duplicate_names_are_value_errors(tmp_path, site_dir, forget_modules):
    (site_dir / "verlish_mod.py").write_text(VERLISH)
    path = write(
        tmp_path,
        """
        interaction:
          - class_name: verlish_mod.EchoInteraction
          - name: echo
            class_name: verlish_mod.EchoInteraction
        """,
    )
    with pytest.raises(ValueError, match="Duplicate interaction name 'echo' found"):
        initialize_interactions_from_config(str(path))


def test_failed_dotted_import_leaves_no_half_module(tmp_path, site_dir, forget_modules):
    (site_dir / "verlish_bad.py").write_text("import json\nraise RuntimeError('half')\n")
    path = write(tmp_path, "interaction:\n  - class_name: verlish_bad.X\n")
    [problem] = problems(path)
    assert "half" in problem and f"{path}:2:" in problem
    assert "verlish_bad" not in sys.modules


def test_dotted_paths_can_be_refused(tmp_path, site_dir, monkeypatch, forget_modules):
    (site_dir / "verlish_mod.py").write_text(VERLISH)
    monkeypatch.setenv("INTERACTIONS_NO_CLASS_PATHS", "1")
    path = write(tmp_path, "interaction:\n  - class_name: verlish_mod.EchoInteraction\n")
    assert "refused" in problems(path)[0]
    assert "verlish_mod" not in sys.modules


# -- the core versions a plugin supports -----------------------------------------------


MODULE = """
from interactions_core import InteractionResult, SessionInteraction

class Vers(SessionInteraction):
    async def respond(self, state, messages, **kwargs):
        return InteractionResult(True, "", 0.0)
"""


@pytest.fixture(autouse=True)
def _fresh_warnings() -> Any:
    versions._warned.clear()
    yield
    versions._warned.clear()


@pytest.mark.parametrize(
    ("version", "spec", "expected"),
    [
        ("0.1.0", ">=0.1,<0.2", True),
        ("0.2.0", ">=0.1,<0.2", False),
        ("0.1.5", "~=0.1", True),
        ("1.0", "~=0.1", False),
        ("0.1.3", "~=0.1.2", True),
        ("0.2.0", "~=0.1.2", False),
        ("0.1", "==0.1.0", True),
        ("0.1.7", "==0.1.*", True),
        ("0.2.0", "==0.1.*", False),
        ("0.2.0", "!=0.1.*", True),
        # PEP 440: "<V" excludes V's own pre-releases, ">V" its post-releases
        ("0.2.0rc1", "<0.2", False),
        ("0.2.0rc1", ">=0.2", False),
        ("0.2.0.dev3", "<0.2.0a1", True),
        ("0.2.0.post1", ">0.2.0", False),
        ("0.2.1", ">0.2.0", True),
        ("0.1.0", "", True),
        ("0.1.0", "===0.1.0", True),
        ("0.1.0", ">=banana", None),
        ("0.1.0", "<>0.1", None),
    ],
)
def test_specifiers(version: str, spec: str, expected: bool | None) -> None:
    assert satisfies(version, spec) is expected


def _metadata(tmp_path: Path, *requires: str) -> str:
    folder = tmp_path / "acme_vers-1.0.dist-info"
    folder.mkdir()
    lines = ["Metadata-Version: 2.1", "Name: acme-vers", "Version: 1.0"]
    lines += [f"Requires-Dist: {r}" for r in requires]
    (folder / "METADATA").write_text("\n".join(lines) + "\n\nLong description\nRequires-Dist: x\n")
    return str(folder)


@pytest.mark.parametrize(
    ("requires", "expected"),
    [
        (["attrs>=23", "interactions-core>=0.1,<0.2"], ">=0.1,<0.2"),
        (["Interactions_Core (>=0.1)"], ">=0.1"),
        (["interactions-core>=0.3; python_version >= '3.10'"], ">=0.3"),
        (['interactions-core[parquet]>=0.1 ; extra == "test"'], None),
        (["interactions-core"], ""),
        (["interactions-corex>=9"], None),
        ([], None),
    ],
)
def test_core_requirement_reads_metadata(
    tmp_path: Path, requires: list[str], expected: str | None
) -> None:
    assert core_requirement(_metadata(tmp_path, *requires)) == expected


def test_missing_metadata_is_no_requirement(tmp_path: Path) -> None:
    assert core_requirement(str(tmp_path / "nowhere")) is None


def test_check_names_plugin_range_and_running_core(tmp_path: Path) -> None:
    path = _metadata(tmp_path, "interactions-core>=9.0,<10")
    message = check_core_requirement("acme-vers", path, core_version="0.1.0")
    assert message == (
        "plugin acme-vers declares it supports interactions-core >=9.0,<10, "
        "but interactions-core 0.1.0 is running"
    )
    assert check_core_requirement("acme-vers", path, core_version="9.1") is None
    assert check_core_requirement("interactions-core", path) is None


def test_loading_a_plugin_for_another_core_warns_once(make_dist: Any, forget_modules: Any) -> None:
    make_dist(
        "acme-vers",
        entry_points={"interactions_core.interactions": {"vers": "acme_vers:Vers"}},
        modules={"acme_vers": MODULE},
        requires=["interactions-core>=99.0"],
    )
    registry = Registry.from_environment(use_cache=False)
    assert [e.name for e in registry.entries() if e.distribution == "acme-vers"] == ["vers"]
    with pytest.warns(IncompatibleCoreWarning) as record:
        registry.load("vers")
    text = str(record[0].message)
    assert "acme-vers" in text and ">=99.0" in text and __version__ in text
    assert "interaction 'vers'" in text and "pip install" in text
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Registry.from_environment(use_cache=False).load("vers")  # once per plugin version


def test_supported_core_loads_silently(make_dist: Any, forget_modules: Any) -> None:
    make_dist(
        "acme-vers",
        entry_points={"interactions_core.interactions": {"vers": "acme_vers:Vers"}},
        modules={"acme_vers": MODULE},
        requires=[f"interactions-core=={__version__}", "attrs"],
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Registry.from_environment(use_cache=False).load("vers")


def test_listing_never_reads_requirements(
    make_dist: Any, forget_modules: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_dist(
        "acme-vers",
        entry_points={"interactions_core.interactions": {"vers": "acme_vers:Vers"}},
        modules={"acme_vers": MODULE},
        requires=["interactions-core>=99.0"],
    )

    def boom(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("listing must not check versions")

    monkeypatch.setattr(versions, "check_core_requirement", boom)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert "vers" in Registry.from_environment(use_cache=False).names()


# -- the options a callable accepts ----------------------------------------------------


def build(*, city: str, days: int = 3, max_rows: int = 10) -> list[Any]:
    return []


def open_ended(**options: Any) -> list[Any]:
    return []


def test_every_problem_at_once_with_a_did_you_mean() -> None:
    problems = check_options("builder 'w'", build, {"citty": "Paris", "dayz": 2})
    assert problems == [
        "builder 'w': unknown option 'citty'; did you mean 'city'? "
        "(options: 'city', 'days', 'max_rows')",
        "builder 'w': unknown option 'dayz'; did you mean 'days'? "
        "(options: 'city', 'days', 'max_rows')",
        "builder 'w': option 'city' is required",
    ]


def test_defaults_can_provide_required_options_and_render_spells_flags() -> None:
    def flag(key: str) -> str:
        return "--" + key.replace("_", "-")

    problems = check_options(
        "builder 'w'", build, {"max_row": 1}, provided={"city": "Oslo"}, render=flag
    )
    assert problems == [
        "builder 'w': unknown option --max-row; did you mean --max-rows? "
        "(options: --city, --days, --max-rows)"
    ]


def test_a_kwargs_callable_checks_its_own_options() -> None:
    assert check_options("policy 'x'", open_ended, {"anything": 1}) == []
    assert keyword_options(open_ended) == {}
    assert list(keyword_options(build)) == ["city", "days", "max_rows"]
