"""``interactions report`` and ``run --report`` without a browser: content, bounds, errors."""

from __future__ import annotations

import json
import os
import random
import re
from pathlib import Path
from typing import Any

import pytest

from interactions_core.cli import main
from interactions_core.report import (
    GROUPS_SHOWN,
    SAMPLE_KEPT,
    WORST_KEPT,
    RecordsError,
    RunData,
    read_records,
    render,
)
from interactions_core.report.figures import _nice_max, bar_chart, line_chart

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_CONFIG = str(ROOT / "examples" / "config.yaml")
EXAMPLE_DATA = str(ROOT / "examples" / "gsm8k_demo.jsonl")


def record(index: int, scores: list[float], **kw: Any) -> dict[str, Any]:
    turns = len(scores)
    messages = [{"role": "user", "content": f"question {index}"}]
    for k in range(turns):
        messages.append({"role": "assistant", "content": f"answer {k} " + "x" * 200})
        if k < turns - 1:
            messages.append({"role": "user", "content": "try again"})
    out = {
        "index": index,
        "sample_id": index,
        "interaction": kw.get("interaction", "gsm8k"),
        "instance_id": f"i{index}",
        "end_reason": "terminated" if scores and scores[-1] >= 1 else "exhausted",
        "turns": turns,
        "user_turns": max(turns - 1, 0),
        "scores": scores,
        "final_score": scores[-1] if scores else 0.0,
        "errors": kw.get("errors", []),
        "started_at": 0.0,
        "duration_s": kw.get("duration_s", 0.001 * (1 + index % 7)),
        "messages": messages,
    }
    return out


def write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def demo_records(tmp_path: Path) -> Path:
    out = tmp_path / "records.jsonl"
    assert main(["run", EXAMPLE_CONFIG, "--data", EXAMPLE_DATA, "--output", str(out)]) == 0
    return out


def test_report_of_a_run_has_the_summary_and_every_plot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = demo_records(tmp_path)
    capsys.readouterr()
    assert main(["report", str(records)]) == 0
    page = (tmp_path / "records.html").read_text(encoding="utf-8")
    assert "wrote " in capsys.readouterr().err
    assert page.startswith("<!DOCTYPE html>")
    for chart in ("solved", "score-by-turn", "end-reasons", "turns", "duration"):
        assert f'data-chart="{chart}"' in page
    assert page.count("<svg") == 5
    assert "0.5230 to 0.9486 (wilson)" in page  # the same interval as the run summary
    assert "36.4%" in page and "81.8%" in page
    # nothing is fetched: no external URL outside the SVG namespace
    urls = set(re.findall(r"""(?:src|href)=["']?([^"' >]+)""", page))
    assert urls == set()
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in page


def test_run_report_writes_the_same_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    html = tmp_path / "run.html"
    assert main(["run", EXAMPLE_CONFIG, "--data", EXAMPLE_DATA, "--report", str(html)]) == 0
    page = html.read_text(encoding="utf-8")
    assert "gsm8k_demo.jsonl" in page and "0.5230 to 0.9486 (wilson)" in page
    assert page.count("<svg") == 5
    # an existing report is refused before anything runs, like --output
    assert main(["run", EXAMPLE_CONFIG, "--data", EXAMPLE_DATA, "--report", str(html)]) == 1
    assert "refusing to overwrite" in capsys.readouterr().err
    args = ["run", EXAMPLE_CONFIG, "--data", EXAMPLE_DATA, "--report", EXAMPLE_DATA]
    assert main([*args, "--overwrite"]) == 1
    assert "would destroy the input" in capsys.readouterr().err
    out = tmp_path / "r.jsonl"
    both = ["--output", str(out), "--report", str(out)]
    assert main(["run", EXAMPLE_CONFIG, "--data", EXAMPLE_DATA, *both]) == 1
    assert "--output and --report are the same file" in capsys.readouterr().err


def test_large_runs_give_a_small_page(tmp_path: Path) -> None:
    rng = random.Random(1)
    n = 20_000
    rows = [
        record(i, [float(rng.random() < 0.5) for _ in range(rng.randint(1, 4))]) for i in range(n)
    ]
    path = write(tmp_path / "big.jsonl", rows)
    (run,) = read_records([str(path)])
    assert run.stats.total.episodes == n
    assert len(run.sample) == SAMPLE_KEPT and len(run.worst) == WORST_KEPT
    page = render([run])
    assert len(page.encode()) < 400_000, len(page)
    assert path.stat().st_size > 10 * len(page.encode())
    # the sample is the same on every read (fixed seed), and spread over the file
    (again,) = read_records([str(path)])
    indexes = [e["index"] for e in run.sample]
    assert indexes == [e["index"] for e in again.sample]
    assert max(indexes) > n / 2 and min(indexes) < n / 2


def test_worst_episodes_are_the_lowest_final_scores(tmp_path: Path) -> None:
    run = RunData("r")
    scores = [0.9, 0.1, 0.5, 0.0, 0.7] * 30
    for i, s in enumerate(scores):
        run.add(record(i, [s]))
    worst = run.worst
    assert len(worst) == WORST_KEPT
    assert [e["final_score"] for e in worst] == sorted(scores)[:WORST_KEPT]
    assert worst[0]["index"] == 3  # ties: the earliest first


def test_errored_episodes_are_kept_with_their_error(tmp_path: Path) -> None:
    error = {"where": "generate_response", "type": "ValueError", "message": "bad <b>"}
    rows = [record(0, [1.0]), record(1, [0.0], errors=[error])]
    (run,) = read_records([str(write(tmp_path / "r.jsonl", rows))])
    assert [e["index"] for e in run.errored] == [1]
    page = render([run])
    assert "generate_response: ValueError: bad &lt;b&gt;" in page
    assert "generate_response: ValueError" in page.split("Errors by kind", 1)[1]


def test_long_messages_are_cut(tmp_path: Path) -> None:
    row = record(0, [1.0])
    row["messages"][1]["content"] = "y" * 50_000
    (run,) = read_records([str(write(tmp_path / "r.jsonl", [row]))])
    content = run.sample[0]["messages"][1]["content"]
    assert len(content) < 5_000 and "46,000 more characters not shown" in content


def test_long_conversations_are_cut(tmp_path: Path) -> None:
    """50 errored records of 100,000 empty messages each (15 MB) made a 150 MB page and
    held 1.3 GB; a sampled one was kept whole until the end."""
    error = {"where": "generate_response", "type": "ValueError", "message": "bad"}
    rows = [record(i, [0.0], errors=[error]) for i in range(50)]
    rows.append(record(50, [1.0]))
    for row in rows:
        row["messages"] = [{"role": "R" * 500, "content": "first"}] + [{}] * 100_000
    (run,) = read_records([str(write(tmp_path / "r.jsonl", rows))])
    for view in (run.errored[0], run.sample[0]):
        messages = view["messages"]
        assert len(messages) == 41 and messages[0]["label"] == "R" * 40 + " (prompt)"
        assert messages[20]["content"] == "[... 99,961 messages not shown]"
    assert len(render([run])) < 2_000_000


def test_a_cut_conversation_keeps_its_turns_and_scores(tmp_path: Path) -> None:
    """The page labelled turns from the shown messages: after the cut, reply 21 read
    "turn 10, score 10.0" and the prompt read as feedback."""
    row = record(0, [float(n) for n in range(1, 31)])  # 30 turns, the score of turn n is n
    row["messages"].insert(0, {"role": "system", "content": "be brief"})
    (run,) = read_records([str(write(tmp_path / "r.jsonl", [row]))])
    shown = run.worst[0]["messages"]
    assert [m["label"] for m in shown[:2]] == ["system (prompt)", "user (prompt)"]
    assert shown[2] == {"kind": "assistant", "label": "assistant, turn 1", "score": 1.0,
                        "content": shown[2]["content"]}  # fmt: skip
    after = next(m for m in shown[21:] if m["kind"] == "assistant")
    assert (after["label"], after["score"]) == ("assistant, turn 21", 21.0)
    assert shown[-1]["label"] == "assistant, turn 30" and shown[-1]["score"] == 30.0


def test_errors_shown_are_bounded_and_plain_text(tmp_path: Path) -> None:
    """A million error entries made a 188 MB page; a NaN message failed the whole report
    ("unexpected ValueError: Out of range float values")."""
    row = record(0, [0.0])
    row["errors"] = [
        {"where": "x", "type": "T", "message": float("nan")},
        {"where": "respond", "type": "ValueError", "message": "m" * 10_000},
    ] + [{"where": "respond", "type": "ValueError", "message": "m" * 100}] * 100_000
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")  # NaN as Python writes it
    (run,) = read_records([str(path)])
    errors = run.errored[0]["errors"]
    assert len(errors) == 20 and errors[0]["message"] == "NaN"
    assert len(errors[1]["message"]) < 4_100
    assert len(render([run])) < 1_000_000


def test_a_nan_inside_a_sample_id_and_scores_at_the_float_limit_make_a_report(
    tmp_path: Path,
) -> None:
    """Both failed the whole report ("unexpected ValueError: Out of range float values",
    "unexpected OverflowError" from the y axis); under run --report the summary was lost."""
    nested = record(0, [1.0])
    nested["sample_id"] = {"a": float("nan")}
    huge = record(1, [1e308, 1e308])
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (nested, huge)), encoding="utf-8")
    (run,) = read_records([str(path)])
    page = render([run])
    assert page.rstrip().endswith("</html>") and '"sample_id": {"a": null}' in page


def test_the_page_is_bounded_whatever_ids_names_and_score_lists_hold(tmp_path: Path) -> None:
    """Views kept each record's whole score list and id (400 records of 100,000 scores made a
    108 MB page, 200 KB ids 78 MB), and 40,000 interaction names made a row and a curve each
    (29 MB); error kinds likewise. The page now keeps GROUPS_SHOWN of each, ids cut."""
    path = tmp_path / "r.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for i in range(400):
            r = record(i, [0.5], interaction=f"name-{i}-" + "n" * 300)
            r["scores"] = [0.5] * 20_000
            r["sample_id"] = "s" * 50_000
            r["errors"] = [{"where": "generate_response", "type": f"E{i}", "message": "m"}]
            if i % 2:
                r["errors"] = []
            out.write(json.dumps(r) + "\n")
    (run,) = read_records([str(path)])
    assert len(run.stats.groups) == 400  # every one counted
    page = render([run])
    assert len(page) < 3_000_000, len(page)
    assert f"{400 - GROUPS_SHOWN:,} more interactions with fewer episodes, not shown" in page
    assert f"{200 - GROUPS_SHOWN:,} more rarer kinds of error, not shown" in page
    assert "s" * 50_000 not in page and "more characters not shown" in page


def test_unreadable_lines_are_counted_and_shown(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(record(0, [1.0])) + "\n{truncated\n[1, 2]\n\n")
    (run,) = read_records([str(path)])
    assert run.bad_lines == 2 and run.stats.total.episodes == 1
    assert f"{path}:2: not JSON" in run.bad_examples[0]
    assert run.bad_examples[1] == f"{path}:3: not a JSON object"
    assert "Unreadable lines (2)" in render([run])


def test_records_without_durations_make_a_report(tmp_path: Path) -> None:
    """``duration_s`` is optional in a record: without any, the duration figure is empty."""
    rows = [record(0, [1.0]), record(1, [0.0])]
    for row in rows:
        del row["duration_s"]
    (run,) = read_records([str(write(tmp_path / "r.jsonl", rows))])
    page = render([run])
    assert "Episode duration" in page and run.stats.total.episodes == 2


def test_a_line_nested_too_deeply_is_skipped_as_unreadable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """100,000 levels make json.loads raise RecursionError: the report skips that line."""
    path = tmp_path / "r.jsonl"
    deep = '{"a":' * 100_000 + "1" + "}" * 100_000
    path.write_text(json.dumps(record(0, [1.0])) + "\n" + deep + "\n")
    (run,) = read_records([str(path)])
    assert run.bad_lines == 1 and run.stats.total.episodes == 1
    assert run.bad_examples == [f"{path}:2: JSON nested too deeply to read"]
    assert main(["report", str(path), "-o", str(tmp_path / "r.html")]) == 0
    err = capsys.readouterr().err
    assert "1 unreadable line(s) skipped" in err and "unexpected" not in err
    assert "r.jsonl:2: JSON nested too deeply to read" in (tmp_path / "r.html").read_text()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "has no records"),
        ("{oops\n", "has 1 unreadable lines"),
        ('{"prompt": [{"role": "user", "content": "q"}]}\n', "not an episode record"),
    ],
)
def test_files_that_are_not_records_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text(content)
    assert main(["report", str(path), "-o", str(tmp_path / "x.html")]) == 1
    err = capsys.readouterr().err
    assert message in err and "interactions run --output" in err
    assert not (tmp_path / "x.html").exists()
    with pytest.raises(RecordsError):
        read_records([str(path)])


def test_report_cli_refusals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = demo_records(tmp_path)
    assert main(["report", str(tmp_path / "missing.jsonl")]) == 1
    assert "cannot read" in capsys.readouterr().err
    assert main(["report", str(records), "-o", str(records)]) == 1
    assert "would destroy the records" in capsys.readouterr().err
    assert main(["report", str(records)]) == 0
    assert main(["report", str(records)]) == 1
    assert "refusing to overwrite" in capsys.readouterr().err
    assert main(["report", str(records), "--overwrite", "--title", "My <run>"]) == 0
    assert "<title>My &lt;run&gt;</title>" in (tmp_path / "records.html").read_text()


def test_comparison_labels_two_runs_of_the_same_name(tmp_path: Path) -> None:
    records = demo_records(tmp_path)
    runs = read_records([str(records), str(records)])
    assert [r.label for r in runs] == ["records.jsonl", "records.jsonl (2)"]
    page = render(runs)
    assert "Run comparison" in page and "records.jsonl · gsm8k" in page


def test_svg_charts() -> None:
    assert [_nice_max(v) for v in (0.3, 0.5, 0.51, 7, 1200)] == [0.5, 0.5, 1.0, 10.0, 2000.0]
    line = line_chart("t", [("a <b>", "#000", {1: 0.5, 2: 1.0})], x_label="x", y_label="y")
    assert line.count("<circle") == 2 and "a &lt;b&gt;" in line and "<b>" not in line
    bars = bar_chart("t", ["p", "q"], [("s", "#000", [0.25, 0.75])], x_label="x", y_label="y")
    heights = [float(h) for h in re.findall(r'rect class="bar"[^>]*height="([\d.]+)"', bars)]
    assert heights[1] == pytest.approx(3 * heights[0])
    assert "no data" in line_chart("t", [], x_label="x", y_label="y")


def test_the_sample_keeps_filling_between_errored_episodes() -> None:
    run = RunData("r")
    error = {"where": "policy.reply", "type": "RuntimeError", "message": "x"}
    for i in range(4000):
        run.add(record(i, [1.0], errors=[error] if i % 3 == 0 else []))
    indexes = [e["index"] for e in run.sample]
    assert len(indexes) == SAMPLE_KEPT and all(i % 3 for i in indexes)
    assert sum(i >= 2000 for i in indexes) > SAMPLE_KEPT / 4  # drawn from the whole run


# -- the last record of each (sample, repeat) counts; finding it costs a second reading ---


def readings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files ``read_records`` starts reading, one entry per reading."""
    import interactions_core.report as report

    started: list[str] = []
    iter_records = report.iter_records

    def counted(handle: Any, path: str) -> Any:
        started.append(path)
        return iter_records(handle, path)

    monkeypatch.setattr(report, "iter_records", counted)
    return started


def test_a_file_without_a_repeated_record_is_read_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = readings(monkeypatch)
    (run,) = read_records([str(write(tmp_path / "r.jsonl", [record(i, [1.0]) for i in range(20)]))])
    assert run.seen == 20 and run.superseded == 0
    assert len(started) == 1


def test_a_retried_record_replaces_the_earlier_one_in_two_readings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = readings(monkeypatch)
    failed = record(3, [], errors=[{"where": "x", "type": "E", "message": "boom"}])
    records = [record(0, [1.0]), record(1, [0.0, 1.0]), record(2, [1.0]), failed]
    records += [record(4, [1.0]), record(3, [1.0]), record(5, [0.0])]
    (run,) = read_records([str(write(tmp_path / "r.jsonl", records))])
    assert (run.seen, run.superseded, run.stats.total.errors) == (6, 1, 0)
    assert run.stats.total.episodes == 6
    assert len(started) == 2


def test_a_first_line_without_end_reason_replaced_later_is_not_refused(tmp_path: Path) -> None:
    # Decided only once the whole file is known: the first reading stops there.
    first = {k: v for k, v in record(0, [0.0]).items() if k != "end_reason"}
    path = write(tmp_path / "r.jsonl", [first, record(1, [1.0]), record(0, [1.0])])
    (run,) = read_records([str(path)])
    assert (run.seen, run.superseded) == (2, 1)
    with pytest.raises(RecordsError, match="not an episode record"):
        read_records([str(write(tmp_path / "d.jsonl", [first, record(1, [1.0])]))])


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_pipe_is_counted_as_the_file_would_be(tmp_path: Path) -> None:
    """Its records are copied to a temporary file first: the later record of sample 0
    replaces the earlier one, as in a regular file."""
    import threading

    pipe = tmp_path / "records.pipe"
    os.mkfifo(pipe)
    lines = "".join(json.dumps(record(i % 2, [1.0])) + "\n" for i in range(3))

    def feed() -> None:
        with open(pipe, "w", encoding="utf-8") as handle:
            handle.write(lines)

    writer = threading.Thread(target=feed)
    writer.start()
    (run,) = read_records([str(pipe)])
    writer.join(timeout=10)
    assert (run.seen, run.superseded) == (2, 1)


def test_the_turns_chart_counts_long_episodes_in_ranges(tmp_path: Path) -> None:
    """One bar per turn count: one record of 100,000 turns made a 12 MB page of 100,000
    bars, and five such files compared 59 MB."""
    paths = []
    for i, turns in enumerate([100_000, 3, 77_777]):
        path = tmp_path / f"r{i}.jsonl"
        line = {"index": 0, "end_reason": "max_assistant_turns", "turns": turns, "errors": []}
        path.write_text(json.dumps(line) + "\n")
        paths.append(str(path))
    out = tmp_path / "page.html"
    assert main(["report", *paths, "-o", str(out)]) == 0
    page = out.read_text()
    assert len(page) < 200_000, len(page)
    turns_chart = page[page.index('data-chart="turns"') :][:100_000]
    assert "1-2500" in turns_chart and "97501-100000" in turns_chart
    small = render(read_records([paths[1]]))
    assert ">3<" in small[small.index('data-chart="turns"') :]  # short runs: a bar per count


def test_a_score_near_the_float_limit_is_shown_in_a_few_digits(tmp_path: Path) -> None:
    """A final score of 1e308 (a score the runtime takes) was printed in 309 digits in the
    summary table and on the score axis."""
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(record(0, [1e308])) + "\n")
    page = render(read_records([str(path)]))
    assert re.search(r"\d{40}", page) is None, re.search(r"\d{40}", page)
    assert "1e+308" in page
