"""Approximate failures: whether a target command whose exit code is unknown shows a failure in
the output of its tool call (`git frobnicate | head` prints git's complaint; a transcript shows
what followed each command). Never an exit code: exit codes stay null when unknown, and the
rates count only known ones. Only the `no_transcript_errors` gate reads these, and its message
says when it did. docs/metrics.md, "Approximate failures", is the contract.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from llmtt.evaluation.shell.target_commands import TargetCommand
from llmtt.events import ToolResult

# At the start of a line of the output (column 0): what a failing program prints.
_FAILED = re.compile(
    r"(?:fatal|error|Error|ERROR|FATAL)(?:\[[^\]\n]*\]|\([^)\n]*\))?:(?:\s|$)"  # git, click, ...
    r"|Traceback \(most recent call last\):"  # a Python program's uncaught exception
)
# A line that is only an exit status as agents and shells word it: "Exit code 1", "[exit 2]",
# "Process exited with code 128", "exit status 1".
_EXIT = re.compile(
    r"\W*(?:process\s+)?exit(?:ed)?(?:\s+with)?(?:\s+(?:code|status))?\s*[:=]?\s*(-?\d{1,10})\W*",
    re.IGNORECASE,
)
_USAGE = re.compile(r"[Uu]sage: ")
_LINES = 2000  # the lines of an output looked at, from its start
_SHOWN = 200  # the characters of the line shown as the sign


@dataclass(frozen=True)
class Sign:
    """Target commands of one tool call whose exit is unknown, and the line of its output that
    shows that (one of) them failed."""

    commands: tuple[TargetCommand, ...]
    line: str


def failure_sign(output: str, binary: str | None, *, help: bool = False) -> str | None:
    """The first line of `output` that shows a failure, or None: a line starting `error:`,
    `fatal:` (with a code in brackets or parentheses), `Error:`, a Python traceback, the
    target's own complaint (`git: ...`), a shell's `git: command not found` (or not found, no
    such file, permission denied), a non-zero exit status on a line of its own, and, unless the
    command asked for help, a `usage:` line."""
    name = PurePosixPath(binary).name if binary else ""
    own = re.compile(re.escape(name) + r": ") if name else None
    missing = (
        re.compile(
            r"(?:^|: )"
            + re.escape(name)
            + r": (?:command not found|not found|No such file or directory|Permission denied)"
        )
        if name
        else None
    )
    for line in output.splitlines()[:_LINES]:
        text = line.rstrip()
        if not text:
            continue
        exited = _EXIT.fullmatch(text)
        if (
            _FAILED.match(text)
            or (own is not None and own.match(text))
            or (missing is not None and missing.search(text))
            or (exited is not None and int(exited.group(1)) != 0)
            or (not help and _USAGE.match(text))
        ):
            return text[:_SHOWN]
    return None


def failure_signs(
    calls: Sequence[tuple[Sequence[TargetCommand], ToolResult | None]], binary: str | None
) -> list[Sign]:
    """For each tool call with target commands whose exit is unknown, the sign of a failure
    its output shows, if any."""
    out = []
    for commands, result in calls:
        unknown = tuple(c for c in commands if c.exit_code is None)
        if not unknown or result is None or not result.output:
            continue
        line = failure_sign(result.output, binary, help=all(c.help for c in unknown))
        if line is not None:
            out.append(Sign(unknown, line))
    return out
