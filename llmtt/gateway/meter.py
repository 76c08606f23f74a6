"""Usage read off the wire: what the provider itself reported for one request, in any of the
three wire formats the agents speak (Anthropic Messages, OpenAI Chat Completions, OpenAI
Responses), answered whole or streamed as server-sent events.

A streamed answer is read as its bytes pass, so a request the provider cut short still counts
what the wire had shown by then (an Anthropic stream's `message_start` input, the output of its
last `message_delta`); such a request is `complete=False`, its figures a lower bound. Figures
are normalised as llmtt's usage events hold them: `input_tokens` is the uncached input, cache
reads and writes apart.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

WIRES = {
    "/messages": "anthropic-messages",
    "/chat/completions": "openai-chat",
    "/responses": "openai-responses",
}


def wire_of(path: str) -> str | None:
    """The wire format of a request path (`/v1/messages`, `.../chat/completions`), or None."""
    bare = path.split("?", 1)[0].rstrip("/")
    return next((name for suffix, name in WIRES.items() if bare.endswith(suffix)), None)


@dataclass
class WireUsage:
    """One request's usage as the provider reported it (complete), or as far as the wire
    showed it before the answer ended early (not complete: a lower bound)."""

    wire: str
    model: str | None = None  # the model that answered, as the provider named it
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    complete: bool = False
    seen: bool = False  # any usage figure arrived

    def as_dict(self) -> dict[str, Any]:
        """The record's usage fields."""
        return {
            "wire": self.wire,
            "model": self.model,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "complete": self.complete,
        }


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _anthropic(usage: WireUsage, figures: Any) -> None:
    if not isinstance(figures, dict):
        return
    usage.seen = True
    # message_start holds the input; message_delta the output so far (cumulative), and on
    # some providers the input again.
    for name, key in (
        ("input_tokens", "input_tokens"),
        ("cache_write_tokens", "cache_creation_input_tokens"),
        ("cache_read_tokens", "cache_read_input_tokens"),
        ("output_tokens", "output_tokens"),
    ):
        if key in figures:
            setattr(usage, name, _int(figures[key]))


def _openai(usage: WireUsage, figures: Any, prompt: str, completion: str) -> None:
    """Chat (`prompt_tokens`) and Responses (`input_tokens`): the input holds the cached, and
    the cache writes of a provider that reports them on this wire (`cache_creation_input_tokens`,
    as Anthropic's OpenAI-compatible endpoint does)."""
    if not isinstance(figures, dict):
        return
    usage.seen = True
    details = figures.get(f"{prompt}_details") or {}
    cached = _int(details.get("cached_tokens")) if isinstance(details, dict) else 0
    written = _int(figures.get("cache_creation_input_tokens"))
    usage.input_tokens = max(0, _int(figures.get(prompt)) - cached - written)
    usage.cache_read_tokens = cached
    usage.cache_write_tokens = written
    usage.output_tokens = _int(figures.get(completion))


def read_body(wire: str, body: Any) -> WireUsage:
    """The usage of an answer given whole (a JSON object)."""
    usage = WireUsage(wire)
    if not isinstance(body, dict):
        return usage
    if isinstance(body.get("model"), str):
        usage.model = body["model"]
    if wire == "anthropic-messages":
        _anthropic(usage, body.get("usage"))
    elif wire == "openai-chat":
        _openai(usage, body.get("usage"), "prompt_tokens", "completion_tokens")
    else:
        _openai(usage, body.get("usage"), "input_tokens", "output_tokens")
    usage.complete = usage.seen
    return usage


@dataclass
class StreamMeter:
    """Reads a streamed answer's server-sent events as they pass, byte chunk by chunk."""

    wire: str
    usage: WireUsage = field(init=False)
    ended: bool = False  # the stream's own end arrived ([DONE], message_stop, a final response)
    _pending: bytes = b""
    _data: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.usage = WireUsage(self.wire)

    def feed(self, chunk: bytes) -> None:
        """Take the next bytes of the stream."""
        self._pending += chunk
        *lines, self._pending = self._pending.split(b"\n")
        for raw in lines:
            line = raw.rstrip(b"\r").decode("utf-8", errors="replace")
            if line == "":
                self._dispatch()
            elif line.startswith("data:"):
                self._data.append(line[5:].lstrip())

    def close(self) -> WireUsage:
        """The usage once the stream has ended (however it ended)."""
        self.feed(b"\n\n")
        return self.usage

    def _dispatch(self) -> None:
        data, self._data = "\n".join(self._data), []
        if not data or data == "[DONE]":
            if data == "[DONE]":
                self.ended = True
                if self.wire == "openai-chat" and self.usage.seen:
                    self.usage.complete = True
            return
        try:
            event = json.loads(data)
        except ValueError:
            return
        if isinstance(event, dict):
            self._event(event)

    def _event(self, event: dict[str, Any]) -> None:
        usage, kind = self.usage, event.get("type")
        if self.wire == "anthropic-messages":
            if kind == "message_start" and isinstance(event.get("message"), dict):
                message = event["message"]
                usage.model = (
                    message.get("model") if isinstance(message.get("model"), str) else None
                )
                _anthropic(usage, message.get("usage"))
            elif kind == "message_delta":
                _anthropic(usage, event.get("usage"))
            elif kind == "message_stop":
                self.ended = True
                usage.complete = usage.seen
        elif self.wire == "openai-chat":
            if isinstance(event.get("model"), str):
                usage.model = event["model"]
            if event.get("usage"):
                _openai(usage, event["usage"], "prompt_tokens", "completion_tokens")
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            self.ended = True
            response = event.get("response")
            if isinstance(response, dict):
                if isinstance(response.get("model"), str):
                    usage.model = response["model"]
                _openai(usage, response.get("usage"), "input_tokens", "output_tokens")
                usage.complete = usage.seen
