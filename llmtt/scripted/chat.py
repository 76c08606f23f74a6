"""OpenAI Chat Completions (opencode, litellm): tools are `{function: {name, parameters}}`,
results are `role: tool` messages; cached tokens are counted inside `prompt_tokens`."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

from llmtt.scripted.session import Reply
from llmtt.scripted.wire import Event, Part, Request, Wire, conversation, request, text_of
from llmtt.spec.scripted import TurnUsage


def read(body: dict[str, Any]) -> Request:
    """Offered tools and the conversation: `role: tool` messages are results, the content of
    the others is text."""
    tools = [
        (t.get("function", {}).get("name", ""), t.get("function", {}).get("parameters", {}))
        for t in body.get("tools") or []
    ]
    return request(tools, conversation(body.get("messages"), _parts))


def _parts(message: dict[str, Any]) -> Iterator[Part]:
    if message.get("role") == "tool":
        yield "result", str(message.get("tool_call_id"))
    else:
        yield "text", text_of(message.get("content"))


def usage(figures: TurnUsage) -> dict[str, Any]:
    """OpenAI's usage: `prompt_tokens` holds the cached tokens too. There is no field for
    cache writes, so they are left out: `prompt_tokens - cached_tokens` is the uncached input,
    the same figure as Anthropic's `input_tokens`."""
    prompt = figures.input + figures.cache_read
    return {
        "prompt_tokens": prompt,
        "completion_tokens": figures.output,
        "total_tokens": prompt + figures.output,
        "prompt_tokens_details": {"cached_tokens": figures.cache_read},
    }


def answer(reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
    """The completion: the turn's text as `content`, its calls as `tool_calls`, in order."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    if reply.commands:
        message["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": reply.tool, "arguments": json.dumps(arguments)},
            }
            for call_id, arguments in zip(reply.call_ids("call_"), reply.arguments, strict=True)
        ]
    return {
        "id": f"chatcmpl-scripted-{reply.turn + 1:04d}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "scripted"),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if reply.commands else "stop",
            }
        ],
        "usage": usage(reply.usage),
    }


def events(completion: dict[str, Any], body: dict[str, Any]) -> Iterator[Event]:
    """The chunks of one completion: role, content, each call's header and arguments, the
    finish reason, and the usage when `stream_options.include_usage` asks for it."""
    base = {k: completion[k] for k in ("id", "created", "model")}
    base["object"] = "chat.completion.chunk"
    choice = completion["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> Event:
        return None, {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    first: dict[str, Any] = {"role": "assistant", "content": None}
    if message["content"] is not None:
        yield chunk({"role": "assistant", "content": ""})
        yield chunk({"content": message["content"]})
        first = {}
    for index, call in enumerate(message.get("tool_calls") or []):
        header = {
            "index": index,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["function"]["name"], "arguments": ""},
        }
        yield chunk({**first, "tool_calls": [header]})
        first = {}
        arguments = call["function"]["arguments"]
        yield chunk({"tool_calls": [{"index": index, "function": {"arguments": arguments}}]})
    yield chunk({}, choice["finish_reason"])
    if (body.get("stream_options") or {}).get("include_usage"):
        yield None, {**base, "choices": [], "usage": completion["usage"]}


def error(status: int, message: str) -> dict[str, Any]:
    """OpenAI's error object."""
    if status == 429:
        kind, code = "requests", "rate_limit_exceeded"
    elif status == 401:
        kind, code = "invalid_request_error", "invalid_api_key"
    else:
        kind, code = ("server_error" if status >= 500 else "invalid_request_error"), None
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


WIRE = Wire("openai-chat", read, answer, events, error, done=b"data: [DONE]\n\n")
