"""``interactions run --ray --resume``: a sharded run resumes exactly as a local run does.

Every test compares with the local run on the same data: the records (times
and session ids aside) and the summary (timings aside) must be the same, and a
file written one way resumes the other way.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from cluster_support import EXPECTED, cli, stable, write_dist

#: Summary fields that depend on timing.
TIMING = ("elapsed_s", "episodes_per_second")


def _run(
    config: Path, data: Path, out: Path, *extra: str, env: dict[str, str] | None = None
) -> tuple[int, dict, list[dict], str]:
    """``interactions run CONFIG --data DATA --output OUT --json EXTRA``: code, summary, records."""
    args = ["run", str(config), "--data", str(data), "--output", str(out), "--json", *extra]
    if env is None:
        code, stdout, stderr = cli(*args)
    else:
        command = [sys.executable, "-m", "interactions_core", *args]
        proc = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
        code, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
    assert "Traceback" not in stderr, stderr
    summary = json.loads(stdout) if stdout.strip() else {}
    for key in TIMING:
        summary.pop(key, None)
    return code, summary, _records(out), stderr


def _records(path: Path) -> list[dict]:
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    assert text == "" or text.endswith("\n"), "the file ends with a partial line"
    return [json.loads(line) for line in text.splitlines()]


def _truncate(source: Path, target: Path, lines: int, partial: bool = True) -> None:
    """The first ``lines`` records of ``source``, plus half of the next (a crash mid-write)."""
    kept = source.read_text(encoding="utf-8").splitlines(keepends=True)
    text = "".join(kept[:lines]) + (kept[lines][: len(kept[lines]) // 2] if partial else "")
    target.write_text(text, encoding="utf-8")


def _same_figures(a: object, b: object) -> bool:
    """Equal, floats to 12 digits: a resumed summary adds the same scores in another order."""
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-15)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_figures(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(_same_figures, a, b))
    return a == b


def _latest(records: list[dict]) -> dict[tuple[int, int], dict]:
    """The record ``--resume`` keeps for each ``(index, repeat)``: the last one in the file."""
    return {(r["index"], r["repeat"]): stable(r) for r in records}


def test_a_cut_sharded_run_resumes_on_ray_to_the_uninterrupted_local_run(
    address: str, replay_files: tuple[Path, Path], tmp_path: Path
) -> None:
    config, data = replay_files
    code, local, local_records, _ = _run(config, data, tmp_path / "local.jsonl")
    assert code == 0 and {k: local[k] for k in EXPECTED} == EXPECTED

    code, _, _, err = _run(config, data, tmp_path / "ray.jsonl", "--ray", address)
    assert code == 0, err
    cut = tmp_path / "cut.jsonl"
    _truncate(tmp_path / "ray.jsonl", cut, 700)  # 700 records and a partial line
    on_ray, on_local = tmp_path / "on_ray.jsonl", tmp_path / "on_local.jsonl"
    shutil.copyfile(cut, on_ray)
    shutil.copyfile(cut, on_local)

    code, summary, records, err = _run(config, data, on_ray, "--resume", "--ray", address)
    assert code == 0, err
    assert "700 episode(s) from earlier runs, 619 played now" in err
    # the summary of the whole dataset, as the uninterrupted local run's
    assert {k: summary[k] for k in EXPECTED} == EXPECTED
    assert _same_figures(summary, local)
    # the partial line was cut off; each sample has exactly one record, in dataset order
    assert [r["index"] for r in records] == list(range(1319))
    assert [stable(r) for r in records] == sorted(
        (stable(r) for r in local_records), key=lambda r: r["index"]
    )
    # the appended records carry the same fingerprints as the earlier ones
    assert {(r["config_hash"], r["data_hash"]) for r in records} == {
        (local_records[0]["config_hash"], local_records[0]["data_hash"])
    }

    # the same cut file resumed without --ray: the same file and summary
    code, summary_local, records_local, _ = _run(config, data, on_local, "--resume")
    assert code == 0
    assert summary_local == summary
    assert [stable(r) for r in records_local] == [stable(r) for r in records]

    # a finished file: nothing is played, so no cluster is reached (none listens on port 1)
    code, again, _, err = _run(config, data, on_ray, "--resume", "--ray", "127.0.0.1:1")
    assert code == 0 and _same_figures(again, summary)
    assert "1319 episode(s) from earlier runs, 0 played now" in err
    assert len(_records(on_ray)) == 1319


def _two_attempts(data: Path, target: Path, rows: int) -> Path:
    """The first ``rows`` replay samples as two recorded attempts of two replies (--repeat 2)."""
    samples = [json.loads(line) for line in data.read_text(encoding="utf-8").splitlines()[:rows]]
    for sample in samples:
        replies = sample["responses"]
        sample["responses"] = [replies[:2], replies[2:]]
    target.write_text("".join(json.dumps(s) + "\n" for s in samples), encoding="utf-8")
    return target


def test_resume_moves_between_local_and_ray_with_repeats(
    address: str, replay_files: tuple[Path, Path], tmp_path: Path
) -> None:
    config, full = replay_files
    data = _two_attempts(full, tmp_path / "data.jsonl", 200)
    options = ("--repeat", "2", "--pass-score", "0.5")
    code, local, local_records, _ = _run(config, data, tmp_path / "local.jsonl", *options)
    assert code == 0 and local["episodes"] == 400
    code, sharded, ray_records, err = _run(
        config, data, tmp_path / "ray.jsonl", *options, "--ray", address
    )
    assert code == 0, err
    # --repeat and --pass-score reach the sharded run: the same pass@k and records
    assert sharded == local
    assert set(sharded["pass_at_k"]) == {"1", "2"}
    assert [(r["index"], r["repeat"]) for r in ray_records] == [
        (i, k) for i in range(200) for k in range(2)
    ]
    assert _latest(ray_records) == _latest(local_records)

    # 151 records: sample 75 has its first repeat only
    local_then_ray = tmp_path / "local_then_ray.jsonl"
    ray_then_local = tmp_path / "ray_then_local.jsonl"
    _truncate(tmp_path / "local.jsonl", local_then_ray, 151)
    _truncate(tmp_path / "ray.jsonl", ray_then_local, 151)
    code, first, first_records, err = _run(
        config, data, local_then_ray, *options, "--resume", "--ray", address
    )
    assert code == 0, err
    assert "151 episode(s) from earlier runs, 249 played now" in err
    code, second, second_records, err = _run(config, data, ray_then_local, *options, "--resume")
    assert code == 0, err
    assert first == second  # exactly: both count the same records in the same order
    assert _same_figures(first, local)
    # the two files are the same, line by line, and hold each episode once
    assert [stable(r) for r in first_records] == [stable(r) for r in second_records]
    assert len(first_records) == 400 and _latest(first_records) == _latest(local_records)

    # the stamp checks are the same on Ray: other run options or other data are refused
    saved = local_then_ray.read_bytes()
    code, _, _, err = _run(
        config,
        data,
        local_then_ray,
        *options,
        "--max-assistant-turns",
        "2",
        "--resume",
        "--ray",
        address,
    )
    assert code == 1 and "another config" in err
    other = _two_attempts(full, tmp_path / "other.jsonl", 201)
    code, _, _, err = _run(config, other, local_then_ray, *options, "--resume", "--ray", address)
    assert code == 1 and "another dataset" in err
    assert local_then_ray.read_bytes() == saved  # refused before anything was written


def test_retry_errors_on_ray_plays_only_the_errored_samples(
    address: str, replay_files: tuple[Path, Path], tmp_path: Path
) -> None:
    config, full = replay_files
    broken = {3, 40, 41, 77}
    rows = [json.loads(line) for line in full.read_text(encoding="utf-8").splitlines()[:100]]
    for i in broken:  # an episode error in every run: an interaction the config lacks
        rows[i]["interaction_kwargs"]["name"] = "nosuch"
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "ray.jsonl"
    code, before, first, err = _run(config, data, out, "--ray", address)
    assert code == 1 and before["errors"] == len(broken), err
    copy = tmp_path / "local.jsonl"
    shutil.copyfile(out, copy)

    code, after, records, err = _run(config, data, out, "--retry-errors", "--ray", address)
    assert code == 1  # they fail again
    assert f"96 episode(s) from earlier runs, {len(broken)} played now" in err
    assert records[:100] == first  # appended, nothing rewritten
    assert sorted(r["index"] for r in records[100:]) == sorted(broken)
    assert all(r["errors"] for r in records[100:])
    assert after == before

    # the same retry without --ray: the same file and summary
    code, after_local, records_local, _ = _run(config, data, copy, "--retry-errors")
    assert code == 1 and after_local == after
    assert [stable(r) for r in records_local] == [stable(r) for r in records]


FLAKY = """
import asyncio
import os

from interactions_core import SessionInteraction


class Flaky(SessionInteraction):
    '''Fails while the file named by the sample's ``fail_while`` exists.'''

    def new_session(self, delay=0.0, fail_while=None, **kwargs):
        return {"delay": delay, "fail_while": fail_while}

    async def respond(self, state, messages, **kwargs):
        await asyncio.sleep(state["delay"])
        if state["fail_while"] and os.path.exists(state["fail_while"]):
            raise RuntimeError("not ready yet")
        return True, "fine", 1.0, {}

    async def score(self, state, **kwargs):
        return 1.0
"""


def test_a_terminated_sharded_run_resumes_and_retries_transient_errors(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    write_dist(site, "acme-flaky", "1.0", {"flaky": "acme_flaky:Flaky"}, {"acme_flaky": FLAKY})
    config = tmp_path / "c.yaml"
    config.write_text("default: flaky\ninteraction:\n  - name: flaky\n", encoding="utf-8")
    marker = tmp_path / "not-ready"
    marker.write_text("", encoding="utf-8")
    flaky = {5, 200, 399}
    n = 400  # 13 chunks of about a second each: time to stop the run midway
    rows = []
    for i in range(n):
        kwargs: dict = {"delay": 0.5, "fail_while": str(marker) if i in flaky else None}
        rows.append(
            {
                "prompt": [{"role": "user", "content": "q"}],
                "responses": ["a"],
                "interaction_kwargs": kwargs,
            }
        )
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    # '--ray' alone starts a local cluster of its own, whose workers inherit PYTHONPATH
    env = dict(os.environ, PYTHONPATH=str(site))

    # 1. stopped by SIGTERM (what Slurm or Kubernetes send) once some records are written
    command = [sys.executable, "-m", "interactions_core", "run", str(config)]
    command += ["--data", str(data), "--output", str(out), "--ray"]
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        deadline = time.monotonic() + 120
        while not (out.exists() and out.stat().st_size > 0):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no record written in 120 s"
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, stderr  # handled like Ctrl-C, as in a local run
    assert "terminated after" in stderr and "Traceback" not in stderr
    assert "continue with the same command and --resume" in stderr
    interrupted = _records(out)
    assert 0 < len(interrupted) < n

    # 2. resumed on Ray: the samples without a record; the flaky ones error while not ready
    code, resumed, records, err = _run(config, data, out, "--resume", "--ray", env=env)
    assert code == 1, err
    assert f"{len(interrupted)} episode(s) from earlier runs" in err
    assert records[: len(interrupted)] == interrupted  # appended, nothing rewritten
    assert sorted(r["index"] for r in records) == list(range(n))
    assert resumed["episodes"] == n and resumed["errors"] == len(flaky)

    # 3. ready now: --retry-errors on Ray plays the errored samples, and only them
    marker.unlink()
    code, retried, records, err = _run(config, data, out, "--retry-errors", "--ray", env=env)
    assert code == 0, err
    assert f"{n - len(flaky)} episode(s) from earlier runs, {len(flaky)} played now" in err
    assert sorted(r["index"] for r in records[n:]) == sorted(flaky)
    assert not any(r["errors"] for r in records[n:])

    # the whole file, as --resume reads it, and the summary equal an uninterrupted local run
    local_out = tmp_path / "local.jsonl"
    code, local, local_records, err = _run(config, data, local_out, "--concurrency", "100", env=env)
    assert code == 0, err
    assert _same_figures(retried, local) and local["errors"] == 0 and local["episodes"] == n
    assert _latest(records) == _latest(local_records)


def test_run_sharded_takes_repeat_pass_score_and_skip_like_the_runner(
    address: str, replay_files: tuple[Path, Path], tmp_path: Path
) -> None:
    import asyncio

    from interactions_core import load_config
    from interactions_core.ray import run_sharded
    from interactions_core.ray.shard import RunSettings
    from interactions_core.runtime import ReplayPolicy, Runner, SampleReader

    config, full = replay_files
    data = _two_attempts(full, tmp_path / "data.jsonl", 60)
    samples = list(SampleReader(str(data)))
    entries = {"interaction": [{"name": "gsm8k", "config": {"method": "flexible"}}]}
    skip = {(i, k) for i in range(0, 60, 3) for k in range(2)} | {(7, 1), (59, 0)}
    for pass_score in (1.0, 2.0):  # 2.0: no episode passes
        settings = RunSettings(entries, repeat=2, pass_score=pass_score)
        sharded = run_sharded(samples, settings, address=address, keep_records=True, skip=skip)
        runner = Runner(
            ReplayPolicy(), load_config(str(config)).instantiate(), repeat=2, pass_score=pass_score
        )
        local = asyncio.run(runner.run(samples, keep_records=True, skip=skip))
        assert sharded.records is not None and local.records is not None
        played = [(r.index, r.repeat) for r in sharded.records]
        assert played == [(i, k) for i in range(60) for k in range(2) if (i, k) not in skip]
        assert _latest([r.to_dict() for r in sharded.records]) == _latest(
            [r.to_dict() for r in local.records]
        )
        assert sharded.as_dict()["pass_at_k"] == local.as_dict()["pass_at_k"]
        assert (sharded.as_dict()["pass_at_k"]["1"] == 0.0) == (pass_score == 2.0)
