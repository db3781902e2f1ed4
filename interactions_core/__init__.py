"""interactions-core: multi-turn RL interactions as installable, named plugins.

The public API is the list in ``__all__``. Names are resolved lazily (PEP 562),
so ``import interactions_core`` stays as cheap as a bare interpreter start and a
CLI call that only lists installed interactions never imports pluggy, yaml, attrs
or ``importlib.metadata``.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .base import BaseInteraction, SessionInteraction, derive_name
    from .errors import (
        ConfigError,
        ConflictError,
        DisabledError,
        InteractionsError,
        InteractionValidationError,
        PluginLoadError,
        SessionError,
        TrustError,
        UnknownInteractionError,
    )
    from .hookspecs import hookimpl
    from .loader import load_config, load_interactions
    from .registry import Registry, get_registry
    from .result import InteractionResult
    from .runtime import (
        EpisodeLoop,
        EpisodeRecord,
        Policy,
        ReplayPolicy,
        Runner,
        RunSummary,
        SampleReader,
        Session,
        run_episodes,
    )

__version__ = "0.1.0"

_EXPORTS = {
    "BaseInteraction": "base",
    "SessionInteraction": "base",
    "derive_name": "base",
    "InteractionResult": "result",
    "InteractionsError": "errors",
    "ConfigError": "errors",
    "ConflictError": "errors",
    "DisabledError": "errors",
    "InteractionValidationError": "errors",
    "PluginLoadError": "errors",
    "SessionError": "errors",
    "TrustError": "errors",
    "UnknownInteractionError": "errors",
    "hookimpl": "hookspecs",
    "load_config": "loader",
    "load_interactions": "loader",
    "Registry": "registry",
    "get_registry": "registry",
    "EpisodeLoop": "runtime.episode",
    "EpisodeRecord": "runtime.episode",
    "Policy": "runtime.policies.base",
    "ReplayPolicy": "runtime.policies.replay",
    "RunSummary": "runtime.runner",
    "Runner": "runtime.runner",
    "SampleReader": "runtime.datasets",
    "Session": "runtime.session",
    "run_episodes": "runtime.runner",
}

__all__ = [
    "BaseInteraction",
    "ConfigError",
    "ConflictError",
    "DisabledError",
    "EpisodeLoop",
    "EpisodeRecord",
    "InteractionResult",
    "InteractionValidationError",
    "InteractionsError",
    "PluginLoadError",
    "Policy",
    "Registry",
    "ReplayPolicy",
    "RunSummary",
    "Runner",
    "SampleReader",
    "Session",
    "SessionError",
    "SessionInteraction",
    "TrustError",
    "UnknownInteractionError",
    "__version__",
    "derive_name",
    "get_registry",
    "hookimpl",
    "load_config",
    "load_interactions",
    "run_episodes",
]


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'interactions_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
