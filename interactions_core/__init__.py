"""interactions-core: multi-turn RL interactions as installable, named plugins.

The public API is the list in ``__all__``. Names are resolved lazily (PEP 562),
so ``import interactions_core`` stays as cheap as a bare interpreter start and a
CLI call that only lists installed interactions never imports pluggy, yaml, attrs
or ``importlib.metadata``.
"""

from __future__ import annotations

from ._lazy import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .base import BaseInteraction as BaseInteraction
    from .base import SessionInteraction as SessionInteraction
    from .errors import ConfigError as ConfigError
    from .errors import InteractionsError as InteractionsError
    from .errors import SessionError as SessionError
    from .errors import UnknownInteractionError as UnknownInteractionError
    from .hookspecs import hookimpl as hookimpl
    from .loader import load_config as load_config
    from .loader import load_interactions as load_interactions
    from .registry import Registry as Registry
    from .registry import get_registry as get_registry
    from .result import InteractionResult as InteractionResult
    from .runtime.episode import EpisodeLoop as EpisodeLoop
    from .runtime.policies.base import Policy as Policy
    from .runtime.policies.replay import ReplayPolicy as ReplayPolicy
    from .runtime.runner import Runner as Runner
    from .runtime.runner import run_episodes as run_episodes
    from .runtime.session import Session as Session

__version__ = "0.1.0"

#: The public API, by the module that defines each name. Everything else lives in
#: its submodule (``interactions_core.errors``, ``interactions_core.runtime``, ...).
__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "base": ("BaseInteraction", "SessionInteraction"),
        "result": ("InteractionResult",),
        "errors": ("InteractionsError", "ConfigError", "SessionError", "UnknownInteractionError"),
        "hookspecs": ("hookimpl",),
        "loader": ("load_config", "load_interactions"),
        "registry": ("Registry", "get_registry"),
        "runtime.session": ("Session",),
        "runtime.episode": ("EpisodeLoop",),
        "runtime.runner": ("Runner", "run_episodes"),
        "runtime.policies.base": ("Policy",),
        "runtime.policies.replay": ("ReplayPolicy",),
    },
)
