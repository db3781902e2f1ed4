"""gsm8k passes the conformance checker, by class and by its installed name, both methods."""

from __future__ import annotations

import pytest
from interactions_gsm8k import Gsm8kInteraction

from interactions_core.testing import Episode, check_interaction

EPISODES = [
    Episode(
        ["6 * 14 = 84, minus 59 is 24.\n#### 24", "84 - 59 = 25\n#### 25"], {"ground_truth": "25"}
    ),
    Episode(["#### 1,170"], {"ground_truth": 1170}),
    Episode(["I am not sure.", "#### 3.5"], {"ground_truth": "7"}),
]


@pytest.mark.parametrize("method", ["strict", "flexible"])
def test_gsm8k_class_conforms(method: str) -> None:
    check_interaction(Gsm8kInteraction, {"method": method}, episodes=EPISODES)


def test_gsm8k_installed_name_conforms(interaction_checker) -> None:
    interaction_checker("gsm8k", episodes=EPISODES)
