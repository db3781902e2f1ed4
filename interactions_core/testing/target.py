"""What the checker checks: a class, an instance or a registered name, and the episodes it plays."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from .._spec import validate_interaction_class
from ..errors import InteractionValidationError
from .driver import DEFAULT_PROMPT
from .report import ConformanceReport, record_spec

__all__ = ["DEFAULT_EPISODES", "Episode", "Target", "episodes_from", "resolve_target"]


class Episode(NamedTuple):
    """One scripted episode: interaction kwargs and the assistant replies to play."""

    replies: Sequence[Any]
    kwargs: Mapping[str, Any] = {}
    prompt: str = DEFAULT_PROMPT


DEFAULT_EPISODES = (
    Episode(
        ["I think the answer is 3.\n#### 3", "The answer is 7.\n#### 7"], {"ground_truth": "7"}
    ),
    Episode(["#### 12", "#### 13"], {"ground_truth": "12"}),
    Episode(["no idea", "#### 0", "#### 5"], {"ground_truth": "5"}),
)


class Target:
    """What is being checked: a label, the class and a way to get an instance."""

    def __init__(self, label: str, cls: type, make: Callable[[], Any], shared: bool) -> None:
        self.label = label
        self.cls = cls
        self.make = make
        self.shared = shared  # an instance was given: every check uses that one


def episodes_from(episodes: Iterable[Any] | None) -> list[Episode]:
    if episodes is None:
        return list(DEFAULT_EPISODES)
    out = []
    for item in episodes:
        if isinstance(item, Episode):
            out.append(item)
        elif isinstance(item, Mapping):
            out.append(Episode(**item))
        elif isinstance(item, tuple):
            out.append(Episode(*item))
        else:
            raise TypeError(
                "episodes must be Episode(replies, kwargs) objects, mappings or tuples; "
                f"got {type(item).__name__}"
            )
    if not out:
        raise ValueError("episodes is empty: give at least one Episode(replies, kwargs)")
    return out


def resolve_target(
    target: Any, config: Mapping[str, Any] | None, registry: Any, report: ConformanceReport
) -> Target | None:
    """Turn the target into a :class:`Target`; record spec/config problems on the way."""
    options = dict(config or {})
    if isinstance(target, str):
        if registry is None:
            from ..registry import get_registry

            registry = get_registry()
        entry = registry.resolve(target)  # unknown/conflicting names raise: not a conformance issue
        report.label = f"interaction {entry.describe()}"
        try:
            cls = registry.load(entry)
        except InteractionValidationError as exc:
            record_spec(report, exc)
            report.notes.append("the class failed validation; no episode could be played")
            return None
        _validate(cls, report)  # in-memory registrations are not validated by the registry
        options = {**entry.defaults, **options}
        options.setdefault("name", entry.name)
        return Target(report.label, cls, _factory(cls, options), shared=False)
    if isinstance(target, type):
        report.label = f"interaction class {target.__module__}:{target.__qualname__}"
        _validate(target, report)
        return Target(report.label, target, _factory(target, options), shared=False)
    cls = type(target)
    report.label = f"interaction instance of {cls.__module__}:{cls.__qualname__}"
    if config:
        report.notes.append("config is ignored when an instance is given")
    _validate(cls, report)
    return Target(report.label, cls, lambda: target, shared=True)


def _factory(cls: type, options: dict[str, Any]) -> Callable[[], Any]:
    return lambda: cls(dict(options))


def _validate(cls: type, report: ConformanceReport) -> None:
    try:
        validate_interaction_class(cls, report.label)
    except InteractionValidationError as exc:
        record_spec(report, exc)
