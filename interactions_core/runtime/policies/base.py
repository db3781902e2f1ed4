"""The policy contract.

A policy is a class. The runtime creates one instance per run (``cls(**options)``;
options are keyword-only constructor parameters, so an unknown option is an
error naming the accepted ones) and, per episode:

1. ``state = policy.start(sample)`` — per-episode state from the sample (the row
   as read from the dataset). Raise :class:`~interactions_core.errors.PolicyError`
   when the sample cannot be played (the episode is recorded as an error). Under
   ``--repeat K`` a ``start`` that accepts a ``repeat`` keyword is called as
   ``start(sample, repeat=r)`` for the repeats ``r >= 1`` (a seed per repeat, the
   ``r``-th recorded attempt); other policies see the sample only.
2. ``text = policy.reply(state, messages)``, once per assistant turn, with the
   full conversation so far. Return the reply text, or ``None`` when the policy
   has nothing more to say (the episode ends as ``exhausted``). ``reply`` may be
   an ``async def`` (a model server) or a plain ``def`` (replay: no coroutine per
   turn); the runtime checks which once per run.
3. ``policy.usage(state)`` — optional: the episode's accounting (token counts,
   request latency) as a JSON-ready mapping, kept in the record's ``usage``.
4. ``policy.finish(state)`` — always called once the episode is over.

``await policy.aclose()`` runs once at the end of the run (close connections).
``max_concurrency`` caps how many episodes run at once with this policy
(``human`` sets 1); ``interactive = True`` tells the CLI the policy uses the
terminal.

Policies are named things of the one catalog (:class:`~interactions_core.registry.Registry`):
the core's own (``replay``, ``openai``, ``human``), entry points in the group
``interactions_core.policies`` and the ``register_policies`` hook of hook plugins,
under the same allow/deny lists and conflict rule as interactions.
:func:`get_policy_class` and :func:`list_policies` ask it.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any, ClassVar

from ...errors import ConfigError
from ...registry import PolicyInfo, Registry, get_registry

__all__ = ["Policy", "create_policy", "get_policy_class", "list_policies", "policy_options"]


class Policy:
    """Base class of policies (subclassing it is optional: the methods are the contract)."""

    #: The name the policy is registered under (informational).
    name: ClassVar[str] = ""
    #: At most this many episodes at once (``None``: no limit of its own).
    max_concurrency: ClassVar[int | None] = None
    #: True when the policy talks to the terminal (the CLI then shows no progress bar).
    interactive: ClassVar[bool] = False

    def start(self, sample: Mapping[str, Any]) -> Any:
        """Per-episode state for ``sample`` (``None`` by default)."""
        return None

    def reply(self, state: Any, messages: list[dict[str, Any]]) -> Any:
        """The next assistant reply (``str``), or ``None`` when there is nothing more to say.

        May be overridden as ``def`` or ``async def``.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement reply")

    def usage(self, state: Any) -> Mapping[str, Any] | None:
        """The episode's accounting for the record's ``usage`` (``None``: nothing to report)."""
        return None

    def finish(self, state: Any) -> None:
        """Release the episode's state (nothing by default)."""

    async def aclose(self) -> None:
        """Release run-wide resources (nothing by default)."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"


def policy_options(cls: type) -> dict[str, inspect.Parameter]:
    """The options ``cls`` accepts: its keyword constructor parameters."""
    from ..._classes import keyword_options

    return keyword_options(cls)


def create_policy(cls: type, options: Mapping[str, Any] | None = None, *, name: str = "") -> Any:
    """Instantiate policy class ``cls`` with ``options``; teaching errors for bad options."""
    from ..._classes import check_options

    options = dict(options or {})
    label = name or getattr(cls, "name", "") or cls.__name__
    problems = check_options(f"policy {label!r}", cls, options)
    if problems:
        raise ConfigError(problems)
    try:
        policy = cls(**options)
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:
        raise ConfigError([f"policy {label!r}: {exc}"]) from exc
    if not callable(getattr(policy, "reply", None)):
        raise ConfigError([f"policy {label!r} ({cls.__qualname__}) has no reply() method"])
    return policy


def list_policies(registry: Registry | None = None) -> list[PolicyInfo]:
    """Every usable policy, sorted by name (ones the allow/deny lists exclude left out)."""
    catalog = registry if registry is not None else get_registry()
    return [p for p in catalog.policies() if p.status != "disabled"]


def get_policy_class(name: str, registry: Registry | None = None) -> Any:
    """The policy class called ``name`` (or ``distribution:name``)."""
    return (registry if registry is not None else get_registry()).policy(name)
