"""The GRPO tests need TRL, torch and OpenEnv; ``nox -s trl`` installs them (CI runs it).

Without them (a plain ``python -m pytest``) these files are reported as skipped.
"""

from __future__ import annotations

from suites import requires

pytest_pycollect_makemodule = requires("trl", modules=("trl", "torch", "openenv"))
