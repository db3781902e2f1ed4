"""verl 0.7.1's own interaction classes, loaded through ``interactions_core.compat.verl``.

Each test runs a script in a fresh interpreter where verl's released modules are
importable (see ``verl_bootstrap.py``), so nothing here imitates verl's code.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
GSM8K = HERE.parents[1].parent / "shared" / "data" / "gsm8k" / "test.jsonl"


def run_with_verl(root: Path, tmp_path: Path, body: str) -> Any:
    """Run ``body`` with verl 0.7.1 importable; return the JSON it prints last."""
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(body))
    done = subprocess.run(
        [sys.executable, "-W", "always", str(HERE / "verl_bootstrap.py"), str(root), str(script)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def test_verls_gsm8k_class_loads_and_agrees_with_the_plugin_on_real_data(
    verl_wheel_root: Path, tmp_path: Path
) -> None:
    assert GSM8K.is_file(), f"shared GSM8K data missing at {GSM8K}"
    (tmp_path / "verl.yaml").write_text(
        "interaction:\n"
        "  - name: verl_gsm8k\n"
        "    class_name: verl.interactions.gsm8k_interaction.Gsm8kInteraction\n"
        "    config: {}\n"
        "  - name: plugin_gsm8k\n"
        "    plugin: gsm8k\n"
    )
    result, stderr = run_with_verl(
        verl_wheel_root,
        tmp_path,
        f"""
        import asyncio, json
        from interactions_core.compat.verl import initialize_interactions_from_config

        found = initialize_interactions_from_config("verl.yaml")
        theirs, ours = found["verl_gsm8k"], found["plugin_gsm8k"]

        async def play(interaction, sid, truth, answer):
            await interaction.start_interaction(sid, ground_truth=truth)
            chat = [{{"role": "user", "content": "q"}}, {{"role": "assistant", "content": answer}}]
            done, text, score, extra = await interaction.generate_response(sid, chat)
            final = await interaction.calculate_score(sid)
            await interaction.finalize_interaction(sid)
            return [done, text, score, dict(extra), final]

        async def main():
            same = differ = 0
            for i, line in enumerate(open({str(GSM8K)!r})):
                row = json.loads(line)
                truth = row["answer"].rsplit("####", 1)[1].strip().replace(",", "")
                for answer in (row["answer"], row["answer"] + "1"):
                    a = await play(theirs, f"t{{i}}", truth, answer)
                    b = await play(ours, f"o{{i}}", truth, answer)
                    same += a == b
                    differ += a != b
            return same, differ

        same, differ = asyncio.run(main())
        print(json.dumps({{
            "module": type(theirs).__module__,
            "same": same,
            "differ": differ,
            "left": len(theirs._instance_dict),
        }}))
        """,
    )
    assert result["module"] == "verl.interactions.gsm8k_interaction"  # verl's real class
    assert result["same"] == 2 * 1319 and result["differ"] == 0
    assert result["left"] == 0
    assert "loaded verl's own class" in stderr and "plugin: gsm8k" in stderr


def test_a_user_class_on_verls_base_class_loads_with_warnings(
    verl_wheel_root: Path, tmp_path: Path
) -> None:
    (tmp_path / "my_task.py").write_text(
        textwrap.dedent(
            """
            from verl.interactions.base import BaseInteraction

            class EchoInteraction(BaseInteraction):
                # verl's style: state in self._instance_dict, legacy methods inherited.
                def __init__(self, config):
                    super().__init__(config)
                    self._instance_dict = {}

                async def start_interaction(self, instance_id=None, **kwargs):
                    self._instance_dict[instance_id] = kwargs
                    return instance_id

                async def generate_response(self, instance_id, messages, **kwargs):
                    said = messages[-1]["content"]
                    return said == "stop", "echo: " + said, 0.5, {"seen": len(messages)}
            """
        )
    )
    (tmp_path / "task.yaml").write_text(
        "interaction:\n  - class_name: my_task.EchoInteraction\n    config: {greeting: hi}\n"
    )
    result, stderr = run_with_verl(
        verl_wheel_root,
        tmp_path,
        """
        import asyncio, json, sys
        sys.path.insert(0, ".")
        from interactions_core import Session
        from interactions_core.compat.verl import get_interaction_class
        from interactions_core.compat.verl import initialize_interactions_from_config

        found = initialize_interactions_from_config("task.yaml")
        echo = found["echo"]

        async def main():
            async with Session(echo, instance_id="s1") as session:
                await session.start(name="echo")
                first = await session.respond([{"role": "assistant", "content": "go"}])
                second = await session.respond([{"role": "assistant", "content": "stop"}])
            return list(first), list(second)

        first, second = asyncio.run(main())
        cls = get_interaction_class("my_task.EchoInteraction")
        print(json.dumps({
            "name": echo.name,
            "config": echo.config,
            "first": first,
            "second": second,
            "same_class": cls is type(echo),
            "base": [c.__module__ for c in type(echo).__mro__][1],
        }))
        """,
    )
    assert result["name"] == "echo"
    assert result["config"] == {"greeting": "hi", "name": "echo"}  # built with config=
    assert result["first"] == [False, "echo: go", 0.5, {"seen": 1}]
    assert result["second"] == [True, "echo: stop", 0.5, {"seen": 1}]
    assert result["same_class"] is True
    assert result["base"] == "verl.interactions.base"
    # What verl tolerated is reported, not refused.
    assert "LegacyInteractionWarning" in stderr
    assert "calculate_score" in stderr and "finalize_interaction" in stderr
    assert "loaded anyway" in stderr


def test_omegaconf_interpolation_is_resolved_as_verl_resolves_it(
    verl_wheel_root: Path, tmp_path: Path
) -> None:
    (tmp_path / "interp.yaml").write_text(
        "interaction:\n"
        "  - name: judge\n"
        "    class_name: verl.interactions.base.BaseInteraction\n"
        "    config:\n"
        "      url: ${oc.env:JUDGE_URL}\n"
        "      retries: 3\n"
        "      also_retries: ${.retries}\n"
    )
    result, _ = run_with_verl(
        verl_wheel_root,
        tmp_path,
        """
        import json, os
        os.environ["JUDGE_URL"] = "http://127.0.0.1:9/judge"
        from interactions_core.compat.verl import initialize_interactions_from_config

        judge = initialize_interactions_from_config("interp.yaml")["judge"]
        print(json.dumps({"config": judge.config, "module": type(judge).__module__}))
        """,
    )
    assert result["config"] == {
        "url": "http://127.0.0.1:9/judge",
        "retries": 3,
        "also_retries": 3,
        "name": "judge",
    }
    assert result["module"] == "verl.interactions.base"
