"""Write the documentation's diagrams (``docs/images/*.svg``) from this script.

    python docs/tools/diagrams.py           # rewrite the SVG files
    python docs/tools/diagrams.py --check   # exit 1 when a committed SVG is stale (CI)

The diagrams are plain SVG written by plain Python: no drawing program, no network,
no dependency, and a reviewer reads a change to a picture as a change to this file.
``nox -s docs`` and ``tests/test_diagrams.py`` run ``--check``, so a committed image
cannot drift from the script that draws it. Labels name real methods and end
reasons; the test checks them against the code.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape

ROOT = Path(__file__).resolve().parents[2]
IMAGES = ROOT / "docs" / "images"

FONT = "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace"
#: Fill and stroke per kind of step, explained by the legend.
KINDS = {
    "runtime": ("#f3f4f6", "#6b7280"),
    "policy": ("#e8f5e9", "#2e7d32"),
    "interaction": ("#e3f2fd", "#1565c0"),
    "end": ("#fff3e0", "#e65100"),
}
LEGEND = {
    "runtime": "the episode loop (interactions_core.runtime)",
    "policy": "the policy: the model side",
    "interaction": "the interaction (SessionInteraction's hook in italics)",
    "end": "how an episode ends (EpisodeRecord.end_reason)",
}


@dataclass
class Drawing:
    """An SVG canvas that collects elements in order; ``render`` closes it."""

    width: int
    height: int
    title: str
    parts: list[str] = field(default_factory=list)

    def box(
        self, x: float, y: float, w: float, h: float, kind: str, lines: list[str], sub: str = ""
    ) -> None:
        """A rounded box, centred text lines, and an optional italic line below them."""
        fill, stroke = KINDS[kind]
        self.parts.append(
            f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="6" '
            f'fill="{fill}" stroke="{stroke}" stroke-width="1.5"/>'
        )
        rows = [(text, "") for text in lines] + ([(sub, ' font-style="italic"')] if sub else [])
        top = y + h / 2 - (len(rows) - 1) * 8 + 4
        for i, (text, style) in enumerate(rows):
            self.text(x + w / 2, top + i * 16, text, style=style)

    def text(self, x: float, y: float, text: str, anchor: str = "middle", style: str = "") -> None:
        self.parts.append(
            f'<text x="{x}" y="{y}" text-anchor="{anchor}"{style}>{escape(text)}</text>'
        )

    def arrow(
        self, points: list[tuple[float, float]], label: str = "", dashed: bool = False
    ) -> None:
        """A polyline ending in an arrowhead; ``label`` sits at the start of its last leg."""
        path = " ".join(f"{x},{y}" for x, y in points)
        dash = ' stroke-dasharray="5,4"' if dashed else ""
        self.parts.append(
            f'<polyline points="{path}" fill="none" stroke="#374151" stroke-width="1.4"'
            f'{dash} marker-end="url(#head)"/>'
        )
        if label:  # beside the last leg: above it when horizontal, right of it when vertical
            (x0, y0), (x1, y1) = points[-2], points[-1]
            if y0 == y1:
                self.text((x0 + x1) / 2, y0 - 6, label, style=' font-size="11"')
            else:
                self.text(x0 + 8, (y0 + y1) / 2 + 4, label, anchor="start", style=' font-size="11"')

    def line(self, points: list[tuple[float, float]]) -> None:
        """A dashed polyline without a head: part of a path that an arrow finishes."""
        path = " ".join(f"{x},{y}" for x, y in points)
        self.parts.append(
            f'<polyline points="{path}" fill="none" stroke="#374151" stroke-width="1.4" '
            'stroke-dasharray="5,4"/>'
        )

    def frame(self, x: float, y: float, w: float, h: float, label: str) -> None:
        self.parts.append(
            f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="10" fill="none" '
            'stroke="#9ca3af" stroke-width="1.2" stroke-dasharray="6,4"/>'
        )
        self.text(x + 10, y + 16, label, anchor="start", style=' font-size="11" fill="#4b5563"')

    def legend(
        self, x: float, y: float, columns: int = 1, spacing: float = 0, entries: dict | None = None
    ) -> None:
        for i, (kind, meaning) in enumerate((entries or LEGEND).items()):
            fill, stroke = KINDS[kind]
            left, top = x + (i % columns) * spacing, y + (i // columns) * 22
            self.parts.append(
                f'<rect x="{left}" y="{top}" width="14" height="14" rx="3" '
                f'fill="{fill}" stroke="{stroke}"/>'
            )
            self.text(left + 22, top + 11, meaning, anchor="start", style=' font-size="11"')

    def render(self) -> str:
        head = (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" '
            f'height="{self.height}" viewBox="0 0 {self.width} {self.height}" '
            f'role="img" aria-labelledby="title" font-family="{FONT}" font-size="12.5" '
            'fill="#111827">\n'
            f'<title id="title">{escape(self.title)}</title>\n'
            '<defs><marker id="head" viewBox="0 0 10 10" refX="9" refY="5" '
            'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
            '<path d="M0,0 L10,5 L0,10 z" fill="#374151"/></marker></defs>\n'
            f'<rect width="{self.width}" height="{self.height}" fill="#ffffff"/>\n'
        )
        return head + "\n".join(self.parts) + "\n</svg>\n"


def episode_loop() -> str:
    """One episode: the interaction's lifecycle inside the policy <-> interaction loop."""
    d = Drawing(860, 930, "One episode: the interaction lifecycle inside the episode loop")
    x, w = 70, 430  # the main column
    mid = x + w / 2
    sx, sw = 570, 240  # the side column: how an episode ends
    rail = 835  # where the endings gather on their way to the final score

    d.box(x, 20, w, 40, "runtime", ['sample: route by interaction_kwargs["name"]'])
    d.box(
        sx,
        14,
        sw,
        52,
        "end",
        ["no interaction_kwargs:", "the first reply ends it:", "single_turn"],
    )
    d.arrow([(x + w, 40), (sx, 40)])
    d.arrow([(mid, 60), (mid, 90)])
    d.box(
        x,
        90,
        w,
        48,
        "interaction",
        ["start_interaction(instance_id, **kwargs)"],
        "new_session(**kwargs)",
    )
    d.arrow([(mid, 138), (mid, 165)])
    d.box(x, 165, w, 34, "runtime", ['messages = copy of sample["prompt"]'])
    d.arrow([(mid, 199), (mid, 250)])

    d.frame(15, 220, 515, 400, "per assistant turn")
    d.box(x, 250, w, 40, "policy", ["reply = policy.reply(state, messages)"])
    d.box(sx, 250, sw, 40, "end", ["reply is None:", "exhausted"])
    d.arrow([(x + w, 270), (sx, 270)], "None")
    d.arrow([(mid, 290), (mid, 315)])
    d.box(x, 315, w, 34, "runtime", ['messages += {"role": "assistant", ...}'])
    d.arrow([(mid, 349), (mid, 375)])
    d.box(
        x,
        375,
        w,
        48,
        "interaction",
        ["generate_response(instance_id, messages, **kwargs)"],
        "respond(state, messages)",
    )
    d.arrow([(mid, 423), (mid, 450)])
    d.box(
        x,
        450,
        w,
        64,
        "runtime",
        [
            "record the turn's score, then check in order:",
            "should_terminate?",
            "max_assistant_turns? max_user_turns?",
        ],
    )
    d.box(sx, 450, sw, 64, "end", ["terminated", "max_assistant_turns", "max_user_turns"])
    d.arrow([(x + w, 482), (sx, 482)], "yes")
    d.arrow([(mid, 514), (mid, 550)], "no")
    d.box(x, 550, w, 40, "runtime", ['messages += {"role": "user", "content": feedback}'])
    d.arrow([(x, 570), (40, 570), (40, 270), (x, 270)])
    d.text(34, 420, "next turn", style=' font-size="11" transform="rotate(-90 34 420)"')

    # the endings with an interaction reach the final score; errors skip it
    d.line([(sx + sw, 270), (rail, 270), (rail, 482)])
    d.line([(sx + sw, 482), (rail, 482)])
    d.arrow([(rail, 482), (rail, 664), (x + w, 664)], "the episode ends", dashed=True)
    d.box(
        x,
        640,
        w,
        48,
        "interaction",
        ["final = calculate_score(instance_id, **kwargs)"],
        "score(state)",
    )
    d.arrow([(mid, 688), (mid, 720)])
    d.box(x, 720, w, 48, "interaction", ["finalize_interaction(instance_id)"], "end_session(state)")
    d.box(sx, 720, sw, 48, "end", ["error / cancelled:", "exception, timeout, Ctrl-C"])
    d.arrow([(sx, 744), (x + w, 744)], "if started")
    d.arrow([(mid, 768), (mid, 805)], "on every path")
    d.box(x, 805, w, 34, "runtime", ["EpisodeRecord -> on_record (the --output file)"])
    d.legend(70, 860, columns=2, spacing=410)
    return d.render()


def name_path() -> str:
    """From ``pip install`` to an instance: how a name in a config finds its class."""
    d = Drawing(860, 520, "The path of a name: from installed metadata to an instance")
    x, w = 40, 430
    mid = x + w / 2
    sx, sw = 540, 290
    steps = [
        (
            "runtime",
            ["pip install some-plugin: an entry point in", "interactions_core.interactions"],
        ),
        (
            "runtime",
            ["index: entry points read from metadata,", "cached until something is installed"],
        ),
        ("runtime", ["registry: allow/deny lists, conflicts;", "nothing imported"]),
        ("runtime", ['resolve "gsm8k" or "interactions-gsm8k:gsm8k"']),
        (
            "interaction",
            ["import the module on first use,", "check the class against the lifecycle"],
        ),
        ("interaction", ["instantiate every config entry", "(all or nothing)"]),
    ]
    notes = [
        ("runtime", ["interactions list stops here:", "it imports no interaction class"]),
        ("end", ["unknown name: did-you-mean", "two distributions: a conflict"]),
        ("end", ["a broken plugin fails here, alone,", "with its original exception"]),
    ]
    top, h, gap = 20, 48, 24
    for i, (kind, lines) in enumerate(steps):
        y = top + i * (h + gap)
        d.box(x, y, w, h, kind, lines)
        if i:
            d.arrow([(mid, y - gap), (mid, y)])
    for row, (kind, lines) in zip((2, 3, 4), notes, strict=True):
        y = top + row * (h + gap)
        d.box(sx, y, sw, h, kind, lines)
        d.line([(x + w, y + h / 2), (sx, y + h / 2)])
    d.text(mid, top + 6 * (h + gap) + 2, "then: per-turn calls go straight to the instance")
    legend = {
        "runtime": "the core, from metadata: no interaction code runs",
        "interaction": "the plugin's code is imported and run",
        "end": "errors, each saying what to do",
    }
    d.legend(40, top + 6 * (h + gap) + 30, columns=2, spacing=430, entries=legend)
    return d.render()


#: Every diagram: the file it is written to and the function that draws it.
DIAGRAMS: dict[str, Callable[[], str]] = {
    "episode-loop.svg": episode_loop,
    "name-path.svg": name_path,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="fail when an SVG is stale")
    args = parser.parse_args(argv)
    stale = []
    for name, draw in DIAGRAMS.items():
        path = IMAGES / name
        svg = draw()
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != svg:
                stale.append(
                    path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)
                )
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(svg, encoding="utf-8")
    if stale:
        print(
            f"stale diagrams: {', '.join(stale)}; regenerate them with "
            "`python docs/tools/diagrams.py` and commit the result",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
