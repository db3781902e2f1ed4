"""Every snippet of docs/ray.md, run in order against the session's real cluster.

Python blocks share one namespace holding ``address`` and ``plugin_dir`` (as the
page says); the YAML block is the ``pooled.yaml`` the next block loads; shell
blocks run with ``$RAY_HEAD`` set, in a scratch folder that links ``examples``
from the repository root (so the files they write land there).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cluster_support import ROOT, write_dist

from interactions_core.registry import reset_registry

BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def blocks() -> list[tuple[str, str]]:
    text = (ROOT / "docs" / "ray.md").read_text(encoding="utf-8")
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(text)]


def test_the_page_has_the_snippets_this_test_runs() -> None:
    kinds = [lang for lang, _ in blocks()]
    assert kinds.count("python") == 3 and kinds.count("yaml") == 1 and kinds.count("bash") == 3
    assert set(kinds) <= {"python", "yaml", "bash", ""}  # "" = sample output, not run


def test_every_snippet_runs(address: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plugin_dir = tmp_path / "shared-plugins"
    plugin_dir.mkdir()
    write_dist(
        plugin_dir,
        "acme-shared",
        "1.0",
        {"shared_judge": "acme_shared:Judge"},
        {"acme_shared": "class Judge:\n    pass\n"},
    )
    # the driver has the plugin; the snippet's runtime_env gives it to the workers
    monkeypatch.syspath_prepend(str(plugin_dir))
    reset_registry()
    work = tmp_path / "work"
    work.mkdir()
    (work / "examples").symlink_to(ROOT / "examples")
    monkeypatch.chdir(work)
    namespace: dict[str, object] = {
        "__name__": "docs_ray",
        "address": address,
        "plugin_dir": str(plugin_dir),
    }
    env = dict(os.environ, RAY_HEAD=address)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    printed = io.StringIO()
    messages = io.StringIO()  # the shell blocks' stderr
    ran = []
    try:
        for lang, code in blocks():
            if lang == "python":
                with contextlib.redirect_stdout(printed):
                    exec(compile(code, "docs/ray.md", "exec"), namespace)
            elif lang == "yaml":
                (work / "pooled.yaml").write_text(code, encoding="utf-8")
            elif lang == "bash":
                proc = subprocess.run(
                    ["bash", "-euo", "pipefail", "-c", code],
                    cwd=work,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=300,
                )
                assert proc.returncode == 0, (code, proc.stdout, proc.stderr)
                printed.write(proc.stdout)
                messages.write(proc.stderr)
            else:
                continue
            ran.append(lang)
    finally:
        reset_registry()
    out = printed.getvalue()
    # the check saw the shipped plugin on the node, and agreed with the driver
    report = namespace["report"]
    node_entries = report.nodes[0].snapshot["entries"]  # type: ignore[attr-defined]
    assert "shared_judge (acme-shared)" in node_entries
    assert "1 node checked against the driver (3 interactions" in out
    assert out.count(": consistent") == 2  # the Python check and `interactions ray check`
    # the pooled run and the sharded run give the demo's known summary
    assert "episodes          11  (11 ok, 0 errored)" in out, out
    assert "terminated        9 (81.8%)" in out
    summary, _ = json.JSONDecoder().raw_decode(out[out.index('{\n  "episodes"') :])
    assert (summary["episodes"], summary["terminated"], summary["errors"]) == (11, 9, 0)
    # the resumed sharded run played the 7 episodes without a record, then summed up all 11
    assert "resumed records.jsonl: 4 episode(s) from earlier runs, 7 played now" in (
        messages.getvalue()
    )
    assert out.count("episodes          11  (11 ok, 0 errored)") == 2  # pooled, resumed
    assert out.rstrip().endswith("11")  # wc -l: one record per episode
    records = [json.loads(line) for line in (work / "records.jsonl").read_text().splitlines()]
    assert sorted(r["index"] for r in records) == list(range(11))
    assert ran == ["python", "python", "bash", "yaml", "python", "bash", "bash"]
