"""The oracle on its own, in this process: what it does with a solution command it cannot run."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

from llmtt.agents.base import RunContext
from llmtt.agents.oracle import OracleAgent
from llmtt.events import EventWriter
from llmtt.spec.config import AgentSettings
from llmtt.spec.scenario import Scenario


def test_a_solution_command_with_a_nul_byte_is_logged_refused_and_the_rest_run(
    tmp_path: Path,
) -> None:
    """A scenario file holding one does not load (tests/test_hostile_inputs.py); one made in
    code (an importer, a plugin) gets the refusal as the command's result, where it raised
    "embedded null byte" out of the run, or ran cut at the NUL."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    solution = ["echo a\0; touch cut", "echo after > after.txt"]
    spec = Scenario.model_validate({"task": {"prompt": "Do it."}})
    out, transcript = io.StringIO(), io.BytesIO()
    ctx = RunContext(
        run_id="r",
        scenario=spec.model_copy(update={"solution": solution}),
        prompt="Do it.",
        workspace=workspace,
        home=tmp_path,
        env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)},
        model=None,
        timeout_secs=30,
        max_turns=10,
        transcript=transcript,
        events=EventWriter(out),
    )
    ended = OracleAgent(AgentSettings(), tmp_path).run(ctx)
    assert (ended.exit_code, ended.error, ended.timed_out) == (0, None, False)
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    calls = [(e["event"], e.get("command"), e.get("exit_code")) for e in events[1:5]]
    assert calls == [
        ("tool_call", solution[0], None),
        ("tool_result", None, 126),
        ("tool_call", solution[1], None),
        ("tool_result", None, 0),
    ]
    assert "contains a NUL byte (character 7)" in events[2]["output"]
    assert not (workspace / "cut").exists() and (workspace / "after.txt").exists()
    assert b"contains a NUL byte" in transcript.getvalue()
