"""Anthropic Messages (claude-code): tools are `{name, input_schema}`, results are
`tool_result` blocks; cache reads and writes are counted apart from `input_tokens`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from llmtt.scripted.session import Reply
from llmtt.scripted.wire import Event, Part, Request, Wire, conversation, request, text_of
from llmtt.spec.scripted import TurnUsage

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def read(body: dict[str, Any]) -> Request:
    """Offered tools and the conversation: `tool_result` blocks of user messages are results,
    text blocks (and string contents) are text."""
    tools = [(t.get("name", ""), t.get("input_schema", {})) for t in body.get("tools") or []]
    return request(tools, conversation(body.get("messages"), _parts))


def _parts(message: dict[str, Any]) -> Iterator[Part]:
    content = message.get("content")
    if not isinstance(content, list):
        yield "text", text_of(content)
        return
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "tool_result" and message.get("role") == "user":
            yield "result", str(block.get("tool_use_id"))
        elif block.get("type") == "text":
            yield "text", text_of([block])


def usage(figures: TurnUsage) -> dict[str, int]:
    """Anthropic's usage: `input_tokens` is the uncached input, the cache apart."""
    return {
        "input_tokens": figures.input,
        "output_tokens": figures.output,
        "cache_creation_input_tokens": figures.cache_write,
        "cache_read_input_tokens": figures.cache_read,
    }


def answer(reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
    """The message: a text block (when the turn says something), then one `tool_use` a call."""
    content: list[dict[str, Any]] = []
    if reply.text is not None:
        content.append({"type": "text", "text": reply.text})
    for call_id, arguments in zip(reply.call_ids("toolu_"), reply.arguments, strict=True):
        content.append({"type": "tool_use", "id": call_id, "name": reply.tool, "input": arguments})
    return {
        "id": f"msg_scripted_{reply.turn + 1:04d}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "scripted"),
        "content": content,
        "stop_reason": "tool_use" if reply.commands else "end_turn",
        "stop_sequence": None,
        "usage": usage(reply.usage),
    }


def events(message: dict[str, Any], body: dict[str, Any]) -> Iterator[Event]:
    """The SSE events of one message: start, each block's start/delta/stop, delta, stop."""
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


def error(status: int, message: str) -> dict[str, Any]:
    """Anthropic's error object."""
    kind = ERROR_TYPES.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


WIRE = Wire("anthropic-messages", read, answer, events, error)
