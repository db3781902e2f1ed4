"""``interactions run --ray``: the same records, summary and exit codes as a local run."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from cluster_support import EXPECTED, ROOT, cli, stable, write_dist

#: Summary fields that depend on timing.
TIMING = ("elapsed_s", "episodes_per_second")


def _run(config: Path, data: Path, out: Path, *extra: str) -> tuple[int, dict, list[dict], str]:
    code, stdout, stderr = cli(
        "run", str(config), "--data", str(data), "--output", str(out), "--json", *extra
    )
    summary = json.loads(stdout) if stdout.strip() else {}
    for key in TIMING:
        summary.pop(key, None)
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    return code, summary, records, stderr


def test_sharded_gsm8k_replay_equals_the_local_run(
    address: str, replay_files: tuple[Path, Path], tmp_path: Path
) -> None:
    config, data = replay_files
    code, local, local_records, _ = _run(config, data, tmp_path / "local.jsonl")
    assert code == 0
    code, sharded, ray_records, err = _run(config, data, tmp_path / "ray.jsonl", "--ray", address)
    assert code == 0, err
    assert {k: sharded[k] for k in EXPECTED} == EXPECTED
    assert sharded == local
    # records: the same episodes, written in dataset order
    assert [r["index"] for r in ray_records] == list(range(1319))
    by_index = {r["index"]: stable(r) for r in local_records}
    assert [stable(r) for r in ray_records] == [by_index[i] for i in range(1319)]
    # start times are wall-clock seconds of this machine, not a worker's clock offset
    starts = [r["started_at"] for r in ray_records]
    assert max(starts) - min(starts) < 600


def test_errors_bad_rows_and_exit_codes_match(address: str, tmp_path: Path) -> None:
    data = tmp_path / "mixed.jsonl"
    rows = [
        {
            "prompt": [{"role": "user", "content": "q"}],
            "responses": ["#### 3"],
            "interaction_kwargs": {"name": "gsm8k", "ground_truth": "3"},
        },
        {
            "prompt": [{"role": "user", "content": "q"}],
            "responses": ["#### 4"],
            "interaction_kwargs": {"name": "nosuch", "ground_truth": "3"},
        },
    ]
    lines = [json.dumps(r) for r in rows] + ["{not json", json.dumps(rows[0])]
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    config = ROOT / "examples" / "config.yaml"
    local = _run(config, data, tmp_path / "a.jsonl")
    sharded = _run(config, data, tmp_path / "b.jsonl", "--ray", address)
    assert local[0] == sharded[0] == 1  # an episode errored
    assert local[1] == sharded[1]
    assert local[1]["errors"] == 1 and local[1]["skipped_rows"] == 1
    assert [stable(r) for r in sharded[2]] == sorted(
        (stable(r) for r in local[2]), key=lambda r: r["index"]
    )
    # the same explanation on stderr
    assert "1 of 3 episode(s) errored" in local[3] and "1 of 3 episode(s) errored" in sharded[3]
    assert "skipped 1 bad row" in sharded[3]


def test_run_with_ray_and_no_address_starts_a_local_cluster(tmp_path: Path) -> None:
    config = ROOT / "examples" / "config.yaml"
    data = ROOT / "examples" / "gsm8k_demo.jsonl"
    local = _run(config, data, tmp_path / "a.jsonl")
    sharded = _run(config, data, tmp_path / "b.jsonl", "--ray")
    assert local[0] == sharded[0] == 0, sharded[3]
    assert local[1] == sharded[1]
    assert [stable(r) for r in sharded[2]] == sorted(
        (stable(r) for r in local[2]), key=lambda r: r["index"]
    )


def test_unsupported_combinations_are_refused_plainly(address: str, tmp_path: Path) -> None:
    config = ROOT / "examples" / "config.yaml"
    data = ROOT / "examples" / "gsm8k_demo.jsonl"
    code, _, err = cli(
        "run",
        str(config),
        "--data",
        str(data),
        "--trace",
        str(tmp_path / "t.jsonl"),
        "--ray",
        address,
    )
    assert code == 1
    assert "--trace is not supported with --ray" in err and "Traceback" not in err
    code, _, err = cli("run", str(config), "--data", str(data), "--ray", "nohost")
    assert code == 1 and "is not HOST:PORT" in err


def _sleepy_plugin(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A plugin importable only through ``PYTHONPATH=site``: (site, config, data)."""
    site = tmp_path / "site"
    site.mkdir()
    write_dist(
        site,
        "acme-sleepy",
        "1.0",
        {"sleepy": "acme_sleepy:Sleepy"},
        {
            "acme_sleepy": """
            import asyncio
            from interactions_core import SessionInteraction

            class Sleepy(SessionInteraction):
                def new_session(self, **kwargs):
                    return {}

                async def respond(self, state, messages, **kwargs):
                    await asyncio.sleep(0.5)
                    return False, "again", 0.0, {}
            """
        },
    )
    config = tmp_path / "c.yaml"
    config.write_text("default: sleepy\ninteraction:\n  - name: sleepy\n", encoding="utf-8")
    data = tmp_path / "d.jsonl"
    row = {"prompt": [{"role": "user", "content": "q"}], "responses": ["a", "b"]}
    row["interaction_kwargs"] = {}
    data.write_text((json.dumps(row) + "\n") * 2000, encoding="utf-8")
    return site, config, data


def test_ctrl_c_stops_a_sharded_run_like_a_local_one(address: str, tmp_path: Path) -> None:
    site, config, data = _sleepy_plugin(tmp_path)
    out = tmp_path / "out.jsonl"
    # '--ray' alone starts its own local cluster, whose workers inherit PYTHONPATH,
    # even though another cluster (the fixture's, at ``address``) is running here
    env = dict(os.environ, PYTHONPATH=str(site))
    command = [sys.executable, "-m", "interactions_core", "run", str(config)]
    command += ["--data", str(data), "--output", str(out), "--ray"]
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 120
        while not (out.exists() and out.stat().st_size > 0):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no record written in 120 s"
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    match = re.search(r"interrupted after (\d+) episode\(s\)", stderr)
    assert match is not None, stderr
    played = int(match.group(1))
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert 0 < played == len(records) < 2000  # whole lines, every one counted
    assert "interrupted       yes" in stdout
    assert "Traceback" not in stderr


def test_a_worker_without_the_plugin_stops_the_run_with_one_clear_error(
    address: str, tmp_path: Path
) -> None:
    # the driver finds the plugin; the fixture cluster's workers do not
    site, config, data = _sleepy_plugin(tmp_path)
    out = tmp_path / "out.jsonl"
    command = [sys.executable, "-m", "interactions_core", "run", str(config)]
    command += ["--data", str(data), "--output", str(out), "--ray", address]
    proc = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, PYTHONPATH=str(site)),
    )
    assert proc.returncode == 1, proc.stderr
    assert "could not set up the run" in proc.stderr
    assert "'sleepy'" in proc.stderr and "interactions ray check" in proc.stderr
    assert "Traceback" not in proc.stderr
    # no error record per sample: the run stopped before playing any, and the new
    # --output it had opened is gone, so the corrected command runs as it is
    assert not out.exists()


def test_a_cluster_that_cannot_be_reached_leaves_no_output_behind(
    address: str, tmp_path: Path
) -> None:
    config = ROOT / "examples" / "config.yaml"
    data = ROOT / "examples" / "gsm8k_demo.jsonl"
    out = tmp_path / "out.jsonl"
    base = ("run", str(config), "--data", str(data), "--output", str(out))
    code, _, err = cli(*base, "--ray", "127.0.0.1:1")  # nothing listens on port 1
    assert code == 1 and "no Ray cluster could be reached" in err and "Traceback" not in err
    assert not out.exists()
    code, _, err = cli(*base, "--ray", address)  # the corrected command, as it is
    assert code == 0, err
    assert len(out.read_text(encoding="utf-8").splitlines()) == 11
    # a resumed file is never removed, even when the cluster cannot be reached
    out.write_text("", encoding="utf-8")
    code, _, err = cli(*base, "--resume", "--ray", "127.0.0.1:1")
    assert code == 1 and out.exists()
    # nor is a device given as --output
    code, _, err = cli(*base[:-1], os.devnull, "--ray", "127.0.0.1:1")
    assert code == 1 and os.path.exists(os.devnull)
