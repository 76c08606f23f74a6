"""Each CLI's stream parser on output recorded from a real run (tests/data/*.transcript.raw.txt:
the raw PTY bytes of `doit run agent=A model=scripted` on the example's git-first-commit)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from llmtt.agents.claude_code import ClaudeStream, exit_code_of
from llmtt.agents.cli import LineBuffer, StreamParser, strip_ansi, unwrap_shell
from llmtt.agents.codex import CodexStream, estimate_cost
from llmtt.agents.opencode import OpencodeStream
from llmtt.events import EventWriter

DATA = Path(__file__).resolve().parents[1] / "data"
COMMANDS = [
    "git --help",
    "git init -q .",
    'git comit -m "Add notes"',
    'git commit -q -m "Add notes"',
    "git add notes.md",
    'git commit -q -m "Add notes"',
    "git log --oneline",
]
EXITS = [0, 0, 1, 1, 0, 0, 0]


def parse(kind: str, chunk: int = 4096) -> tuple[list[dict[str, Any]], StreamParser]:
    out = io.StringIO()
    events = EventWriter(out)
    parser: StreamParser
    if kind == "claude-code":
        parser = ClaudeStream(events, scripted=True)
    elif kind == "opencode":
        parser = OpencodeStream(events, scripted=True)
    else:
        parser = CodexStream(events, scripted=True, model="scripted")
    raw = (DATA / f"{kind}.transcript.raw.txt").read_bytes()
    lines = LineBuffer(parser)
    for start in range(0, len(raw), chunk):  # as the PTY delivers it: in arbitrary pieces
        lines.feed(raw[start : start + chunk])
    lines.flush()
    parser.finish()
    return [json.loads(line) for line in out.getvalue().splitlines()], parser


@pytest.mark.parametrize("kind", ["claude-code", "opencode", "codex"])
@pytest.mark.parametrize("chunk", [7, 4096])
def test_recorded_stream_gives_commands_exit_codes_and_usage(kind: str, chunk: int) -> None:
    events, parser = parse(kind, chunk)
    calls = [e for e in events if e["event"] == "tool_call"]
    results = {e["id"]: e["exit_code"] for e in events if e["event"] == "tool_result"}
    assert [c["command"] for c in calls] == COMMANDS
    assert [results[c["id"]] for c in calls] == EXITS
    usage = [e for e in events if e["event"] == "usage"]
    assert sum(u["input_tokens"] for u in usage) == 10800
    assert sum(u["output_tokens"] for u in usage) == 150
    assert all(u["cost_usd"] == 0.0 for u in usage)
    assert parser.turns == 8
    assert parser.natural_stop is True
    assert [e["text"] for e in events if e["event"] == "message"][-1].startswith("Done:")


def test_claude_exit_codes_from_text() -> None:
    assert exit_code_of("Bash", False, "ok") == 0
    assert exit_code_of("Bash", True, "Exit code 3\nboom") == 3
    assert exit_code_of("Bash", True, "Error: Exit code 127\nnot found") == 127
    assert exit_code_of("Bash", True, "Permission to use Bash has been denied") is None
    assert exit_code_of("Read", False, "file") == 0
    assert exit_code_of("Read", True, "no such file") is None


def test_claude_paid_cost_is_taken_from_the_result_line() -> None:
    out = io.StringIO()
    parser = ClaudeStream(EventWriter(out), scripted=False)
    parser.line(
        '{"type":"result","subtype":"success","num_turns":3,"total_cost_usd":0.0123,'
        '"usage":{"input_tokens":10,"cache_creation_input_tokens":5,"output_tokens":7,'
        '"cache_read_input_tokens":2}}'
    )
    usage = json.loads(out.getvalue())
    assert (usage["input_tokens"], usage["output_tokens"], usage["cache_read_tokens"]) == (15, 7, 2)
    assert usage["cost_usd"] == 0.0123 and parser.turns == 3


def test_codex_cost_is_estimated_from_the_price_table_or_null() -> None:
    assert estimate_cost("gpt-5-mini", 1_000_000, 0, 1_000_000) == 2.25
    assert estimate_cost("no-such-model", 10, 0, 10) is None
    out = io.StringIO()
    parser = CodexStream(EventWriter(out), scripted=False, model="gpt-5")
    parser.line(
        '{"type":"turn.completed","usage":{"input_tokens":2000000,"cached_input_tokens":1000000,"output_tokens":0}}'
    )
    usage = json.loads(out.getvalue())
    assert usage["cost_usd"] == 1.375 and usage["estimated"] is True


@pytest.mark.parametrize(
    ("wrapped", "inner"),
    [
        ("/bin/bash -lc 'git init -q .'", "git init -q ."),
        ("bash -c 'echo \"a b\" > x'", 'echo "a b" > x'),
        ("git status", "git status"),
        ("/bin/bash -lc 'unterminated", "/bin/bash -lc 'unterminated"),
    ],
)
def test_codex_commands_are_unwrapped(wrapped: str, inner: str) -> None:
    assert unwrap_shell(wrapped) == inner


def test_non_json_lines_become_output_and_terminal_codes_are_stripped() -> None:
    out = io.StringIO()
    parser = OpencodeStream(EventWriter(out), scripted=True)
    parser.line("\x1b[31mwarning: something\x1b[0m\r")
    parser.line("\x1b[?25h")
    parser.line('{"type":"text","part":{"text":"hello"}}')
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert events[0] == {**events[0], "event": "output", "text": "warning: something"}
    assert events[1]["event"] == "message" and events[1]["text"] == "hello"
    assert len(events) == 2
    assert strip_ansi("\x1b]0;title\x07plain") == "plain"
