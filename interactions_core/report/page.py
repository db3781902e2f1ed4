"""The report page: one self-contained HTML file (inline CSS, SVG and a small script).

The page works offline and from ``file://``: nothing is fetched. It is laid out
here, section by section, with its tables (the summary, the figures by
interaction, errors, kept episodes) and its fixed stylesheet and script; the
plots and the number formats come from :mod:`.figures`.

The summary and by-interaction tables show the figures ``docs/run.md`` defines,
with a column per run (or a row per run and interaction) so runs compare side by
side. An episode table lists kept episodes, each with a button that opens its
conversation: the kept episodes' conversations are embedded as JSON
(``episodes-data``), which the script renders when a row is opened, using
``textContent`` so that model output containing HTML is shown, never run.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Sequence
from html import escape
from typing import TYPE_CHECKING, Any

from .figures import charts, num, pct, seconds, table

if TYPE_CHECKING:
    from . import RunData

__all__ = ["CSS", "SCRIPT", "episode_table", "render"]


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
    from .._files import json_safe  # a sample id or score holding NaN is shown as null

    data = json_safe([{"label": run.label, **k} for run, k in zip(runs, kept, strict=True)])
    text = json.dumps(data, ensure_ascii=False, default=str, allow_nan=False)
    # inside <script>, "<" could close the element: \u003c is the same JSON string
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


# -- tables --------------------------------------------------------------

_INTERACTION_HEADERS = [
    "interaction",
    "episodes",
    "errored",
    "terminated",
    "mean turns",
    "final score",
    "std. error",
    "95% interval",
    "solved at 1",
    "solved at all",
]
_EPISODE_HEADERS = (
    "episode",
    "sample",
    "interaction",
    "ended by",
    "turns",
    "final",
    "duration",
    "error",
)


def summary_table(runs: Sequence[RunData]) -> str:
    """The whole-run figures, one column per run."""
    return table(["", *(r.label for r in runs)], _summary_rows(runs), cls="summary")


def _summary_rows(runs: Sequence[RunData]) -> list[list[str]]:
    def row(name: str, cells: list[str]) -> list[str]:
        return [escape(name), *cells]

    totals = [r.stats.total for r in runs]
    finals = [t.final_score() for t in totals]
    solved = [t.solved_by_turn() for t in totals]
    turns = [t.assistant_turns() for t in totals]
    rows = [
        row("episodes", [num(t.episodes) for t in totals]),
        row("errored", [f"{num(t.errors)} ({pct(t.errors / t.episodes)})" for t in totals]),
        row(
            "terminated",
            [f"{num(t.terminated)} ({pct(t.terminated / t.episodes)})" for t in totals],
        ),
        row("assistant turns: mean", [num(t["mean"], 2) for t in turns]),
        row(
            "assistant turns: median / p90 / max",
            [f"{t['median']} / {t['p90']} / {t['max']}" for t in turns],
        ),
        row("final score: mean", [num(f["mean"]) for f in finals]),
        row("final score: standard error", [num(f["stderr"]) for f in finals]),
        row(
            "final score: 95% interval",
            [
                "-"
                if f["ci95"] is None
                else f"{num(f['ci95'][0])} to {num(f['ci95'][1])} ({f['ci95_method']})"
                for f in finals
            ],
        ),
        row("solved at turn 1", [pct(s.get(1)) for s in solved]),
        row("solved at all", [pct(list(s.values())[-1]) if s else "-" for s in solved]),
        row("unreadable lines", [num(r.bad_lines) for r in runs]),
    ]
    return rows


def interaction_table(runs: Sequence[RunData]) -> str:
    """The figures of each interaction (of each run, with a run column when several)."""
    headers = ([] if len(runs) == 1 else ["run"]) + _INTERACTION_HEADERS
    return table(headers, _interaction_rows(runs), cls="by-interaction") + _not_shown(
        [(run.label, run.shown_groups()[1]) for run in runs], "interactions with fewer episodes"
    )


def _not_shown(hidden: Sequence[tuple[str, int]], what: str) -> str:
    """A note of the rows a table leaves out (each run's count), or nothing."""
    counts = [(label, n) for label, n in hidden if n]
    if not counts:
        return ""
    said = ", ".join(f"{n:,}" + (f" ({label})" if len(hidden) > 1 else "") for label, n in counts)
    return f'<p class="note">{escape(said)} more {what}, not shown; the totals count them</p>'


def _interaction_rows(runs: Sequence[RunData]) -> list[list[str]]:
    rows = []
    for run in runs:
        for name, g in run.shown_groups()[0]:
            final = g.final_score()
            solved = g.solved_by_turn()
            ci = (
                "-"
                if final["ci95"] is None
                else f"{num(final['ci95'][0])} to {num(final['ci95'][1])}"
            )
            cells = [
                escape(name),
                num(g.episodes),
                num(g.errors),
                num(g.terminated),
                num(g.turns_mean, 2),
                num(final["mean"]),
                num(final["stderr"]),
                ci,
                pct(solved.get(1)),
                pct(list(solved.values())[-1]) if solved else "-",
            ]
            rows.append([escape(run.label), *cells] if len(runs) > 1 else cells)
    return rows


def errors_by_kind_table(runs: Sequence[RunData]) -> str | None:
    """Errors counted by where and type for each run; ``None`` when no episode errored."""
    kinds = [(r.label, k, n) for r in runs for k, n in r.shown_error_kinds()[0]]
    if not kinds:
        return None
    return table(
        ["run", "where: type", "errors"],
        [[escape(lbl), escape(k), num(n)] for lbl, k, n in kinds],
        cls="errors-by-kind",
    ) + _not_shown([(r.label, r.shown_error_kinds()[1]) for r in runs], "rarer kinds of error")


def episode_table(run_index: int, kind: str, episodes: Sequence[dict[str, Any]]) -> str:
    """Kept episodes of one kind (``errored``, ``worst``, ``sample``) of run ``run_index``."""
    if not episodes:
        return '<p class="note">none</p>'
    rows = [_episode_row(run_index, kind, i, ep) for i, ep in enumerate(episodes)]
    return table(_EPISODE_HEADERS, rows, cls=f"episodes {kind}")


def _episode_row(run_index: int, kind: str, i: int, ep: dict[str, Any]) -> list[str]:
    error = ep["errors"][0] if ep["errors"] else None
    return [
        f'<button class="open" data-run="{run_index}" data-kind="{kind}" '
        f'data-i="{i}">open</button> {escape(str(ep["index"]))}',
        escape(json.dumps(ep["sample_id"], ensure_ascii=False, default=str)),
        escape(str(ep["interaction"])),
        escape(str(ep["end_reason"])),
        num(ep["turns"]),
        num(ep["final_score"]),
        seconds(ep["duration_s"]) if isinstance(ep["duration_s"], (int, float)) else "-",
        escape(f"{error['where']}: {error['type']}: {error['message']}"[:200]) if error else "",
    ]


# -- stylesheet and script ----------------------------------------------

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d2330;
background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:16px 24px}header h1{margin:0;font-size:20px}
header p{margin:4px 0 0;color:#c9cfdb}main{padding:16px 24px;max-width:1200px}
h2{font-size:17px;margin:28px 0 8px}table{border-collapse:collapse;background:#fff;margin:4px 0}
th,td{border:1px solid #dde1e8;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#eef0f4;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums}
.charts{display:flex;flex-wrap:wrap;gap:14px}
figure.chart{background:#fff;border:1px solid #dde1e8;margin:0;padding:8px}
figure.chart figcaption{font-weight:600;margin-bottom:4px}
svg .grid{stroke:#e4e7ec}svg .tick,svg .axis-label,svg .empty{font-size:11px;fill:#4a5263}
.legend span{display:inline-block;margin-right:12px;font-size:12px}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}
button.open{font:inherit;padding:1px 8px;cursor:pointer}
#episode{position:fixed;top:0;right:0;bottom:0;width:min(46vw,640px);overflow:auto;
background:#fff;border-left:3px solid #0072B2;padding:10px 16px;box-shadow:-4px 0 16px #0003}
#episode[hidden]{display:none}#episode h3{margin:4px 0;font-size:15px;padding-right:40px}
button.close{position:absolute;top:8px;right:10px;font:inherit;font-size:18px;cursor:pointer}
.turn{border-left:4px solid #c9cfdb;margin:8px 0;padding:4px 10px;background:#fafbfc}
.turn.assistant{border-color:#0072B2}.turn.user{border-color:#009E73}
.turn.feedback{border-color:#D55E00}.turn .role{font-weight:600;font-size:12px;color:#4a5263}
.turn pre{white-space:pre-wrap;word-break:break-word;margin:4px 0 0;font:13px/1.4 ui-monospace,
monospace}.score{float:right;font-weight:600}.err{color:#b00020}.note{color:#4a5263}
"""

SCRIPT = """
(function(){
  var data = JSON.parse(document.getElementById('episodes-data').textContent);
  var panel = document.getElementById('episode');
  function el(tag, cls, text){var e=document.createElement(tag);if(cls){e.className=cls;}
    if(text!==undefined&&text!==null){e.textContent=String(text);}return e;}
  function show(run, kind, i){
    var ep = data[run][kind][i];
    panel.textContent = '';
    var close = el('button', 'close', '\u00d7');
    close.title = 'close (Esc)';
    close.addEventListener('click', function(){ panel.hidden = true; });
    panel.appendChild(close);
    panel.appendChild(el('h3', null, data[run].label + ' - episode ' + ep.index +
      ' (sample ' + JSON.stringify(ep.sample_id) + ')'));
    panel.appendChild(el('p', 'note', 'interaction ' + ep.interaction + ', ended by ' +
      ep.end_reason + ', ' + ep.turns + ' assistant turn(s), final score ' + ep.final_score));
    ep.messages.forEach(function(m){
      var box = el('div', 'turn ' + m.kind);
      if (m.score !== null && m.score !== undefined){
        box.appendChild(el('span', 'score', 'score ' + m.score));
      }
      box.appendChild(el('div', 'role', m.label));
      box.appendChild(el('pre', null, m.content));
      panel.appendChild(box);
    });
    ep.errors.forEach(function(e){
      panel.appendChild(el('p', 'err', 'error in ' + e.where + ': ' + e.type + ': ' + e.message));
    });
    panel.hidden = false;
    panel.scrollTop = 0;
  }
  document.addEventListener('keydown', function(ev){
    if (ev.key === 'Escape') { panel.hidden = true; }
  });
  document.addEventListener('click', function(ev){
    var b = ev.target.closest('button.open');
    if (!b) { return; }
    show(Number(b.dataset.run), b.dataset.kind, Number(b.dataset.i));
  });
})();
"""
