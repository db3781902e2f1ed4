"""Helpers that several of the core's test files share: config files, sample plugins.

Fixtures live in ``conftest.py``; this module holds the plain functions and plugin
sources that more than one ``test_<module>.py`` needs.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from interactions_core import ConfigError, load_config


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def problems(source) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config(source)
    return info.value.problems
