"""The report page: one self-contained HTML file (inline CSS, SVG and a small script).

The page works offline and from ``file://``: nothing is fetched. It is laid out
here, section by section; the tables come from :mod:`.tables`, the plots from
:mod:`.charts`, the stylesheet and script from :mod:`.assets`. The kept
episodes' conversations are embedded as JSON, which the script shows when a
row is opened.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Sequence
from html import escape
from typing import Any

from .assets import CSS, SCRIPT
from .charts import charts
from .collect import RunData
from .tables import episode_table, errors_by_kind_table, interaction_table, summary_table

__all__ = ["render"]

#: The conversations a run's page carries, by kind (the tables' ``data-kind``).
Kept = dict[str, list[dict[str, Any]]]


def render(runs: Sequence[RunData], *, title: str | None = None) -> str:
    """The whole report page for one run, or several side by side."""
    labels = ", ".join(r.label for r in runs)
    title = title or (f"Run report: {labels}" if len(runs) == 1 else f"Run comparison: {labels}")
    kept: list[Kept] = [{"errored": r.errored, "worst": r.worst, "sample": r.sample} for r in runs]
    parts = [
        *_head(title),
        "<h2>Summary</h2>",
        summary_table(runs),
        "<h2>Plots</h2>",
        charts(runs),
        "<h2>By interaction</h2>",
        interaction_table(runs),
    ]
    errors = errors_by_kind_table(runs)
    if errors is not None:
        parts += ["<h2>Errors by kind</h2>", errors]
    for i, run in enumerate(runs):
        prefix = f"{run.label}: " if len(runs) > 1 else ""
        parts += _run_sections(i, run, kept[i], escape(prefix))
    parts += [
        '<section id="episode" hidden></section>',
        f'<script type="application/json" id="episodes-data">{_embedded(runs, kept)}</script>',
        f"<script>{SCRIPT}</script>",
        "</main></body></html>",
    ]
    return "\n".join(parts)


def _head(title: str) -> list[str]:
    """From the doctype to the opening of ``<main>``: title, stylesheet, header."""
    made = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>",
        f"<header><h1>{escape(title)}</h1><p>written by interactions report on {made}; "
        "the figures are defined in docs/run.md</p></header><main>",
    ]


def _run_sections(i: int, run: RunData, kept: Kept, prefix: str) -> list[str]:
    """One run's unreadable lines and its errored, lowest-scoring and sampled episodes."""
    parts = []
    if run.bad_examples:
        parts.append(f"<h2>{prefix}Unreadable lines ({run.bad_lines:,})</h2><ul>")
        parts.extend(f"<li>{escape(b)}</li>" for b in run.bad_examples)
        parts.append("</ul>")
    if run.torn_line:
        parts.append(f'<p class="note">{escape(run.torn_line)}</p>')
    total = run.stats.total
    parts.append(
        f"<h2>{prefix}Errored episodes</h2>"
        + (
            f'<p class="note">the first {len(run.errored)} of {total.errors:,}</p>'
            + episode_table(i, "errored", kept["errored"])
            if total.errors
            else '<p class="note">no episode errored</p>'
        )
    )
    parts.append(f"<h2>{prefix}Lowest final scores</h2>" + episode_table(i, "worst", kept["worst"]))
    parts.append(
        f"<h2>{prefix}Sampled episodes</h2>"
        f'<p class="note">{len(kept["sample"])} episodes without error, drawn uniformly '
        f"(fixed seed) from {total.episodes - total.errors:,}</p>"
        + episode_table(i, "sample", kept["sample"])
    )
    return parts


def _embedded(runs: Sequence[RunData], kept: Sequence[Kept]) -> str:
    """The kept conversations as JSON that is safe inside a ``<script>`` element."""
    data = [{"label": run.label, **k} for run, k in zip(runs, kept, strict=True)]
    text = json.dumps(data, ensure_ascii=False, default=str, allow_nan=False)
    # inside <script>, "<" could close the element: \u003c is the same JSON string
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
