"""Server tests need OpenEnv; without it (plain ``python -m pytest``) they are not collected.

``nox -s serve`` installs the pinned OpenEnv stack and runs them (CI does too).
The hub and episode tests need nothing beyond the core and always run.
"""

from __future__ import annotations

import importlib.util

collect_ignore_glob = (
    ["test_server*.py"]
    if importlib.util.find_spec("openenv") is None or importlib.util.find_spec("uvicorn") is None
    else []
)
