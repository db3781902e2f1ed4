"""``interactions_core.integrations``: the interactions a verl worker process shares.

The catalog needs no verl (only ``integrations/verl.py`` imports verl), so its
rules are checked here, in the plain test run; ``tests/verl_adapter`` checks
them again through verl's own worker.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from interactions_core.integrations import InteractionCatalog, interactions_for


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "interactions.yaml"
    path.write_text("default: gsm8k\ninteraction:\n  - name: gsm8k\n  - name: weather\n")
    return path


def test_one_catalog_per_config_and_pools_in_a_process(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(config.parent)
    catalog = interactions_for(config)
    assert interactions_for(Path("interactions.yaml")) is catalog  # same file, relative
    assert interactions_for(os.fspath(config), {}) is catalog
    assert catalog.get("weather")[1] is catalog.get("weather")[1]  # instances are shared


def test_a_sample_without_a_name_gets_the_default(config: Path) -> None:
    name, interaction = interactions_for(config).get(None)
    assert name == "gsm8k" and interaction.name == "gsm8k"


def test_an_unknown_name_names_the_config_and_what_it_provides(config: Path) -> None:
    with pytest.raises(ValueError) as info:
        interactions_for(config).get("wether")
    assert str(info.value) == (
        "unknown interaction 'wether' in the sample's extra_info.interaction_kwargs; "
        f"the config {str(config)!r} provides gsm8k, weather; did you mean 'weather'?"
    )


def test_no_name_and_no_default_asks_for_one(tmp_path: Path) -> None:
    path = tmp_path / "plain.yaml"
    path.write_text("interaction:\n  - name: gsm8k\n")
    with pytest.raises(
        ValueError, match=r"has no 'name' and the interaction config .* no 'default:'"
    ):
        InteractionCatalog(str(path)).get("")


def test_without_a_config_installed_interactions_are_created_by_name() -> None:
    catalog = InteractionCatalog(None)
    name, interaction = catalog.get("gsm8k")
    assert name == "gsm8k" and catalog.get("gsm8k")[1] is interaction
    with pytest.raises(ValueError, match="interaction 'nope' for the verl agent loop: unknown"):
        catalog.get("nope")
    with pytest.raises(ValueError, match=r"\(none: installed interactions\) has no 'default:'"):
        catalog.get(None)


def test_ray_pool_needs_a_config_naming_its_entries(config: Path) -> None:
    with pytest.raises(ValueError, match="ray_pool needs an interaction_config"):
        InteractionCatalog(None, {"gsm8k": 2})
    with pytest.raises(ValueError) as info:
        InteractionCatalog(str(config), {"judge": 2})
    assert str(info.value) == (
        f"ray_pool names 'judge', which {str(config)!r} does not configure (gsm8k, weather)"
    )
