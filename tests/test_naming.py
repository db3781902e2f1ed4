"""``naming``: one lookup, one did-you-mean and one error vocabulary for every named thing."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from interactions_core._names import close_matches, suggest, summarize
from interactions_core.cli import main
from interactions_core.errors import (
    UnknownBuilderError,
    UnknownInteractionError,
    UnknownNameError,
    UnknownPolicyError,
)
from interactions_core.registry import Registry, get_registry
from interactions_core.runtime.builders import get_builder
from interactions_core.runtime.policies.registry import get_policy_class

PACKAGE = Path(__file__).resolve().parents[1] / "interactions_core"


def test_suggest_formats_the_closest_names() -> None:
    assert close_matches("gsm8", ["weather", "gsm8k", "gsm8k_v2"]) == ["gsm8k", "gsm8k_v2"]
    assert suggest("gsm8", ["gsm8k", "weather"]) == "; did you mean 'gsm8k'?"
    assert suggest("max_row", ["max_rows"], n=1, render=lambda k: "--" + k) == (
        "; did you mean --max_rows?"
    )
    assert suggest("zzz", ["gsm8k"]) == ""


def test_each_kind_has_its_own_unknown_error_under_one_base() -> None:
    registry = get_registry()
    with pytest.raises(UnknownInteractionError, match="did you mean 'gsm8k'") as interaction:
        registry.resolve("gsm8")
    with pytest.raises(UnknownPolicyError, match="did you mean 'replay'") as policy:
        get_policy_class("replya", Registry.from_classes({}))
    with pytest.raises(UnknownBuilderError, match="did you mean 'gsm8k'") as builder:
        get_builder("gsm8", registry)
    errors = [interaction.value, policy.value, builder.value]
    assert all(isinstance(e, UnknownNameError) for e in errors)
    # an unknown policy or builder is not reported as an unknown interaction
    assert not isinstance(policy.value, UnknownInteractionError)
    assert not isinstance(builder.value, UnknownInteractionError)
    assert [e.kind for e in errors] == ["interaction", "policy", "dataset builder"]


def test_difflib_is_used_in_one_place_only() -> None:
    users = []
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                if "difflib" in names:
                    users.append(path.relative_to(PACKAGE).as_posix())
    assert users == ["_names.py"]


def test_unknown_interaction_lists_suites_as_one_item(tmp_path, capsys):
    assert main(["show", "gsm8kk"]) == 1
    err = capsys.readouterr().err
    assert "did you mean 'gsm8k'?" in err
    installed = err.split("Installed", 1)[1]
    assert "gsm8k" in installed and "weather" in installed
    assert len(installed) < 200  # not a hundred generated names


def test_summarize() -> None:
    names = ["b", "a", *(f"rg/t{i}" for i in range(106)), "x/one", "x/two"]
    assert summarize(names) == "a, b, rg/* (106 names), x/one, x/two"
    assert summarize([f"n{i:02d}" for i in range(15)], limit=3) == "n00, n01, n02, ... and 12 more"
