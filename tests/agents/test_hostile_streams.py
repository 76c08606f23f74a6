"""An agent's stream in shapes its recordings never show: the parsers must read what they can,
never fail the run (a paid one, lost), and write only events the evaluation can read.

A CLI update can change a field's type (`input` a text rather than an object, `content` a
number, a usage figure a float, infinite or negative): each test here feeds the recorded
streams of tests/data with fields replaced by values of other JSON types, codex's rollout too,
with fixed seeds.
"""

from __future__ import annotations

import io
import json
import math
import random
from pathlib import Path
from typing import Any

import pytest
from test_stream_parsers import DATA, KINDS, make_parser

from llmtt.agents.codex import CodexStream
from llmtt.agents.opencode import OpencodeStream
from llmtt.agents.pricing import SCRIPTED_PRICING, pricing_of
from llmtt.agents.stream import MAX_TOKENS, LineBuffer, StreamParser
from llmtt.events import _ADAPTER, EventWriter
from llmtt.redaction import Redactor
from llmtt.spec.config import ModelSpec

RECORDINGS = ("", "-contract", "-compaction", "-endless")
FIGURES = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
TEXTS = ("", "x", "bash", "Bash", "call_1", "item_1", "text", "tool_use", "exec_command")
NOTE = "a shape llmtt does not read"
PRICED = pricing_of("priced", {"priced": ModelSpec(input_usd_per_mtok=1, output_usd_per_mtok=2)})


def recorded(kind: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The JSON objects of every recording of `kind`'s stream, and of codex's rollouts."""
    stream: list[dict[str, Any]] = []
    rollout: list[dict[str, Any]] = []
    for name in RECORDINGS:
        path = DATA / f"{kind}{name}.transcript.raw.txt"
        if path.exists():
            for line in path.read_bytes().split(b"\n"):
                try:
                    value = json.loads(line)
                except ValueError:
                    continue
                if isinstance(value, dict):
                    stream.append(value)
        path = DATA / f"{kind}{name}.rollout.jsonl"
        if path.exists():
            rollout += [json.loads(line) for line in path.read_text().splitlines() if line]
    return stream, rollout


def other_value(rng: random.Random, depth: int = 0) -> Any:
    """A JSON value of any type, odd numbers and deep nesting included."""
    pick = rng.randrange(9)
    if pick == 0:
        return None
    if pick == 1:
        return rng.choice([True, False])
    if pick == 2:
        numbers = [0, -1, 7, 2**70, 10**400, 1.5, 1e308, float("nan"), float("inf")]
        return rng.choice(numbers)
    if pick == 3:
        return rng.choice(TEXTS)
    if pick == 4 and depth < 3:
        return [other_value(rng, depth + 1) for _ in range(rng.randrange(3))]
    if pick == 5 and depth < 3:
        keys = ("type", "id", "text", "input", "command", "usage", "item", "payload", "content")
        return {rng.choice(keys): other_value(rng, depth + 1) for _ in range(rng.randrange(3))}
    if pick == 6:
        depth = rng.choice([150, 900])  # within pydantic's parser, or only within Python's json
        return json.loads("[" * depth + "]" * depth)
    return "s" * rng.randrange(5)


def changed(record: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """`record` with one to three of its fields (at any depth) given another value."""
    record = json.loads(json.dumps(record))
    places: list[tuple[Any, Any]] = []

    def walk(value: Any) -> None:
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, inner in items:
            places.append((value, key))
            if isinstance(inner, dict | list):
                walk(inner)

    walk(record)
    for _ in range(rng.randint(1, 3)):
        holder, key = rng.choice(places)
        holder[key] = other_value(rng)
    return record


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("kind", KINDS)
def test_fields_of_other_types_never_fail_the_run(kind: str, seed: int, tmp_path: Path) -> None:
    rng = random.Random(f"{kind}-{seed}")
    stream, rollout = recorded(kind)
    for trial in range(40):
        home = tmp_path / str(trial)
        lines = [changed(r, rng) if rng.random() < 0.5 else r for r in stream]
        thread = next((r["thread_id"] for r in lines if r.get("type") == "thread.started"), None)
        if rollout and isinstance(thread, str) and thread and "/" not in thread:
            folder = home / "sessions" / "2026" / "01" / "01"
            folder.mkdir(parents=True)
            records = [changed(r, rng) if rng.random() < 0.5 else r for r in rollout]
            (folder / f"rollout-t-{thread}.jsonl").write_text(
                "".join(json.dumps(r) + "\n" for r in records)
            )
        out = io.StringIO()
        parser = make_parser(kind, EventWriter(out, Redactor()), PRICED, home)
        buffer = LineBuffer(parser)
        for line in lines:
            buffer.feed(json.dumps(line).encode() + b"\n")
            parser.poll()
        parser.finish()
        assert parser.spent is not None and 0 <= parser.spent < math.inf
        for line in out.getvalue().split("\n")[:-1]:
            _ADAPTER.validate_json(line)  # what the evaluation reads
            assert NOTE not in line, line  # read, not set aside by the guard below
            event = json.loads(line)
            assert type(event.get("exit_code", 0)) in (int, type(None)), line  # never `true`
            assert all(0 <= event.get(f, 0) <= MAX_TOKENS for f in FIGURES), line
            assert math.isfinite(event.get("cost_usd") or 0), line


def test_a_line_the_adapter_cannot_read_is_noted_and_the_run_goes_on() -> None:
    """Whatever an adapter still trips over in a line (a shape nobody foresaw) is said in the
    log, with the line, and the lines after it are read."""

    class Tripping(OpencodeStream):
        def handle(self, obj: dict[str, Any]) -> None:
            if obj.get("trip"):
                raise TypeError("'int' object is not subscriptable")
            super().handle(obj)

    out = io.StringIO()
    parser: StreamParser = Tripping(EventWriter(out), SCRIPTED_PRICING)
    LineBuffer(parser).feed(
        b'{"trip": 1, "type": "text"}\n{"type":"text","part":{"text":"after"}}\n'
    )
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [e["event"] for e in events] == ["output", "message"]
    assert NOTE in events[0]["text"] and '{"trip": 1, "type": "text"}' in events[0]["text"]
    assert "TypeError" in events[0]["text"] and events[1]["text"] == "after"


def test_a_rollout_record_codex_cannot_be_read_leaves_the_others_of_its_read(
    tmp_path: Path,
) -> None:
    """The rollout is read outside the stream's lines too (each look for a limit, the end of
    the run): a record of an odd shape, or a line that is no record, is noted (the run warns)
    and the records after it are still read."""
    home = tmp_path / "home"
    folder = home / "sessions" / "2026" / "01" / "01"
    folder.mkdir(parents=True)
    out = io.StringIO()
    parser = CodexStream(EventWriter(out), PRICED, home=home)
    parser.take(b'{"type":"thread.started","thread_id":"t1"}')
    call = {"type": "function_call", "name": "shell", "call_id": "c1"}
    records = [
        {"type": "event_msg", "payload": {"type": "item_completed", "item": []}},
        {"type": "response_item", "payload": {**call, "arguments": '{"command": ["ls"]}'}},
        {"type": "token_usage_record", "payload": {"usage": {"input_tokens": 5}}},
        {
            "type": "response_item",
            "payload": {
                "type": "function_call_output",
                "call_id": "c1",
                "output": "Process exited with code " + "1" * 5000 + "\nOutput:\nx",
            },
        },
    ]
    lines = [json.dumps(r) for r in records]
    lines.insert(2, '{"type": "token_usage_record", "payload": ')  # no JSON object
    (folder / "rollout-x-t1.jsonl").write_text("".join(line + "\n" for line in lines))
    parser.poll()  # as Limits.reached() does, outside any line of the stream
    parser.finish()
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [e["event"] for e in events] == ["usage", "tool_call", "tool_result", "output"]
    assert events[1]["command"] == "ls" and events[2]["exit_code"] is None
    assert events[3]["text"].startswith("llmtt: a line of codex's rollout has " + NOTE)
    assert '{"type": "token_usage_record", "payload": ' in events[3]["text"]


def test_figures_past_any_request_are_capped_not_an_overflow() -> None:
    """A usage figure of 309 digits, or 1e308, once overflowed the cost (the run failed) or
    made it infinite (no limit could compare with it)."""
    out = io.StringIO()
    parser = make_parser("claude-code", EventWriter(out), PRICED, None)
    huge = b"1" + b"0" * 308
    parser.take(b'{"type":"result","subtype":"success","usage":{"input_tokens":' + huge + b"}}")
    parser.take(b'{"type":"result","subtype":"success","usage":{"output_tokens":1e308}}')
    usage = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(u["input_tokens"], u["output_tokens"]) for u in usage] == [
        (MAX_TOKENS, 0),
        (0, MAX_TOKENS),
    ]
    assert parser.spent == MAX_TOKENS * 1.0 / 1e6 + MAX_TOKENS * 2.0 / 1e6


def test_a_step_part_that_cannot_be_read_is_not_emitted_again() -> None:
    """opencode holds a step's tool parts until the step ends: one that trips the reader
    must not stay held, to be emitted again (with the parts before it) at every later step."""

    class Tripping(OpencodeStream):
        def _tool(self, part: dict[str, Any]) -> None:
            if part.get("id") == "p2":
                raise TypeError("unreadable")
            super()._tool(part)

    out = io.StringIO()
    parser = Tripping(EventWriter(out), SCRIPTED_PRICING)
    part = {"tool": "bash", "callID": "c1", "state": {"input": {"command": "ls"}}}
    for line in (
        {"type": "step_start"},
        {"type": "tool_use", "part": {**part, "id": "p1"}},
        {"type": "tool_use", "part": {**part, "id": "p2", "callID": "c2"}},
        {"type": "step_finish", "part": {"reason": "tool-calls"}},
        {"type": "step_start"},
        {"type": "step_finish", "part": {"reason": "stop"}},
    ):
        parser.take(json.dumps(line).encode())
    parser.finish()
    calls = [e for e in map(json.loads, out.getvalue().splitlines()) if e["event"] == "tool_call"]
    assert [c["id"] for c in calls] == ["c1"]
