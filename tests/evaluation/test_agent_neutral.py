"""Evaluators mean the same whichever agent ran: tool names normalised in the events (each
agent's own name kept beside llmtt's), an event log written before that read as if written
after, each evaluator handed only its own criteria (another's refused, a crash an error with
where it is), exit rates over known exits, and the transcript fallback's unknown exits read
approximately by no_transcript_errors, which says when it cannot tell."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from llmtt.evaluation.approximate import failure_sign, failure_signs
from llmtt.evaluation.evaluators.base import (
    EvaluationInput,
    EvaluationResult,
    Evaluator,
    ToolUse,
)
from llmtt.evaluation.evaluators.runner import (
    Memo,
    evaluation_input,
    evaluator_failures,
    run_evaluators,
)
from llmtt.evaluation.evaluators.tool_usage import ToolUsageEvaluator
from llmtt.evaluation.gates import GateContext, run_gates
from llmtt.evaluation.interaction import interaction_metrics, target_commands_by_call
from llmtt.evaluation.shell.target_commands import TargetMatcher
from llmtt.evaluation.transcript import transcript_events
from llmtt.events import SHELL, Event, ToolCall, ToolResult, read_events, tool_name
from llmtt.spec.evaluation import Criterion, EvaluatorSpec
from llmtt.spec.gates import Gate

GIT = TargetMatcher("git")

# The shell tool as each agent names it in its own stream.
SHELLS = {
    "claude-code": "Bash",
    "codex": "exec_command",
    "opencode": "bash",
    "litellm": "bash",
    "oracle": "bash",
}


# --- tool names ------------------------------------------------------------------------------


def test_every_agents_shell_tool_is_the_shell() -> None:
    for own in [*SHELLS.values(), "shell", "shell_command", "local_shell"]:
        assert tool_name(own) == SHELL
    assert tool_name("Read") == tool_name("read") == "read"
    assert tool_name("Edit") == tool_name("MultiEdit") == tool_name("edit") == "edit"
    assert tool_name("apply_patch") == tool_name("patch") == "patch"
    assert tool_name("WebSearch") == tool_name("websearch") == "web_search"
    # A name llmtt does not know is its own (AgentDock's `search_web`, an MCP tool's).
    assert tool_name("search_web") == "search_web"
    assert tool_name("mcp__github__create_issue") == "mcp__github__create_issue"


def _log(lines: list[dict[str, Any]], tmp_path: Path) -> list[Event]:
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps({"ts": 1.0, **line}) + "\n" for line in lines))
    return read_events(path)


def test_an_event_log_written_before_tool_names_were_normalised_reads_as_a_new_one(
    tmp_path: Path,
) -> None:
    old = _log(
        [
            {"event": "tool_call", "id": "a", "tool": "Bash", "command": "git init"},
            {"event": "tool_call", "id": "b", "tool": "Read", "command": '{"file_path": "x"}'},
            {"event": "tool_call", "id": "c", "command": "git status"},  # no tool: the shell
        ],
        tmp_path,
    )
    assert [(c.tool, c.agent_tool) for c in old if isinstance(c, ToolCall)] == [
        ("shell", "Bash"),
        ("read", "Read"),
        ("shell", None),
    ]
    new = _log(
        [{"event": "tool_call", "id": "a", "tool": "shell", "agent_tool": "Bash", "command": "x"}],
        tmp_path,
    )
    assert [(c.tool, c.agent_tool) for c in new if isinstance(c, ToolCall)] == [("shell", "Bash")]


def _session(agent: str, tmp_path: Path, *, old: bool = False) -> list[Event]:
    """One session as `agent` logs it: its shell tool's calls, one file read, results."""
    shell, read = SHELLS[agent], {"claude-code": "Read", "opencode": "read"}.get(agent)
    lines: list[dict[str, Any]] = []
    calls = [(shell, "git init -q ."), (shell, "git add a.txt"), (shell, "git commit -m first")]
    if read is not None:
        calls.insert(1, (read, '{"file_path": "a.txt"}'))
    for index, (own, command) in enumerate(calls):
        named = {"tool": own} if old else {"tool": tool_name(own), "agent_tool": own}
        lines.append({"event": "tool_call", "id": f"c{index}", **named, "command": command})
        lines.append({"event": "tool_result", "id": f"c{index}", "output": "", "exit_code": 0})
    return _log(lines, tmp_path)


TOOL_RULES: dict[str, Any] = {
    "rules": [
        {"criterion": "shell", "min_calls": 3, "max_calls": 3},  # the default: the shell
        {"criterion": "as_written_for_claude", "tool": "Bash", "required": True},
        {"criterion": "as_written_for_codex", "tool": "exec_command", "required": True},
        {"criterion": "as_written_before", "tool": "bash", "required": True},  # the old default
        {"criterion": "commit", "target_subcommand": "commit", "argument_pattern": "-m first"},
        {"criterion": "no_edits", "tool": "Edit", "max_calls": 0},
    ]
}
TOOL_CRITERIA = [Criterion(name=r["criterion"], scale="binary") for r in TOOL_RULES["rules"]]


def _tool_usage(events: list[Event]) -> list[tuple[str, Any, str]]:
    found = target_commands_by_call(events, GIT)
    input = evaluation_input("p", None, events, Path("."), [c for cs, _ in found for c in cs], {})
    evaluator = ToolUsageEvaluator(ToolUsageEvaluator.Config.model_validate(TOOL_RULES))
    return [(r.criterion, r.score, r.reasoning) for r in evaluator.evaluate(input, TOOL_CRITERIA)]


@pytest.mark.parametrize("old", [False, True], ids=["new log", "log written before"])
def test_tool_usage_scores_one_session_alike_under_every_agent(old: bool, tmp_path: Path) -> None:
    scored = {agent: _tool_usage(_session(agent, tmp_path, old=old)) for agent in SHELLS}
    assert all(s == scored["oracle"] for s in scored.values()), scored
    assert [score for _, score, _ in scored["oracle"]] == [True] * len(TOOL_CRITERIA)
    assert scored["claude-code"][0][2] == "Tool 'shell' was called 3 time(s)."


def test_tool_usage_matches_a_call_named_by_hand_with_an_agents_name() -> None:
    """A plugin or a test may make ToolUse with an agent's own name: it is the same tool."""
    input = EvaluationInput(
        prompt="p",
        response=None,
        tool_calls=[ToolUse("Bash", "ls"), ToolUse("exec_command", "ls"), ToolUse("shell", "ls")],
    )
    rule = {"rules": [{"criterion": "c", "tool": "bash", "min_calls": 3}]}
    evaluator = ToolUsageEvaluator(ToolUsageEvaluator.Config.model_validate(rule))
    [found] = evaluator.evaluate(input, [Criterion(name="c", scale="binary")])
    assert found.score is True and found.metadata == {"calls": 3}


def test_the_evaluators_input_carries_both_names(tmp_path: Path) -> None:
    input = evaluation_input("p", None, _session("codex", tmp_path), Path("."), [], {})
    assert {(c.tool, c.agent_tool) for c in input.tool_calls} == {("shell", "exec_command")}


def test_a_memo_key_is_the_same_for_a_log_read_before_and_after_the_change(
    tmp_path: Path,
) -> None:
    """Evaluating a run again after the upgrade asks no model the same question twice: the
    key is made from the events as they were keyed before."""
    spec = EvaluatorSpec(type="llm_judge", criteria=[Criterion(name="c")], config={})
    memo = Memo(tmp_path / "answers.json")
    new = evaluation_input("p", None, _session("claude-code", tmp_path), Path("."), [], {})
    before = [
        {k: v for k, v in e.items() if k != "agent_tool"}
        | ({"tool": e["agent_tool"]} if e.get("event") == "tool_call" else {})
        for e in new.events
    ]
    keyed_before = EvaluationInput(**{**new.__dict__, "events": before})
    assert memo.key(spec, new, None) == memo.key(spec, keyed_before, None)
    # A transcript's calls, whose agent name is unknown, were keyed with "bash" (the results
    # now read from the transcript are new, though: such a run's model evaluators are asked
    # once more).
    made = transcript_events("$ git init\n")
    input = evaluation_input("p", None, made, Path("."), [], {})
    legacy = [
        {k: v for k, v in e.items() if k != "agent_tool"}
        | ({"tool": "bash"} if e.get("event") == "tool_call" else {})
        for e in input.events
    ]
    assert memo.key(spec, input, None) == memo.key(
        spec, EvaluationInput(**{**input.__dict__, "events": legacy}), None
    )


# --- each evaluator its own criteria -----------------------------------------------------------


class Nosy(Evaluator):
    type = "nosy"
    handed: list[list[str]] = []

    def evaluate(
        self, input: EvaluationInput, criteria: Sequence[Criterion]
    ) -> list[EvaluationResult]:
        Nosy.handed.append([c.name for c in criteria])
        return [
            EvaluationResult("gate_me", False, self.type),  # another evaluator's criterion
            EvaluationResult("mine", True, self.type),
            {"criterion": "mine", "score": 1},  # type: ignore[list-item]  # not a result
            EvaluationResult("mine", [1, 2], self.type),  # type: ignore[arg-type]
        ]


class Honest(Evaluator):
    type = "honest"

    def evaluate(
        self, input: EvaluationInput, criteria: Sequence[Criterion]
    ) -> list[EvaluationResult]:
        return [EvaluationResult(c.name, True, self.type) for c in criteria]


class Crashing(Evaluator):
    type = "crashing"

    def evaluate(
        self, input: EvaluationInput, criteria: Sequence[Criterion]
    ) -> list[EvaluationResult]:
        return [EvaluationResult(c.name, 1 / 0, self.type) for c in criteria]


OWN = {
    "nosy": f"{__name__}:Nosy",
    "honest": f"{__name__}:Honest",
    "crashing": f"{__name__}:Crashing",
}


def _specs() -> list[EvaluatorSpec]:
    return [
        EvaluatorSpec(type="honest", criteria=[Criterion(name="gate_me", scale="binary")]),
        EvaluatorSpec(type="nosy", criteria=[Criterion(name="mine", scale="binary")]),
        EvaluatorSpec(type="crashing", criteria=[Criterion(name="boom", scale="numeric")]),
    ]


def test_an_evaluator_is_handed_its_own_criteria_and_nothing_else_is_taken_from_it() -> None:
    Nosy.handed.clear()
    places = [f"scenarios/s.yaml:{n}, evaluation.evaluators[{i}]" for i, n in enumerate((4, 7, 9))]
    evaluated = run_evaluators(
        _specs(), EvaluationInput(prompt="p", response="r"), OWN, Path("."), places=places
    )
    assert Nosy.handed == [["mine"]]
    results = [(r["criterion"], r["evaluator"], r["score"]) for r in evaluated["results"]]
    assert results == [
        ("gate_me", "honest", True),
        ("mine", "nosy", True),
        ("boom", "crashing", None),
    ]
    nosy = "evaluator nosy (scenarios/s.yaml:7, evaluation.evaluators[1])"
    assert evaluated["errors"][:3] == [
        f"{nosy} scored 'gate_me', which is not one of its criteria (mine): left out",
        f"{nosy} returned a dict ({{'criterion': 'mine', 'score': 1}}), not an "
        "EvaluationResult: left out",
        f"{nosy} scored 'mine' with a list ([1, 2]); a score is a bool, an int, a float, a str "
        "or None: left out",
    ]
    crash = evaluated["errors"][3]
    assert crash.startswith(
        "evaluator crashing (scenarios/s.yaml:9, evaluation.evaluators[2]) raised "
        "ZeroDivisionError: division by zero (at "
    )
    # Where in the evaluator's own module it raised (its comprehension's frame on 3.11).
    assert "(at tests/evaluation/test_agent_neutral.py:" in crash and crash.endswith(")")
    assert "Traceback" not in crash
    assert evaluator_failures(evaluated) == evaluated["errors"]
    assert evaluated["overall_score"] == 1.0  # the refused False counts nowhere


def test_a_run_whose_evaluators_all_behave_has_no_failure() -> None:
    specs = _specs()[:1]
    evaluated = run_evaluators(specs, EvaluationInput(prompt="p", response="r"), OWN, Path("."))
    assert evaluated["errors"] == [] and evaluator_failures(evaluated) == []
    assert evaluator_failures(None) == []


# --- exit rates ------------------------------------------------------------------------------


def _calls(*calls: tuple[str, int | None, str]) -> list[Event]:
    events: list[Event] = []
    for index, (command, code, output) in enumerate(calls):
        events.append(ToolCall(ts=index, event="tool_call", id=f"c{index}", command=command))
        events.append(
            ToolResult(ts=index, event="tool_result", id=f"c{index}", output=output, exit_code=code)
        )
    return events


FROBNICATE = "git: 'frobnicate' is not a git command. See 'git --help'."


def test_rates_are_over_known_exits_with_the_unknown_beside_them() -> None:
    m = interaction_metrics(
        _calls(
            ("git frobnicate | head", 0, FROBNICATE),
            ("git frobnicate && echo ok", 1, FROBNICATE),
            ("git init -q .", 0, ""),
        ),
        GIT,
        free=True,
    )
    assert (m["total_commands"], m["error_count"], m["unknown_exit_count"]) == (3, 0, 2)
    assert (m["error_rate"], m["first_try_success_rate"]) == (0.0, 1.0)  # of the 1 known


# --- approximate failures, the gate ----------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "help", "sign"),
    [
        (f"some output\n{FROBNICATE}\n", False, FROBNICATE),
        ("fatal: not a git repository (or any of the parent directories): .git", False, "fatal:"),
        ("error: pathspec 'x' did not match any file(s) known to git", False, "error:"),
        ("Error: No such command 'frob'.", False, "Error:"),
        ("bash: line 1: git: command not found", False, "command not found"),
        ("Traceback (most recent call last):\n  File ...", False, "Traceback"),
        ("Exit code 128", False, "Exit code 128"),
        ("Process exited with code 2", False, "code 2"),
        ("[exit 1]", False, "[exit 1]"),
        ("usage: git commit [<options>]", False, "usage:"),
        # Not signs: a help text's usage line, a message indented in a log, exit 0, prose.
        ("usage: git [-v | --version] [-h | --help]", True, None),
        ("commit 1a2b\n\n    error: fix the parser\n", False, None),
        ("Exit code 0", False, None),
        ("abc123 fatal: typo in README", False, None),
        ("", False, None),
    ],
)
def test_failure_signs_in_an_output(output: str, help: bool, sign: str | None) -> None:
    found = failure_sign(output, "git", help=help)
    assert (found is None) == (sign is None), found
    if sign is not None:
        assert found is not None and sign in found


def _gate(
    events: list[Event], source: str = "events", tmp_path: Path = Path(".")
) -> dict[str, Any]:
    by_call = target_commands_by_call(events, GIT)
    ctx = GateContext(
        tmp_path,
        {},
        10,
        [c for cs, _ in by_call for c in cs],
        failure_signs=failure_signs(by_call, "git"),
        source=source,
    )
    gates = TypeAdapter(list[Gate]).validate_python([{"type": "no_transcript_errors"}])
    return run_gates(gates, ctx)[0]


def test_no_transcript_errors_reads_a_failure_behind_a_pipe_from_its_output() -> None:
    found = _gate(_calls(("git init -q .", 0, ""), ("git frobnicate | head", 0, FROBNICATE)))
    assert found["passed"] is False
    assert found["message"] == (
        "1 tool call(s) with target commands of unknown exit show a failure in their output "
        f"(approximate): `git frobnicate` (its output: {FROBNICATE!r})"
    )


def test_no_transcript_errors_says_when_it_cannot_tell() -> None:
    found = _gate(_calls(("git init -q .", 0, ""), ("git log | head -3", 0, "abc first")))
    assert found["passed"] is True
    assert found["message"] == (
        "none of 2 target commands is known to have failed, but llmtt cannot tell for 1 "
        "(`git log`): their exit code is unknown (docs/metrics.md); their output shows no "
        "failure"
    )
    known = _gate(_calls(("git init -q .", 0, "")))
    assert known == {**known, "passed": True, "message": "none of 1 target commands failed"}


TRANSCRIPT = f"""\
I will make the repository.
$ git init -q .
$ git frobnicate
{FROBNICATE}
$ git status
On branch main
Done: the repository is made.
"""


def test_the_transcript_fallback_gives_each_command_the_text_after_it() -> None:
    events = transcript_events(TRANSCRIPT)
    pairs = [(e.command, None) if isinstance(e, ToolCall) else e.output for e in events]
    assert pairs == [
        ("git init -q .", None),
        "",
        ("git frobnicate", None),
        FROBNICATE,
        ("git status", None),
        "On branch main\nDone: the repository is made.",
    ]
    assert all(e.exit_code is None for e in events if isinstance(e, ToolResult))
    assert {(e.tool, e.agent_tool) for e in events if isinstance(e, ToolCall)} == {(SHELL, None)}


def test_no_transcript_errors_fails_a_transcript_whose_git_frobnicate_failed() -> None:
    found = _gate(transcript_events(TRANSCRIPT), "transcript")
    assert found["passed"] is False and FROBNICATE in found["message"]
    clean = _gate(transcript_events(TRANSCRIPT.replace(FROBNICATE, "")), "transcript")
    assert clean["passed"] is True
    assert "llmtt cannot tell for 3" in clean["message"]
    assert "the transcript shows no exit code" in clean["message"]
