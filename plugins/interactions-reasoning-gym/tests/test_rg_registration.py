"""rg/<dataset> names come from reasoning-gym through the core's registration hook."""

from __future__ import annotations

from importlib.metadata import distribution

from interactions_reasoning_gym import ReasoningGymInteraction, dataset_names

from interactions_core.registry import Registry


def test_every_dataset_is_registered_by_the_hook() -> None:
    from reasoning_gym.factory import DATASETS

    registry = Registry.from_environment(use_cache=False)
    rg = {e.name: e for e in registry.entries() if e.name.startswith("rg/")}
    assert set(rg) == {f"rg/{name}" for name in DATASETS}
    assert len(rg) >= 100
    entry = rg["rg/countdown"]
    assert entry.kind == "hook" and entry.status == "ok"
    assert entry.distribution == "interactions-reasoning-gym"
    assert "Countdown" in (entry.description or "")
    assert dataset_names() == sorted(DATASETS)


def test_no_hand_written_interaction_entry_points() -> None:
    groups = {ep.group for ep in distribution("interactions-reasoning-gym").entry_points}
    assert groups == {"interactions_core.plugins"}


def test_registered_names_load_and_create_with_their_dataset() -> None:
    registry = Registry.from_environment(use_cache=False)
    assert registry.load("rg/countdown") is ReasoningGymInteraction
    interaction = registry.create("rg/basic_arithmetic", {"max_attempts": 1})
    assert interaction.name == "rg/basic_arithmetic"
    assert interaction.settings.dataset == "basic_arithmetic"
    assert interaction.settings.max_attempts == 1


def test_dataset_builders_are_registered_under_the_same_names() -> None:
    from interactions_core.runtime.datasets import get_builder

    registry = Registry.from_environment(use_cache=False)
    info = get_builder("rg/countdown", registry)
    assert info.defaults == {"dataset": "countdown"}
    assert info.distribution == "interactions-reasoning-gym"
