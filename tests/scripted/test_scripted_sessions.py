"""Scripted sessions richer than a solution, played to the real agent CLIs and the litellm
loop by `doit run agent=A model=scripted`: a turn of parallel tool calls, a session of chosen
token figures, a rate-limited turn and a stream that stalls. Asserted: what the server was
asked and answered (scripted.log), that every agent ran every command of a parallel turn, and
the event figures every adapter already records as the session says (the issue 11 report lists
the ones that still differ)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import CLI_AGENTS, Project, cli_project

from llmtt.scripted import TITLE_TEXT

AGENTS = CLI_AGENTS

PARALLEL_TURNS = [
    ["git init -q .", "echo one > one.txt", "echo two > two.txt"],
    ["git add one.txt two.txt", "echo three > three.txt"],  # independent of each other
    ["git status --short"],
]
PARALLEL = """\
task: {prompt: Make a git repository and stage two files.}
run: {timeout_secs: 60}
scripted:
  format: 1
  turns:
    - say: Three things at once.
      run: ["git init -q .", "echo one > one.txt", "echo two > two.txt"]
    - run: ["git add one.txt two.txt", "echo three > three.txt"]
    - run: ["git status --short"]
    - say: Two files staged, one not.
evaluation:
  gates:
    - {type: command_output_contains, command: git diff --cached --name-only, substring: two.txt}
"""

# (input, output, cache_read, cache_write) of each turn; input is the uncached input.
USAGE = [(400, 25, 1500, 200), (60, 15, 1800, 0), (80, 12, 1900, 40)]
USAGE_SESSION = """\
task: {prompt: Make a git repository.}
run: {timeout_secs: 60}
scripted:
  turns:
    - run: ["git init -q ."]
      usage: {input: 400, output: 25, cache_read: 1500, cache_write: 200}
    - run: ["git status --short"]
      usage: {input: 60, output: 15, cache_read: 1800}
    - say: Usage noted.
      usage: {input: 80, output: 12, cache_read: 1900, cache_write: 40}
"""

RATE_LIMITED = """\
task: {prompt: Make a git repository.}
run: {timeout_secs: 60}
scripted:
  turns:
    - run: ["git init -q ."]
      error: {status: 429, times: 1}
    - say: Done.
"""
STALLED = """\
task: {prompt: Make a git repository.}
run: {timeout_secs: 60}
scripted:
  turns:
    - run: ["git init -q ."]
      hang: {secs: 2, at: stream}
    - say: Done.
"""
SCENARIOS = {
    "parallel": PARALLEL,
    "usage": USAGE_SESSION,
    "ratelimited": RATE_LIMITED,
    "stalled": STALLED,
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Project:
    project = cli_project(tmp_path_factory.mktemp("sessions") / "proj")
    for name, text in SCENARIOS.items():
        project.write(f"scenarios/{name}.yaml", text)
    # Only the agent tasks: what is asserted here is what the agents did and recorded.
    tasks = [f"{s}/{a}-scripted/r1:agent" for s in SCENARIOS for a in AGENTS]
    result = project.doit("run", "-n", "4", f"agent={','.join(AGENTS)}", "model=scripted", *tasks)
    assert result.code == 0, result.out + result.err
    assert sorted(result.executed()) == sorted(tasks)
    return project


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def run_dir(runs: Project, scenario: str, agent: str) -> Path:
    return runs.results() / f"{scenario}/{agent}-scripted/r1"


def turns_asked(log: list[dict[str, Any]]) -> list[tuple[int, int, int, int]]:
    """(turn, attempt, status, calls answered) of each agent-loop request."""
    return [(e["turn"], e["attempt"], e["status"], e["calls"]) for e in log if not e["side"]]


@pytest.mark.parametrize("agent", AGENTS)
def test_server_played_each_parallel_turn_once(runs: Project, agent: str) -> None:
    log = lines(run_dir(runs, "parallel", agent) / "scripted.log")
    assert turns_asked(log) == [(0, 1, 200, 3), (1, 1, 200, 2), (2, 1, 200, 1), (3, 1, 200, 0)]
    loop = [e for e in log if not e["side"]]
    assert [e["results"] for e in loop] == [0, 3, 5, 6]
    # The client sent back a result for every call of the turn before (in its own order).
    prefix = "toolu_" if agent == "claude-code" else "call_"
    assert [sorted(e["answered"]) for e in loop[1:]] == [
        [f"{prefix}{n:04d}" for n in numbers] for numbers in ((1, 2, 3), (4, 5), (6,))
    ]
    for side in (e for e in log if e["side"]):  # titles: opencode asks for one
        assert (side["tools"], side["text"], side["status"]) == (0, TITLE_TEXT, 200)


@pytest.mark.parametrize("agent", AGENTS)
def test_every_command_of_a_parallel_turn_ran(runs: Project, agent: str) -> None:
    folder = run_dir(runs, "parallel", agent)
    events = lines(folder / "events.jsonl")
    calls = [e for e in events if e["event"] == "tool_call"]
    results = {e["id"]: e for e in events if e["event"] == "tool_result"}
    commands = [c["command"] for c in calls]
    # Within a turn the order differs by agent; the turns themselves come in order.
    assert [sorted(commands[0:3]), sorted(commands[3:5]), commands[5:]] == [
        sorted(turn) for turn in PARALLEL_TURNS
    ]
    assert [results[c["id"]]["exit_code"] for c in calls] == [0] * 6
    status = results[calls[5]["id"]]["output"].split()
    assert status == ["A", "one.txt", "A", "two.txt", "??", "three.txt"]
    workspace = folder / "workspace"
    for name, text in (("one.txt", "one"), ("two.txt", "two"), ("three.txt", "three")):
        assert (workspace / name).read_text() == text + "\n"
    messages = [e["text"] for e in events if e["event"] == "message"]
    assert messages[0] == "Three things at once."
    assert messages[-1] == "Two files staged, one not."
    assert events[-1]["event"] == "complete" and events[-1]["exit_code"] == 0


@pytest.mark.parametrize("agent", AGENTS)
def test_chosen_usage_session(runs: Project, agent: str) -> None:
    folder = run_dir(runs, "usage", agent)
    assert turns_asked(lines(folder / "scripted.log")) == [
        (0, 1, 200, 1),
        (1, 1, 200, 1),
        (2, 1, 200, 0),
    ]
    events = lines(folder / "events.jsonl")
    # Per request: an agent's own total (claude-code, codex) replaces them, it is not added.
    usage = [e for e in events if e["event"] == "usage" and not e.get("total")]
    # Output and cache-read tokens already come out as the session says for every agent;
    # the uncached input and the cache writes do not yet (the adapters' part of issue 11).
    assert sum(u["output_tokens"] for u in usage) == sum(u[1] for u in USAGE)
    assert sum(u["cache_read_tokens"] for u in usage) == sum(u[2] for u in USAGE)
    assert all(u["cost_usd"] == 0.0 for u in usage)


@pytest.mark.parametrize("agent", AGENTS)
def test_a_rate_limited_turn(runs: Project, agent: str) -> None:
    folder = run_dir(runs, "ratelimited", agent)
    asked = turns_asked(lines(folder / "scripted.log"))
    assert asked[0] == (0, 1, 429, 1)
    # An agent that retried got the turn on its second attempt and ran its command; one that
    # gives up (codex, whose adapter sets request_max_retries = 0) asked nothing more.
    assert asked[1:] in ([], [(0, 2, 200, 1), (1, 1, 200, 0)])
    calls = [e["command"] for e in lines(folder / "events.jsonl") if e["event"] == "tool_call"]
    assert calls == (["git init -q ."] if asked[1:] else [])


@pytest.mark.parametrize("agent", AGENTS)
def test_a_stream_that_stalls_is_waited_for(runs: Project, agent: str) -> None:
    folder = run_dir(runs, "stalled", agent)
    log = [e for e in lines(folder / "scripted.log") if not e["side"]]
    assert turns_asked(log) == [(0, 1, 200, 1), (1, 1, 200, 0)]  # no client gave up
    assert [e["hang_secs"] for e in log] == [2, None]
    events = lines(folder / "events.jsonl")
    assert [e["command"] for e in events if e["event"] == "tool_call"] == ["git init -q ."]
    assert events[-1]["event"] == "complete" and events[-1]["exit_code"] == 0
