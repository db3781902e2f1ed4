"""Policies by name: built-in, entry points, and the ``register_policies`` hook.

Policies are found the way interactions are:

* built in: ``replay``, ``openai``, ``human`` (distribution ``interactions-core``);
* entry points in the group ``interactions_core.policies`` (name = policy name,
  value = ``module:Class``), read from the discovery index, imported on use;
* the ``register_policies(register)`` hook of hook plugins, where
  ``register(name, cls)`` contributes a class.

The allow/deny lists (``INTERACTIONS_PLUGINS`` / ``INTERACTIONS_DISABLE``) apply
to plugin policies as to interactions. Two distributions providing the same name
is an error naming both; a qualified ``distribution:name`` picks one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..._contribution import Contribution, mark_conflicts
from ..._discovery import POLICIES_GROUP
from ..._naming import suggest
from ...errors import PluginLoadError, UnknownPolicyError

__all__ = ["BUILTIN", "PolicyInfo", "UnknownPolicyError", "get_policy_class", "list_policies"]

CORE_DISTRIBUTION = "interactions-core"


def _builtin(name: str) -> Callable[[], type]:
    def load() -> type:
        from . import human, openai, replay

        return {
            "replay": replay.ReplayPolicy,
            "openai": openai.OpenAIPolicy,
            "human": human.HumanPolicy,
        }[name]

    return load


BUILTIN = {
    "replay": "interactions_core.runtime.policies.replay:ReplayPolicy",
    "openai": "interactions_core.runtime.policies.openai:OpenAIPolicy",
    "human": "interactions_core.runtime.policies.human:HumanPolicy",
}


class PolicyInfo(Contribution):
    """One policy the framework knows about (its ``loader`` returns the class)."""

    __slots__ = ()

    noun = "policy"

    def load(self) -> Any:
        """The policy class (imported now if needed); :class:`PluginLoadError` when broken."""
        if self.status == "broken":
            raise PluginLoadError(
                f"policy {self.qualified} ({self.target}) is broken: {self.error}"
            )
        assert self.loader is not None  # every policy is listed with its loader
        try:
            return self.loader()
        except Exception as exc:
            raise PluginLoadError(
                f"policy {self.qualified} ({self.target}) failed to import: "
                f"{exc.__class__.__name__}: {exc}"
            ) from exc


def _import_loader(value: str) -> Callable[[], Any]:
    def load() -> Any:
        from ...plugins import import_target

        return import_target(value)

    return load


def _constant(obj: Any) -> Callable[[], Any]:
    return lambda: obj


def list_policies(registry: Any = None) -> list[PolicyInfo]:
    """Every policy available, sorted by name (disabled plugin policies left out)."""
    from ...registry import get_registry

    registry = registry if registry is not None else get_registry()
    selection = registry.selection
    out = [
        PolicyInfo(name, CORE_DISTRIBUTION, target, "builtin", loader=_builtin(name))
        for name, target in BUILTIN.items()
    ]
    for record in registry.index.get("entries", []):
        if record["group"] != POLICIES_GROUP:
            continue
        qualified = f"{record['dist']}:{record['name']}"
        if selection.excluded(record["name"], record["dist"], qualified) is not None:
            continue
        out.append(
            PolicyInfo(
                record["name"],
                record["dist"],
                record["value"],
                "entry-point",
                error=record.get("error"),
                loader=_import_loader(record["value"]),
            )
        )
    host = registry.plugin_host
    for pid, registrations in host.collect("register_policies").items():
        dist = pid.split(":", 1)[0]
        for reg in registrations:
            qualified = f"{dist}:{reg.name}"
            if selection.excluded(reg.name, dist, qualified, pid) is not None:
                continue
            out.append(
                PolicyInfo(
                    reg.name,
                    dist,
                    reg.target,
                    "hook",
                    description=reg.description,
                    loader=_constant(reg.obj),
                )
            )
    out.sort(key=lambda p: (p.name, p.distribution))
    mark_conflicts(out, "use a qualified name (--policy {qualified})")
    return out


def get_policy_class(name: str, registry: Any = None) -> Any:
    """The policy class called ``name`` (or ``distribution:name``)."""
    from ..._resolution import resolve

    policies = list_policies(registry)

    def unknown() -> UnknownPolicyError:
        known = sorted({p.name for p in policies})
        return UnknownPolicyError(
            f"unknown policy {name!r}{suggest(name, known)} Available: {', '.join(known)}. "
            "Plugins add policies through the 'interactions_core.policies' entry-point group "
            "(ones excluded by INTERACTIONS_PLUGINS / INTERACTIONS_DISABLE are not listed)."
        )

    return resolve(policies, name, unknown).load()
