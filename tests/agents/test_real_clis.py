"""The real, pinned agent CLIs driven by `doit run agent=A model=scripted` against llmtt's
scripted model server on 127.0.0.1: events and every interaction metric asserted exactly.

Turns, tokens and cost follow the contract of docs/metrics.md: one usage event per model request
in the event log (and the agent's own total, which replaces them), and the same figures in
metrics.json for every agent. Tool names too: each agent's shell tool is `shell` in the events
(its own name beside it), so a `tool_usage` evaluator scores the same session alike under every
agent and the oracle, which plays the same session in the same invocation."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import CLI_AGENTS, Project, cli_project

AGENTS = CLI_AGENTS

SOLUTION = [
    "git --help",
    "git init -q .",
    "git comit -m first",  # not a git command: exit 1
    "git commit -q -m first",  # nothing added yet: exit 1
    "echo a > a.txt",  # not a target command
    "git add a.txt",
    "git commit -q -m first",  # retry after the failed commit, and a repeat
    "git log --oneline",
]
EXIT_CODES = [0, 0, 1, 1, 0, 0, 0, 0]
# Each agent's own name for its shell tool, which the events keep beside llmtt's (`shell`).
SHELL_NAMES = {
    "claude-code": "Bash",
    "codex": "exec_command",
    "opencode": "bash",
    "litellm": "bash",
}

# A tool_usage evaluator of the session: the shell named as llmtt names it (the default), as
# claude-code and as codex name it, a target subcommand, and two other tools.
TOOL_USAGE = """\
  evaluators:
    - type: tool_usage
      criteria:
        - {name: shell, scale: binary}
        - {name: as_claude_code_names_it, scale: binary}
        - {name: as_codex_names_it, scale: binary}
        - {name: committed, scale: numeric}
        - {name: no_edits, scale: binary}
        - {name: read_a_file, scale: binary}
      config:
        rules:
          - {criterion: shell, required: true, min_calls: 8, max_calls: 8}
          - {criterion: as_claude_code_names_it, tool: Bash, min_calls: 8}
          - {criterion: as_codex_names_it, tool: exec_command, required: true}
          - {criterion: committed, target_subcommand: commit, max_calls: 2, argument_pattern: -m first}
          - {criterion: no_edits, tool: edit, max_calls: 0}
          - {criterion: read_a_file, tool: read, required: true}
"""
TOOL_SCORES = {
    "shell": True,
    "as_claude_code_names_it": True,
    "as_codex_names_it": True,
    "committed": 1,
    "no_edits": True,
    "read_a_file": False,  # no agent read a file with a file tool: the same failure for all
}

# Each model request's usage (uncached input, output): the server's fixed counts for eight
# turns of one tool call and a final answer. Nine requests are nine turns; before the contract
# claude-code counted 9 from its `num_turns`, codex 9 from commands and messages, opencode 9
# from its steps, and the tokens came from totals only (claude-code, codex).
TURNS = [(1000 + 100 * turn, 20) for turn in range(8)] + [(1800, 10)]
# What the scripted session implies, by DESIGN.md's definitions.
EXPECTED: dict[str, Any] = {
    "total_commands": 7,
    "unique_commands": 6,
    "error_count": 2,
    "unknown_exit_count": 0,
    "retry_count": 1,
    "retry_rate": round(1 / 7, 6),
    "retries_after_failure": 1,
    "help_invocations": 1,
    "first_try_success_rate": round(4 / 7, 6),
    "iteration_ratio": round(6 / 7, 6),
    "error_rate": round(2 / 7, 6),
    "completed": True,
    "turns": 9,
    "tool_calls": 8,
    "tool_calls_ok": 6,
    "tool_calls_error": 2,
    "input_tokens": sum(t[0] for t in TURNS),
    "output_tokens": sum(t[1] for t in TURNS),
    "cache_read_tokens": 0,
    "cache_write_tokens": 0,
    "cost_usd": 0.0,  # the scripted model costs nothing, whatever the client computes
    "cost_source": "scripted",
    "usage_source": "wire",  # as the provider (the scripted model) reported it
    "natural_stop": True,
    "by_subcommand": {
        "(none)": {"count": 1, "errors": 0, "help": 1, "retries": 0},
        "add": {"count": 1, "errors": 0, "help": 0, "retries": 0},
        "comit": {"count": 1, "errors": 1, "help": 0, "retries": 0},
        "commit": {"count": 2, "errors": 1, "help": 0, "retries": 1},
        "init": {"count": 1, "errors": 0, "help": 0, "retries": 0},
        "log": {"count": 1, "errors": 0, "help": 0, "retries": 0},
    },
    "outcome": "pass",
    "source": "events",
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Project:
    project = cli_project(tmp_path_factory.mktemp("clis") / "proj")
    solution = "".join(f"\n  - {json.dumps(c)}" for c in SOLUTION)
    project.write(
        "scenarios/git-basics.yaml",
        "task:\n  prompt: Make this folder a git repository with one commit of a.txt.\n"
        f"solution:{solution}\n"
        "run: {timeout_secs: 120}\n"
        "evaluation:\n"
        f"{TOOL_USAGE}"
        "  gates:\n"
        "    - {type: command_output_contains, command: git log --format=%s, substring: first}\n"
        "    - {type: file_exists, path: a.txt}\n"
        "    - {type: evaluator, criterion: shell, threshold: 1}\n",
    )
    # The oracle plays the same session in the same invocation, for the tool_usage scores.
    agents = ",".join([*AGENTS, "oracle"])
    result = project.doit("run", "-n", "4", f"agent={agents}", "model=scripted")
    assert result.code == 0, result.out + result.err
    return project


@pytest.mark.parametrize("agent", AGENTS)
def test_every_metric_equals_the_scripted_session(runs: Project, agent: str) -> None:
    metrics = runs.json(f"git-basics/{agent}-scripted/r1/metrics.json")
    assert {k: metrics[k] for k in EXPECTED} == EXPECTED
    # opencode's title request, which its output never shows, is on the wire.
    assert metrics["side_requests"] == (1 if agent == "opencode" else 0)
    assert metrics["client_side_requests"] == 0 and "warnings" not in metrics
    assert metrics["duration_secs"] > 0


@pytest.mark.parametrize("agent", AGENTS)
def test_events_carry_the_commands_and_real_exit_codes(runs: Project, agent: str) -> None:
    lines = (
        (runs.results() / f"git-basics/{agent}-scripted/r1/events.jsonl").read_text().splitlines()
    )
    events = [json.loads(line) for line in lines]
    calls = [e for e in events if e["event"] == "tool_call"]
    results = {e["id"]: e for e in events if e["event"] == "tool_result"}
    assert [c["command"] for c in calls] == SOLUTION
    assert {(c["tool"], c["agent_tool"]) for c in calls} == {("shell", SHELL_NAMES[agent])}
    assert [results[c["id"]]["exit_code"] for c in calls] == EXIT_CODES
    assert "not a git command" in results[calls[2]["id"]]["output"]
    assert events[0]["event"] == "spawn"
    complete = events[-1]
    assert complete["event"] == "complete" and complete["exit_code"] == 0
    assert complete["timed_out"] is False and complete["natural_stop"] is True
    messages = [e["text"] for e in events if e["event"] == "message"]
    assert messages[-1] == "Done: every step of the task has been carried out."
    usage = [e for e in events if e["event"] == "usage"]
    # The scripted model costs nothing, whatever the client computes.
    assert usage, "no usage event"
    assert all(u["cost_usd"] == 0.0 and u["cost_source"] == "scripted" for u in usage)


@pytest.mark.parametrize("agent", AGENTS)
def test_nothing_is_waited_for_once_the_agent_has_answered(runs: Project, agent: str) -> None:
    """From its last answer to its end, an agent has nothing to wait for in its sandbox: codex's
    usage analytics, on by default, looked up hosts that cannot be reached there and held every
    run 5 s (0.03-0.05 s without them, on this machine, for every agent)."""
    lines = (
        (runs.results() / f"git-basics/{agent}-scripted/r1/events.jsonl").read_text().splitlines()
    )
    events = [json.loads(line) for line in lines]
    answered = max(e["ts"] for e in events if e["event"] == "message")
    assert events[-1]["event"] == "complete"
    assert events[-1]["ts"] - answered < 4.0, events[-3:]


@pytest.mark.parametrize("agent", AGENTS)
def test_usage_of_each_request_and_the_agents_total(runs: Project, agent: str) -> None:
    lines = (
        (runs.results() / f"git-basics/{agent}-scripted/r1/events.jsonl").read_text().splitlines()
    )
    usage = [e for e in map(json.loads, lines) if e["event"] == "usage"]
    requests = [u for u in usage if not u.get("total") and not u.get("side")]
    assert [(u["input_tokens"], u["output_tokens"]) for u in requests] == TURNS
    # claude-code and codex report their own totals at the end; opencode and litellm do not.
    totals = [(u["input_tokens"], u["output_tokens"]) for u in usage if u.get("total")]
    sums = (sum(t[0] for t in TURNS), sum(t[1] for t in TURNS))
    assert totals == ([sums] if agent in ("claude-code", "codex") else [])
    complete = json.loads(lines[-1])
    assert complete["turns"] == len(TURNS) and "reason" not in complete


@pytest.mark.parametrize("agent", AGENTS)
def test_run_record_scripted_log_and_isolation(runs: Project, agent: str) -> None:
    run_dir = runs.results() / f"git-basics/{agent}-scripted/r1"
    record = json.loads((run_dir / "run.json").read_text())
    assert record["status"] == "completed" and record["model"] == "scripted"
    assert record["stop_reason"] is None  # it ended by itself
    assert record["versions"]["agent"] != "not installed"
    log = [json.loads(line) for line in (run_dir / "scripted.log").read_text().splitlines()]
    tool_turns = [entry for entry in log if entry["tools"]]
    assert [entry["command"] for entry in tool_turns][: len(SOLUTION)] == SOLUTION
    assert (run_dir / "workspace" / ".git").is_dir()  # the agent worked in the run's workspace
    home = run_dir / "home"
    assert home.is_dir()  # its HOME was the run's own folder, not the user's


@pytest.mark.parametrize("agent", [*AGENTS, "oracle"])
def test_tool_usage_scores_the_session_alike_under_every_agent(runs: Project, agent: str) -> None:
    """Before tool names were normalised, the default `bash` rule failed "required tool not
    called" under claude-code (`Bash`) and codex (`exec_command`) and passed under the others."""
    folder = "git-basics/oracle" if agent == "oracle" else f"git-basics/{agent}-scripted"
    metrics = runs.json(f"{folder}/r1/metrics.json")
    evaluated = metrics["evaluators"]
    assert evaluated["errors"] == []
    assert {r["criterion"]: r["score"] for r in evaluated["results"]} == TOOL_SCORES
    assert evaluated["overall_score"] == pytest.approx(5 / 6)
    reasons = {r["criterion"]: r["reasoning"] for r in evaluated["results"]}
    assert reasons["as_codex_names_it"] == "Tool 'exec_command' was called 8 time(s)."
    assert metrics["outcome"] == "pass"  # its evaluator gate reads the `shell` criterion


def test_second_run_executes_nothing(runs: Project) -> None:
    again = runs.doit("run", f"agent={','.join([*AGENTS, 'oracle'])}", "model=scripted")
    assert again.code == 0 and again.executed() == []
