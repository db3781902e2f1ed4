"""Plugins declare the core versions they support; the core warns clearly on a mismatch."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from interactions_core import __version__
from interactions_core import _classes as versions
from interactions_core._classes import (
    IncompatibleCoreWarning,
    check_core_requirement,
    core_requirement,
    satisfies,
)
from interactions_core.registry import Registry

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
