"""`interactions run` and `interactions data` at their edges: odd files, signals, limits, names."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from interactions_core.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
WARNING = "no turn limit is set"


@pytest.fixture
def ex(tmp_path: Path) -> Path:
    """A copy of examples/ (the files a careless command could destroy)."""
    return Path(shutil.copytree(EXAMPLES, tmp_path / "ex"))


def run_ex(ex: Path, *extra: str) -> int:
    return main(["run", str(ex / "config.yaml"), "--data", str(ex / "gsm8k_demo.jsonl"), *extra])


# -- 1: a live policy without a turn limit -----------------------------------------------

ECHO = """
class Once:
    def start(self, sample):
        return [0]

    def reply(self, state, messages):
        state[0] += 1
        return "4" if state[0] == 1 else None
"""


@pytest.fixture
def once_policy(make_dist: Any, forget_modules: None) -> None:
    make_dist(
        "acme-once",
        entry_points={"interactions_core.policies": {"once": "acme_once:Once"}},
        modules={"acme_once": ECHO},
    )


def test_live_policy_without_turn_limit_warns(
    once_policy: None, ex: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_ex(ex, "--policy", "once") == 0
    err = capsys.readouterr().err
    assert WARNING in err and "--max-assistant-turns" in err
    assert len([line for line in err.splitlines() if WARNING in line]) == 1
    assert run_ex(ex, "--policy", "once", "--max-assistant-turns", "3") == 0
    assert WARNING not in capsys.readouterr().err
    assert run_ex(ex, "--policy", "once", "--max-user-turns", "3") == 0
    assert WARNING not in capsys.readouterr().err
    assert run_ex(ex) == 0  # replay: recorded replies run out by themselves
    assert WARNING not in capsys.readouterr().err


# -- 2, 3: outputs that would destroy an input or each other -----------------------------


def test_output_or_trace_naming_an_input_is_refused(
    ex: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = ex / "gsm8k_demo.jsonl"
    config = ex / "config.yaml"
    before = data.read_bytes(), config.read_bytes()
    assert run_ex(ex, "--output", str(data), "--overwrite") == 1
    assert "--output" in (err := capsys.readouterr().err) and "is the --data file" in err
    other_spelling = str(ex / ".." / "ex" / "config.yaml")
    assert run_ex(ex, "--trace", other_spelling, "--overwrite") == 1
    assert "is the CONFIG file" in capsys.readouterr().err
    link = ex / "link.jsonl"
    link.symlink_to(data)
    assert run_ex(ex, "--output", str(link), "--overwrite") == 1
    assert "is the --data file" in capsys.readouterr().err
    assert (data.read_bytes(), config.read_bytes()) == before


def test_output_and_trace_in_one_file_are_refused(
    ex: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    same = tmp_path / "same.jsonl"
    assert run_ex(ex, "--output", str(same), "--trace", str(same)) == 1
    assert "--output and --trace are the same file" in capsys.readouterr().err
    assert not same.exists()  # nothing was created
    same.write_text("keep\n")
    assert run_ex(ex, "--output", str(same), "--trace", str(same), "--overwrite") == 1
    assert "the same file" in capsys.readouterr().err
    assert same.read_text() == "keep\n"


# -- 4: Ctrl-C during a slow model request -----------------------------------------------


class SlowServer:
    """A chat-completions server on 127.0.0.1 that answers after ``delay`` seconds."""

    def __init__(self, delay: float) -> None:
        self.got_request = threading.Event()
        self.release = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                owner.got_request.set()
                owner.release.wait(delay)
                body = json.dumps({"choices": [{"message": {"content": "4"}}]}).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:  # the client is long gone
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        ).start()

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def slow_server() -> Iterator[SlowServer]:
    server = SlowServer(delay=30)
    yield server
    server.close()


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT delivery differs on Windows")
def test_ctrl_c_during_a_slow_request_exits_at_once(slow_server: SlowServer) -> None:
    env = {**os.environ, "INTERACTIONS_NO_CACHE": "1"}
    env.pop("OPENAI_API_KEY", None)
    command = [
        sys.executable,
        "-m",
        "interactions_core",
        "run",
        str(EXAMPLES / "config.yaml"),
        "--data",
        str(EXAMPLES / "gsm8k_demo.jsonl"),
        "--policy",
        "openai",
        "--base-url",
        slow_server.url,
        "--model",
        "tiny",
        "-p",
        "timeout=60",
        "--max-assistant-turns",
        "2",
    ]
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        assert slow_server.got_request.wait(30), "the run never reached the server"
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        started = time.monotonic()
        stdout, stderr = proc.communicate(timeout=10)  # the server answers after 30 s
        elapsed = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, stderr
    assert elapsed < 5, elapsed
    assert "Traceback" not in stderr
    assert "interrupted after 0 episode(s)" in stderr and "(0 left open)" in stderr
    assert "interrupted       yes" in stdout


# -- 5: unreadable parquet ----------------------------------------------------------------


def test_unreadable_parquet_is_a_dataset_error(
    ex: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("pyarrow")
    assert run_ex(ex, "--format", "parquet") == 1
    err = capsys.readouterr().err
    assert "gsm8k_demo.jsonl is not a readable parquet file: " in err
    assert "unexpected" not in err and "please report" not in err
    empty = tmp_path / "empty.parquet"
    empty.write_bytes(b"")
    assert main(["run", str(ex / "config.yaml"), "--data", str(empty)]) == 1
    err = capsys.readouterr().err
    assert "empty.parquet is not a readable parquet file: " in err and "unexpected" not in err


# -- 7, 8, 11, 13, 14 for `interactions data` --------------------------------------------

BUILDERS = '''
from interactions_core._spec import hookimpl

def _row(i, **extra):
    return {"prompt": [{"role": "user", "content": f"{i}?"}], **extra}

def build_crash(*, at: int = 2):
    """Fails mid-stream with a plugin bug."""
    for i in range(5):
        if i == at:
            raise RuntimeError("boom")
        yield _row(i)

def build_nan(*, count: int = 3):
    """A NaN in the second row."""
    for i in range(count):
        yield _row(i, extra_info={"difficulty": float("nan") if i == 1 else 0.5})

def build_ok(*, count: int = 3):
    """Fine rows."""
    for i in range(count):
        yield _row(i)

def build_stops(*, how: str = "exit"):
    """Stops itself in the second row, as a stray sys.exit() or argparse call does."""
    for i in range(3):
        if i == 1:
            raise {"exit": SystemExit(0), "generator": GeneratorExit(),
                   "interrupt": KeyboardInterrupt()}[how]
        yield _row(i)

class Liar:
    @property
    def __class__(self):
        return dict

def build_odd(*, what: str = "set"):
    """One row holding a value JSON cannot hold as it is."""
    row = _row(0)
    if what == "cycle":
        row["extra_info"] = {"me": row}
    else:
        odd = {"set": {1, 2}, "bytes": b"\\xff", "bigint": 10**5000, "key": {1: "a"},
               "liar": Liar()}[what]
        row["extra_info"] = {"odd": odd}
    yield row

def build_described():
    """Fine rows."""
    yield _row(0)

@hookimpl
def register_dataset_builders(register):
    register("crash", build_crash)
    register("nan", build_nan)
    register("ok", build_ok)
    register("stops", build_stops)
    register("odd", build_odd)
    register("described", build_described, description="red \\x1b[31mtext\\nsecond line")
'''


@pytest.fixture
def builders(make_dist: Any, forget_modules: None) -> None:
    make_dist(
        "acme-review-builders",
        entry_points={"interactions_core.plugins": {"builders": "acme_review_builders"}},
        modules={"acme_review_builders": BUILDERS},
    )


def test_builder_bug_mid_stream_is_named(
    builders: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    assert main(["data", "crash", "--output", str(folder / "rows.jsonl")]) == 1
    err = capsys.readouterr().err
    assert "builder 'crash' failed: RuntimeError: boom" in err
    assert "unexpected" not in err and "acme-review-builders" in err
    assert list(folder.iterdir()) == []  # no file, not even a temporary one


def test_data_limit_must_be_at_least_one(
    builders: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "rows.jsonl")
    for value in ("0", "-1"):
        assert main(["data", "ok", "--output", out, "--limit", value]) == 1
        assert "--limit: must be at least 1" in capsys.readouterr().err
        with pytest.raises(SystemExit) as exit_info:
            main(["data", "--limit", value, "ok", "--output", out])
        assert exit_info.value.code == 2
        assert "must be at least 1" in capsys.readouterr().err
    assert not os.path.exists(out)
    assert main(["data", "ok", "--output", out, "--limit", "2"]) == 0
    assert len(Path(out).read_text().splitlines()) == 2
    # Past the largest index (islice refused it: "unexpected ValueError"): every row.
    everything = str(tmp_path / "all.jsonl")
    assert main(["data", "ok", "--output", everything, "--limit", "9" * 20]) == 0
    assert len(Path(everything).read_text().splitlines()) >= 2


def test_data_refuses_nan_rows(
    builders: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "rows.jsonl"
    assert main(["data", "nan", "--output", str(out)]) == 1
    err = capsys.readouterr().err
    assert "row 2 produced by the builder is invalid: field extra_info.difficulty is nan" in err
    assert not out.exists()


def test_directories_are_called_directories(
    builders: None, ex: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "folder.jsonl"
    folder.mkdir()
    assert main(["run", str(ex / "config.yaml"), "--data", str(folder)]) == 1
    assert "folder.jsonl is a directory" in capsys.readouterr().err
    assert run_ex(ex, "--output", str(folder), "--overwrite") == 1
    assert "folder.jsonl is a directory" in capsys.readouterr().err
    plain = tmp_path / "plain"
    plain.mkdir()
    assert main(["data", "ok", "--output", str(plain), "--overwrite"]) == 1
    err = capsys.readouterr().err
    assert "plain is a directory" in err and "cannot tell the format" not in err


@pytest.mark.skipif(not os.path.exists(os.devnull) or os.devnull != "/dev/null", reason="POSIX")
def test_dev_null_is_a_fine_output(
    builders: None, ex: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_ex(ex, "--output", os.devnull, "--trace", os.devnull) == 0
    assert "already exists" not in capsys.readouterr().err
    assert main(["data", "ok", "--output", os.devnull, "--format", "jsonl"]) == 0
    assert "wrote 3 rows" in capsys.readouterr().err
    assert os.path.exists(os.devnull) and not os.path.isfile(os.devnull)


# -- 10: two distributions provide the same policy name ----------------------------------


@pytest.fixture
def rival_replay(make_dist: Any, forget_modules: None) -> None:
    make_dist(
        "acme-rival",
        entry_points={"interactions_core.policies": {"replay": "acme_rival:Once"}},
        modules={"acme_rival": ECHO},
    )


def test_policy_name_conflicts_are_listed_and_explained(
    rival_replay: None, ex: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--list-policies", "--json"]) == 0
    replays = [p for p in json.loads(capsys.readouterr().out) if p["name"] == "replay"]
    assert sorted(p["distribution"] for p in replays) == ["acme-rival", "interactions-core"]
    assert {p["status"] for p in replays} == {"conflict"}
    assert main(["run", "--list-policies"]) == 0
    out = capsys.readouterr().out
    assert "conflict" in out and "interactions-core:replay" in out
    assert run_ex(ex) == 1
    err = capsys.readouterr().err
    assert "no --policy was given" in err and "Write the qualified name" in err
    assert "interactions-core:replay" in err
    assert run_ex(ex, "--policy", "interactions-core:replay") == 0


# -- 12c: a bad --default-interaction is blamed on the option ---------------------------


def test_bad_default_interaction_names_the_option(
    ex: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_ex(ex, "--default-interaction", "nope") == 1
    err = capsys.readouterr().err
    assert "--default-interaction 'nope' is not one of the interactions" in err
    assert "config.yaml:4" not in err
    assert run_ex(ex, "--default-interaction", "gsm8k") == 0


@pytest.mark.parametrize(
    ("how", "kind"),
    [("exit", "SystemExit"), ("generator", "GeneratorExit"), ("interrupt", "KeyboardInterrupt")],
)
def test_a_builder_that_stops_itself_is_a_named_plugin_error(
    builders: None, tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str, kind: str
) -> None:
    # A stray sys.exit() ended `data` with exit 0, nothing written and nothing said; a
    # GeneratorExit printed a bare traceback; a KeyboardInterrupt read as the user's Ctrl-C.
    folder = tmp_path / "out"
    folder.mkdir()
    assert main(["data", "stops", "--how", how, "--output", str(folder / "rows.jsonl")]) == 1
    err = capsys.readouterr().err
    assert f"builder 'stops' failed: {kind}" in err and "a bug in the plugin" in err, err
    assert "Traceback" not in err and "interrupted" not in err, err
    assert list(folder.iterdir()) == []


@pytest.mark.parametrize(
    ("what", "told"),
    [
        ("cycle", "nested over 500 levels (a row that contains itself?)"),
        ("set", "field extra_info.odd is a set"),
        ("bytes", "field extra_info.odd is a bytes"),
        ("bigint", "field extra_info.odd is an integer of 16,610 bits"),
        ("key", "is a key that is not text"),
        ("liar", "field extra_info.odd is a Liar"),
    ],
)
def test_a_row_json_cannot_hold_as_it_is_is_refused_by_name(
    builders: None, tmp_path: Path, capsys: pytest.CaptureFixture[str], what: str, told: str
) -> None:
    # A row that contains itself kept `data` walking it for ever; a set, bytes or an
    # integer of thousands of digits was written as its text ("{1, 2}") without a word.
    out = tmp_path / "rows.jsonl"
    assert main(["data", "odd", "--what", what, "--output", str(out)]) == 1
    err = capsys.readouterr().err
    assert "row 1 produced by the builder is invalid" in err and told in err, err
    assert "unexpected" not in err and not out.exists(), err


def test_a_row_longer_than_a_line_run_reads_is_refused(
    builders: None, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    # `data` wrote a 900 MB line that `run` then skipped as too long.
    from interactions_core import _files

    monkeypatch.setattr(_files, "MAX_LINE", 20)
    out = tmp_path / "rows.jsonl"
    assert main(["data", "ok", "--output", str(out)]) == 1
    err = capsys.readouterr().err
    assert "row 1 produced by the builder would be a JSON line over" in err, err
    assert not out.exists()


def test_the_builder_listing_escapes_what_plugins_wrote(
    builders: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["data"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "red \\x1b[31mtext\\nsecond line" in out, out
