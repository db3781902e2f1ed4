"""Dataset builders: plugins that prepare the rows their interactions expect.

The contract (see ``docs/run.md``, "Dataset builders"):

* A hook plugin (entry-point group ``interactions_core.plugins``) implements::

      @hookimpl
      def register_dataset_builders(register):
          register("gsm8k", build_gsm8k, description="GSM8K -> verl multi-turn rows")

  ``register(name, builder, *, defaults=None, description=None)`` — ``name`` is
  the builder's name on the command line, ``builder`` a callable, ``defaults``
  option values applied before the user's, ``description`` a one-line summary
  (else the first line of the builder's docstring).

* The builder is called with keyword arguments only, ``builder(**options)``, and
  returns an iterable of rows (mappings) in the sample shape (``prompt``,
  ``extra_info.interaction_kwargs`` or ``interaction_kwargs``, other fields).
  Its keyword parameters are its options: ``interactions data NAME --input x
  --with-responses`` calls ``builder(input="x", with_responses=True)``. Values
  arrive as strings, converted to ``int``/``float``/``bool`` when the
  parameter's default has that type; a flag without a value is ``True``; a
  repeated option gives a list. Raise ``ValueError`` (or any
  ``InteractionsError``) with a helpful message for a bad option.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from .._contribution import Contribution
from .._naming import suggest
from ..errors import (
    ConfigError,
    InteractionsError,
    PluginLoadError,
    UnknownBuilderError,
)

if TYPE_CHECKING:
    from ..plugins import Registration

__all__ = [
    "BuilderInfo",
    "builder_options",
    "get_builder",
    "guard_rows",
    "list_builders",
    "parse_cli_options",
    "run_builder",
]


class BuilderInfo(Contribution):
    """A dataset builder registered by a hook plugin: its registration, listed."""

    __slots__ = ("builder", "defaults", "plugin")

    noun = "dataset builder"
    listed = ("name", "distribution", "plugin", "description", "options")

    def __init__(self, registration: Registration) -> None:
        builder = registration.obj
        summary = registration.description
        if not summary:
            doc = inspect.getdoc(builder) or ""
            summary = doc.splitlines()[0] if doc else ""
        plugin = registration.plugin
        distribution = plugin.split(":", 1)[0]
        super().__init__(
            registration.name, distribution, registration.target, "hook", None, summary
        )
        self.builder = builder
        self.plugin = plugin
        self.defaults = dict(registration.defaults)  # the registration stays as it was

    @property
    def options(self) -> dict[str, Any]:
        """The builder's options with their defaults (``None`` for a required one)."""
        return {
            name: (None if p.default is p.empty else p.default)
            for name, p in builder_options(self.builder).items()
        }


def list_builders(registry: Any = None) -> list[BuilderInfo]:
    """Every registered builder, sorted by name (hook plugins are imported)."""
    from ..registry import get_registry

    registry = registry if registry is not None else get_registry()
    host = registry.plugin_host
    out = []
    for pid, registrations in host.collect("register_dataset_builders").items():
        for reg in registrations:
            if not callable(reg.obj):
                host.errors[pid] = TypeError(f"dataset builder {reg.name!r} is not callable")
                continue
            out.append(BuilderInfo(reg))
    out.sort(key=lambda b: (b.name, b.distribution))
    return out


def get_builder(name: str, registry: Any = None) -> BuilderInfo:
    """The builder called ``name`` (or ``distribution:name``)."""
    from .._resolution import resolve
    from ..registry import get_registry

    registry = registry if registry is not None else get_registry()
    builders = list_builders(registry)

    def unknown() -> UnknownBuilderError:
        known = sorted({b.name for b in builders})
        broken = registry.plugin_host.errors
        note = (
            f" ({len(broken)} hook plugin(s) failed to load: "
            + "; ".join(f"{pid}: {exc}" for pid, exc in broken.items())
            + ")"
            if broken
            else ""
        )
        shown = ", ".join(known) if known else "none installed"
        return UnknownBuilderError(
            f"unknown dataset builder {name!r}{suggest(name, known)} Available: {shown}.{note}"
        )

    return resolve(builders, name, unknown)


def builder_options(builder: Any) -> dict[str, inspect.Parameter]:
    """The builder's options: its keyword parameters."""
    from .._options import keyword_options

    return keyword_options(builder)


def _convert(name: str, value: Any, param: inspect.Parameter | None) -> Any:
    if param is None or param.default is param.empty or param.default is None:
        return value
    if isinstance(value, list):
        return [_convert(name, v, param) for v in value]
    kind = type(param.default)
    if not isinstance(value, str) or kind is str:
        return value
    try:
        if kind is bool:
            lowered = value.strip().lower()
            if lowered in ("1", "true", "yes", "on"):
                return True
            if lowered in ("0", "false", "no", "off"):
                return False
            raise ValueError(value)
        if kind in (int, float):
            return kind(value)
    except ValueError:
        raise ConfigError(
            [f"option --{name.replace('_', '-')}: {value!r} is not a valid {kind.__name__}"]
        ) from None
    return value


def parse_cli_options(args: list[str]) -> dict[str, Any]:
    """Parse builder options written ``--name value``.

    ``["--input", "x", "--flag", "--k", "a", "--k", "b"]`` gives
    ``{"input": "x", "flag": True, "k": ["a", "b"]}``; ``--key=value`` works too.
    """
    out: dict[str, Any] = {}
    i = 0
    while i < len(args):
        token = args[i]
        if not token.startswith("--") or token == "--":
            raise ConfigError(
                [f"unexpected argument {token!r}: builder options are written --name value"]
            )
        key, eq, value = token[2:].partition("=")
        key = key.replace("-", "_")
        if not eq:
            if i + 1 < len(args) and not args[i + 1].startswith("--"):
                value = args[i + 1]
                i += 1
            else:
                value = True  # type: ignore[assignment]
        if key in out:
            previous = out[key]
            out[key] = [*previous, value] if isinstance(previous, list) else [previous, value]
        else:
            out[key] = value
        i += 1
    return out


def run_builder(info: BuilderInfo, options: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    """Call the builder with ``defaults`` then ``options``; check the options first."""
    from .._options import check_options

    accepted = builder_options(info.builder)
    merged = {**info.defaults, **options}
    problems = check_options(
        f"builder {info.name!r}", info.builder, options, provided=merged, render=_flag
    )
    if problems:
        raise ConfigError(problems)
    merged = {k: _convert(k, v, accepted.get(k)) for k, v in merged.items()}
    try:
        rows = info.builder(**merged)
    except Exception as exc:
        raise _failed(info, exc) from exc
    if not isinstance(rows, Iterable) or isinstance(rows, (str, bytes, Mapping)):
        raise PluginLoadError(
            f"builder {info.qualified} returned {type(rows).__name__}; it must return an "
            "iterable of rows (mappings)"
        )
    return guard_rows(info, rows)


def _failed(info: BuilderInfo, exc: Exception) -> Exception:
    """The error to show for an exception the builder raised (its message, its name)."""
    if isinstance(exc, InteractionsError):
        return exc
    if isinstance(exc, (ValueError, OSError)):  # the documented way to say what to fix
        return ConfigError([f"builder {info.name!r} failed: {exc}"])
    # anything else is a bug in the plugin: name the plugin and the exception type
    return ConfigError(
        [
            f"builder {info.name!r} failed: {exc.__class__.__name__}: {exc} (a bug in the "
            f"plugin {info.plugin}; report it to its authors)"
        ]
    )


def guard_rows(info: BuilderInfo, rows: Iterable[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
    """Iterate ``rows``; an exception the builder raises mid-stream becomes a named error."""
    try:
        iterator = iter(rows)
    except Exception as exc:
        raise _failed(info, exc) from exc
    while True:
        try:
            row = next(iterator)
        except StopIteration:
            return
        except Exception as exc:
            raise _failed(info, exc) from exc
        yield row


def _flag(option: str) -> str:
    """An option's name as the command line spells it: ``max_rows`` is ``--max-rows``."""
    return "--" + option.replace("_", "-")
