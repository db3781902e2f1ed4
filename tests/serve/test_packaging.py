"""The extras install OpenEnv's current package, ``openenv``, and never ``openenv-core``.

Both distributions install the same ``openenv`` import package, so requiring the
old one would give a user who has ``openenv`` 0.10 both at once.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # the standard library gained tomllib in 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]


def extras() -> dict[str, list[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return project["optional-dependencies"]


def distribution(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert match, requirement
    return match.group(0).lower().replace("_", "-")


def test_openenv_and_trl_extras_require_openenv_0_10_or_later() -> None:
    for extra in ("openenv", "trl"):
        pins = [r for r in extras()[extra] if distribution(r) == "openenv"]
        assert pins == ["openenv>=0.10"], (extra, extras()[extra])


def test_no_extra_requires_openenv_core() -> None:
    for extra, requirements in extras().items():
        names = {distribution(r) for r in requirements}
        assert "openenv-core" not in names, (extra, requirements)
