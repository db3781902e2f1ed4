"""Make verl 0.7.1's interaction modules importable without torch, Ray or transformers.

``verl/__init__.py`` and ``verl/utils/__init__.py`` import the training stack, but
the interaction modules need only ``verl.interactions`` and
``verl.utils.reward_score.gsm8k`` (the standard library). Registering the parent
packages as plain package modules with the wheel's folders as their search path
lets Python import exactly those files, unchanged, and nothing else.

Run as ``python verl_bootstrap.py WHEEL_ROOT SCRIPT``: the script runs with verl
importable this way.
"""

from __future__ import annotations

import importlib.machinery
import runpy
import sys
import types
from pathlib import Path


def install(root: Path) -> None:
    for name in ("verl", "verl.utils", "verl.utils.reward_score"):
        folder = root.joinpath(*name.split("."))
        spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
        spec.submodule_search_locations = [str(folder)]
        module = types.ModuleType(name)
        module.__spec__ = spec
        module.__path__ = [str(folder)]
        sys.modules[name] = module


if __name__ == "__main__":
    install(Path(sys.argv[1]))
    script = sys.argv[2]
    sys.argv = sys.argv[2:]
    runpy.run_path(script, run_name="__main__")
