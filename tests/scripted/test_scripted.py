"""The scripted model server over real HTTP on 127.0.0.1: every capability of a scripted
session (parallel calls, chosen usage, text, final answer, HTTP errors, hangs, endless
sessions, side requests) over the three wire formats, streamed and plain."""

from __future__ import annotations

import json
import re
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from conftest import GIT_TOML, Project
from pydantic import ValidationError

from llmtt.errors import ConfigError
from llmtt.plan.runs import build_plan
from llmtt.scripted import (
    FINAL_TEXT,
    TITLE_TEXT,
    Hang,
    HttpError,
    ScriptedSession,
    Turn,
    TurnUsage,
    shell_arguments,
)
from llmtt.scripted.server import ScriptedServer
from llmtt.scripted.session import answer, played_marker
from llmtt.spec.project import load_project
from llmtt.spec.scenario import load_scenario
from llmtt.spec.selection import Selection

COMMANDS = ["git init", "git status"]
BASH = {"name": "Bash", "input_schema": {"properties": {"command": {"type": "string"}}}}
CHAT_BASH = {
    "type": "function",
    "function": {"name": "bash", "parameters": {"properties": {"command": {"type": "string"}}}},
}
EXEC = {
    "type": "function",
    "name": "exec_command",
    "parameters": {"properties": {"cmd": {"type": "string"}}},
}
WIRES = ("messages", "chat", "responses")
PATHS = {"messages": "/v1/messages", "chat": "/v1/chat/completions", "responses": "/v1/responses"}
TOOLS = {"messages": BASH, "chat": CHAT_BASH, "responses": EXEC}
COMBOS = [(wire, stream) for wire in WIRES for stream in (False, True)]
COMBO_IDS = [f"{wire}-{'stream' if stream else 'plain'}" for wire, stream in COMBOS]
EVERY_WIRE = pytest.mark.parametrize(("wire", "stream"), COMBOS, ids=COMBO_IDS)
TOOL_NAME = {"messages": "Bash", "chat": "bash", "responses": "exec_command"}
SCHEMA = {
    "messages": BASH["input_schema"],
    "chat": CHAT_BASH["function"]["parameters"],  # type: ignore[index]
    "responses": EXEC["parameters"],
}
PREFIX = {"messages": "toolu_", "chat": "call_", "responses": "call_"}  # of call ids

# A turn that says something, calls the shell twice at once and reports cache figures.
RICH = Turn(
    say="Looking first.",
    run=["git status", "git log --oneline"],
    usage=TurnUsage(input=500, output=40, cache_read=2000, cache_write=300),
)


# -- a small client of each wire format ------------------------------------------------------


def conversation(
    wire: str, results: list[str], tools: bool = True, output: str = "ok"
) -> dict[str, Any]:
    """A request of `wire` whose conversation holds tool results with the ids `results`, each
    with the text `output`."""
    body: dict[str, Any] = {"model": "m"}
    if tools:
        body["tools"] = [TOOLS[wire]]
    if wire == "messages":
        blocks = [{"type": "tool_result", "tool_use_id": i, "content": output} for i in results]
        body["messages"] = [{"role": "user", "content": "go"}]
        if blocks:
            body["messages"].append({"role": "user", "content": blocks})
    elif wire == "chat":
        body["messages"] = [{"role": "user", "content": "go"}] + [
            {"role": "tool", "tool_call_id": i, "content": output} for i in results
        ]
        body["stream_options"] = {"include_usage": True}
    else:
        body["input"] = [{"type": "message", "role": "user", "content": "go"}] + [
            {"type": "function_call_output", "call_id": i, "output": output} for i in results
        ]
    return body


def compacted(wire: str, summaries: list[str], results: list[str], **kw: Any) -> dict[str, Any]:
    """A conversation after a compaction, as each wire's agent carries its summary on (the
    earlier turns' results are gone): opencode as the assistant's message, then its "Continue"
    (Chat Completions); claude-code in a user message's text block (Messages); codex in a user
    message's `input_text` (Responses). Then the tool results `results`."""
    body = conversation(wire, results, **kw)
    if wire == "chat":
        said = []
        for summary in summaries:
            said += [
                {"role": "assistant", "content": summary},
                {"role": "user", "content": [{"type": "text", "text": "Continue if you have"}]},
            ]
    elif wire == "messages":
        said = [
            {"role": "user", "content": [{"type": "text", "text": f"Summarized:\n{summary}"}]}
            for summary in summaries
        ]
    else:
        said = [
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": f"Another model's summary: {summary}"}],
            }
            for summary in summaries
        ]
    key = "input" if wire == "responses" else "messages"
    body[key] = body[key][:1] + said + body[key][1:]
    return body


@dataclass
class Answer:
    """One answer as a client understands it, whatever the wire."""

    status: int
    headers: dict[str, str]
    raw: bytes
    text: str | None = None
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)
    body: Any = None
    events: list[tuple[str | None, dict[str, Any]]] = field(default_factory=list)


def post(
    server: ScriptedServer,
    path: str,
    body: dict[str, Any],
    timeout: float = 10,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(
        server.url + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def sse(raw: bytes) -> list[tuple[str | None, dict[str, Any]]]:
    """(event name, data) of each SSE event; the chat stream's `[DONE]` is left out."""
    out = []
    for block in raw.decode().split("\n\n"):
        lines = block.splitlines()
        name = next((ln[7:] for ln in lines if ln.startswith("event: ")), None)
        data = next((ln[6:] for ln in lines if ln.startswith("data: ")), None)
        if data is not None and data != "[DONE]":
            out.append((name, json.loads(data)))
    return out


def ask(server: ScriptedServer, wire: str, stream: bool, body: dict[str, Any]) -> Answer:
    """Send `body` (streamed or not) and read the answer as that wire's client would."""
    status, headers, raw = post(server, PATHS[wire], {**body, "stream": stream})
    answer = Answer(status, headers, raw)
    if status != 200:
        answer.body = json.loads(raw) if headers["Content-Type"] == "application/json" else raw
        return answer
    if not stream:
        answer.body = json.loads(raw)
        READ_PLAIN[wire](answer, answer.body)
    else:
        assert headers["Content-Type"] == "text/event-stream"
        answer.events = sse(raw)
        READ_STREAM[wire](answer, answer.events)
    return answer


def read_messages(answer: Answer, message: dict[str, Any]) -> None:
    texts = [b["text"] for b in message["content"] if b["type"] == "text"]
    answer.text = "".join(texts) if texts else None
    answer.calls = [(b["id"], b["input"]) for b in message["content"] if b["type"] == "tool_use"]
    answer.usage = message["usage"]


def read_messages_stream(answer: Answer, events: list[tuple[str | None, dict[str, Any]]]) -> None:
    blocks: dict[int, dict[str, Any]] = {}
    usage: dict[str, Any] = {}
    for name, data in events:
        assert name == data["type"]
        if name == "message_start":
            usage = dict(data["message"]["usage"])
        elif name == "content_block_start":
            blocks[data["index"]] = {**data["content_block"], "json": ""}
        elif name == "content_block_delta":
            delta, block = data["delta"], blocks[data["index"]]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            else:
                block["json"] += delta["partial_json"]
        elif name == "message_delta":
            usage.update(data["usage"])
    content = [
        {**b, "input": json.loads(b["json"])} if b["type"] == "tool_use" else b
        for b in blocks.values()
    ]
    read_messages(answer, {"content": content, "usage": usage})
    assert events[-1][0] == "message_stop"


def read_chat(answer: Answer, completion: dict[str, Any]) -> None:
    message = completion["choices"][0]["message"]
    answer.text = message["content"]
    answer.calls = [
        (c["id"], json.loads(c["function"]["arguments"])) for c in message.get("tool_calls", [])
    ]
    answer.usage = completion["usage"]


def read_chat_stream(answer: Answer, events: list[tuple[str | None, dict[str, Any]]]) -> None:
    text: str | None = None
    calls: dict[int, dict[str, str]] = {}
    for _, chunk in events:
        assert chunk["object"] == "chat.completion.chunk"
        if not chunk["choices"]:
            answer.usage = chunk["usage"]
            continue
        delta = chunk["choices"][0]["delta"]
        if delta.get("content"):
            text = (text or "") + delta["content"]
        for call in delta.get("tool_calls", []):
            slot = calls.setdefault(call["index"], {"id": "", "arguments": ""})
            slot["id"] = call.get("id") or slot["id"]
            slot["arguments"] += call["function"]["arguments"]
    answer.text = text
    answer.calls = [(c["id"], json.loads(c["arguments"])) for c in calls.values()]
    assert answer.raw.decode().endswith("data: [DONE]\n\n")


def read_responses(answer: Answer, response: dict[str, Any]) -> None:
    texts = [
        part["text"]
        for item in response["output"]
        if item["type"] == "message"
        for part in item["content"]
    ]
    answer.text = "".join(texts) if texts else None
    answer.calls = [
        (item["call_id"], json.loads(item["arguments"]))
        for item in response["output"]
        if item["type"] == "function_call"
    ]
    answer.usage = response["usage"]


def read_responses_stream(answer: Answer, events: list[tuple[str | None, dict[str, Any]]]) -> None:
    # codex takes each item from `response.output_item.done` and the usage from the end.
    for name, data in events:
        assert name == data["type"]
    done = [d["item"] for n, d in events if n == "response.output_item.done"]
    assert events[-1][0] == "response.completed"
    read_responses(answer, {"output": done, "usage": events[-1][1]["response"]["usage"]})


READ_PLAIN = {"messages": read_messages, "chat": read_chat, "responses": read_responses}
READ_STREAM = {
    "messages": read_messages_stream,
    "chat": read_chat_stream,
    "responses": read_responses_stream,
}


def commands(answer: Answer) -> list[str]:
    """The shell commands of an answer's calls, whatever the argument shape."""
    return [args.get("command", args.get("cmd")) for _, args in answer.calls]


def uncached_input(wire: str, usage: dict[str, Any]) -> int:
    """DESIGN.md's `input_tokens` from a wire's usage."""
    if wire == "messages":
        return int(usage["input_tokens"])
    if wire == "chat":
        return int(usage["prompt_tokens"] - usage["prompt_tokens_details"]["cached_tokens"])
    return int(usage["input_tokens"] - usage["input_tokens_details"]["cached_tokens"])


def cache_read(wire: str, usage: dict[str, Any]) -> int:
    if wire == "messages":
        return int(usage["cache_read_input_tokens"])
    key = "prompt_tokens_details" if wire == "chat" else "input_tokens_details"
    return int(usage[key]["cached_tokens"])


def log_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    """Start servers for sessions; each stops at the end of the test."""
    started: list[ScriptedServer] = []

    def start(
        session: ScriptedSession | list[str], log: str = "log.jsonl", api_key: str | None = None
    ) -> ScriptedServer:
        server = ScriptedServer(session, log=tmp_path / log, api_key=api_key).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def server(serve: Any) -> ScriptedServer:
    return serve(COMMANDS)  # type: ignore[no-any-return]


# -- the default session: a solution, one command a turn, fixed token counts ------------------


def test_anthropic_plain_counts_tool_results(server: ScriptedServer) -> None:
    first = ask(server, "messages", False, conversation("messages", [])).body
    assert first["content"] == [
        {"type": "tool_use", "id": "toolu_0001", "name": "Bash", "input": {"command": "git init"}}
    ]
    assert first["stop_reason"] == "tool_use" and first["usage"]["input_tokens"] == 1000
    last = ask(server, "messages", False, conversation("messages", ["t0", "t1"])).body
    assert last["content"] == [{"type": "text", "text": FINAL_TEXT}]
    assert last["stop_reason"] == "end_turn"
    assert last["usage"] == {
        "input_tokens": 1200,
        "output_tokens": 10,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


@EVERY_WIRE
def test_default_session_keeps_its_fixed_figures(
    server: ScriptedServer, wire: str, stream: bool
) -> None:
    # turn k: 1000 + 100 k input tokens, 20 output with a call, 10 for the final text
    seen = []
    for done in range(3):
        answer = ask(server, wire, stream, conversation(wire, [f"c{i}" for i in range(done)]))
        seen.append((commands(answer), answer.text, uncached_input(wire, answer.usage)))
        assert cache_read(wire, answer.usage) == 0
        out = answer.usage["output_tokens" if wire != "chat" else "completion_tokens"]
        assert out == (20 if done < 2 else 10)
    assert seen == [
        (["git init"], None, 1000),
        (["git status"], None, 1100),
        ([], FINAL_TEXT, 1200),
    ]


def test_chat_completions_stream_with_tool_call_deltas_and_usage(server: ScriptedServer) -> None:
    answer = ask(server, "chat", True, conversation("chat", ["c1"]))
    chunks = [data for _, data in answer.events]
    call = chunks[0]["choices"][0]["delta"]["tool_calls"][0]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert call["function"]["name"] == "bash" and call["id"] == "call_0002"
    assert json.loads(
        chunks[1]["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"]
    ) == {"command": "git status"}
    assert chunks[2]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[3]["usage"] == {
        "prompt_tokens": 1100,
        "completion_tokens": 20,
        "total_tokens": 1120,
        "prompt_tokens_details": {"cached_tokens": 0},
    }


def test_requests_are_logged_and_unknown_paths_are_404(
    server: ScriptedServer, tmp_path: Path
) -> None:
    ask(server, "messages", False, conversation("messages", []))
    assert post(server, "/v2/nothing", {})[0] == 404
    (entry,) = log_of(tmp_path / "log.jsonl")
    assert entry["command"] == "git init" and entry["path"] == "/v1/messages"
    assert {k: entry[k] for k in ("side", "turn", "attempt", "status", "calls")} == {
        "side": False,
        "turn": 0,
        "attempt": 1,
        "status": 200,
        "calls": 1,
    }


@pytest.mark.parametrize(
    ("name", "schema", "expected"),
    [
        ("Bash", {"properties": {"command": {"type": "string"}}}, {"command": "ls"}),
        ("exec_command", {"properties": {"cmd": {"type": "string"}}}, {"cmd": "ls"}),
        (
            "shell",
            {"properties": {"command": {"type": "array"}}},
            {"command": ["bash", "-lc", "ls"]},
        ),
    ],
)
def test_arguments_follow_the_tool_schema(
    name: str, schema: dict[str, Any], expected: dict[str, Any]
) -> None:
    assert shell_arguments(name, schema, "ls") == expected


@pytest.mark.parametrize("wire", WIRES)
def test_a_server_with_a_key_answers_only_requests_carrying_it(
    serve: Any, wire: str, tmp_path: Path
) -> None:
    # The first attempt at turn 1 fails: the refused requests before it are no attempts.
    session = ScriptedSession(turns=[Turn(run=["git init"], error=HttpError(status=500, times=1))])
    server = serve(session, api_key="sk-right")
    body = conversation(wire, [])
    refused = [
        post(server, PATHS[wire], body, headers=headers)
        for headers in (
            {},
            {"Authorization": "Bearer sk-wrong"},
            {"x-api-key": "sk-wrong"},
            {"Authorization": "sk-right"},  # no scheme
            {"Authorization": "Basic sk-right"},
        )
    ]
    message = "scripted: wrong or missing API key"
    expected = (
        {"type": "error", "error": {"type": "authentication_error", "message": message}}
        if wire == "messages"
        else {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "param": None,
                "code": "invalid_api_key",
            }
        }
    )
    for status, headers, raw in refused:
        assert (status, headers["Content-Type"], json.loads(raw)) == (
            401,
            "application/json",
            expected,
        )
    admitted = [
        post(server, PATHS[wire], body, headers=headers)
        for headers in (
            {"Authorization": "Bearer sk-right"},
            {"x-api-key": "sk-right"},
            {"authorization": "bearer  sk-right", "X-Api-Key": "sk-wrong"},
        )
    ]
    assert [status for status, _, _ in admitted] == [500, 200, 200]
    # Reading the models stays open, as a client probing the server does without its key.
    with urllib.request.urlopen(server.url + "/v1/models", timeout=10) as response:
        assert response.status == 200
    log = log_of(tmp_path / "log.jsonl")
    assert [(e["status"], e["attempt"], e["calls"], e["command"]) for e in log] == [
        *[(401, 0, 0, None)] * 5,
        (500, 1, 1, "git init"),
        (200, 2, 1, "git init"),
        (200, 3, 1, "git init"),
    ]


@pytest.mark.parametrize("wire", WIRES)
def test_a_server_without_a_key_answers_every_request(serve: Any, wire: str) -> None:
    server = serve(COMMANDS)
    body = conversation(wire, [])
    for headers in ({}, {"Authorization": "Bearer anything"}, {"x-api-key": ""}):
        status, _, raw = post(server, PATHS[wire], body, headers=headers)
        assert status == 200 and b"git init" in raw


# -- exact shapes of a rich turn: text, two parallel calls, cache figures ---------------------


def test_messages_rich_turn_plain_and_streamed(serve: Any) -> None:
    server = serve(ScriptedSession(turns=[RICH]))
    message = {
        "id": "msg_scripted_0001",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [
            {"type": "text", "text": "Looking first."},
            {
                "type": "tool_use",
                "id": "toolu_0001",
                "name": "Bash",
                "input": {"command": "git status"},
            },
            {
                "type": "tool_use",
                "id": "toolu_0002",
                "name": "Bash",
                "input": {"command": "git log --oneline"},
            },
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 500,
            "output_tokens": 40,
            "cache_creation_input_tokens": 300,
            "cache_read_input_tokens": 2000,
        },
    }
    assert ask(server, "messages", False, conversation("messages", [])).body == message
    events = ask(server, "messages", True, conversation("messages", [])).events
    start = {**message, "content": [], "stop_reason": None}
    start["usage"] = {**message["usage"], "output_tokens": 1}

    def block(index: int, empty: dict[str, Any], delta: dict[str, Any]) -> list[Any]:
        return [
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": empty},
            ),
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": index}),
        ]

    tool = {"type": "tool_use", "name": "Bash", "input": {}}
    assert events == [
        ("message_start", {"type": "message_start", "message": start}),
        *block(0, {"type": "text", "text": ""}, {"type": "text_delta", "text": "Looking first."}),
        *block(
            1,
            {**tool, "id": "toolu_0001"},
            {"type": "input_json_delta", "partial_json": '{"command": "git status"}'},
        ),
        *block(
            2,
            {**tool, "id": "toolu_0002"},
            {"type": "input_json_delta", "partial_json": '{"command": "git log --oneline"}'},
        ),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": 40},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]


def test_chat_rich_turn_plain_and_streamed(serve: Any) -> None:
    server = serve(ScriptedSession(turns=[RICH]))
    plain = ask(server, "chat", False, conversation("chat", [])).body
    calls = [
        {
            "id": "call_0001",
            "type": "function",
            "function": {"name": "bash", "arguments": '{"command": "git status"}'},
        },
        {
            "id": "call_0002",
            "type": "function",
            "function": {"name": "bash", "arguments": '{"command": "git log --oneline"}'},
        },
    ]
    usage = {
        "prompt_tokens": 2500,  # the cached tokens are counted inside, as OpenAI does
        "completion_tokens": 40,
        "total_tokens": 2540,
        "prompt_tokens_details": {"cached_tokens": 2000},
    }
    assert plain == {
        "id": "chatcmpl-scripted-0001",
        "object": "chat.completion",
        "created": plain["created"],
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Looking first.", "tool_calls": calls},
                "finish_reason": "tool_calls",
            }
        ],
        "usage": usage,
    }
    answer = ask(server, "chat", True, conversation("chat", []))
    base = {
        "id": "chatcmpl-scripted-0001",
        "created": answer.events[0][1]["created"],
        "model": "m",
        "object": "chat.completion.chunk",
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[None, dict[str, Any]]:
        return None, {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    def header(index: int) -> dict[str, Any]:
        call = calls[index]
        function = {"name": "bash", "arguments": ""}
        return {"index": index, "id": call["id"], "type": "function", "function": function}

    def arguments(index: int) -> dict[str, Any]:
        return {"index": index, "function": {"arguments": calls[index]["function"]["arguments"]}}

    assert answer.events == [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Looking first."}),
        chunk({"tool_calls": [header(0)]}),
        chunk({"tool_calls": [arguments(0)]}),
        chunk({"tool_calls": [header(1)]}),
        chunk({"tool_calls": [arguments(1)]}),
        chunk({}, "tool_calls"),
        (None, {**base, "choices": [], "usage": usage}),
    ]
    assert answer.raw.endswith(b"data: [DONE]\n\n")
    # Without `stream_options.include_usage` there is no usage chunk.
    body = {**conversation("chat", []), "stream_options": {}}
    assert [e for _, e in ask(server, "chat", True, body).events if not e["choices"]] == []


def test_responses_rich_turn_plain_and_streamed(serve: Any) -> None:
    server = serve(ScriptedSession(turns=[RICH]))
    plain = ask(server, "responses", False, conversation("responses", [])).body
    message = {
        "type": "message",
        "id": "msg_0001",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Looking first.", "annotations": []}],
    }
    calls = [
        {
            "type": "function_call",
            "id": f"fc_000{n}",
            "call_id": f"call_000{n}",
            "name": "exec_command",
            "arguments": json.dumps({"cmd": command}),
            "status": "completed",
        }
        for n, command in ((1, "git status"), (2, "git log --oneline"))
    ]
    response = {
        "id": "resp_scripted_0001",
        "object": "response",
        "created_at": plain["created_at"],
        "status": "completed",
        "model": "m",
        "output": [message, *calls],
        "usage": {
            "input_tokens": 2500,
            "input_tokens_details": {"cached_tokens": 2000},
            "output_tokens": 40,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 2540,
        },
    }
    assert plain == response
    events = ask(server, "responses", True, conversation("responses", [])).events
    response["created_at"] = events[0][1]["response"]["created_at"]
    pending = {**response, "status": "in_progress", "output": [], "usage": None}
    text = {"item_id": "msg_0001", "output_index": 0, "content_index": 0}

    def call_events(index: int, call: dict[str, Any]) -> list[dict[str, Any]]:
        where = {"output_index": index, "item_id": call["id"]}
        return [
            {
                "type": "response.output_item.added",
                "output_index": index,
                "item": {**call, "arguments": "", "status": "in_progress"},
            },
            {"type": "response.function_call_arguments.delta", **where, "delta": call["arguments"]},
            {
                "type": "response.function_call_arguments.done",
                **where,
                "arguments": call["arguments"],
            },
            {"type": "response.output_item.done", "output_index": index, "item": call},
        ]

    expected = [
        {"type": "response.created", "response": pending},
        {"type": "response.in_progress", "response": pending},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**message, "content": [], "status": "in_progress"},
        },
        {
            "type": "response.content_part.added",
            **text,
            "part": {"type": "output_text", "text": "", "annotations": []},
        },
        {"type": "response.output_text.delta", **text, "delta": "Looking first."},
        {"type": "response.output_text.done", **text, "text": "Looking first."},
        {"type": "response.content_part.done", **text, "part": message["content"][0]},  # type: ignore[index]
        {"type": "response.output_item.done", "output_index": 0, "item": message},
        *call_events(1, calls[0]),
        *call_events(2, calls[1]),
        {"type": "response.completed", "response": response},
    ]
    assert events == [(e["type"], e) for e in expected]


# -- each capability over each wire, streamed and plain ---------------------------------------


@EVERY_WIRE
def test_parallel_calls_in_order_then_the_final_answer(
    serve: Any, wire: str, stream: bool, tmp_path: Path
) -> None:
    session = ScriptedSession(
        turns=[
            Turn(run=["echo a1", "echo a2", "echo a3"]),
            Turn(say="One more.", run=["echo b1"]),
            Turn(say="All done.", usage=TurnUsage(input=7, output=3)),
        ]
    )
    server = serve(session)
    p = PREFIX[wire]
    first = ask(server, wire, stream, conversation(wire, []))
    assert first.text is None
    assert first.calls == [
        (f"{p}000{n}", shell_arguments(TOOL_NAME[wire], SCHEMA[wire], f"echo a{n}"))
        for n in (1, 2, 3)
    ]
    # The client answers the three calls (in any order): the next turn is played.
    second = ask(server, wire, stream, conversation(wire, [f"{p}0003", f"{p}0001", f"{p}0002"]))
    assert (second.text, commands(second), second.calls[0][0]) == (
        "One more.",
        ["echo b1"],
        f"{p}0004",
    )
    final = ask(server, wire, stream, conversation(wire, ["x"] * 4))
    assert (final.text, final.calls, uncached_input(wire, final.usage)) == ("All done.", [], 7)
    # A client that sent only some results of a turn moves on; it is never played again.
    partial = ask(server, wire, stream, conversation(wire, ["x"]))
    assert commands(partial) == ["echo b1"]
    log = log_of(tmp_path / "log.jsonl")
    assert [(e["turn"], e["calls"], e["commands"]) for e in log] == [
        (0, 3, ["echo a1", "echo a2", "echo a3"]),
        (1, 1, ["echo b1"]),
        (2, 0, []),
        (1, 1, ["echo b1"]),
    ]
    assert log[1]["answered"] == [f"{p}0003", f"{p}0001", f"{p}0002"]  # the client's order
    assert log[2]["answered"] == ["x"] and log[3]["answered"] == ["x"]


@EVERY_WIRE
def test_chosen_usage_gives_the_same_uncached_input_on_every_wire(
    serve: Any, wire: str, stream: bool
) -> None:
    figures = [
        TurnUsage(input=500, output=40, cache_read=2000, cache_write=300),
        TurnUsage(input=70, output=30, cache_read=2600),
        TurnUsage(input=90, output=15, cache_read=0, cache_write=50),
    ]
    session = ScriptedSession(
        turns=[
            Turn(run=["git init"], usage=figures[0]),
            Turn(run=["git status"], usage=figures[1]),
            Turn(say="Done.", usage=figures[2]),
        ],
        side_usage=TurnUsage(input=11, output=2, cache_read=5),
    )
    server = serve(session)
    for done, chosen in enumerate(figures):
        usage = ask(server, wire, stream, conversation(wire, ["r"] * done)).usage
        assert uncached_input(wire, usage) == chosen.input
        assert cache_read(wire, usage) == chosen.cache_read
        if wire == "messages":
            assert usage["output_tokens"] == chosen.output
            assert usage["cache_creation_input_tokens"] == chosen.cache_write
        else:  # no field for cache writes: left out, never folded into the input
            total = usage["prompt_tokens" if wire == "chat" else "input_tokens"]
            out = usage["completion_tokens" if wire == "chat" else "output_tokens"]
            assert (total, out) == (chosen.input + chosen.cache_read, chosen.output)
            assert usage["total_tokens"] == total + out
    side = ask(server, wire, stream, conversation(wire, [], tools=False))
    assert side.text == TITLE_TEXT
    assert (uncached_input(wire, side.usage), cache_read(wire, side.usage)) == (11, 5)


@EVERY_WIRE
def test_http_error_for_the_first_attempts_then_the_answer(
    serve: Any, wire: str, stream: bool, tmp_path: Path
) -> None:
    session = ScriptedSession(
        turns=[
            Turn(run=["git init"], error=HttpError(status=500, times=2)),
            Turn(
                run=["git status"],
                error=HttpError(
                    status=429, body={"why": "slow down"}, headers={"retry-after": "0"}
                ),
            ),
            Turn(run=["git log"], error=HttpError(status=503, body="upstream gone", times=1)),
        ]
    )
    server = serve(session)
    first = [ask(server, wire, stream, conversation(wire, [])) for _ in range(3)]
    assert [a.status for a in first] == [500, 500, 200]
    assert commands(first[2]) == ["git init"]
    message = "scripted HTTP 500: turn 1"
    if wire == "messages":
        assert first[0].body == {
            "type": "error",
            "error": {"type": "api_error", "message": message},
        }
    else:
        assert first[0].body == {
            "error": {"message": message, "type": "server_error", "param": None, "code": None}
        }
    limited = [ask(server, wire, stream, conversation(wire, ["r"])) for _ in range(2)]
    assert [(a.status, a.body, a.headers["retry-after"]) for a in limited] == [
        (429, {"why": "slow down"}, "0")
    ] * 2  # no `times`: every attempt
    gone = ask(server, wire, stream, conversation(wire, ["r", "r"]))
    assert (gone.status, gone.body, gone.headers["Content-Type"]) == (
        503,
        b"upstream gone",
        "text/plain; charset=utf-8",
    )
    assert commands(ask(server, wire, stream, conversation(wire, ["r", "r"]))) == ["git log"]
    log = log_of(tmp_path / "log.jsonl")
    assert [(e["turn"], e["attempt"], e["status"]) for e in log] == [
        (0, 1, 500),
        (0, 2, 500),
        (0, 3, 200),
        (1, 1, 429),
        (1, 2, 429),
        (2, 1, 503),
        (2, 2, 200),
    ]


@pytest.mark.parametrize("wire", WIRES)
def test_default_error_bodies_name_the_kind_of_error(serve: Any, wire: str) -> None:
    session = ScriptedSession(turns=[Turn(run=["x"], error=HttpError(status=429))])
    body = ask(serve(session), wire, False, conversation(wire, [])).body
    if wire == "messages":
        assert body["error"]["type"] == "rate_limit_error"
    else:
        assert (body["error"]["type"], body["error"]["code"]) == ("requests", "rate_limit_exceeded")


def stalls_after(server: ScriptedServer, wire: str, stream: bool, first_event: bool) -> bytes:
    """Send a request; read the status, headers and first event when `first_event`, then
    check that nothing more comes for a while. Returns what was read."""
    body = json.dumps({**conversation(wire, []), "stream": stream}).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(
            f"POST {PATHS[wire]} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        reader = sock.makefile("rb")
        lines: list[bytes] = []
        if first_event:
            while not lines or lines[-1] != b"\r\n":  # the status line and headers
                lines.append(reader.readline())
            while lines[-1] != b"\n":  # one SSE event, up to its blank line
                lines.append(reader.readline())
        sock.settimeout(0.5)  # the hang is 600 s: anything more within this is a failure
        with pytest.raises(TimeoutError):
            reader.readline()
    return b"".join(lines)


@EVERY_WIRE
def test_hang_before_the_answer_then_a_retry_is_answered(
    serve: Any, wire: str, stream: bool, tmp_path: Path
) -> None:
    session = ScriptedSession(turns=[Turn(run=["git init"], hang=Hang(secs=600, times=1))])
    server = serve(session)
    assert stalls_after(server, wire, stream, first_event=False) == b""  # not even a status
    assert commands(ask(server, wire, stream, conversation(wire, []))) == ["git init"]
    log = log_of(tmp_path / "log.jsonl")
    assert [(e["attempt"], e["hang_secs"], e["status"]) for e in log] == [
        (1, 600, 200),
        (2, None, 200),
    ]


@EVERY_WIRE
def test_hang_mid_stream_after_the_first_event(serve: Any, wire: str, stream: bool) -> None:
    session = ScriptedSession(turns=[Turn(run=["git init"], hang=Hang(secs=600, at="stream"))])
    server = serve(session)
    if not stream:  # a plain answer is held back whole
        assert stalls_after(server, wire, stream, first_event=False) == b""
        return
    head, _, rest = stalls_after(server, wire, stream, first_event=True).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and b"text/event-stream" in head
    first = {"messages": "message_start", "chat": None, "responses": "response.created"}[wire]
    (event,) = sse(rest)
    assert event[0] == first and (first is not None or event[1]["choices"][0]["delta"])


@EVERY_WIRE
def test_endless_session_never_gives_a_final_answer(
    serve: Any, wire: str, stream: bool, tmp_path: Path
) -> None:
    session = ScriptedSession(
        turns=[Turn(run=["git init", "git status"]), Turn(run=["git log"])], endless=True
    )
    server = serve(session)
    p = PREFIX[wire]
    for done, turn, call in ((0, 0, 1), (2, 1, 3), (3, 2, 4), (40, 39, 41)):
        answer = ask(server, wire, stream, conversation(wire, ["r"] * done))
        assert answer.calls[0][0] == f"{p}{call:04d}"
        assert commands(answer) == (["git init", "git status"] if turn == 0 else ["git log"])
        assert uncached_input(wire, answer.usage) == 1000 + 100 * turn
    assert [e["turn"] for e in log_of(tmp_path / "log.jsonl")] == [0, 1, 2, 39]


@EVERY_WIRE
def test_side_requests_and_retries_do_not_move_the_script(
    serve: Any, wire: str, stream: bool, tmp_path: Path
) -> None:
    session = ScriptedSession(
        turns=[
            Turn(run=["git init"]),
            Turn(run=["git add .", "git status"], error=HttpError(status=500, times=1)),
        ]
    )
    server = serve(session)
    ask(server, wire, stream, conversation(wire, []))
    # A title or compaction request offers no shell tool: plain text, whatever came before,
    # with the marker of how far the session is.
    marked = f"{TITLE_TEXT} [llmtt scripted: 1 turn played]"
    for _ in range(2):
        side = ask(server, wire, stream, conversation(wire, ["r"], tools=False))
        assert (side.status, side.text, side.calls) == (200, marked, [])
    # The side requests used none of turn 2's attempts: its first attempt still fails.
    retried = [ask(server, wire, stream, conversation(wire, ["r"])) for _ in range(3)]
    assert [a.status for a in retried] == [500, 200, 200]
    assert commands(retried[1]) == commands(retried[2]) == ["git add .", "git status"]
    log = log_of(tmp_path / "log.jsonl")
    assert [(e["side"], e["turn"], e["attempt"], e["status"], e["text"]) for e in log] == [
        (False, 0, 1, 200, None),
        (True, 1, 0, 200, marked),
        (True, 1, 0, 200, marked),
        (False, 1, 1, 500, None),
        (False, 1, 2, 200, None),
        (False, 1, 3, 200, None),
    ]
    assert all(e["tools"] == 0 for e in log if e["side"])


@EVERY_WIRE
def test_a_compacted_conversation_goes_on_from_the_marker_of_its_summary(
    serve: Any, wire: str, stream: bool, tmp_path: Path
) -> None:
    session = ScriptedSession(
        turns=[
            Turn(run=["echo a"]),
            Turn(run=["echo b1", "echo b2"]),
            Turn(run=["echo c"]),
            Turn(run=["echo d"]),
            Turn(say="Done."),
        ]
    )
    server = serve(session)
    p = PREFIX[wire]
    ids = [f"{p}{n:04d}" for n in range(1, 6)]
    assert commands(ask(server, wire, stream, conversation(wire, ids[:1]))) == [
        "echo b1",
        "echo b2",
    ]
    # The agent compacts: a side request holding the conversation so far, no tools.
    summary = ask(server, wire, stream, conversation(wire, ids[:3], tools=False)).text
    assert summary == f"{TITLE_TEXT} [llmtt scripted: 2 turns played]"
    # It goes on with the summary alone: turn 3 is played, ids and figures numbered on.
    after = ask(server, wire, stream, compacted(wire, [summary], []))
    assert (after.calls[0][0], commands(after)) == (ids[3], ["echo c"])
    assert uncached_input(wire, after.usage) == 1000 + 100 * 2
    # Asked again it answers the same; a result after the summary is turn 4.
    again = ask(server, wire, stream, compacted(wire, [summary], []))
    assert (again.calls, again.usage) == (after.calls, after.usage)
    assert commands(ask(server, wire, stream, compacted(wire, [summary], ids[3:4]))) == ["echo d"]
    # A second compaction: its summary states the higher count, and the results after it
    # count; a command's output that reads like a marker is not the model's and counts none.
    second = ask(server, wire, stream, compacted(wire, [summary], ids[3:5], tools=False)).text
    assert second == f"{TITLE_TEXT} [llmtt scripted: 4 turns played]"
    stale = f"{TITLE_TEXT} [llmtt scripted: 1 turn played]"
    last = compacted(wire, [second, stale], [], output="[llmtt scripted: 9 turns played]")
    assert ask(server, wire, stream, last).text == "Done."
    echoed = compacted(wire, [second], ["x"], output="[llmtt scripted: 9 turns played]")
    assert ask(server, wire, stream, echoed).text == "Done."
    log = log_of(tmp_path / "log.jsonl")
    assert [(e["played"], e["results"], e["side"], e["turn"]) for e in log] == [
        (0, 1, False, 1),
        (0, 3, True, 2),
        (2, 0, False, 2),
        (2, 0, False, 2),
        (2, 1, False, 3),
        (2, 2, True, 4),
        (4, 0, False, 4),
        (4, 1, False, 4),
    ]
    assert [e["attempt"] for e in log if not e["side"]] == [1, 1, 2, 1, 1, 2]


@pytest.mark.parametrize("wire", WIRES)
def test_a_conversation_written_out_as_text_counts_its_results(serve: Any, wire: str) -> None:
    # opencode's summary request: the conversation since its last summary as one text, each
    # finished call a `[Tool result]:` or `[Tool error]:` line, the prior summary after them.
    server = serve([f"echo {n}" for n in range(6)])
    flattened = (
        "Here is the conversation so far:\n\n<conversation>\n[User]: Continue.\n\n"
        '[Assistant tool call]: bash({"command":"echo 2"})\n[Tool result]: 2\n'
        '[Assistant tool call]: bash({"command":"echo 3"})\n[Tool error]: killed\n'
        '[Assistant tool call]: bash({"command":"echo 4"})\n</conversation>\n\n'
        "<prior-summary>\nSUMMARY\n</prior-summary>\n"
    )
    body = conversation(wire, [], tools=False)
    key = "input" if wire == "responses" else "messages"
    body[key][0]["content"] = flattened.replace("SUMMARY", f"{TITLE_TEXT} {played_marker(2)}")
    assert ask(server, wire, False, body).text == f"{TITLE_TEXT} {played_marker(4)}"
    body[key][0]["content"] = flattened.replace("SUMMARY", "")  # the first summary: from turn 0
    assert ask(server, wire, False, body).text == f"{TITLE_TEXT} {played_marker(2)}"


def test_markers_count_from_the_highest_and_past_the_turns_of_an_endless_session() -> None:
    session = ScriptedSession(turns=[Turn(run=["a", "b"]), Turn(run=["c"])], endless=True)
    bash = [("bash", CHAT_BASH["function"]["parameters"])]  # type: ignore[index]
    # Turn 5 (0-based) of an endless session: 2 + 4 calls before it.
    reply = answer(session, bash, 0, played=5)
    assert (reply.turn, reply.first_call, reply.commands) == (5, 6, ("c",))
    assert answer(session, bash, 1, played=5).turn == 6
    assert answer(session, [], 2, played=5).text == f"{TITLE_TEXT} [llmtt scripted: 7 turns played]"
    # A marker past the final answer of a session that ends: still the final answer.
    ended = ScriptedSession(turns=[Turn(run=["a"]), Turn(say="Done.")])
    assert answer(ended, bash, 0, played=40).text == "Done."
    assert answer(ended, [], 0).text == TITLE_TEXT  # no marker before the first turn


# -- the session format: validated, located in scenario files, part of the agent key ----------


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"turns": [{}]}, "a turn needs `say` (text), `run` (commands), `skill` or some of them"),
        (
            {"turns": [{"say": "hm"}, {"run": ["ls"]}]},
            "turn 1 calls no command, so it ends the agent's loop",
        ),
        ({"turns": [{"say": "hi"}], "endless": True}, "an endless session repeats its last turn"),
        ({"format": 2}, "Input should be 1"),
        ({"turns": [{"run": ["ls"], "usage": {"input": -1, "output": 0}}]}, "greater than or"),
        ({"turns": [{"run": ["ls"], "error": {"status": 200}}]}, "greater than or equal to 400"),
        ({"turns": [{"run": ["ls"], "hang": {"secs": 1, "at": "end"}}]}, "'start' or 'stream'"),
        ({"turns": [{"run": ["ls"], "calls": 2}]}, "Extra inputs are not permitted"),
    ],
)
def test_sessions_are_validated(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(message)):
        ScriptedSession.model_validate(data)


def test_a_scenarios_session_is_loaded_and_its_errors_located(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(
        "task: {prompt: go}\n"
        "scripted:\n"
        "  turns:\n"
        "    - say: Two at once.\n"
        "      run: [git init, git status]\n"
        "      usage: {input: 5, output: 1, cache_read: 9}\n"
        "    - run: [git log]\n"
        "      error: {status: 429, times: 1, headers: {retry-after: '0'}}\n"
    )
    session = load_scenario(good).spec.scripted
    assert session is not None and session.format == 1
    assert session.turns[0].usage == TurnUsage(input=5, output=1, cache_read=9)
    assert session.turns[1].error == HttpError(status=429, times=1, headers={"retry-after": "0"})
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "task: {prompt: go}\n"
        "scripted:\n"
        "  turns:\n"
        "    - run: [git init]\n"
        "      usage: {input: 5, output: -1}\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_scenario(bad)
    assert f"{bad}:5: scripted.turns[0].usage.output:" in str(caught.value)
    bad.write_text(
        "task: {prompt: go}\nscripted:\n  turns:\n    - say: stop here\n    - run: [ls]\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_scenario(bad)
    assert str(caught.value).startswith(f"{bad}:3: scripted.turns: turn 1 calls no command")


def test_the_session_is_part_of_the_scripted_runs_agent_key(project: Project) -> None:
    project.write("llmtt.toml", GIT_TOML)
    scenario = project.write(
        "scenarios/demo.yaml", "task: {prompt: go}\nsolution: [git init -q .]\n"
    )

    def keys() -> dict[str, str]:
        plan = build_plan(
            load_project(project.root),
            Selection(agents=("oracle", "litellm"), models=("scripted", "other")),
        )
        return {run.run_id: run.agent_key["solution"] for run in plan.runs}

    plain = keys()
    # Without a session the scripted model plays the solution: the oracle's key part.
    assert plain["demo/litellm-scripted/r1"] == plain["demo/oracle/r1"]
    assert plain["demo/litellm-other/r1"] == "unused"
    scenario.write_text(scenario.read_text() + "scripted: {turns: [{run: [git init]}]}\n")
    first = keys()
    scenario.write_text(scenario.read_text().replace("run: [git init]", "run: [git init, ls]"))
    second = keys()
    scripted = [k["demo/litellm-scripted/r1"] for k in (plain, first, second)]
    assert len(set(scripted)) == 3  # each edit of the session re-runs the scripted agent
    for run in ("demo/oracle/r1", "demo/litellm-other/r1"):
        assert plain[run] == first[run] == second[run]


def test_a_request_body_nested_too_deep_is_refused_as_not_json(tmp_path: Path) -> None:
    """Python's json raises RecursionError on it: the server once died on that request
    (the client saw its connection dropped) instead of answering 400."""
    depth = 100_000
    with ScriptedServer(["git init -q ."], log=tmp_path / "log.jsonl") as server:
        request = urllib.request.Request(
            server.url + "/v1/chat/completions",
            data=b"[" * depth + b"]" * depth,
            headers={"Content-Type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 400
        assert b"request body is not JSON" in refused.value.read()
