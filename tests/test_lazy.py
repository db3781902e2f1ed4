"""``_lazy.py``: a package's public names, each imported from its submodule on first use."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import interactions_core

PACKAGE = """
from interactions_core._lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__, {"heavy": ("Heavy", "helper"), "light": ("Light",)}
)
"""


@pytest.fixture
def fake_pkg(site_dir: Path, forget_modules: None) -> object:
    folder = site_dir / "fake_lazy_pkg"
    folder.mkdir()
    (folder / "__init__.py").write_text(PACKAGE)
    (folder / "heavy.py").write_text("class Heavy: ...\n\ndef helper():\n    return 42\n")
    (folder / "light.py").write_text("class Light: ...\n")
    import fake_lazy_pkg

    return fake_lazy_pkg


def test_names_are_listed_without_importing_their_modules(fake_pkg) -> None:
    assert fake_pkg.__all__ == ["Heavy", "Light", "helper"]
    assert dir(fake_pkg) == ["Heavy", "Light", "helper"]
    assert "fake_lazy_pkg.heavy" not in sys.modules
    assert "fake_lazy_pkg.light" not in sys.modules


def test_first_use_imports_only_that_module_and_keeps_the_value(fake_pkg) -> None:
    assert fake_pkg.helper() == 42
    assert "fake_lazy_pkg.heavy" in sys.modules
    assert "fake_lazy_pkg.light" not in sys.modules
    assert fake_pkg.Heavy is sys.modules["fake_lazy_pkg.heavy"].Heavy
    assert vars(fake_pkg)["Heavy"] is fake_pkg.Heavy  # later lookups skip __getattr__


def test_an_unknown_name_is_an_attribute_error(fake_pkg) -> None:
    with pytest.raises(AttributeError, match="module 'fake_lazy_pkg' has no attribute 'Hevy'"):
        fake_pkg.Hevy  # noqa: B018
    assert not hasattr(fake_pkg, "light")  # a submodule name is not a public name


def test_the_core_package_lists_its_api_this_way() -> None:
    assert "InteractionResult" in interactions_core.__all__
    assert interactions_core.__all__ == sorted(interactions_core.__all__)
    from interactions_core.result import InteractionResult

    assert interactions_core.InteractionResult is InteractionResult
