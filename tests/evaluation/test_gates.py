"""Layer 2 gates on real files and real shell commands."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from llmtt.evaluation.gates import GateContext, check_assertion, run_gates
from llmtt.evaluation.interaction import TargetCommand
from llmtt.spec.gates import Gate

GATE = TypeAdapter(Gate)


def gates(*specs: dict[str, Any]) -> list[Gate]:
    return [GATE.validate_python(s) for s in specs]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    work = tmp_path / "workspace"
    work.mkdir()
    (work / "notes.md").write_text("# Title\nbody line\n")
    (work / "data.json").write_text(
        '{"items": [1, 2, 3], "name": "demo", "ok": true, "none": null}'
    )
    return work


def ctx(ws: Path, commands: list[TargetCommand] | None = None, timeout: float = 10) -> GateContext:
    env = {"PATH": os.environ["PATH"], "HOME": str(ws.parent)}
    return GateContext(workspace=ws, env=env, timeout_secs=timeout, target_commands=commands or [])


def test_every_gate_type_passes_and_fails(ws: Path) -> None:
    results = run_gates(
        gates(
            {"type": "command_succeeds", "command": "test -f notes.md"},
            {"type": "command_succeeds", "command": "exit 4"},
            {"type": "command_output_contains", "command": "cat notes.md", "substring": "body"},
            {"type": "command_output_contains", "command": "cat notes.md", "substring": "absent"},
            {"type": "command_output_matches", "command": "cat notes.md", "pattern": "^# \\w+$"},
            {"type": "command_output_matches", "command": "cat notes.md", "pattern": "^nope"},
            {
                "type": "command_json_path",
                "command": "cat data.json",
                "path": "$.items",
                "assertion": "len == 3",
            },
            {
                "type": "command_json_path",
                "command": "cat notes.md",
                "path": "$",
                "assertion": "exists",
            },
            {"type": "file_exists", "path": "notes.md"},
            {"type": "file_exists", "path": "missing.txt"},
            {"type": "file_contains", "path": "notes.md", "substring": "Title"},
            {"type": "file_contains", "path": "notes.md", "substring": "zzz"},
            {"type": "file_matches", "path": "notes.md", "pattern": "^body"},
            {"type": "file_matches", "path": "missing.txt", "pattern": "x"},
            {"type": "no_transcript_errors"},
            {"type": "script", "command": "echo checking; echo '{\"score\": 3}'"},
            {"type": "script", "command": "echo bad >&2; exit 1"},
        ),
        ctx(ws),
    )
    assert [r["passed"] for r in results] == [
        True,
        False,
        True,
        False,
        True,
        False,
        True,
        False,
        True,
        False,
        True,
        False,
        True,
        False,
        True,
        True,
        False,
    ]
    assert [r["index"] for r in results] == list(range(1, 18))
    assert "exit 4" in results[1]["message"]
    assert "lacks 'absent'" in results[3]["message"]
    assert "not JSON" in results[7]["message"]
    assert "does not exist" in results[9]["message"]
    assert results[15]["data"] == {"score": 3}
    assert "bad" in results[16]["message"]


@pytest.mark.parametrize(
    ("assertion", "value", "found", "expected"),
    [
        ("exists", 1, True, True),
        ("exists", None, True, False),
        ("exists", None, False, False),
        ("equals 3", 3, True, True),
        ('equals "demo"', "demo", True, True),
        ("equals demo", "demo", True, True),
        ("equals true", True, True, True),
        ("equals 3", "3", True, False),
        ("contains em", "demo", True, True),
        ("contains 2", [1, 2], True, True),
        ("contains x", 5, True, False),
        ("len >= 3", [1, 2, 3], True, True),
        ("len > 3", [1, 2, 3], True, False),
        ("len == 2", {"a": 1, "b": 2}, True, True),
        ("len == 1", 7, True, False),
    ],
)
def test_json_path_assertions(assertion: str, value: Any, found: bool, expected: bool) -> None:
    assert check_assertion(assertion, value, found=found)[0] is expected


def test_gates_do_not_see_each_others_changes_nor_change_the_workspace(ws: Path) -> None:
    results = run_gates(
        gates(
            {"type": "command_succeeds", "command": "rm notes.md && touch made.txt"},
            {"type": "command_succeeds", "command": "test -f notes.md && test ! -e made.txt"},
            {"type": "file_exists", "path": "notes.md"},
        ),
        ctx(ws),
    )
    assert [r["passed"] for r in results] == [True, True, True]
    assert (ws / "notes.md").exists() and not (ws / "made.txt").exists()


def test_gate_timeout_fails_with_reason_and_runs_the_rest(ws: Path) -> None:
    results = run_gates(
        gates(
            {"type": "command_succeeds", "command": "sleep 30", "timeout_secs": 0.5},
            {"type": "file_exists", "path": "notes.md"},
        ),
        ctx(ws),
    )
    assert results[0]["passed"] is False and results[0]["timed_out"] is True
    assert "timed out" in results[0]["message"]
    assert results[1]["passed"] is True


def test_no_transcript_errors_lists_failed_target_commands(ws: Path) -> None:
    failed = TargetCommand("git comit", "git comit", "comit", 1, False)
    fine = TargetCommand("git init", "git init", "init", 0, False)
    unknown = TargetCommand("git status", "git status", "status", None, False)
    result = run_gates(gates({"type": "no_transcript_errors"}), ctx(ws, [fine, failed, unknown]))[0]
    assert result["passed"] is False
    assert "`git comit` (exit 1)" in result["message"]
    assert run_gates(gates({"type": "no_transcript_errors"}), ctx(ws, [fine, unknown]))[0]["passed"]


def test_gate_commands_get_the_given_env(ws: Path) -> None:
    c = ctx(ws)
    c2 = GateContext(ws, {**c.env, "DEMO_VALUE": "xyz"}, 10, [])
    result = run_gates(
        gates(
            {"type": "command_output_contains", "command": "echo $DEMO_VALUE", "substring": "xyz"}
        ),
        c2,
    )
    assert result[0]["passed"]


def test_a_gate_command_with_a_nul_byte_fails_saying_why(ws: Path) -> None:
    """Its scenario file does not load (tests/test_hostile_inputs.py); a gate made in code is
    refused where it would run, and the gates after it still run."""
    from llmtt.spec.gates import CommandSucceeds

    nul = CommandSucceeds.model_construct(command="test -f notes.md\0", type="command_succeeds")
    results = run_gates([nul, *gates({"type": "file_exists", "path": "notes.md"})], ctx(ws))
    assert results[0]["passed"] is False and results[0]["exit_code"] == 126
    assert "contains a NUL byte" in results[0]["message"]
    assert results[1]["passed"] is True
