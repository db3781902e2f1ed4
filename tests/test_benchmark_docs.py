"""Every benchmark figure in the docs sits in a block its benchmark script writes.

``benchmarks/run.py`` writes the table of docs/performance.md; the heavy benchmarks,
run by their own nox sessions, write theirs into docs/serve.md, docs/ray.md and
docs/migrating-from-verl.md. The figures cannot be checked without running the
benchmarks, but their shape can: each block exists once, is the output of a full
run, has its script's header and lists exactly the rows the script declares, in
order, each with well-formed figures. A row renamed or added in ``benchmarks/``
without a new full run (or a table edited by hand) fails here, and so does prose
around a block that quotes a figure the block does not hold.

The heavy scripts are imported for their row titles without Ray, OpenEnv or verl:
they import those only when they run, which is checked too.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"
DOC = ROOT / "docs" / "performance.md"
#: The heavy benchmarks whose figures live in a page of their own.
HEAVY = ("bench_serve", "bench_ray", "bench_verl_adapter")


@pytest.fixture(scope="module")
def bench() -> Iterator[dict[str, ModuleType]]:
    """``run``, ``_common`` and the heavy scripts, imported from ``benchmarks/``."""
    import importlib

    sys.path.insert(0, str(BENCHMARKS))
    try:
        names = ("run", "_common", *HEAVY)
        yield {name: importlib.import_module(name) for name in names}
    finally:
        sys.path.remove(str(BENCHMARKS))


@pytest.fixture(scope="module")
def run_module(bench: dict[str, ModuleType]) -> ModuleType:
    return bench["run"]


def block_lines(block) -> list[str]:
    """The non-blank lines of a page's generated block (which must exist exactly once)."""
    return [line for line in block.read().splitlines() if line.strip()]


def cells(line: str) -> list[str]:
    assert line.startswith("|") and line.endswith("|"), line
    # Backquoted code may hold a '|': split only on pipes outside backquotes.
    parts, current, quoted = [], "", False
    for char in line[1:-1]:
        if char == "`":
            quoted = not quoted
        if char == "|" and not quoted:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    parts.append(current.strip())
    return parts


# -- docs/performance.md: benchmarks/run.py --------------------------------------------


def test_the_block_is_a_full_run_of_every_benchmark(run_module) -> None:
    lines = block_lines(run_module.DOCS)
    assert re.match(r"Python 3\.\d+\.\d+ on \w+ .*at most \d+ alternating runs", lines[0])
    assert lines[1] == run_module.HEADER
    rows = [cells(line) for line in lines[3:]]
    assert [r[0] for r in rows] == run_module.expected_titles()
    for title, goal, measured, result, detail, reproduce in rows:
        assert re.fullmatch(r"(<=|>=) \d+\.\d\dx|report", goal), title
        assert re.fullmatch(r"\d+\.\d\dx|n/a", measured), title
        assert result in ("pass", "FAIL", "info", "skipped"), title
        if goal != "report" and measured != "n/a":
            limit, value = float(goal[3:-1]), float(measured[:-1])
            passed = value <= limit if goal.startswith("<=") else value >= limit
            # A row may fail on a check besides its figure; its detail then says why.
            expected = "pass" if passed and "FAIL:" not in detail else "FAIL"
            assert result == expected, title
        assert detail, title
        assert re.fullmatch(r"`python benchmarks/run\.py --only \w+`", reproduce), title


def test_the_table_format_is_the_one_run_writes(bench, run_module) -> None:
    Row = bench["_common"].Row
    rows = [Row.at_most("a", 1.1, 1.0, "d", "r"), Row("b", "report", 2.0, None, "d", "r")]
    written = run_module.table(rows).splitlines()
    assert written[0] == run_module.HEADER
    assert cells(written[2])[:4] == ["a", "<= 1.10x", "1.00x", "pass"]
    assert cells(written[3])[:4] == ["b", "report", "2.00x", "info"]


def test_prose_outside_the_block_quotes_no_measurement(run_module) -> None:
    """Goals may be written out; measured ratios and times come only from the block."""
    text = DOC.read_text(encoding="utf-8")
    before, rest = text.split(run_module.DOCS.begin, 1)
    prose = before + rest.split(run_module.DOCS.end, 1)[1]
    for figure in re.findall(r"\b\d+(?:\.\d+)?\s?(?:ms|us|µs|s)\b|\b\d+\.\d+x\b", prose):
        assert figure in GOALS, f"docs/performance.md quotes {figure!r} outside the table"


#: Goals the prose names (they are targets, not measurements).
GOALS = {"1.5x", "1.05x", "1.10x"}


# -- the heavy benchmarks' pages --------------------------------------------------------

#: Per script: the page and nox session its markers must name, the first line of a
#: full run's block, and the shape of each row's cells after the title (per row, a
#: regex per cell).
PAGES: dict[str, tuple[str, str, str, list[tuple[str, ...]]]] = {
    "bench_serve": (
        "docs/serve.md",
        "bench_serve",
        r"interactions serve benchmark \(full run\), this machine: \d+ cores shared by the "
        r"server and its clients; medians of 1000 steps each side, episodes/s over 6 s per "
        r"client count",
        [
            (r"\d+\.\d us",),
            (r"\d+ us",),
            (r"-?\d+ us",),
            (r"\d+x",),
            (r"\d+",),
            (r"\d+",),
            (r"\d+",),
        ],
    ),
    "bench_ray": (
        "docs/ray.md",
        "bench_ray",
        r"Ray benchmark \(full\), this machine: \d+ cores, local cluster of 2 CPUs, Ray workers "
        r"at nice -?\d+, load average \d+\.\d at the end",
        [
            (
                r"[\d,]+ µs per call against [\d,]+\.\d µs local",
                r"[\d,]+x",
                r"Ray adds -?[\d,]+ µs per call",
            ),
            (r"[\d,]+ µs per turn", r"[\d,]+x local", r"calls overlap in the actor"),
            (r"[\d,]+ µs per turn", r"[\d,]+x local", r"\d+\.\dx faster than unbatched"),
            *[(r"[\d,]+ turns/s", r"\d+\.\d\dx of 1 replica", r"batched; 2 cores")] * 3,
            *[
                (
                    r"\d+\.\d\d s with --ray against \d+\.\d\d s local",
                    r"\d+\.\d\dx",
                    # A full run: every replayed sample, or the judge's 1000 episodes.
                    r"\d+ episodes; 2 workers on 2 cores; connecting included",
                )
            ]
            * 2,
        ],
    ),
    "bench_verl_adapter": (
        "docs/migrating-from-verl.md",
        "bench_verl",
        r"verl adapter benchmark \(full run\), this machine: \d+ cores",
        [
            (
                r"\d+\.\d\dx",
                r"median batch of 64 episodes x 2 turns: \d+\.\d ms vs \d+\.\d ms; "
                r"[+-]\d+ us per turn; 15 alternating batches; verl's worker, Continuous Token "
                r"tokenization, scripted model",
            )
        ],
    ),
}


@pytest.mark.parametrize("name", HEAVY)
def test_each_heavy_page_has_its_scripts_block_of_a_full_run(bench, name: str) -> None:
    module = bench[name]
    page, session, first_line, shapes = PAGES[name]
    block = module.DOCS
    assert block.page == ROOT / page
    assert block.script == f"{name}.py"
    assert block.session == session
    lines = block_lines(block)
    assert re.fullmatch(first_line, lines[0]), lines[0]
    assert lines[1] == module.HEADER
    assert re.fullmatch(r"(\|---)+\|", lines[2])
    rows = [cells(line) for line in lines[3:]]
    assert [row[0] for row in rows] == list(module.ROWS)
    assert len(module.ROWS) == len(shapes)
    width = len(cells(module.HEADER))
    for row, shape in zip(rows, shapes, strict=True):
        assert len(row) == width, row
        for cell, pattern in zip(row[1:], shape, strict=True):
            assert re.fullmatch(pattern, cell), (row[0], cell, pattern)


def test_the_verl_block_is_the_default_run(bench) -> None:
    """The verl block's shape above hard-codes the script's full-run batch and repeats."""
    module = bench["bench_verl_adapter"]
    assert (module.BATCH, module.REPEATS) == (64, 15)


def test_the_serve_table_is_what_the_script_writes(bench) -> None:
    """The serve block's shapes are those of the script's own formatter."""
    module = bench["bench_serve"]
    text = module.table(True, 1000, 6.0, 1.6e-6, 493.4e-6, {1: 643.2, 16: 1028.1, 64: 932.4})
    lines = text.strip().splitlines()
    _page, _session, first_line, shapes = PAGES["bench_serve"]
    assert re.fullmatch(first_line, lines[0])
    values = [cells(line)[1] for line in lines[4:]]
    assert values == ["1.6 us", "493 us", "492 us", "308x", "643", "1028", "932"]
    for value, (pattern,) in zip(values, shapes, strict=True):
        assert re.fullmatch(pattern, value)


def test_the_ray_table_refuses_rows_it_does_not_declare(bench, monkeypatch) -> None:
    module = bench["bench_ray"]
    monkeypatch.setenv("RAY_worker_niceness", "0")
    rows = [f"| {title} | m | r | n |" for title in module.ROWS]
    text = module.table(True, rows)
    assert text.splitlines()[2] == module.HEADER
    assert [cells(line)[0] for line in text.splitlines()[4:]] == list(module.ROWS)
    with pytest.raises(RuntimeError, match="declares"):
        module.table(True, rows[:-1])


#: Numbers the prose around a block may state that no run measures (facts of design).
DESIGN_NUMBERS = {"bench_ray": {"15"}}  # Ray's default worker niceness


def section_around(text: str, marker: str) -> str:
    """The Markdown section (heading to the next heading of its level or higher) holding marker."""
    at = text.index(marker)
    headings = list(re.finditer(r"^(#+) ", text, flags=re.MULTILINE))
    own = [h for h in headings if h.start() < at][-1]
    level = len(own.group(1))
    later = [h for h in headings if h.start() > at and len(h.group(1)) <= level]
    return text[own.start() : later[0].start() if later else len(text)]


def numbers(text: str) -> set[str]:
    """The numbers written in ``text`` (not the digits inside a word such as gsm8k)."""
    return set(re.findall(r"(?<![\w.])\d+(?:,\d{3})*(?:\.\d+)?", text))


@pytest.mark.parametrize("name", HEAVY)
def test_prose_around_a_heavy_block_states_only_its_numbers(bench, name: str) -> None:
    """Figures come from the block: every number of the section's prose is one of its own.

    Code spans are left out (names, addresses, environment variables are not figures).
    """
    block = bench[name].DOCS
    text = block.page.read_text(encoding="utf-8")
    section = section_around(text, block.begin)
    before, rest = section.split(block.begin, 1)
    prose = re.sub(r"`[^`]*`", "", before + rest.split(block.end, 1)[1])
    allowed = numbers(block.read()) | DESIGN_NUMBERS.get(name, set())
    stray = numbers(prose) - allowed
    assert not stray, f"{block.where} states {sorted(stray)} outside the generated block"


def test_the_heavy_scripts_import_without_their_stacks() -> None:
    """The docs' tests read ROWS without Ray, OpenEnv, verl or torch installed."""
    heavy = ("ray", "openenv", "verl", "torch", "transformers", "interactions_core")
    code = (
        "import sys\n"
        f"sys.path.insert(0, {str(BENCHMARKS)!r})\n"
        f"import {', '.join(HEAVY)}\n"
        f"loaded = sorted(m for m in {heavy!r} if m in sys.modules)\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- the block writer (benchmarks/_common.py) --------------------------------------------

PAGE = """# A page

Prose above, with a table of its own:

| a | b |
|---|---|

{begin}
old figures
{end}

Prose below.
"""


@pytest.fixture()
def page_block(bench, tmp_path: Path):
    block = bench["_common"].DocsBlock(tmp_path / "page.md", "bench_x.py", "bench_x")
    block.page.write_text(PAGE.format(begin=block.begin, end=block.end), encoding="utf-8")
    return block


def test_the_writer_replaces_only_the_block(page_block) -> None:
    page_block.write("header line\n\n| m | v |\n|---|---|\n| x | 1 |\n")
    text = page_block.page.read_text(encoding="utf-8")
    expected = PAGE.format(begin=page_block.begin, end=page_block.end).replace(
        "old figures", "header line\n\n| m | v |\n|---|---|\n| x | 1 |"
    )
    assert text == expected
    assert page_block.read() == "header line\n\n| m | v |\n|---|---|\n| x | 1 |"
    page_block.write(page_block.read())  # writing what is there changes nothing
    assert page_block.page.read_text(encoding="utf-8") == expected


def test_the_markers_name_the_script_and_its_session(page_block) -> None:
    assert page_block.begin == (
        "<!-- BEGIN generated by benchmarks/bench_x.py (nox -s bench_x); do not edit -->"
    )
    assert page_block.end == "<!-- END generated by benchmarks/bench_x.py -->"


def swap(text: str, a: str, b: str) -> str:
    return text.replace(a, "\0").replace(b, a).replace("\0", b)


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(lambda text, b: text.replace(b.begin + "\n", ""), id="no-begin"),
        pytest.param(lambda text, b: text.replace(b.end + "\n", ""), id="no-end"),
        pytest.param(lambda text, b: text.replace(b.begin, "").replace(b.end, ""), id="none"),
        pytest.param(lambda text, b: text + b.begin + "\n" + b.end + "\n", id="two"),
        pytest.param(lambda text, b: swap(text, b.begin, b.end), id="swapped"),
    ],
)
def test_a_page_without_a_well_formed_block_is_refused_untouched(bench, page_block, edit) -> None:
    broken = edit(page_block.page.read_text(encoding="utf-8"), page_block)
    page_block.page.write_text(broken, encoding="utf-8")
    with pytest.raises(bench["_common"].DocsBlockError) as raised:
        page_block.write("new figures\n")
    message = str(raised.value)
    assert "page.md needs exactly one generated block for benchmarks/bench_x.py" in message
    assert message.endswith(f"{page_block.begin}\n{page_block.end}")
    assert page_block.page.read_text(encoding="utf-8") == broken


def test_a_missing_page_is_named(bench, tmp_path: Path) -> None:
    common = bench["_common"]
    block = common.DocsBlock(tmp_path / "gone.md", "bench_x.py", "bench_x")
    with pytest.raises(common.DocsBlockError, match=r"gone\.md is missing"):
        block.read()


def test_only_a_full_run_without_no_docs_writes_and_it_checks_the_page_first(
    bench, page_block
) -> None:
    assert page_block.wanted(full_run=True, no_docs=False)
    assert not page_block.wanted(full_run=False, no_docs=False)
    assert not page_block.wanted(full_run=True, no_docs=True)
    page_block.page.write_text("# no markers\n", encoding="utf-8")
    # A quick run never looks at the page; a full run refuses before measuring anything.
    assert not page_block.wanted(full_run=False, no_docs=False)
    with pytest.raises(bench["_common"].DocsBlockError):
        page_block.wanted(full_run=True, no_docs=False)


# -- which runs write the docs ---------------------------------------------------------


class _Decided(Exception):
    """Raised by the stand-in block once a script has decided whether to write the docs."""


@pytest.mark.parametrize(
    ("name", "argv", "full_run", "no_docs"),
    [
        ("run", [], True, False),
        ("run", ["--quick"], False, False),
        ("run", ["--only", "startup"], False, False),
        ("run", ["--repeats", "3"], False, False),
        ("run", ["--no-docs"], True, True),
        ("bench_serve", [], True, False),
        ("bench_serve", ["--quick"], False, False),
        ("bench_serve", ["--no-docs"], True, True),
        ("bench_ray", [], True, False),
        ("bench_ray", ["--quick"], False, False),
        ("bench_ray", ["--quick", "--no-docs"], False, True),
        ("bench_verl_adapter", [], True, False),
        ("bench_verl_adapter", ["--batch", "64", "--repeats", "15"], True, False),
        ("bench_verl_adapter", ["--repeats", "3"], False, False),
        ("bench_verl_adapter", ["--batch", "8"], False, False),
        ("bench_verl_adapter", ["--no-docs"], True, True),
    ],
)
def test_only_a_full_run_asks_to_write_the_docs(
    bench, monkeypatch, name: str, argv: list[str], full_run: bool, no_docs: bool
) -> None:
    """Each script decides before it measures anything, from its own arguments."""
    decided: dict[str, bool] = {}

    class Block:
        def wanted(self, **kwargs: bool) -> bool:
            decided.update(kwargs)
            raise _Decided

    monkeypatch.setattr(bench[name], "DOCS", Block())
    with pytest.raises(_Decided):
        bench[name].main(argv)
    assert decided == {"full_run": full_run, "no_docs": no_docs}


def session_calls(session: str) -> list[list[object]]:
    """The string arguments of every ``session.run`` call in a noxfile session."""
    import ast

    tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    [function] = [
        node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == session
    ]
    return [
        [arg.value for arg in node.args if isinstance(arg, ast.Constant) and arg.value]
        for node in ast.walk(function)
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "run"
    ]


@pytest.mark.parametrize(
    ("ci", "full", "script"),
    [
        ("ray", "bench_ray", "benchmarks/bench_ray.py"),
        ("serve", "bench_serve", "benchmarks/bench_serve.py"),
        (None, "bench_verl", "benchmarks/bench_verl_adapter.py"),
    ],
)
def test_ci_runs_the_quick_form_and_the_named_session_the_full_one(
    ci: str | None, full: str, script: str
) -> None:
    """The session a block's markers name runs its script in full; CI's only quickly."""
    if ci is not None:
        runs = [call for call in session_calls(ci) if script in call]
        assert runs and all("--quick" in call for call in runs), runs
    runs = [call for call in session_calls(full) if script in call]
    assert runs and not any("--quick" in call for call in runs), runs
