"""``_class_loading``: an interaction's class imported once, validated, failures remembered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from interactions_core._names import Selection
from interactions_core.errors import InteractionValidationError, PluginLoadError
from interactions_core.registry import Registry

GROUP = "interactions_core.interactions"


def registry_of(site_dir: Path, modules: dict[str, str]) -> Registry:
    """A registry whose entry points are ``name = module:Thing``, one per module."""
    for module, code in modules.items():
        (site_dir / f"{module}.py").write_text(code)
    records = [
        {
            "group": GROUP,
            "name": module,
            "dist": "acme-tasks",
            "version": "1.0",
            "value": f"{module}:Thing",
            "path": "",
            "error": None,
        }
        for module in modules
    ]
    return Registry({"entries": records, "hooks": {}}, Selection(), save_index=False)


GOOD = (
    "from interactions_core import BaseInteraction\n"
    "class Thing(BaseInteraction):\n"
    "    async def generate_response(self, instance_id, messages, **kwargs):\n"
    "        return True, '', 1.0, {}\n"
)


def test_a_good_class_is_imported_once_and_kept(site_dir: Path, forget_modules: None) -> None:
    registry = registry_of(site_dir, {"acme_good": GOOD})
    klass = registry.load("acme_good")
    assert klass.__name__ == "Thing" and registry.load("acme_good") is klass
    assert registry.resolve("acme_good")._cls is klass


def test_an_import_failure_marks_the_entry_broken_for_good(
    site_dir: Path, forget_modules: None
) -> None:
    registry = registry_of(site_dir, {"acme_raises": "raise RuntimeError('half installed')\n"})
    with pytest.raises(PluginLoadError) as first:
        registry.load("acme_raises")
    assert isinstance(first.value.__cause__, RuntimeError)  # the original is never lost
    [entry] = registry.entries()
    assert entry.status == "broken" and "half installed" in (entry.error or "")
    (site_dir / "acme_raises.py").write_text(GOOD)  # fixed on disk: still broken in this registry
    with pytest.raises(PluginLoadError, match=r"^interaction 'acme_raises' .* is broken: "):
        registry.load(entry)


def test_a_class_that_breaks_the_spec_is_broken_with_the_reason(
    site_dir: Path, forget_modules: None
) -> None:
    registry = registry_of(site_dir, {"acme_bare": "class Thing:\n    pass\n"})
    with pytest.raises(InteractionValidationError) as info:
        registry.load("acme_bare")
    [entry] = registry.entries()
    assert entry.status == "broken" and entry.error == str(info.value)


def test_check_reports_a_hanging_import_and_goes_on(site_dir: Path, forget_modules: None) -> None:
    hang = "import threading\nthreading.Event().wait(5)\n"
    registry = registry_of(site_dir, {"acme_hangs": hang, "acme_fine": GOOD})
    entries = {e.name: e for e in registry.check(import_timeout=0.3)}
    assert entries["acme_fine"].status == "ok"
    assert entries["acme_hangs"].status == "broken"
    assert (entries["acme_hangs"].error or "").startswith(
        "importing it did not finish within 0.3 s (a plugin that hangs at import;"
    )


@pytest.mark.parametrize(
    ("value", "expected"), [(None, 60.0), ("2.5", 2.5), ("soon", 60.0), ("-1", 60.0)]
)
def test_the_import_timeout_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, value: Any, expected: float
) -> None:
    from interactions_core.registry import default_import_timeout as import_timeout

    if value is None:
        monkeypatch.delenv("INTERACTIONS_IMPORT_TIMEOUT", raising=False)
    else:
        monkeypatch.setenv("INTERACTIONS_IMPORT_TIMEOUT", value)
    assert import_timeout() == expected
