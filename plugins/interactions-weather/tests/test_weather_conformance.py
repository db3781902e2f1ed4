"""weather passes the conformance checker, by class and by its installed name."""

from __future__ import annotations

from interactions_weather import WeatherInteraction

from interactions_core.testing import Episode, check_interaction

EPISODES = [
    Episode(["Let me look it up."], {"location": "Paris"}),
    Episode(["It is sunny."], {"location": "Oslo"}),
]


def test_weather_class_conforms() -> None:
    check_interaction(WeatherInteraction, episodes=EPISODES)


def test_weather_installed_name_conforms(interaction_checker) -> None:
    interaction_checker("weather")
