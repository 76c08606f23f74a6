"""What a run's panel in report.html says of its failed tool calls: what each one said (the head
of its output), and, listed first, those that ran the target, the tool under test.

A `tool_result` event holds one `output`, stdout and stderr together as the agent saw them
(DESIGN.md, "Event log"): the panel shows it as such.
"""

from __future__ import annotations

from typing import Any

from llmtt.errors import LlmttError
from llmtt.evaluation.shell.target_commands import TargetMatcher, target_commands
from llmtt.report.render import paired_calls
from llmtt.spec.config import TargetSpec
from llmtt.util.text import Masks, strip_ansi

HEAD_LINES = 12  # what a failed call's output shows at most: its first lines,
HEAD_CHARS = 1500  # ... and of them, at most this many characters


def failed_calls(
    events: list[dict[str, Any]], target: TargetSpec, redact: Masks
) -> list[dict[str, Any]]:
    """The tool calls whose result exited non-zero, those holding a target command first (each
    part in the order of the run): command, exit code, `target`, and the head of the output
    (`output`) with the number of its lines not shown whole (`more_lines`). The output is
    masked before it is cut, so that no piece of a secret too short to be known survives."""
    matcher = TargetMatcher.of(target)
    out = []
    for call in paired_calls(events):
        if call["exit_code"] in (0, None):
            continue
        head, more = output_head(redact(str(call["output"])))
        out.append(
            {
                "command": call["command"],
                "exit_code": call["exit_code"],
                "target": _holds_target(call["command"], call["exit_code"], matcher),
                "output": head,
                "more_lines": more,
            }
        )
    return sorted(out, key=lambda call: not call["target"])


def output_head(text: str) -> tuple[str, int]:
    """The first `HEAD_LINES` lines of an output (terminal sequences removed, carriage returns
    as line ends), cut at `HEAD_CHARS` characters, and how many lines are not shown whole."""
    text = strip_ansi(text).replace("\r\n", "\n").replace("\r", "\n").strip("\n").rstrip()
    if not text:
        return "", 0
    lines = text.split("\n")
    head = "\n".join(lines[:HEAD_LINES])
    shown = min(len(lines), HEAD_LINES)
    if len(head) > HEAD_CHARS:
        whole = head[HEAD_CHARS] == "\n"  # the cut falls at a line's end
        head = head[:HEAD_CHARS]
        shown = head.count("\n") + whole
        head = head.rstrip("\n")
    return head, len(lines) - shown


def _holds_target(command: str, exit_code: int, matcher: TargetMatcher | None) -> bool:
    """Whether the call's line runs the target (DESIGN.md's target commands)."""
    if matcher is None:
        return False
    try:
        return bool(target_commands(command, exit_code, matcher))
    except LlmttError:  # a command_pattern that backtracks without end: evaluation said so
        return False
