"""The verifiers tests need verifiers' released wheel (with its OpenEnv extra) and uv;
``nox -s verifiers`` installs them (CI runs it).

Without them (a plain ``python -m pytest``) these files are reported as skipped.
"""

from __future__ import annotations

from suites import requires

pytest_pycollect_makemodule = requires("verifiers", modules=("verifiers", "openenv", "uv"))
