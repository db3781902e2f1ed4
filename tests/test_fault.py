"""Errors that point at the fault: the plugin's file and line, did-you-mean, the chained cause."""

from __future__ import annotations

import pytest

from interactions_core.cli import main
from interactions_core.errors import ConfigError, PluginLoadError
from interactions_core.loader import load_config
from interactions_core.registry import get_registry

GROUP = "interactions_core.interactions"

GOOD = """
class Gsm8kLikeInteraction:
    '''Fine.'''
    def __init__(self, config):
        self.config = config
    async def start_interaction(self, instance_id=None, **kwargs):
        return instance_id or "x"
    async def generate_response(self, instance_id, messages, **kwargs):
        return True, "ok", 1.0, {}
    async def calculate_score(self, instance_id, **kwargs):
        return 1.0
    async def finalize_interaction(self, instance_id, **kwargs):
        return None
"""


def test_import_failure_names_the_plugin_file_and_line(make_dist, forget_modules, monkeypatch):
    monkeypatch.delenv("INTERACTIONS_DEBUG", raising=False)
    make_dist(
        "broken-dist",
        entry_points={GROUP: {"acme_boom": "broken_fault:Boom"}},
        modules={"broken_fault": "import os\n\n\nvalue = {}['missing']\n"},
    )
    with pytest.raises(PluginLoadError) as info:
        get_registry().load("acme_boom")
    message = str(info.value)
    assert "KeyError: 'missing'" in message
    assert "broken_fault.py:4" in message
    assert "INTERACTIONS_DEBUG=1" in message
    assert isinstance(info.value.__cause__, KeyError)


def test_syntax_error_points_at_its_line(make_dist, forget_modules):
    make_dist(
        "broken-dist",
        entry_points={GROUP: {"acme_syntax": "broken_syntax:Boom"}},
        modules={"broken_syntax": "x = 1\ny = (\n"},
    )
    with pytest.raises(PluginLoadError, match=r"broken_syntax\.py:2"):
        get_registry().load("acme_syntax")


def test_debug_shows_the_whole_traceback(make_dist, forget_modules, monkeypatch):
    monkeypatch.setenv("INTERACTIONS_DEBUG", "1")
    make_dist(
        "broken-dist",
        entry_points={GROUP: {"acme_deep": "broken_deep:Boom"}},
        modules={
            "broken_deep": "import broken_helper\n",
            "broken_helper": "def f():\n    raise ValueError('deep down')\nf()\n",
        },
    )
    with pytest.raises(PluginLoadError) as info:
        get_registry().load("acme_deep")
    message = str(info.value)
    assert "Traceback (most recent call last)" in message
    assert "broken_helper.py" in message and "ValueError: deep down" in message
    assert "at " in message and "broken_helper.py:2" in message


def test_missing_attribute_gets_a_did_you_mean_and_the_fix(make_dist, forget_modules, capsys):
    make_dist(
        "acme-dist",
        entry_points={GROUP: {"acme_typo": "acme_fault:Gsm8kLikeInteracton"}},
        modules={"acme_fault": GOOD},
    )
    with pytest.raises(PluginLoadError) as info:
        get_registry().load("acme_typo")
    message = str(info.value)
    assert "did you mean 'Gsm8kLikeInteraction'?" in message
    assert "fix the entry point in the plugin's pyproject.toml and reinstall" in message
    assert main(["show", "acme_typo"]) == 1
    assert "did you mean 'Gsm8kLikeInteraction'?" in capsys.readouterr().err


def test_config_error_chains_the_cause(make_dist, forget_modules, tmp_path):
    make_dist(
        "broken-dist",
        entry_points={GROUP: {"acme_chain": "broken_chain:Boom"}},
        modules={"broken_chain": "raise RuntimeError('kaboom')\n"},
    )
    config = tmp_path / "c.yaml"
    config.write_text("interaction:\n  - name: acme_chain\n")
    with pytest.raises(ConfigError) as info:
        load_config(str(config))
    assert "broken_chain.py:1" in str(info.value)
    assert isinstance(info.value.__cause__, PluginLoadError)
    assert isinstance(info.value.__cause__.__cause__, RuntimeError)


def test_class_name_with_a_missing_class(make_dist, forget_modules, tmp_path):
    make_dist("acme-dist", modules={"acme_cls": GOOD})
    config = tmp_path / "c.yaml"
    config.write_text("interaction:\n  - class_name: acme_cls.Gsm8kLikeInteractio\n")
    with pytest.raises(ConfigError, match="did you mean 'Gsm8kLikeInteraction'"):
        load_config(str(config))
