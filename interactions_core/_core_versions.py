"""Which core versions a plugin supports, and a clear warning when the running one is not.

A plugin declares the core versions it supports the standard way, as the version
specifier of its dependency on the core in ``pyproject.toml``::

    dependencies = ["interactions-core>=0.1,<0.2"]

That lands in the distribution's metadata as ``Requires-Dist``. pip enforces it at
install time, but it can still be broken afterwards (``pip install --no-deps``,
a core upgraded later, a ``PYTHONPATH`` shared between environments, a conda
environment mixing installers). So when the registry first loads a class from a
distribution it reads that distribution's ``METADATA`` file (already located by
discovery, so no metadata scan and no plugin import is needed; listing never
calls this) and, when the running core does not satisfy the specifier, emits an
:class:`IncompatibleCoreWarning` naming the plugin, the range it declares and the
running core version. It is a warning, not an error: a plugin that declares a
conservative upper bound often still works, and the user decides.

The specifier check implements the PEP 440 operators plugins use (``==``,
``!=``, ``<``, ``<=``, ``>``, ``>=``, ``~=``, ``===`` and ``.*`` wildcards) on
release numbers, with pre-releases ordered before their release. Anything it
cannot parse is ignored rather than warned about.
"""

from __future__ import annotations

import os
import re

from .errors import IncompatibleCoreWarning, warn

__all__ = [
    "CORE_DISTRIBUTION",
    "IncompatibleCoreWarning",
    "check_core_requirement",
    "core_requirement",
    "satisfies",
    "warn_if_incompatible",
]

CORE_DISTRIBUTION = "interactions-core"

_warned: set[tuple[str, str, str]] = set()

_NAME_SEP = re.compile(r"[-_.]+")
_REQ = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*\(?([^;)]*)\)?\s*(;.*)?$")
_CLAUSE = re.compile(r"^\s*(~=|===|==|!=|<=|>=|<|>)\s*([^\s]+)\s*$")
_VERSION = re.compile(
    r"^v?(?:\d+!)?(\d+(?:\.\d+)*)(?:[-_.]?(a|b|c|rc|alpha|beta|pre|preview)[-_.]?(\d*))?"
    r"(?:[-_.]?(post|rev|r)[-_.]?(\d*))?(?:[-_.]?(dev)[-_.]?(\d*))?(?:\+.*)?$",
    re.IGNORECASE,
)


def _normalize(name: str) -> str:
    return _NAME_SEP.sub("-", name).lower()


def _key(version: str) -> tuple[tuple[int, ...], tuple[int, int], int, int] | None:
    """A sort key for a version: release, pre-release, post-release, dev-release."""
    match = _VERSION.match(version.strip())
    if not match:
        return None
    release = tuple(int(p) for p in match.group(1).split("."))
    while len(release) > 1 and release[-1] == 0:
        release = release[:-1]
    pre_tag, pre_num, post_tag, post_num, dev_tag, dev_num = match.groups()[1:]
    if pre_tag:
        order = {"a": 0, "alpha": 0, "b": 1, "beta": 1}.get(pre_tag.lower(), 2)
        pre = (order, int(pre_num or 0))
    elif dev_tag and not post_tag:
        pre = (-1, 0)  # 1.0.dev1 sorts before 1.0a1
    else:
        pre = (3, 0)  # a final release
    post = int(post_num or 0) if post_tag else -1
    dev = int(dev_num or 0) if dev_tag else 1 << 30
    return release, pre, post, dev


def _release(version: str) -> tuple[int, ...] | None:
    match = _VERSION.match(version.strip())
    return tuple(int(p) for p in match.group(1).split(".")) if match else None


def _pad(a: tuple[int, ...], n: int) -> tuple[int, ...]:
    return a + (0,) * (n - len(a))


def _clause(op: str, wanted: str, version: str) -> bool | None:
    """Whether ``version`` satisfies one clause; ``None`` when it cannot be evaluated."""
    if op == "===":
        return version.strip() == wanted.strip()
    if wanted.endswith(".*") and op in ("==", "!="):
        prefix, have = _release(wanted[:-2]), _release(version)
        if prefix is None or have is None:
            return None
        same = _pad(have, len(prefix))[: len(prefix)] == prefix
        return same if op == "==" else not same
    have_key, want_key = _key(version), _key(wanted)
    if have_key is None or want_key is None:
        return None
    if op == "~=":
        prefix = _release(wanted)
        have = _release(version)
        if prefix is None or have is None or len(prefix) < 2:
            return None
        stem = prefix[:-1]
        return have_key >= want_key and _pad(have, len(stem))[: len(stem)] == stem
    if op == "==":
        return have_key == want_key
    if op == "!=":
        return have_key != want_key
    if op == "<":
        return have_key < want_key
    if op == "<=":
        return have_key <= want_key
    if op == ">":
        return have_key > want_key
    return have_key >= want_key  # ">="


def satisfies(version: str, specifier: str) -> bool | None:
    """Whether ``version`` satisfies ``specifier`` (e.g. ``">=0.1,<0.2"``).

    Returns ``None`` when the specifier or version cannot be parsed; an empty
    specifier is satisfied by everything.
    """
    result: bool | None = True
    for part in filter(None, (p.strip() for p in specifier.split(","))):
        match = _CLAUSE.match(part)
        if not match:
            return None
        ok = _clause(match.group(1), match.group(2), version)
        if ok is None:
            return None
        result = result and ok
    return result


def core_requirement(metadata_path: str) -> str | None:
    """The specifier a distribution's metadata puts on interactions-core, if any.

    ``metadata_path`` is the ``*.dist-info`` (or ``*.egg-info``) folder. Only
    unconditional requirements count (not ``; extra == "test"`` ones). Returns
    ``""`` for an unversioned dependency and ``None`` when there is none.
    """
    for filename in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(metadata_path, filename), encoding="utf-8") as fh:
                text = fh.read()
        except OSError:
            continue
        head = text.split("\n\n", 1)[0]  # headers end at the first blank line
        for line in head.splitlines():
            if not line.lower().startswith("requires-dist:"):
                continue
            match = _REQ.match(line.split(":", 1)[1])
            if not match or _normalize(match.group(1)) != CORE_DISTRIBUTION:
                continue
            marker = match.group(4) or ""
            if "extra" in marker:
                continue
            return match.group(3).strip()
        return None
    return None


def check_core_requirement(
    distribution: str, metadata_path: str, core_version: str | None = None
) -> str | None:
    """The warning text when ``distribution`` does not support the running core, else ``None``."""
    if _normalize(distribution) == CORE_DISTRIBUTION or not metadata_path:
        return None
    specifier = core_requirement(metadata_path)
    if not specifier:
        return None
    if core_version is None:
        from . import __version__

        core_version = __version__
    if satisfies(core_version, specifier) is not False:
        return None
    return (
        f"plugin {distribution} declares it supports {CORE_DISTRIBUTION} {specifier}, but "
        f"{CORE_DISTRIBUTION} {core_version} is running"
    )


def warn_if_incompatible(
    distribution: str,
    version: str,
    metadata_path: str,
    interaction: str | None = None,
    *,
    stacklevel: int = 3,
) -> bool:
    """Warn (once per plugin version) when ``distribution`` does not support this core.

    Called by :meth:`Registry.load <interactions_core.registry.Registry.load>`.
    Returns whether a warning was issued. Never raises: unreadable metadata means
    no warning.
    """
    try:
        problem = check_core_requirement(distribution, metadata_path)
    except Exception:
        return False
    if problem is None:
        return False
    from . import __version__ as core_version

    key = (distribution, version, core_version)
    if key in _warned:
        return False
    _warned.add(key)
    what = f"interaction {interaction!r}" if interaction else "its interactions"
    specifier = core_requirement(metadata_path)
    warn(
        f"{problem} ({distribution} {version}); {what} may not work. Install an "
        f"{CORE_DISTRIBUTION} version the plugin supports (pip install "
        f"'{CORE_DISTRIBUTION}{specifier}'), or a release of {distribution} that supports "
        f"{CORE_DISTRIBUTION} {core_version}.",
        IncompatibleCoreWarning,
        stacklevel=stacklevel,
    )
    return True
