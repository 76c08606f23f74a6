"""OpenAI Responses (codex): tools are `{type: function, name, parameters}`, results are
`function_call_output` input items; cached tokens are counted inside `input_tokens`."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

from llmtt.scripted.chat import error
from llmtt.scripted.session import Reply
from llmtt.scripted.wire import Event, Part, Request, Wire, conversation, request, text_of
from llmtt.spec.scripted import TurnUsage

OUTPUT_ITEMS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")


def read(body: dict[str, Any]) -> Request:
    """Offered tools and the input items: tool outputs are results, messages' content is
    text (an input given as one string is text too)."""
    tools = [
        (t.get("name", t.get("type", "")), t.get("parameters", {})) for t in body.get("tools") or []
    ]
    return request(tools, conversation(body.get("input"), _parts))


def _parts(item: dict[str, Any]) -> Iterator[Part]:
    kind = item.get("type", "message")
    if kind in OUTPUT_ITEMS:
        yield "result", str(item.get("call_id"))
    elif kind == "message":
        yield "text", text_of(item.get("content"))


def usage(figures: TurnUsage) -> dict[str, Any]:
    """The Responses usage: `input_tokens` holds the cached tokens too; cache writes have no
    field and are left out, so `input_tokens - cached_tokens` is the uncached input."""
    total_in = figures.input + figures.cache_read
    return {
        "input_tokens": total_in,
        "input_tokens_details": {"cached_tokens": figures.cache_read},
        "output_tokens": figures.output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": total_in + figures.output,
    }


def answer(reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
    """The response: a message item (when the turn says something), then a `function_call`
    item a call, in order."""
    output: list[dict[str, Any]] = []
    if reply.text is not None:
        output.append(
            {
                "type": "message",
                "id": f"msg_{reply.turn + 1:04d}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
            }
        )
    for number, arguments in enumerate(reply.arguments, start=reply.first_call + 1):
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{number:04d}",
                "call_id": f"call_{number:04d}",
                "name": reply.tool,
                "arguments": json.dumps(arguments),
                "status": "completed",
            }
        )
    return {
        "id": f"resp_scripted_{reply.turn + 1:04d}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "model": body.get("model", "scripted"),
        "output": output,
        "usage": usage(reply.usage),
    }


def events(response: dict[str, Any], body: dict[str, Any]) -> Iterator[Event]:
    """The SSE events of one response: created, in progress, each item, completed."""
    pending = {**response, "status": "in_progress", "output": [], "usage": None}
    yield _event("response.created", response=pending)
    yield _event("response.in_progress", response=pending)
    for index, item in enumerate(response["output"]):
        if item["type"] == "function_call":
            yield from _call_events(index, item)
        else:
            yield from _message_events(index, item)
        yield _event("response.output_item.done", output_index=index, item=item)
    yield _event("response.completed", response=response)


def _event(kind: str, **fields: Any) -> Event:
    """One SSE event: its name is also its data's `type`."""
    return kind, {"type": kind, **fields}


def _call_events(index: int, item: dict[str, Any]) -> Iterator[Event]:
    added = {**item, "arguments": "", "status": "in_progress"}
    arguments = item["arguments"]
    where = {"output_index": index, "item_id": item["id"]}
    yield _event("response.output_item.added", output_index=index, item=added)
    yield _event("response.function_call_arguments.delta", **where, delta=arguments)
    yield _event("response.function_call_arguments.done", **where, arguments=arguments)


def _message_events(index: int, item: dict[str, Any]) -> Iterator[Event]:
    part = item["content"][0]
    where = {"item_id": item["id"], "output_index": index, "content_index": 0}
    added = {**item, "content": [], "status": "in_progress"}
    empty = {"type": "output_text", "text": "", "annotations": []}
    yield _event("response.output_item.added", output_index=index, item=added)
    yield _event("response.content_part.added", **where, part=empty)
    yield _event("response.output_text.delta", **where, delta=part["text"])
    yield _event("response.output_text.done", **where, text=part["text"])
    yield _event("response.content_part.done", **where, part=part)


WIRE = Wire("openai-responses", read, answer, events, error)
