"""The GRPO tests need TRL and torch; ``nox -s trl`` installs them (CI runs it).

Without them (plain ``python -m pytest``) these files are not collected.
"""

from __future__ import annotations

import importlib.util

collect_ignore_glob = (
    ["test_*.py"]
    if any(importlib.util.find_spec(m) is None for m in ("trl", "torch", "openenv"))
    else []
)
