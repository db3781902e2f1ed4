"""The options of a run, declared and checked in one place.

A local run, the episode loop, ``interactions run`` and a sharded run on Ray
workers all take the same options; each used to declare and check them
itself. :class:`RunOptions` is the one declaration: an immutable attrs class
whose validators run once, when it is built, so every consumer can trust the
values it reads. A sharded run sends it to its workers (it is picklable) and
keys their state by :meth:`RunOptions.worker_key`.
"""

from __future__ import annotations

import json
import math
from typing import Any

import attrs

from .stats import PASS_SCORE

__all__ = ["RunOptions", "check_positive_int", "positive_int"]


def check_positive_int(name: str, value: Any) -> None:
    """Refuse ``value`` unless it is an ``int`` of at least 1 (``bool`` is refused)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, not {value!r}")


def positive_int(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """An attrs validator: :func:`check_positive_int` on the attribute."""
    check_positive_int(attribute.name, value)


def _limit(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """A turn limit: ``None`` (no limit) or a positive integer."""
    if value is not None:
        try:
            positive_int(instance, attribute, value)
        except ValueError:
            raise ValueError(
                f"{attribute.name} must be a positive integer or None, not {value!r}"
            ) from None


def _seconds(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """A timeout: ``None`` (no bound) or a positive number of seconds."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{attribute.name} must be a positive number of seconds, not {value!r}")


def _finite(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{attribute.name} must be a finite number, not {value!r}")


@attrs.frozen(kw_only=True)
class RunOptions:
    """How a run plays its episodes; every field is checked when the object is built.

    ``concurrency``: episodes in flight (the policy's ``max_concurrency`` may
    lower it). ``repeat``: episodes per sample (pass@k for k = 1..repeat).
    ``pass_score``: the final score at which an episode counts as passed.
    ``default``: the interaction of samples whose kwargs name none.
    ``max_assistant_turns`` / ``max_user_turns``: turn limits (``None``: none).
    ``timeout``: the bound on every interaction call, in seconds (``None``: none).
    """

    concurrency: int = attrs.field(default=16, validator=positive_int)
    repeat: int = attrs.field(default=1, validator=positive_int)
    pass_score: float = attrs.field(default=PASS_SCORE, validator=_finite)
    default: str | None = None
    max_assistant_turns: int | None = attrs.field(default=None, validator=_limit)
    max_user_turns: int | None = attrs.field(default=None, validator=_limit)
    timeout: float | None = attrs.field(default=None, validator=_seconds)

    #: Options only the driver of a sharded run uses (it expands repeats, counts pass@k).
    DRIVER_ONLY = ("repeat", "pass_score")

    def replace(self, **changes: Any) -> RunOptions:
        """A copy with ``changes``, checked like a new one."""
        return attrs.evolve(self, **changes)

    def worker_key(self) -> str:
        """The options that shape how a worker plays an episode, as a stable string."""
        shared = attrs.asdict(self, filter=lambda a, _: a.name not in self.DRIVER_ONLY)
        return json.dumps(shared, sort_keys=True)
