"""What each wire format module provides to the server: one small record of functions, and
the reading of a request's conversation that the three share."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from llmtt.scripted.session import Reply, played_in

Tools = list[tuple[str, dict[str, Any]]]
Event = tuple[str | None, dict[str, Any]]  # (SSE event name or None, data)
# One piece of a conversation, in its order: a tool result (its call id) or some text.
Part = tuple[Literal["result", "text"], str]
# A tool result an agent wrote out as text: opencode flattens its conversation into one text
# for its summary request, a `[Tool result]: ...` (or `[Tool error]: ...`) line a finished call.
FLATTENED = re.compile(r"^\[Tool (?:result|error)\]: ", re.MULTILINE)
FLATTENED_ID = "(text)"  # the id of a result written out as text: it has none


@dataclass(frozen=True)
class Request:
    """What the session needs of a request: the tools it offers, the turns played by the
    highest marker in its conversation's text (0: none), and the ids of the tool results
    after that marker, in the client's order."""

    tools: Tools
    results: list[str] = field(default_factory=list)
    played: int = 0


@dataclass(frozen=True)
class Wire:
    """One wire format: read a request, shape an answer, stream it, shape an error."""

    name: str
    read: Callable[[dict[str, Any]], Request]
    answer: Callable[[Reply, dict[str, Any]], dict[str, Any]]
    events: Callable[[dict[str, Any], dict[str, Any]], Iterator[Event]]  # (answer, request)
    error: Callable[[int, str], dict[str, Any]]  # (status, message) -> body
    done: bytes = b""  # written after the last event


def request(tools: Tools, parts: Iterable[Part]) -> Request:
    """The request of a conversation given as its parts in order: results count from the
    highest marker on (from its last statement, when it is stated again).

    A text may hold results written out (FLATTENED): they count after the text's own marker,
    wherever it stands in the text, as the summary it is in summarizes what came before them
    (opencode writes its prior summary after the conversation it flattens)."""
    results: list[str] = []
    played = 0
    for kind, value in parts:
        if kind == "result":
            results.append(value)
            continue
        marker = played_in(value)
        if marker and marker >= played:
            results, played = [], marker
        results += [FLATTENED_ID] * len(FLATTENED.findall(value))
    return Request(tools, results, played)


def conversation(items: Any, parts: Callable[[dict[str, Any]], Iterator[Part]]) -> Iterator[Part]:
    """The parts of a conversation's `items` (messages or input items), each read by `parts`;
    a conversation given as one string is its text."""
    if isinstance(items, str):
        yield "text", items
    elif isinstance(items, list):
        for item in items:
            if isinstance(item, dict):
                yield from parts(item)


def text_of(content: Any) -> str:
    """The text of a message's content: a string, or the `text` of each of its parts."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(
        p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
    )
