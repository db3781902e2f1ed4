"""GSM8K answer checking as an interactions-core interaction.

Installing this distribution registers the interaction ``gsm8k`` (entry-point
group ``interactions_core.interactions``). The scoring functions are exported
too, for use as a plain reward function.
"""

from __future__ import annotations

from .interaction import Gsm8kConfig, Gsm8kInteraction, message_text
from .scoring import METHODS, compute_score, extract_answer, normalize_ground_truth

__version__ = "0.1.0"

__all__ = [
    "METHODS",
    "Gsm8kConfig",
    "Gsm8kInteraction",
    "__version__",
    "compute_score",
    "extract_answer",
    "message_text",
    "normalize_ground_truth",
]
