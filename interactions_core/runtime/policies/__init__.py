"""Policies: the model side of an episode.

A policy produces the assistant's reply to the conversation so far. Three are
built in: ``replay`` (recorded replies from the sample), ``openai`` (any
OpenAI-compatible chat-completions server) and ``human`` (you type the replies).
More come from plugins, discovered exactly like interactions: the entry-point
group ``interactions_core.policies`` or the ``register_policies`` hook. See
``docs/policies.md``.
"""

from __future__ import annotations

from ...registry import PolicyInfo
from .base import Policy, create_policy, get_policy_class, list_policies

__all__ = ["Policy", "PolicyInfo", "create_policy", "get_policy_class", "list_policies"]
