"""The SkyRL tests need skyrl-gym's released wheel; ``nox -s skyrl`` installs it (CI runs it).

Without it (a plain ``python -m pytest``) these files are reported as skipped.
"""

from __future__ import annotations

from suites import requires

pytest_pycollect_makemodule = requires("skyrl", modules=("skyrl_gym",))
