"""The SVG diagrams in docs/images are the ones docs/tools/diagrams.py draws.

``--check`` fails on a stale image; the labels name methods and end reasons that
exist, so a renamed hook or a new end reason fails here until the picture follows.
"""

from __future__ import annotations

import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "docs" / "tools" / "diagrams.py"
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def diagrams() -> Iterator[ModuleType]:
    sys.path.insert(0, str(TOOL.parent))
    try:
        import diagrams

        yield diagrams
    finally:
        sys.path.remove(str(TOOL.parent))


def labels(name: str) -> str:
    root = ET.parse(ROOT / "docs" / "images" / name).getroot()
    return "\n".join("".join(t.itertext()) for t in root.iter(f"{SVG}text"))


def test_committed_diagrams_are_fresh() -> None:
    proc = subprocess.run(
        [sys.executable, str(TOOL), "--check"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr


def test_the_check_catches_a_stale_image(
    diagrams: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setattr(diagrams, "IMAGES", tmp_path)
    assert diagrams.main(["--check"]) == 1  # missing
    assert diagrams.main([]) == 0
    assert diagrams.main(["--check"]) == 0
    (tmp_path / "name-path.svg").write_text("<svg/>", encoding="utf-8")
    capsys.readouterr()
    assert diagrams.main(["--check"]) == 1
    assert "python docs/tools/diagrams.py" in capsys.readouterr().err


def test_every_diagram_is_shown_by_a_page(diagrams: ModuleType) -> None:
    pages = "".join(p.read_text(encoding="utf-8") for p in (ROOT / "docs").glob("*.md"))
    for name in diagrams.DIAGRAMS:
        assert f"](images/{name})" in pages, f"no page shows docs/images/{name}"


def test_episode_loop_names_the_real_hooks_and_end_reasons() -> None:
    from interactions_core import BaseInteraction, SessionInteraction
    from interactions_core.runtime import END_REASONS, Policy

    text = labels("episode-loop.svg")
    called = set(re.findall(r"\b([a-z_]+)\(", text))
    lifecycle = {
        "start_interaction",
        "generate_response",
        "calculate_score",
        "finalize_interaction",
    }
    hooks = {"new_session", "respond", "score", "end_session"}
    assert lifecycle | hooks | {"reply"} <= called
    for name in lifecycle:
        assert callable(getattr(BaseInteraction, name))
    for name in hooks:
        assert name in vars(SessionInteraction)
    assert callable(Policy.reply)
    for reason in END_REASONS:
        if reason != "cancelled":
            assert re.search(rf"\b{reason}\b", text), reason
    assert "cancelled" in text


def test_name_path_names_the_real_entry_point_group() -> None:
    from interactions_core._index import INTERACTIONS_GROUP

    text = labels("name-path.svg")
    assert INTERACTIONS_GROUP in text
    assert "interactions-gsm8k:gsm8k" in text  # the qualified form, distribution:name
