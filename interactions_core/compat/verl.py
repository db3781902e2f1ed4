"""verl's interaction loader, as a drop-in for verl up to 0.7.

verl's rollout code calls
``verl.interactions.utils.interaction_registry.initialize_interactions_from_config(path)``
and gets ``{name: interaction}``. Switching to interactions-core is a one-line
import change::

    from interactions_core.compat.verl import initialize_interactions_from_config

What verl accepted keeps working, and keeps meaning the same:

* the same YAML, ``class_name`` dotted paths included; OmegaConf interpolation
  (``${oc.env:VAR}``) is resolved as verl resolves it (omegaconf is installed with
  verl), or refused with a message when omegaconf is missing;
* classes built on verl's own ``BaseInteraction`` with its legacy signatures
  (``calculate_score(self)``, ``finalize_interaction(self)``, which verl's loop
  never calls), and classes keeping their state in ``self._instance_dict``: what
  they do wrong is reported as a
  :class:`~interactions_core.errors.LegacyInteractionWarning`, not refused;
* classes are built as verl builds them, ``cls(config={..., "name": name})``;
* verl's paths of its two built-in interactions resolve to the installed
  ``gsm8k`` / ``weather`` plugins when verl's module is gone, with a
  :class:`VerlPathWarning` saying so;
* a duplicate name is a ``ValueError`` and a missing module a
  ``ModuleNotFoundError``, as in verl.

The same config may also name installed plugins (``name: gsm8k``). Unlike verl's
loader, every entry is checked before any is created, a failed import leaves no
half-initialised module in ``sys.modules``, and errors carry line numbers.
"""

from __future__ import annotations

import os
from typing import Any

from .._config import VerlPathWarning
from .._interaction import BaseInteraction
from ..errors import ConfigError

__all__ = [
    "BaseInteraction",
    "VerlModuleNotFoundError",
    "VerlPathWarning",
    "get_interaction_class",
    "initialize_interactions_from_config",
]


class VerlModuleNotFoundError(ConfigError, ModuleNotFoundError):
    """A config names a module that cannot be imported (verl raised ``ModuleNotFoundError``)."""


def get_interaction_class(cls_name: str) -> Any:
    """The class a verl dotted path names, checked the way the drop-in loader checks it."""
    from ..loader import class_for_path
    from ..registry import get_registry

    cls, _origin, _defaults = class_for_path(
        cls_name, get_registry(), f"class_name {cls_name!r}", legacy=True
    )
    return cls


def initialize_interactions_from_config(
    interaction_config_file: str | os.PathLike[str],
) -> dict[str, Any]:
    """Initialize interactions from a config file; return ``{name: instance}`` (verl's shape)."""
    from ..loader import load_config

    try:
        loaded = load_config(interaction_config_file, legacy=True)
    except ConfigError as exc:
        if any("ModuleNotFoundError" in problem for problem in exc.problems):
            raise VerlModuleNotFoundError(exc.problems, exc.source) from exc
        raise
    return loaded.instantiate()
