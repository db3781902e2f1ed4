"""verl's weather example interaction, as an interactions-core plugin.

Installing this distribution registers the interaction ``weather`` (entry-point
group ``interactions_core.interactions``).
"""

from __future__ import annotations

from .interaction import WeatherConfig, WeatherInteraction

__version__ = "0.1.0"

__all__ = ["WeatherConfig", "WeatherInteraction", "__version__"]
