"""``_class_paths.py``: verl's dotted ``class_name`` paths, via the loader and verl's drop-in."""

from __future__ import annotations

import sys

import pytest
from core_helpers import problems, write

from interactions_core.compat.verl import initialize_interactions_from_config

VERLISH = """
from interactions_core.compat.verl import BaseInteraction

class EchoInteraction(BaseInteraction):
    def __init__(self, config):
        super().__init__(config)
        self._instance_dict = {}

    async def generate_response(self, instance_id, messages, **kwargs):
        return True, messages[-1]["content"], 1.0, {}
"""


def test_verl_compat_loader_accepts_dotted_class_paths(tmp_path, site_dir, forget_modules):
    (site_dir / "verlish_mod.py").write_text(VERLISH)
    path = write(
        tmp_path,
        """
        interaction:
          - class_name: verlish_mod.EchoInteraction
            config: {anything: 1}
          - name: second
            class_name: verlish_mod.EchoInteraction
        """,
    )
    interactions = initialize_interactions_from_config(str(path))
    assert list(interactions) == ["echo", "second"]
    assert interactions["echo"].config == {"anything": 1, "name": "echo"}


def test_verl_duplicate_names_are_value_errors(tmp_path, site_dir, forget_modules):
    (site_dir / "verlish_mod.py").write_text(VERLISH)
    path = write(
        tmp_path,
        """
        interaction:
          - class_name: verlish_mod.EchoInteraction
          - name: echo
            class_name: verlish_mod.EchoInteraction
        """,
    )
    with pytest.raises(ValueError, match="Duplicate interaction name 'echo' found"):
        initialize_interactions_from_config(str(path))


def test_failed_dotted_import_leaves_no_half_module(tmp_path, site_dir, forget_modules):
    (site_dir / "verlish_bad.py").write_text("import json\nraise RuntimeError('half')\n")
    path = write(tmp_path, "interaction:\n  - class_name: verlish_bad.X\n")
    [problem] = problems(path)
    assert "half" in problem and f"{path}:2:" in problem
    assert "verlish_bad" not in sys.modules


def test_dotted_paths_can_be_refused(tmp_path, site_dir, monkeypatch, forget_modules):
    (site_dir / "verlish_mod.py").write_text(VERLISH)
    monkeypatch.setenv("INTERACTIONS_NO_CLASS_PATHS", "1")
    path = write(tmp_path, "interaction:\n  - class_name: verlish_mod.EchoInteraction\n")
    assert "refused" in problems(path)[0]
    assert "verlish_mod" not in sys.modules
