"""interactions-core: multi-turn RL interactions as installable, named plugins.

The public API is ``__all__``, two short lists:

* for plugin authors: the base classes to subclass, the result a turn returns,
  the specs they implement (:class:`InteractionSpec` for an interaction,
  :class:`PluginSpec` with :data:`hookimpl` for hooks), :func:`last_assistant_text`
  and the errors they raise;
* for users: loading a config and its interactions, running episodes, one
  interaction session, the policy (model side) interface and the errors a run
  can raise.

Everything else is in a documented submodule (``errors``, ``runtime``, ``testing``,
``ray``, ``integrations.*``, ``compat.verl``: see ``docs/api.md``) or private.

Each name is imported the first time it is used (PEP 562 ``__getattr__``), so
``import interactions_core`` costs almost nothing and ``interactions list`` never
imports pluggy, yaml, attrs or the runtime.
"""

from __future__ import annotations

# Read as true by type checkers; not imported from ``typing``, whose import (and the
# ``warnings`` module it pulls in) would double what ``import interactions_core`` costs.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ._interaction import (
        BaseInteraction,
        InteractionResult,
        SessionInteraction,
        last_assistant_text,
    )
    from ._spec import InteractionSpec, PluginSpec, hookimpl
    from .errors import ConfigError, InteractionCallError, InteractionsError, SessionError
    from .loader import load_config, load_interactions
    from .runtime import Policy, Session, run_episodes

__version__ = "0.1.0"

#: Where each public name is defined (a module relative to this package).
_SOURCES = {
    # For plugin authors.
    "BaseInteraction": "._interaction",
    "SessionInteraction": "._interaction",
    "InteractionResult": "._interaction",
    "last_assistant_text": "._interaction",
    "InteractionSpec": "._spec",
    "PluginSpec": "._spec",
    "hookimpl": "._spec",
    "ConfigError": ".errors",
    "SessionError": ".errors",
    # For users.
    "load_config": ".loader",
    "load_interactions": ".loader",
    "run_episodes": ".runtime",
    "Session": ".runtime",
    "Policy": ".runtime",
    "InteractionsError": ".errors",
    "InteractionCallError": ".errors",
}

__all__ = [
    "BaseInteraction",
    "ConfigError",
    "InteractionCallError",
    "InteractionResult",
    "InteractionSpec",
    "InteractionsError",
    "PluginSpec",
    "Policy",
    "Session",
    "SessionError",
    "SessionInteraction",
    "hookimpl",
    "last_assistant_text",
    "load_config",
    "load_interactions",
    "run_episodes",
]


def __getattr__(name: str) -> Any:
    """Import a public name from its module on first use, then keep it here."""
    source = _SOURCES.get(name)
    if source is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib  # here, not at the top: it imports ``warnings``

    value = getattr(importlib.import_module(source, __name__), name)
    globals()[name] = value  # later lookups do not come back here
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
