"""The report's tables: the summary, the figures by interaction, errors, kept episodes.

The summary and by-interaction tables show the figures ``docs/run.md`` defines,
with a column per run (or a row per run and interaction) so runs compare side by
side. An episode table lists kept episodes, each with a button that opens its
conversation (the page's script reads it from the embedded JSON).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from html import escape
from typing import Any

from .collect import RunData
from .markup import num, pct, seconds, table

__all__ = ["episode_table", "errors_by_kind_table", "interaction_table", "summary_table"]

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
                else "{:.4f} to {:.4f} ({})".format(*f["ci95"], f["ci95_method"])
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
    return table(headers, _interaction_rows(runs), cls="by-interaction")


def _interaction_rows(runs: Sequence[RunData]) -> list[list[str]]:
    rows = []
    for run in runs:
        for name, g in sorted(run.stats.groups.items()):
            final = g.final_score()
            solved = g.solved_by_turn()
            ci = "-" if final["ci95"] is None else "{:.4f} to {:.4f}".format(*final["ci95"])
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
    kinds = [(r.label, k, n) for r in runs for k, n in r.stats.total.errors_by_kind.items()]
    if not kinds:
        return None
    return table(
        ["run", "where: type", "errors"],
        [[escape(lbl), escape(k), num(n)] for lbl, k, n in kinds],
        cls="errors-by-kind",
    )


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
