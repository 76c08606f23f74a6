"""The fallback when an agent gives no structured events: target commands found by regex.

Exit codes cannot be seen in free text, so they stay null (unknown), never guessed.
"""

from __future__ import annotations

import re

from llmtt.events import Event, ToolCall

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def transcript_events(text: str, pattern: str | None) -> list[Event]:
    """One synthetic tool call per transcript line that invokes the target."""
    if pattern is None:
        return []
    regex = re.compile(pattern)
    events: list[Event] = []
    for number, line in enumerate(_ANSI.sub("", text).splitlines(), start=1):
        match = regex.search(line)
        if match:
            command = line[match.start() :].strip()
            events.append(ToolCall(ts=0.0, event="tool_call", id=f"line_{number}", command=command))
    return events
