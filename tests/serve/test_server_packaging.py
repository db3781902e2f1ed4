"""Exactly one OpenEnv distribution is installed, and it is the one the session pinned.

``nox -s serve`` and ``nox -s trl`` pin ``openenv`` 0.10 (what the extras install);
``nox -s serve_openenv_core`` pins the older ``openenv-core`` 0.3 alone. Each sets
``INTERACTIONS_EXPECT_OPENENV`` to its pin.
"""

from __future__ import annotations

import os
from importlib import metadata

import pytest

PACKAGES = ("openenv", "openenv-core")


def installed() -> dict[str, str]:
    found = {}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return found


def test_openenv_and_openenv_core_are_never_installed_together() -> None:
    assert len(installed()) == 1, installed()


def test_the_pinned_distribution_is_the_one_installed() -> None:
    expected = os.environ.get("INTERACTIONS_EXPECT_OPENENV")
    if not expected:
        pytest.skip("INTERACTIONS_EXPECT_OPENENV is set by the nox sessions that pin OpenEnv")
    name, version = expected.split("==")
    assert installed() == {name: version}
