"""The verl <= 0.7 drop-in against verl 0.7.1's released code (``nox -s verl_legacy``).

That session downloads verl 0.7.1's wheel and source distribution from the package
index and names them in ``INTERACTIONS_VERL_LEGACY_WHEEL`` and
``INTERACTIONS_VERL_LEGACY_SDIST``; verl's code and tests are read from there at
test time and never copied into this repository. Without those variables (the
core's own test run) these files are reported as skipped.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest
from suites import requires

WHEEL_VAR = "INTERACTIONS_VERL_LEGACY_WHEEL"
SDIST_VAR = "INTERACTIONS_VERL_LEGACY_SDIST"

pytest_pycollect_makemodule = requires("verl_legacy", env=(WHEEL_VAR, SDIST_VAR))


@pytest.fixture(scope="session")
def verl_wheel_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """verl 0.7.1's wheel unpacked: a folder holding the ``verl`` package."""
    root = tmp_path_factory.mktemp("verl-0.7.1")
    with zipfile.ZipFile(os.environ[WHEEL_VAR]) as wheel:
        wheel.extractall(root)
    assert (root / "verl" / "interactions" / "gsm8k_interaction.py").is_file()
    return root
