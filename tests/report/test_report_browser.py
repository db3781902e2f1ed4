"""The HTML report in a real headless Chromium: loads cleanly, plots render, episodes open."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from headless import Browser, require_chromium

from interactions_core.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_CONFIG = str(ROOT / "examples" / "config.yaml")
EXAMPLE_DATA = ROOT / "examples" / "gsm8k_demo.jsonl"
HOSTILE = "</script><script>window.pwned = 1</script><img src=x onerror='window.pwned = 2'>"


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    executable = require_chromium()
    b = Browser(executable, tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield b
    finally:
        b.close()


def keep_artifact(path: Path) -> None:
    """Copy a screenshot to $INTERACTIONS_TEST_ARTIFACTS when CI sets it."""
    folder = os.environ.get("INTERACTIONS_TEST_ARTIFACTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(folder) / path.name)


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real run of the demo, plus one errored episode and one with hostile content."""
    folder = tmp_path_factory.mktemp("records")
    data = folder / "data.jsonl"
    rows = EXAMPLE_DATA.read_text(encoding="utf-8").splitlines()
    extra = [
        {"prompt": [{"role": "user", "content": "q"}], "responses": ["#### 1"],
         "interaction_kwargs": {"name": "no_such_interaction"}},
        {"prompt": [{"role": "user", "content": "what is 2+2?"}],
         "responses": [HOSTILE, "#### 4"],
         "interaction_kwargs": {"name": "gsm8k", "ground_truth": "4"}},
    ]  # fmt: skip
    data.write_text("\n".join(rows + [json.dumps(r) for r in extra]) + "\n", encoding="utf-8")
    out = folder / "records.jsonl"
    assert main(["run", EXAMPLE_CONFIG, "--data", str(data), "--output", str(out)]) == 1
    return out


def test_report_loads_renders_and_opens_episodes(
    browser: Browser, records: Path, tmp_path: Path
) -> None:
    page = tmp_path / "report.html"
    assert main(["report", str(records), "-o", str(page)]) == 0
    browser.open(page)
    assert browser.console_errors() == []
    charts = browser.evaluate(
        "Array.from(document.querySelectorAll('figure.chart')).map(f => [f.dataset.chart,"
        " f.querySelectorAll('svg path[stroke], svg rect.bar').length,"
        " f.querySelector('svg').getBoundingClientRect().width])"
    )
    assert [c[0] for c in charts] == ["solved", "score-by-turn", "end-reasons", "turns", "duration"]
    for name, marks, width in charts:
        assert marks >= 1, f"chart {name} drew nothing"
        assert width > 100, f"chart {name} is not laid out"
    # the solved curve goes up to 81.8% + the hostile episode: 10 of 12 scored
    solved = browser.evaluate(
        "Array.from(document.querySelectorAll('[data-chart=solved] circle title'))"
        ".map(t => t.textContent)"
    )
    assert solved[-1].endswith("83.3%")
    assert browser.evaluate("document.getElementById('episode').hidden") is True
    browser.evaluate("document.querySelector('button.open[data-kind=errored]').click()")
    errored = browser.evaluate("document.getElementById('episode').innerText")
    assert "no_such_interaction" in errored
    # open the hostile episode: its text is shown, never run
    index = browser.evaluate(
        "(() => { const d = JSON.parse(document.getElementById('episodes-data').textContent);"
        " return d[0].sample.findIndex(e => e.turns === 2 && e.messages[1].content.includes("
        "'pwned')); })()"
    )
    assert index >= 0
    browser.evaluate(
        f"document.querySelector('button.open[data-kind=sample][data-i=\"{index}\"]').click()"
    )
    turns = browser.evaluate(
        "Array.from(document.querySelectorAll('#episode .turn')).map(t => t.innerText)"
    )
    assert len(turns) == 4  # prompt, turn 1, feedback, turn 2
    assert "assistant, turn 1" in turns[1] and "score 0" in turns[1]
    assert HOSTILE in turns[1]
    assert "interaction feedback after turn 1" in turns[2] and "incorrect" in turns[2]
    assert "assistant, turn 2" in turns[3] and "score 1" in turns[3]
    assert browser.evaluate("typeof window.pwned") == "undefined"
    assert browser.console_errors() == []
    shot = browser.screenshot(tmp_path / "report.png")
    assert shot[:8] == b"\x89PNG\r\n\x1a\n" and len(shot) > 20_000
    keep_artifact(tmp_path / "report.png")


def test_comparison_page_in_the_browser(browser: Browser, records: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.jsonl"
    lines = records.read_text(encoding="utf-8").splitlines()
    other.write_text("\n".join(lines[: len(lines) // 2]) + "\n", encoding="utf-8")
    page = tmp_path / "compare.html"
    assert main(["report", str(records), str(other), "-o", str(page)]) == 0
    browser.open(page)
    assert browser.console_errors() == []
    header = browser.evaluate(
        "Array.from(document.querySelectorAll('table.summary th')).map(t => t.textContent)"
    )
    assert header == ["", "records.jsonl", "other.jsonl"]
    legends = browser.evaluate(
        "Array.from(document.querySelectorAll('[data-chart=end-reasons] .legend span'))"
        ".map(s => s.textContent)"
    )
    assert legends == ["records.jsonl", "other.jsonl"]
    browser.screenshot(tmp_path / "compare.png")
    keep_artifact(tmp_path / "compare.png")


def test_the_console_check_catches_errors(browser: Browser, tmp_path: Path) -> None:
    """The assertion above can fail: a page that logs an error is caught."""
    page = tmp_path / "broken.html"
    page.write_text(
        "<!DOCTYPE html><html><body><script>console.error('boom');"
        "undefinedFunction();</script></body></html>"
    )
    browser.open(page)
    errors = browser.console_errors()
    assert any("boom" in e for e in errors)
    assert any("undefinedFunction" in e for e in errors)
