"""A compaction in the middle of a scripted session, with the real agent CLIs that compact on
their own: a turn reports input near the context limit, the agent asks for a summary (a side
request), goes on with only the summary, and the session goes on from where it was rather than
from its first turn (the marker of turns played in the summary, llmtt/scripted/session.py).

codex sends its conversation, tool results and all, with the summary request; opencode writes it
out as one text (`[Tool result]: ...` lines): both are counted. Each run takes a few seconds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import Project, cli_project

from llmtt.scripted import TITLE_TEXT

# opencode compacts once a turn's usage comes near its context limit (200,000, of which it
# keeps 32,000 for output); codex before a turn when the last one's input passes its limit.
AGENTS = {"opencode": 190_000, "codex": 250_000}
COMMANDS = ["echo one", "echo two", "echo three"]


def session(tokens: int) -> str:
    return f"""\
task: {{prompt: Count to three.}}
run: {{timeout_secs: 60}}
scripted:
  side_usage: {{input: 300, output: 40}}
  turns:
    - run: ["echo one"]
      usage: {{input: {tokens}, output: 20}}
    - run: ["echo two"]
    - run: ["echo three"]
    - say: Counted.
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Project:
    project = cli_project(tmp_path_factory.mktemp("compaction") / "proj")
    for agent, tokens in AGENTS.items():
        project.write(f"scenarios/{agent}.yaml", session(tokens))
    tasks = [f"{a}/{a}-scripted/r1:agent" for a in AGENTS]
    result = project.doit("run", "-n", "2", f"agent={','.join(AGENTS)}", "model=scripted", *tasks)
    assert result.code == 0, result.out + result.err
    return project


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().split("\n") if line]


@pytest.mark.parametrize("agent", AGENTS)
def test_the_session_goes_on_after_a_compaction(runs: Project, agent: str) -> None:
    folder = runs.results() / f"{agent}/{agent}-scripted/r1"
    log = lines(folder / "scripted.log")
    summaries = [e for e in log if e["side"] and e["results"]]
    assert [e["text"] for e in summaries] == [f"{TITLE_TEXT} [llmtt scripted: 1 turn played]"]
    # After it, the conversation holds the summary and no tool results: turn 2 on.
    after = log[log.index(summaries[0]) + 1 :]
    loop = [(e["played"], e["results"], e["turn"], e["commands"]) for e in after if not e["side"]]
    assert loop == [(1, 0, 1, ["echo two"]), (1, 1, 2, ["echo three"]), (1, 2, 3, [])]
    events = lines(folder / "events.jsonl")
    assert [e["command"] for e in events if e["event"] == "tool_call"] == COMMANDS
    record = json.loads((folder / "run.json").read_text())
    assert (record["status"], record["natural_stop"]) == ("completed", True)
