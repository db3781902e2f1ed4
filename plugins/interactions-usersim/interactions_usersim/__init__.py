"""An LLM plays the user: the ``usersim`` interaction, as an interactions-core plugin.

Installing this distribution registers the interaction ``usersim`` (entry-point
group ``interactions_core.interactions``).
"""

from __future__ import annotations

from .backends import ModelCallError
from .config import UserSimConfig
from .interaction import UserSimInteraction, UserSimSession
from .scoring import JudgeReplyError, parse_score

__version__ = "0.1.0"

__all__ = [
    "JudgeReplyError",
    "ModelCallError",
    "UserSimConfig",
    "UserSimInteraction",
    "UserSimSession",
    "__version__",
    "parse_score",
]
