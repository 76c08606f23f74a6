"""What each wire format module provides to the server: one small record of functions."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from llmtt.scripted.session import Reply

Tools = list[tuple[str, dict[str, Any]]]
Event = tuple[str | None, dict[str, Any]]  # (SSE event name or None, data)


@dataclass(frozen=True)
class Wire:
    """One wire format: read a request, shape an answer, stream it, shape an error."""

    name: str
    read: Callable[[dict[str, Any]], tuple[Tools, list[str]]]  # -> (tools, tool result ids)
    answer: Callable[[Reply, dict[str, Any]], dict[str, Any]]
    events: Callable[[dict[str, Any], dict[str, Any]], Iterator[Event]]  # (answer, request)
    error: Callable[[int, str], dict[str, Any]]  # (status, message) -> body
    done: bytes = b""  # written after the last event


def result_ids(items: Any, kinds: tuple[str, ...], key: str, id_key: str) -> list[str]:
    """The ids (`id_key`) of the dicts in `items` whose `key` is one of `kinds`, in order."""
    if not isinstance(items, list):
        return []
    return [
        str(item.get(id_key)) for item in items if isinstance(item, dict) and item.get(key) in kinds
    ]
