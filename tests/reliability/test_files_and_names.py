"""Files and names handled safely: outputs, temporary files, streams, odd names.

Each test goes through the public CLI (a real process where the behaviour is a
process's) or the public API.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from interactions_core.runtime import write_rows

ROW = {"prompt": [{"role": "user", "content": "hi"}], "responses": ["a"]}


def cli(
    *args: str, cwd: Path, stdin: str | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "INTERACTIONS_DISABLE": "interactions-reasoning-gym", **env}
    proc = subprocess.run(
        [sys.executable, "-m", "interactions_core", *args],
        capture_output=True, text=True, env=environ, timeout=120, cwd=cwd, input=stdin,
    )  # fmt: skip
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def rows(n: int) -> str:
    return "".join(json.dumps({**ROW, "id": f"r{i}"}) + "\n" for i in range(n))


def test_data_from_standard_input(tmp_path: Path) -> None:
    out = tmp_path / "records.jsonl"
    proc = cli("run", "--data", "-", "--output", str(out), "--json", cwd=tmp_path, stdin=rows(3))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["episodes"] == 3
    assert len(out.read_text().splitlines()) == 3


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes")
def test_data_from_a_named_pipe(tmp_path: Path) -> None:
    fifo = tmp_path / "samples.jsonl"
    os.mkfifo(fifo)

    def feed() -> None:
        with open(fifo, "w") as pipe:
            pipe.write(rows(4))

    writer = threading.Thread(target=feed)
    writer.start()
    proc = cli("run", "--data", str(fifo), "--json", cwd=tmp_path)
    writer.join(10)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["episodes"] == 4


def test_overwrite_never_writes_through_a_symlink(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text(rows(1))
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    link = tmp_path / "records.jsonl"
    link.symlink_to(victim)
    proc = cli("run", "--data", str(data), "--output", str(link), "--overwrite", cwd=tmp_path)
    assert proc.returncode == 1 and "symbolic link" in proc.stderr
    assert victim.read_text() == "precious\n"


@pytest.mark.skipif(sys.platform == "win32", reason="fcntl locks")
def test_a_file_being_written_by_another_run_is_refused(tmp_path: Path) -> None:
    import fcntl

    data = tmp_path / "d.jsonl"
    data.write_text(rows(2))
    out = tmp_path / "records.jsonl"
    out.write_text('{"index": 0}\n')
    with open(out, "a") as other_run:
        fcntl.flock(other_run, fcntl.LOCK_EX)  # what a running `interactions run` holds
        proc = cli("run", "--data", str(data), "--output", str(out), "--overwrite", cwd=tmp_path)
    assert proc.returncode == 1 and "being written by another process" in proc.stderr
    assert out.read_text() == '{"index": 0}\n'  # not truncated either
    proc = cli("run", "--data", str(data), "--output", str(out), "--overwrite", cwd=tmp_path)
    assert proc.returncode == 0 and len(out.read_text().splitlines()) == 2


def test_a_failed_trace_open_leaves_no_empty_output_behind(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text(rows(1))
    out = tmp_path / "records.jsonl"
    bad_trace = tmp_path / "missing-folder" / "trace.jsonl"
    proc = cli("run", "--data", str(data), "--output", str(out), "--trace", str(bad_trace),
               cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 1 and "cannot write" in proc.stderr
    assert not out.exists()
    proc = cli("run", "--data", str(data), "--output", str(out), cwd=tmp_path)  # the rerun works
    assert proc.returncode == 0, proc.stderr


def test_data_temporary_files_are_exclusive_and_unpredictable(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    out = tmp_path / "built.jsonl"
    for planted in (f"{out}.tmp-{os.getpid()}", f"{out}.tmp"):
        Path(planted).symlink_to(victim)
    assert write_rows([dict(ROW)], out) == 1
    assert victim.read_text() == "precious\n"
    assert json.loads(out.read_text())["prompt"] == ROW["prompt"]
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".built")]
    assert leftovers == []


def test_a_relative_xdg_cache_home_is_ignored(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    proc = cli("list", "--json", cwd=tmp_path, XDG_CACHE_HOME="relative-cache", HOME=str(home))
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "relative-cache").exists()
    assert (home / ".cache" / "interactions-core").is_dir()


def test_new_with_a_very_long_name_is_a_clear_error(tmp_path: Path) -> None:
    proc = cli("new", "x" * 300, cwd=tmp_path)
    assert proc.returncode == 1
    assert "300 characters long; at most 100" in proc.stderr
    assert "unexpected" not in proc.stderr and list(tmp_path.iterdir()) == []


def test_list_escapes_terminal_control_characters(
    make_dist, site_dir: Path, tmp_path: Path
) -> None:
    make_dist(
        "acme-evil",
        "1.0",
        {"interactions_core.interactions": {"evil\x1b[2J\x07": "acme_evil:Evil"}},
        {"acme_evil": "class Evil: ...\n"},
    )
    proc = cli("list", cwd=tmp_path, PYTHONPATH=str(site_dir),
               XDG_CACHE_HOME=str(tmp_path / "cache"))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout
    assert "evil\\x1b[2J\\x07" in proc.stdout


def test_short_writes_are_continued(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from interactions_core.runtime import LineWriter

    real_write = os.write
    calls = [0]

    def short_write(fd: int, data: bytes) -> int:  # the OS may accept fewer bytes than asked
        calls[0] += 1
        return real_write(fd, bytes(data[:7]))

    path = tmp_path / "records.jsonl"
    with LineWriter(path) as writer:
        monkeypatch.setattr(os, "write", short_write)
        for i in range(20):
            writer.write({"index": i, "text": "x" * 50})
        writer.flush()
        monkeypatch.setattr(os, "write", real_write)
    lines = path.read_text().splitlines()
    assert [json.loads(line)["index"] for line in lines] == list(range(20))
    assert calls[0] > 20  # many short writes made one complete batch


def test_sigterm_during_data_leaves_no_temporary_file(tmp_path: Path) -> None:
    # SIGTERM's default action ended `interactions data` on the spot: its hidden
    # temporary file stayed (1.8 GB under `timeout 60`), with exit 143 and no word.
    import signal

    from core_helpers import signal_when

    source = tmp_path / "questions.jsonl"
    with source.open("w", encoding="utf-8") as file:  # several seconds of building
        for i in range(300_000):
            file.write(json.dumps({"question": f"q{i}", "answer": f"#### {i}"}) + "\n")
    out = tmp_path / "built.jsonl"
    command = ["data", "gsm8k", "--output", str(out), "--input", str(source)]

    def writing() -> bool:
        return any(p.name.startswith(".built") for p in tmp_path.iterdir())

    code, _, err = signal_when(command, writing, signal.SIGTERM)
    assert code == 143, err
    assert b"terminated" in err and b"Traceback" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["questions.jsonl"]


def test_data_output_dash_writes_standard_output(tmp_path: Path) -> None:
    # `--output -` wrote a file named "-" ("wrote 1 row to -").
    source = tmp_path / "q.jsonl"
    source.write_text(json.dumps({"question": "q", "answer": "#### 1"}) + "\n")
    proc = cli("data", "gsm8k", "--input", str(source), "--output", "-", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    [row] = [json.loads(line) for line in proc.stdout.splitlines()]
    assert row["reward_model"]["ground_truth"] == "1", row
    assert sorted(p.name for p in tmp_path.iterdir()) == ["q.jsonl"]
