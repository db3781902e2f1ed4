"""The server tests need OpenEnv and uvicorn; the hub and episode tests need only the core.

``nox -s serve`` installs the pinned OpenEnv stack and runs them all (CI does too);
without it, a plain ``python -m pytest`` reports ``test_server*.py`` as skipped.
"""

from __future__ import annotations

from suites import requires

pytest_pycollect_makemodule = requires(
    "serve", modules=("openenv", "uvicorn"), files="test_server*.py"
)
