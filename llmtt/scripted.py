"""The `scripted` model: an offline model server on 127.0.0.1 that plays a scenario's solution.

It speaks the three wire formats the real agent CLIs use: Anthropic Messages (claude-code),
OpenAI Chat Completions (opencode) and OpenAI Responses (codex), streamed (SSE) or plain. Each
answer is decided from the request alone: the number of tool results already in the
conversation says which solution command comes next, so side requests (titles, retries)
cannot derail it. A request that offers no shell tool gets plain text. Token counts are
fixed per turn, so a run's usage is the same on every machine; a scripted run costs nothing.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from llmtt.atomic import open_private

FINAL_TEXT = "Done: every step of the task has been carried out."
TITLE_TEXT = "Scripted session"
SHELL_TOOLS = ("Bash", "bash", "exec_command", "shell", "local_shell")
INPUT_TOKENS_BASE = 1000
INPUT_TOKENS_PER_TURN = 100
OUTPUT_TOKENS_TOOL = 20
OUTPUT_TOKENS_TEXT = 10


@dataclass(frozen=True)
class Reply:
    """What the script answers to one request: a shell call, or text."""

    turn: int
    command: str | None
    tool: str | None
    arguments: dict[str, Any] | None
    text: str | None

    @property
    def usage(self) -> tuple[int, int]:
        """(input, output) tokens: fixed per turn, whatever the request's size."""
        out = OUTPUT_TOKENS_TOOL if self.command is not None else OUTPUT_TOKENS_TEXT
        return INPUT_TOKENS_BASE + INPUT_TOKENS_PER_TURN * self.turn, out


class Script:
    """A solution to play: one command per turn, then a final text."""

    def __init__(self, commands: Sequence[str]) -> None:
        self.commands = list(commands)

    def reply(self, tools: list[tuple[str, dict[str, Any]]], done: int) -> Reply:
        """The answer to a request offering `tools` after `done` tool results."""
        shell = next(((n, s) for n, s in tools if n in SHELL_TOOLS), None)
        if shell is None:
            return Reply(done, None, None, None, TITLE_TEXT)
        if done >= len(self.commands):
            return Reply(done, None, None, None, FINAL_TEXT)
        command = self.commands[done]
        name, schema = shell
        return Reply(done, command, name, shell_arguments(name, schema, command), None)


def shell_arguments(name: str, schema: dict[str, Any], command: str) -> dict[str, Any]:
    """Arguments shaped from the tool's schema: `{command}`, `{cmd}` or an argv array."""
    props = schema.get("properties", {}) if isinstance(schema, dict) else {}
    if "cmd" in props or (name == "exec_command" and "command" not in props):
        return {"cmd": command}
    if props.get("command", {}).get("type") == "array" or name in ("shell", "local_shell"):
        return {"command": ["bash", "-lc", command]}
    return {"command": command}


# -- the three wire formats ------------------------------------------------------------------


def anthropic_reply(script: Script, body: dict[str, Any]) -> tuple[Reply, dict[str, Any]]:
    """Anthropic Messages: tools are `{name, input_schema}`, results are `tool_result` blocks."""
    tools = [(t.get("name", ""), t.get("input_schema", {})) for t in body.get("tools") or []]
    done = sum(
        1
        for m in body.get("messages", [])
        if m.get("role") == "user" and isinstance(m.get("content"), list)
        for block in m["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    )
    reply = script.reply(tools, done)
    tokens_in, tokens_out = reply.usage
    if reply.command is not None:
        content: list[dict[str, Any]] = [
            {
                "type": "tool_use",
                "id": f"toolu_{done + 1:04d}",
                "name": reply.tool,
                "input": reply.arguments,
            }
        ]
        stop = "tool_use"
    else:
        content = [{"type": "text", "text": reply.text}]
        stop = "end_turn"
    message = {
        "id": f"msg_scripted_{done + 1:04d}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "scripted"),
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {
            "input_tokens": tokens_in,
            "output_tokens": tokens_out,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }
    return reply, message


def anthropic_events(message: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The SSE events of one Anthropic message."""
    start = {
        **message,
        "content": [],
        "stop_reason": None,
        "usage": {**message["usage"], "output_tokens": 1},
    }
    yield "message_start", {"type": "message_start", "message": start}
    for index, block in enumerate(message["content"]):
        if block["type"] == "tool_use":
            empty = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            empty = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        yield (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": empty},
        )
        yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": message["usage"]["output_tokens"]},
        },
    )
    yield "message_stop", {"type": "message_stop"}


def chat_reply(script: Script, body: dict[str, Any]) -> tuple[Reply, dict[str, Any]]:
    """OpenAI Chat Completions: tools are `{function: {name, parameters}}`, results `role: tool`."""
    tools = [
        (t.get("function", {}).get("name", ""), t.get("function", {}).get("parameters", {}))
        for t in body.get("tools") or []
    ]
    done = sum(1 for m in body.get("messages", []) if m.get("role") == "tool")
    reply = script.reply(tools, done)
    tokens_in, tokens_out = reply.usage
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    if reply.command is not None:
        message["tool_calls"] = [
            {
                "id": f"call_{done + 1:04d}",
                "type": "function",
                "function": {"name": reply.tool, "arguments": json.dumps(reply.arguments)},
            }
        ]
    completion = {
        "id": f"chatcmpl-scripted-{done + 1:04d}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "scripted"),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if reply.command else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": tokens_in,
            "completion_tokens": tokens_out,
            "total_tokens": tokens_in + tokens_out,
        },
    }
    return reply, completion


def chat_chunks(completion: dict[str, Any], include_usage: bool) -> Iterator[dict[str, Any]]:
    """The stream of one chat completion: role, content or tool-call deltas, finish, usage."""
    base = {k: completion[k] for k in ("id", "created", "model")}
    base["object"] = "chat.completion.chunk"
    choice = completion["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    if message.get("tool_calls"):
        call = message["tool_calls"][0]
        yield chunk(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "index": 0,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["function"]["name"], "arguments": ""},
                    }
                ],
            }
        )
        yield chunk(
            {"tool_calls": [{"index": 0, "function": {"arguments": call["function"]["arguments"]}}]}
        )
    else:
        yield chunk({"role": "assistant", "content": ""})
        yield chunk({"content": message["content"]})
    yield chunk({}, choice["finish_reason"])
    if include_usage:
        yield {**base, "choices": [], "usage": completion["usage"]}


def responses_reply(script: Script, body: dict[str, Any]) -> tuple[Reply, dict[str, Any]]:
    """OpenAI Responses: tools are `{type: function, name, parameters}`, results are
    `function_call_output` input items."""
    tools = [
        (t.get("name", t.get("type", "")), t.get("parameters", {})) for t in body.get("tools") or []
    ]
    items = body.get("input")
    done = (
        sum(
            1
            for item in items
            if isinstance(item, dict)
            and item.get("type")
            in ("function_call_output", "custom_tool_call_output", "local_shell_call_output")
        )
        if isinstance(items, list)
        else 0
    )
    reply = script.reply(tools, done)
    tokens_in, tokens_out = reply.usage
    output: list[dict[str, Any]]
    if reply.command is not None:
        output = [
            {
                "type": "function_call",
                "id": f"fc_{done + 1:04d}",
                "call_id": f"call_{done + 1:04d}",
                "name": reply.tool,
                "arguments": json.dumps(reply.arguments),
                "status": "completed",
            }
        ]
    else:
        output = [
            {
                "type": "message",
                "id": f"msg_{done + 1:04d}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
            }
        ]
    response = {
        "id": f"resp_scripted_{done + 1:04d}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "model": body.get("model", "scripted"),
        "output": output,
        "usage": {
            "input_tokens": tokens_in,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": tokens_out,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": tokens_in + tokens_out,
        },
    }
    return reply, response


def responses_events(response: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The SSE events of one Responses answer."""
    pending = {**response, "status": "in_progress", "output": [], "usage": None}
    yield "response.created", {"type": "response.created", "response": pending}
    yield "response.in_progress", {"type": "response.in_progress", "response": pending}
    for index, item in enumerate(response["output"]):
        if item["type"] == "function_call":
            yield (
                "response.output_item.added",
                {
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": {**item, "arguments": "", "status": "in_progress"},
                },
            )
            yield (
                "response.function_call_arguments.delta",
                {
                    "type": "response.function_call_arguments.delta",
                    "output_index": index,
                    "item_id": item["id"],
                    "delta": item["arguments"],
                },
            )
            yield (
                "response.function_call_arguments.done",
                {
                    "type": "response.function_call_arguments.done",
                    "output_index": index,
                    "item_id": item["id"],
                    "arguments": item["arguments"],
                },
            )
        else:
            text = item["content"][0]["text"]
            yield (
                "response.output_item.added",
                {
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": {**item, "content": [], "status": "in_progress"},
                },
            )
            yield (
                "response.content_part.added",
                {
                    "type": "response.content_part.added",
                    "item_id": item["id"],
                    "output_index": index,
                    "content_index": 0,
                    "part": {"type": "output_text", "text": "", "annotations": []},
                },
            )
            yield (
                "response.output_text.delta",
                {
                    "type": "response.output_text.delta",
                    "item_id": item["id"],
                    "output_index": index,
                    "content_index": 0,
                    "delta": text,
                },
            )
            yield (
                "response.output_text.done",
                {
                    "type": "response.output_text.done",
                    "item_id": item["id"],
                    "output_index": index,
                    "content_index": 0,
                    "text": text,
                },
            )
            yield (
                "response.content_part.done",
                {
                    "type": "response.content_part.done",
                    "item_id": item["id"],
                    "output_index": index,
                    "content_index": 0,
                    "part": item["content"][0],
                },
            )
        yield (
            "response.output_item.done",
            {"type": "response.output_item.done", "output_index": index, "item": item},
        )
    yield "response.completed", {"type": "response.completed", "response": response}


# -- the HTTP server ------------------------------------------------------------------------


class ScriptedServer:
    """The server, on 127.0.0.1 and a free port, in a background thread."""

    def __init__(self, commands: Sequence[str], log: Path | None = None, port: int = 0) -> None:
        self.script = Script(commands)
        self._log = log
        self._lock = threading.Lock()
        handler = type("Handler", (_Handler,), {"server_ref": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The port it listens on."""
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """Base URL, without a path."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ScriptedServer:
        """Serve in a daemon thread."""
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def record(self, entry: dict[str, Any]) -> None:
        """Append one request to the log (JSON lines)."""
        if self._log is None:
            return
        with self._lock, open_private(self._log, append=True) as handle:
            handle.write((json.dumps(entry) + "\n").encode())


class _Handler(BaseHTTPRequestHandler):
    server_ref: ScriptedServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - base signature
        """Quiet: requests go to the run's log instead of stderr."""

    def do_HEAD(self) -> None:  # noqa: N802 - http.server's naming
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:  # noqa: N802
        path = self.path.split("?")[0].rstrip("/")
        if path.endswith("/models"):
            self._json({"object": "list", "data": [{"id": "scripted", "object": "model"}]})
        else:
            self._json({"ok": True, "server": "llmtt scripted"})

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._json({"error": {"message": "request body is not JSON"}}, status=400)
            return
        path = self.path.split("?")[0].rstrip("/")
        stream = bool(body.get("stream"))
        if path.endswith("/messages"):
            reply, message = anthropic_reply(self.server_ref.script, body)
            self._log(path, body, reply)
            if stream:
                self._sse(anthropic_events(message))
            else:
                self._json(message)
        elif path.endswith("/chat/completions"):
            reply, completion = chat_reply(self.server_ref.script, body)
            self._log(path, body, reply)
            if stream:
                include = bool((body.get("stream_options") or {}).get("include_usage"))
                self._sse((None, c) for c in chat_chunks(completion, include))
                return
            self._json(completion)
        elif path.endswith("/responses"):
            reply, response = responses_reply(self.server_ref.script, body)
            self._log(path, body, reply)
            if stream:
                self._sse(responses_events(response))
            else:
                self._json(response)
        else:
            self._json({"error": {"message": f"no such endpoint: {path}"}}, status=404)

    def _log(self, path: str, body: dict[str, Any], reply: Reply) -> None:
        self.server_ref.record(
            {
                "ts": round(time.time(), 3),
                "path": path,
                "model": body.get("model"),
                "stream": bool(body.get("stream")),
                "turn": reply.turn,
                "command": reply.command,
                "text": reply.text,
                "tools": len(body.get("tools") or []),
            }
        )

    def _json(self, value: Any, status: int = 200) -> None:
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _sse(self, events: Any) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        for name, data in events:
            prefix = f"event: {name}\n" if name else ""
            self.wfile.write(f"{prefix}data: {json.dumps(data)}\n\n".encode())
        if "chat" in self.path:
            self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True
