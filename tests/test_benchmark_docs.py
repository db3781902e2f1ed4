"""The docs' benchmark figures sit in blocks that the benchmark scripts write.

``benchmarks/run.py`` writes the table of docs/performance.md; the heavy benchmarks,
run by their own nox sessions, write theirs into docs/serve.md, docs/ray.md and
docs/migrating-from-verl.md. The figures cannot be checked without running the
benchmarks, but a block can be checked against the script that writes it: it exists
once, and it has the script's header, the script's rows and the script's format. The
prose around a block is the docs' business, not this file's.

Then the block writer itself (``benchmarks/_common.py``), and which runs write.
The heavy scripts are imported for their rows without Ray, OpenEnv or verl: they
import those only when they run, which is checked too.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"
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


def test_the_performance_table_is_what_run_writes(bench) -> None:
    """Each row of docs/performance.md, read back and written again by ``run.table``."""
    run, row_type = bench["run"], bench["_common"].Row
    _summary, *table = block_lines(run.DOCS)
    passed = {"pass": True, "FAIL": False, "info": None, "skipped": None}
    rows = []
    for line in table[2:]:
        title, goal, measured, result, detail, reproduce = cells(line)
        ratio = None if measured == "n/a" else float(measured.removesuffix("x"))
        rows.append(row_type(title, goal, ratio, passed[result], detail, reproduce.strip("`")))
        assert reproduce.strip("`").split()[-1] in run.BENCHMARKS, title
    assert run.table(rows).splitlines() == table


@pytest.mark.parametrize("name", HEAVY)
def test_each_heavy_block_has_its_scripts_header_and_rows(bench, name: str) -> None:
    module = bench[name]
    block = module.DOCS
    assert block.script == f"{name}.py"
    lines = block_lines(block)
    header = lines.index(module.HEADER)
    width = len(cells(module.HEADER))
    assert cells(lines[header + 1]) == ["---"] * width
    rows = [cells(line) for line in lines[header + 2 :]]
    assert [row[0] for row in rows] == list(module.ROWS)
    assert all(len(row) == width and all(row) for row in rows), rows


def test_the_ray_table_refuses_rows_it_does_not_declare(bench, monkeypatch) -> None:
    module = bench["bench_ray"]
    monkeypatch.setenv("RAY_worker_niceness", "0")
    rows = [f"| {title} | m | r | n |" for title in module.ROWS]
    text = module.table(True, rows)
    assert [cells(line)[0] for line in text.splitlines()[4:]] == list(module.ROWS)
    with pytest.raises(RuntimeError, match="declares"):
        module.table(True, rows[:-1])


def test_the_heavy_scripts_import_without_their_stacks() -> None:
    """These tests read ROWS without Ray, OpenEnv, verl or torch installed."""
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
