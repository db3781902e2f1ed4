"""Make ``docs/images/report.png``: the demo run's report, as a headless Chromium shows it.

    python tests/report/make_screenshot.py

Runs the README's demo through ``interactions run --report``, opens the page
in Chromium (see ``headless.py``), opens a three-turn episode of the sample,
and saves a screenshot of the top of the page.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

from headless import Browser, find_chromium  # noqa: E402

from interactions_core.cli import main as cli  # noqa: E402


def main() -> int:
    chromium = find_chromium()
    if chromium is None:
        sys.stderr.write("chromium not found (apt-get install chromium)\n")
        return 1
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        page = folder / "report.html"
        config, data = ROOT / "examples" / "config.yaml", ROOT / "examples" / "gsm8k_demo.jsonl"
        if cli(["run", str(config), "--data", str(data), "--report", str(page)]) != 0:
            return 1
        browser = Browser(chromium, folder / "profile")
        try:
            browser.open(page)
            browser.send(
                "Emulation.setDeviceMetricsOverride",
                width=1100,
                height=1400,
                deviceScaleFactor=1,
                mobile=False,
            )
            browser.evaluate(
                "document.querySelectorAll('button.open[data-kind=sample]')[6].click()"
            )
            data_png = browser.send("Page.captureScreenshot", format="png")["data"]
        finally:
            browser.close()
    import base64

    target = ROOT / "docs" / "images" / "report.png"
    target.write_bytes(base64.b64decode(data_png))
    print(f"wrote {target.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
