"""verl's dotted class paths of its built-in interactions, and where they lead now.

verl's own example configs name ``verl.interactions.gsm8k_interaction.Gsm8kInteraction``
and ``verl.interactions.weather_interaction.WeatherInteraction``. verl 0.8 removed
that module, so on a current install those paths cannot be imported, while the
same interactions are installed here as the ``gsm8k`` and ``weather`` plugins.

The rule, stated once: when verl's module is importable, its class is used (it is
what the config says), with a note naming the plugin that could replace it; when
it is not, the path resolves to the installed plugin, with a note saying so and
how to write the entry by name. ``verl.interactions.base.BaseInteraction`` likewise
falls back to :class:`interactions_core.BaseInteraction`. Finding out whether
verl's file exists never imports verl (its package import pulls in torch and Ray).
"""

from __future__ import annotations

import importlib.util
import os

from ..errors import InteractionsWarning

__all__ = ["VERL_BASE", "VERL_BUILTINS", "VerlPathWarning", "verl_module_installed"]

#: verl's class path -> the registered name of the plugin that replaces it.
VERL_BUILTINS = {
    "verl.interactions.gsm8k_interaction.Gsm8kInteraction": "gsm8k",
    "verl.interactions.weather_interaction.WeatherInteraction": "weather",
}
#: verl's base class path, which falls back to the core's own base class.
VERL_BASE = "verl.interactions.base.BaseInteraction"


class VerlPathWarning(InteractionsWarning):
    """A verl class path was resolved in a way the user should know about."""


def verl_module_installed(class_path: str) -> bool:
    """Whether the module of ``class_path`` (under ``verl.``) exists, without importing verl."""
    module = class_path.rpartition(".")[0]
    try:
        spec = importlib.util.find_spec("verl")
    except (ImportError, ValueError):
        return False
    if spec is None or not spec.submodule_search_locations:
        return False
    relative = module.split(".")[1:]
    for root in spec.submodule_search_locations:
        base = os.path.join(root, *relative)
        if os.path.isfile(base + ".py") or os.path.isfile(os.path.join(base, "__init__.py")):
            return True
    return False
