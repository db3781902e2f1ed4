"""The report page: one self-contained HTML file (inline CSS, SVG and a small script).

The page works offline and from ``file://``: nothing is fetched. Tables and
charts are plain HTML and SVG; the only script renders a kept episode's
conversation when its row is opened, from JSON embedded in the page, using
``textContent`` so that model output containing HTML is shown, never run.
"""

from __future__ import annotations

import datetime
import json
import math
from collections.abc import Callable, Mapping, Sequence
from html import escape
from typing import Any

from ..runtime.record import END_REASONS
from .collect import RunData
from .svg import PALETTE, bar_chart, line_chart

__all__ = ["render"]

_CSS = """
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

_SCRIPT = """
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
    var prompt = ep.messages.length - ep.turns - ep.user_turns;
    var turn = 0;
    ep.messages.forEach(function(m, k){
      var cls = m.role, label = m.role;
      if (k >= prompt && m.role === 'assistant'){ turn += 1; label = 'assistant, turn ' + turn; }
      else if (k >= prompt && m.role === 'user'){ cls = 'feedback';
        label = 'interaction feedback after turn ' + turn; }
      else if (k < prompt){ label = m.role + ' (prompt)'; }
      var box = el('div', 'turn ' + cls);
      if (cls === 'assistant' && k >= prompt && ep.scores.length >= turn){
        box.appendChild(el('span', 'score', 'score ' + ep.scores[turn - 1]));
      }
      box.appendChild(el('div', 'role', label));
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


def _num(value: Any, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _cell(text: str) -> str:
    """A table cell; numbers (and ``-`` for none) are right-aligned."""
    numeric = text[:1].isdigit() or text == "-" or text.startswith("-0")
    return f'<td class="num">{text}</td>' if numeric else f"<td>{text}</td>"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], cls: str = "") -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(_cell(c) for c in r) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _summary_rows(runs: Sequence[RunData]) -> list[list[str]]:
    def row(name: str, cells: list[str]) -> list[str]:
        return [escape(name), *cells]

    totals = [r.stats.total for r in runs]
    finals = [t.final_score() for t in totals]
    solved = [t.solved_by_turn() for t in totals]
    turns = [t.assistant_turns() for t in totals]
    rows = [
        row("episodes", [_num(t.episodes) for t in totals]),
        row("errored", [f"{_num(t.errors)} ({_pct(t.errors / t.episodes)})" for t in totals]),
        row(
            "terminated",
            [f"{_num(t.terminated)} ({_pct(t.terminated / t.episodes)})" for t in totals],
        ),
        row("assistant turns: mean", [_num(t["mean"], 2) for t in turns]),
        row(
            "assistant turns: median / p90 / max",
            [f"{t['median']} / {t['p90']} / {t['max']}" for t in turns],
        ),
        row("final score: mean", [_num(f["mean"]) for f in finals]),
        row("final score: standard error", [_num(f["stderr"]) for f in finals]),
        row(
            "final score: 95% interval",
            [
                "-"
                if f["ci95"] is None
                else "{:.4f} to {:.4f} ({})".format(*f["ci95"], f["ci95_method"])
                for f in finals
            ],
        ),
        row("solved at turn 1", [_pct(s.get(1)) for s in solved]),
        row("solved at all", [_pct(list(s.values())[-1]) if s else "-" for s in solved]),
        row("unreadable lines", [_num(r.bad_lines) for r in runs]),
    ]
    return rows


def _series_names(runs: Sequence[RunData]) -> list[tuple[int, str, str]]:
    """(run index, interaction, legend label) for every run x interaction pair."""
    out = []
    for i, run in enumerate(runs):
        for name in sorted(run.stats.groups):
            label = name if len(runs) == 1 else f"{run.label} · {name}"
            out.append((i, name, label))
    return out


def _legend(labels: Sequence[str]) -> str:
    return (
        '<div class="legend">'
        + "".join(
            f'<span><i style="background:{PALETTE[k % len(PALETTE)]}"></i>{escape(label)}</span>'
            for k, label in enumerate(labels)
        )
        + "</div>"
    )


def _figure(key: str, caption: str, svg: str, legend: str) -> str:
    return (
        f'<figure class="chart" data-chart="{key}"><figcaption>{escape(caption)}</figcaption>'
        f"{svg}{legend}</figure>"
    )


_DURATION_EDGES = [m * 10.0**e for e in range(-6, 5) for m in (1, 2, 5)]


def _seconds(value: float) -> str:
    """``45µs``, ``12ms``, ``3.4s``, ``2.5min``: durations span nine orders of magnitude."""
    if value < 1e-3:
        return f"{value * 1e6:.3g}µs"
    if value < 1:
        return f"{value * 1e3:.3g}ms"
    if value < 60:
        return f"{value:.3g}s"
    return f"{value / 60:.3g}min"


def _duration_bins(runs: Sequence[RunData]) -> tuple[list[str], list[list[float]]]:
    """Log-spaced bins (1, 2, 5 x 10^k seconds) covering every run's durations."""
    lows = [min(r.durations) for r in runs if r.durations]
    highs = [max(r.durations) for r in runs if r.durations]
    if not lows:
        return [], []
    edges = _DURATION_EDGES
    first = max(0, max(i for i, e in enumerate(edges) if e <= max(min(lows), edges[0])))
    last = min(
        len(edges) - 1,
        min((i for i, e in enumerate(edges) if e > max(highs)), default=len(edges) - 1),
    )
    used = edges[first : last + 1]
    labels = [f"<{_seconds(e)}" for e in used[1:]] or [f"<{_seconds(used[0])}"]
    shares = []
    for run in runs:
        counts = [0] * len(labels)
        for d in run.durations:
            k = 0
            while k < len(labels) - 1 and d >= used[k + 1]:
                k += 1
            counts[k] += 1
        total = len(run.durations) or 1
        shares.append([c / total for c in counts])
    return labels, shares


def _charts(runs: Sequence[RunData]) -> str:
    """Every chart of the page: the curves per interaction, then the shares per run."""
    return '<div class="charts">' + "".join(_curve_charts(runs) + _share_charts(runs)) + "</div>"


def _curve_charts(runs: Sequence[RunData]) -> list[str]:
    """Solved by turn k and mean score by turn, one line per interaction of each run."""
    names = _series_names(runs)
    colours = [PALETTE[k % len(PALETTE)] for k in range(len(names))]
    legend = _legend([label for _, _, label in names])
    solved = [
        (label, colours[k], runs[i].stats.groups[name].solved_by_turn())
        for k, (i, name, label) in enumerate(names)
    ]
    by_turn = [
        (label, colours[k], runs[i].stats.groups[name].score_by_turn())
        for k, (i, name, label) in enumerate(names)
    ]
    return [
        _figure(
            "solved",
            "Solved by turn k (cumulative share of scored episodes)",
            line_chart(
                "solved by turn",
                solved,
                x_label="turn k",
                y_label="solved",
                percent=True,
                y_top=1.0,
            ),
            legend,
        ),
        _figure(
            "score-by-turn",
            "Mean score by turn",
            line_chart(
                "score by turn", by_turn, x_label="assistant turn", y_label="mean turn score"
            ),
            legend,
        ),
    ]


def _share_charts(runs: Sequence[RunData]) -> list[str]:
    """End reasons, assistant turns and durations as shares of each run's episodes."""
    run_colours = [PALETTE[i % len(PALETTE)] for i in range(len(runs))]
    run_legend = _legend([r.label for r in runs]) if len(runs) > 1 else ""

    def shares(keys: list[Any], counts: Callable[[RunData], Mapping[Any, int]]) -> list[Any]:
        return [
            (
                run.label,
                run_colours[i],
                [counts(run).get(k, 0) / run.stats.total.episodes for k in keys],
            )
            for i, run in enumerate(runs)
        ]

    def bars(slug: str, title: str, name: str, labels: list[str], series: Any, x: str) -> str:
        chart = bar_chart(name, labels, series, x_label=x, y_label="episodes", percent=True)
        return _figure(slug, title, chart, run_legend)

    reasons = [r for r in END_REASONS if any(run.stats.total.end_reasons.get(r) for run in runs)]
    most = max((max(run.stats.total.turns, default=0) for run in runs), default=0)
    turn_values = list(range(0 if any(0 in r.stats.total.turns for r in runs) else 1, most + 1))
    labels, duration_shares = _duration_bins(runs)
    durations = [(run.label, run_colours[i], duration_shares[i]) for i, run in enumerate(runs)]
    return [
        bars(
            "end-reasons",
            "End reasons (share of episodes)",
            "end reasons",
            reasons,
            shares(reasons, lambda run: run.stats.total.end_reasons),
            "end reason",
        ),
        bars(
            "turns",
            "Assistant turns per episode (share of episodes)",
            "assistant turns",
            [str(t) for t in turn_values],
            shares(turn_values, lambda run: run.stats.total.turns),
            "assistant turns",
        ),
        bars(
            "duration",
            "Episode duration (share of episodes)",
            "episode duration",
            labels,
            durations if labels else [],
            "wall-clock time per episode",
        ),
    ]


def _interaction_rows(runs: Sequence[RunData]) -> list[list[str]]:
    rows = []
    for run in runs:
        for name, g in sorted(run.stats.groups.items()):
            final = g.final_score()
            solved = g.solved_by_turn()
            ci = "-" if final["ci95"] is None else "{:.4f} to {:.4f}".format(*final["ci95"])
            cells = [
                escape(name),
                _num(g.episodes),
                _num(g.errors),
                _num(g.terminated),
                _num(g.turns_mean, 2),
                _num(final["mean"]),
                _num(final["stderr"]),
                ci,
                _pct(solved.get(1)),
                _pct(list(solved.values())[-1]) if solved else "-",
            ]
            rows.append([escape(run.label), *cells] if len(runs) > 1 else cells)
    return rows


def _episode_table(run_index: int, kind: str, episodes: Sequence[dict[str, Any]]) -> str:
    if not episodes:
        return '<p class="note">none</p>'
    rows = []
    for i, ep in enumerate(episodes):
        error = ep["errors"][0] if ep["errors"] else None
        rows.append(
            [
                f'<button class="open" data-run="{run_index}" data-kind="{kind}" '
                f'data-i="{i}">open</button> {escape(str(ep["index"]))}',
                escape(json.dumps(ep["sample_id"], ensure_ascii=False, default=str)),
                escape(str(ep["interaction"])),
                escape(str(ep["end_reason"])),
                _num(ep["turns"]),
                _num(ep["final_score"]),
                _seconds(ep["duration_s"]) if isinstance(ep["duration_s"], (int, float)) else "-",
                escape(f"{error['where']}: {error['type']}: {error['message']}"[:200])
                if error
                else "",
            ]
        )
    headers = (
        "episode",
        "sample",
        "interaction",
        "ended by",
        "turns",
        "final",
        "duration",
        "error",
    )
    return _table(headers, rows, cls=f"episodes {kind}")


def _embedded(runs: Sequence[RunData], kept: Sequence[dict[str, list[dict[str, Any]]]]) -> str:
    data = [{"label": run.label, **k} for run, k in zip(runs, kept, strict=True)]
    text = json.dumps(data, ensure_ascii=False, default=str, allow_nan=False)
    # inside <script>, "<" could close the element: \u003c is the same JSON string
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def render(runs: Sequence[RunData], *, title: str | None = None) -> str:
    """The whole report page for one run, or several side by side."""
    labels = ", ".join(r.label for r in runs)
    title = title or (f"Run report: {labels}" if len(runs) == 1 else f"Run comparison: {labels}")
    kept = [{"errored": r.errored, "worst": r.worst, "sample": r.sample} for r in runs]
    made = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<header><h1>{escape(title)}</h1><p>written by interactions report on {made}; "
        "the figures are defined in docs/run.md</p></header><main>",
        "<h2>Summary</h2>",
        _table(["", *(r.label for r in runs)], _summary_rows(runs), cls="summary"),
        "<h2>Plots</h2>",
        _charts(runs),
        "<h2>By interaction</h2>",
        _table(
            ([] if len(runs) == 1 else ["run"])
            + [
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
            ],
            _interaction_rows(runs),
            cls="by-interaction",
        ),
    ]
    kinds = [(r.label, k, n) for r in runs for k, n in r.stats.total.errors_by_kind.items()]
    if kinds:
        parts.append("<h2>Errors by kind</h2>")
        parts.append(
            _table(
                ["run", "where: type", "errors"],
                [[escape(lbl), escape(k), _num(n)] for lbl, k, n in kinds],
                cls="errors-by-kind",
            )
        )
    for i, run in enumerate(runs):
        prefix = f"{run.label}: " if len(runs) > 1 else ""
        if run.bad_examples:
            parts.append(f"<h2>{escape(prefix)}Unreadable lines ({run.bad_lines:,})</h2><ul>")
            parts.extend(f"<li>{escape(b)}</li>" for b in run.bad_examples)
            parts.append("</ul>")
        errors = run.stats.total.errors
        parts.append(
            f"<h2>{escape(prefix)}Errored episodes</h2>"
            + (
                f'<p class="note">the first {len(run.errored)} of {errors:,}</p>'
                + _episode_table(i, "errored", kept[i]["errored"])
                if errors
                else '<p class="note">no episode errored</p>'
            )
        )
        parts.append(
            f"<h2>{escape(prefix)}Lowest final scores</h2>"
            + _episode_table(i, "worst", kept[i]["worst"])
        )
        parts.append(
            f"<h2>{escape(prefix)}Sampled episodes</h2>"
            f'<p class="note">{len(kept[i]["sample"])} episodes without error, drawn uniformly '
            f"(fixed seed) from {run.stats.total.episodes - run.stats.total.errors:,}</p>"
            + _episode_table(i, "sample", kept[i]["sample"])
        )
    parts += [
        '<section id="episode" hidden></section>',
        f'<script type="application/json" id="episodes-data">{_embedded(runs, kept)}</script>',
        f"<script>{_SCRIPT}</script>",
        "</main></body></html>",
    ]
    return "\n".join(parts)
