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
from typing import Any

from .._classes import check_options, keyword_options
from ..errors import ConfigError, InteractionsError, PluginLoadError
from ..registry import BuilderInfo, Registry, get_registry

__all__ = [
    "BuilderInfo",
    "builder_options",
    "get_builder",
    "guard_rows",
    "list_builders",
    "parse_cli_options",
    "run_builder",
]


def list_builders(registry: Registry | None = None) -> list[BuilderInfo]:
    """Every registered builder, sorted by name (hook plugins are imported).

    The catalog's list (:meth:`Registry.builders`): the allow/deny lists and the
    conflict rule apply to builders as to interactions.
    """
    return (registry if registry is not None else get_registry()).builders()


def get_builder(name: str, registry: Registry | None = None) -> BuilderInfo:
    """The builder called ``name`` (or ``distribution:name``)."""
    return (registry if registry is not None else get_registry()).builder(name)


def builder_options(builder: Any) -> dict[str, inspect.Parameter]:
    """The builder's options: its keyword parameters."""
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
