"""A named contribution: one interaction, policy or dataset builder a distribution provides.

The registry's :class:`~interactions_core.registry.Entry`, the runtime's
:class:`~interactions_core.runtime.policies.registry.PolicyInfo` and
:class:`~interactions_core.runtime.builders.BuilderInfo` are this record with
what their kind adds. They share the fields a listing shows, the qualified name
(``distribution:name``), the status vocabulary (``ok``, ``broken``,
``conflict``, ``disabled``) and one conflict rule (:func:`mark_conflicts`): two
different distributions claiming one name are both marked, never resolved by
order.
"""

from __future__ import annotations

from ._selection import normalize

TYPE_CHECKING = False
if TYPE_CHECKING:  # ``typing`` is not imported at run time: this module is on the warm path
    from collections.abc import Callable, Iterable
    from typing import Any

__all__ = ["Contribution", "mark_conflicts"]


class Contribution:
    """What every named contribution has; subclasses add what their kind needs."""

    __slots__ = (
        "description",
        "distribution",
        "error",
        "kind",
        "loader",
        "name",
        "status",
        "target",
    )

    #: The kind of thing, as messages name it ("interaction", "policy", ...).
    noun = "contribution"
    #: The attributes :meth:`as_dict` lists, in this order (a listing's JSON row).
    listed: tuple[str, ...] = ("name", "distribution", "target", "kind", "status", "error")

    def __init__(
        self,
        name: str,
        distribution: str,
        target: str,
        kind: str,
        error: str | None = None,
        description: str | None = None,
        *,
        loader: Callable[[], Any] | None = None,
    ) -> None:
        self.name = name
        self.distribution = distribution
        self.target = target
        self.kind = kind  # how it was contributed: entry-point, hook, builtin, memory
        self.error = error
        self.status = "broken" if error else "ok"
        self.description = description
        #: Returns the contributed object (importing it if needed), where the kind loads itself.
        self.loader = loader

    @property
    def qualified(self) -> str:
        """``distribution:name``, the name that stays unique when two claim one."""
        return f"{self.distribution}:{self.name}"

    @property
    def qualified_name(self) -> str:
        """:attr:`qualified`, under the key listings use for it."""
        return self.qualified

    def describe(self) -> str:
        """``'name' (distribution version, target)`` for messages."""
        return f"{self.name!r} ({self._release()}, {self.target})"

    def claim(self) -> str:
        """``distribution version (target)``: one side of a conflict, for messages."""
        return f"{self._release()} ({self.target})"

    def _release(self) -> str:
        """``distribution version``, or the distribution alone for kinds without a version."""
        version = getattr(self, "version", None)
        return f"{self.distribution} {version}" if version else self.distribution

    def as_dict(self) -> dict[str, Any]:
        """The :attr:`listed` attributes, as ``interactions list --json`` and friends show them."""
        return {field: getattr(self, field) for field in self.listed}

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.qualified} {self.status}>"


def mark_conflicts(items: Iterable[Contribution], how: str) -> None:
    """Mark every item whose name another distribution also claims (disabled ones aside).

    ``how`` says how to pick one, e.g. ``"use a qualified name ({qualified})"``;
    ``{qualified}`` is replaced by the item's own qualified name.
    """
    by_name: dict[str, list[Contribution]] = {}
    for item in items:
        if item.status != "disabled":
            by_name.setdefault(item.name, []).append(item)
    for name, claims in by_name.items():
        if len({normalize(c.distribution) for c in claims}) < 2:
            continue
        for item in claims:
            others = ", ".join(c.qualified for c in claims if c is not item)
            item.status = "conflict"
            item.error = (
                f"name {name!r} is also provided by {others}; "
                f"{how.format(qualified=item.qualified)} or disable one"
            )
