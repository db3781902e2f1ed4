"""Policies by name, from the one catalog (:class:`~interactions_core.registry.Registry`).

Policies are found the way interactions are: the core's own (``replay``,
``openai``, ``human``, registered by its built-in hook implementation), entry
points in the group ``interactions_core.policies`` (name = policy name, value =
``module:Class``, imported on use), and the ``register_policies(register)`` hook
of hook plugins. The allow/deny lists, the conflict rule (two distributions,
one name: an error naming both; ``distribution:name`` picks one) and the
unknown-name message are the catalog's, as for every named thing.
"""

from __future__ import annotations

from typing import Any

from ...errors import UnknownPolicyError
from ...registry import PolicyInfo, Registry, get_registry

__all__ = ["PolicyInfo", "UnknownPolicyError", "get_policy_class", "list_policies"]


def list_policies(registry: Registry | None = None) -> list[PolicyInfo]:
    """Every usable policy, sorted by name (ones the allow/deny lists exclude left out)."""
    catalog = registry if registry is not None else get_registry()
    return [p for p in catalog.policies() if p.status != "disabled"]


def get_policy_class(name: str, registry: Registry | None = None) -> Any:
    """The policy class called ``name`` (or ``distribution:name``)."""
    return (registry if registry is not None else get_registry()).policy(name)
