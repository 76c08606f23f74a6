"""The fallback when an agent gives no structured events: the commands a transcript shows run.

Only a line that starts with the agent's command marker (a prompt, `$ ` by default) is a
command, once terminal control sequences are gone and carriage returns have overwritten what
they overwrite; lines inside Markdown code fences are the agent's prose. Each such line is one
tool call, which layer 1 splits like any other, and the lines after it, up to the next command,
its result's output. Exit codes cannot be seen in free text, so they stay null (unknown), never
guessed; the `no_transcript_errors` gate reads that output for signs of a failure
(`llmtt.evaluation.approximate`). docs/metrics.md, "Transcript fallback", is the contract.
"""

from __future__ import annotations

import re

from llmtt.events import Event, ToolCall, ToolResult, clip

DEFAULT_MARKER = "$ "
_SEQUENCE = re.compile(
    r"(?P<erase>\x1b\[(?P<mode>[012]?)K)"  # erase in line
    r"|\x1b\][^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"  # OSC (title, hyperlink): to BEL or ST
    r"|\x9d[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"  # the same, 8-bit
    r"|\x1b[PX^_][^\x1b\x9c\n]*(?:\x1b\\|\x9c)?"  # DCS, SOS, PM, APC strings
    r"|\x1b\[[0-?]*[ -/]*[@-~]|\x9b[0-?]*[ -/]*[@-~]"  # CSI (colours, cursor), 7- and 8-bit
    r"|\x1b[ -/]*[0-~]"  # the other escape sequences (`ESC ( B`, `ESC =`, `ESC 7`, ...)
    r"|\x1b"  # an escape that starts nothing complete
    r"|(?P<cr>\r)|(?P<bs>\x08)"
    r"|[\x00-\x07\x0b-\x0c\x0e-\x1f\x7f]"  # other control characters
)
_FENCE = re.compile(r"\s*(```|~~~)")


def transcript_events(text: str, marker: str = DEFAULT_MARKER) -> list[Event]:
    """One synthetic tool call per transcript line that starts with `marker` (the shell tool,
    whose name in the agent is not known), each with a result: the lines shown after it, up to
    the next command, and an unknown exit code."""
    events: list[Event] = []
    fenced = False
    call: str | None = None  # the id of the last command, whose output is being read
    output: list[str] = []
    for number, raw in enumerate(text.split("\n"), start=1):
        line = render(raw)
        command = ""
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and line.startswith(marker):
            command = line[len(marker) :].strip()
        if not command:
            if call is not None:
                output.append(line)
            continue
        if call is not None:
            events.append(_result(call, output))
        call, output = f"line_{number}", []
        events.append(ToolCall(ts=0.0, event="tool_call", id=call, command=command))
    if call is not None:
        events.append(_result(call, output))
    return events


def _result(call: str, output: list[str]) -> ToolResult:
    text = clip("\n".join(output).strip("\n"))
    return ToolResult(ts=0.0, event="tool_result", id=call, output=text, exit_code=None)


def render(line: str) -> str:
    """What a terminal shows of one line: control sequences gone, carriage returns and
    backspaces moving the cursor back so that later text overwrites earlier text."""
    if not _SEQUENCE.search(line):
        return line
    shown: list[str] = []
    cursor = 0
    at = 0
    for match in _SEQUENCE.finditer(line):
        cursor = _write(shown, cursor, line[at : match.start()])
        at = match.end()
        if match.group("cr"):
            cursor = 0
        elif match.group("bs"):
            cursor = max(cursor - 1, 0)
        elif match.group("erase") is not None:
            mode = match.group("mode")
            if mode == "2":
                shown[:] = [" "] * len(shown)
            elif mode == "1":
                shown[: cursor + 1] = [" "] * min(cursor + 1, len(shown))
            else:
                del shown[cursor:]
    _write(shown, cursor, line[at:])
    return "".join(shown).rstrip()


def _write(shown: list[str], cursor: int, text: str) -> int:
    """Overwrite from `cursor` on (padding with spaces past the end); the new cursor."""
    if len(shown) < cursor:
        shown.extend(" " * (cursor - len(shown)))
    shown[cursor : cursor + len(text)] = text
    return cursor + len(text)
