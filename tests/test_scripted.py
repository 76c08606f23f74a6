"""The scripted model server over real HTTP on 127.0.0.1: the three wire formats."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from llmtt.scripted import FINAL_TEXT, TITLE_TEXT, ScriptedServer, shell_arguments

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


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ScriptedServer]:
    with ScriptedServer(COMMANDS, log=tmp_path / "log.jsonl") as srv:
        yield srv


def post(server: ScriptedServer, path: str, body: dict[str, Any]) -> tuple[str, bytes]:
    request = urllib.request.Request(
        server.url + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.headers.get("Content-Type", ""), response.read()


def sse(raw: bytes) -> list[dict[str, Any]]:
    return [
        json.loads(line[6:]) for line in raw.decode().splitlines() if line.startswith("data: {")
    ]


def test_anthropic_plain_counts_tool_results(server: ScriptedServer) -> None:
    first = json.loads(
        post(
            server,
            "/v1/messages",
            {"model": "m", "tools": [BASH], "messages": [{"role": "user", "content": "go"}]},
        )[1]
    )
    assert first["content"] == [
        {"type": "tool_use", "id": "toolu_0001", "name": "Bash", "input": {"command": "git init"}}
    ]
    assert first["stop_reason"] == "tool_use" and first["usage"]["input_tokens"] == 1000
    done = [
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": "ok"}],
        }
        for i in range(2)
    ]
    last = json.loads(
        post(server, "/v1/messages?beta=true", {"tools": [BASH], "messages": done})[1]
    )
    assert (
        last["content"] == [{"type": "text", "text": FINAL_TEXT}]
        and last["usage"]["input_tokens"] == 1200
    )


def test_anthropic_stream_and_title_request(server: ScriptedServer) -> None:
    kind, raw = post(server, "/v1/messages", {"stream": True, "tools": [BASH], "messages": []})
    assert kind == "text/event-stream"
    types = [e["type"] for e in sse(raw)]
    assert types == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    delta = sse(raw)[2]["delta"]
    assert json.loads(delta["partial_json"]) == {"command": "git init"}
    title = json.loads(
        post(server, "/v1/messages", {"messages": [{"role": "user", "content": "name this"}]})[1]
    )
    assert title["content"][0]["text"] == TITLE_TEXT


def test_chat_completions_stream_with_tool_call_deltas_and_usage(server: ScriptedServer) -> None:
    body = {
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": [CHAT_BASH],
        "messages": [{"role": "user", "content": "go"}, {"role": "tool", "content": "ok"}],
    }
    _, raw = post(server, "/v1/chat/completions", body)
    chunks = sse(raw)
    assert raw.decode().rstrip().endswith("data: [DONE]")
    call = chunks[0]["choices"][0]["delta"]["tool_calls"][0]
    assert call["function"]["name"] == "bash" and call["id"] == "call_0002"
    assert json.loads(
        chunks[1]["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"]
    ) == {"command": "git status"}
    assert chunks[2]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[3]["usage"] == {
        "prompt_tokens": 1100,
        "completion_tokens": 20,
        "total_tokens": 1120,
    }
    plain = json.loads(post(server, "/v1/chat/completions", {**body, "stream": False})[1])
    assert plain["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "bash"


def test_responses_stream_function_call_then_message(server: ScriptedServer) -> None:
    _, raw = post(server, "/v1/responses", {"stream": True, "tools": [EXEC], "input": []})
    events = sse(raw)
    done = [e for e in events if e["type"] == "response.output_item.done"][0]["item"]
    assert done["name"] == "exec_command" and json.loads(done["arguments"]) == {"cmd": "git init"}
    assert events[-1]["type"] == "response.completed"
    outputs = [{"type": "function_call_output", "call_id": "c", "output": "ok"}] * 2
    final = json.loads(post(server, "/v1/responses", {"tools": [EXEC], "input": outputs})[1])
    assert final["output"][0]["content"][0]["text"] == FINAL_TEXT


def test_requests_are_logged_and_unknown_paths_are_404(
    server: ScriptedServer, tmp_path: Path
) -> None:
    post(server, "/v1/messages", {"tools": [BASH], "messages": []})
    with pytest.raises(urllib.error.HTTPError) as caught:
        post(server, "/v2/nothing", {})
    assert caught.value.code == 404
    log = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert log[0]["command"] == "git init" and log[0]["path"] == "/v1/messages"


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
