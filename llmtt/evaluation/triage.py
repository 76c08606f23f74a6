"""Why a failed run failed, by rule and for free: from its events alone, the first target command
that exited non-zero (its exit code, the head of what it printed, the command the agent ran
next, or that it stopped), else the first gate that failed; in one line for evaluation.md and
the reports (docs/metrics.md, "triage"). A paid model may word it better afterwards (the triage
layer); these fields stay."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from llmtt.evaluation.interaction import paired_calls
from llmtt.evaluation.shell.target_commands import TargetMatcher, target_commands
from llmtt.events import Event
from llmtt.util.text import strip_ansi

TRIAGE_FORMAT = 1
HEAD_LINES = 4  # what the triage keeps of the failing command's output: its first lines,
HEAD_CHARS = 400  # ... at most this many characters
SHOWN_COMMAND = 200  # a command quoted in the one line is cut past this


def rule_triage(
    events: Sequence[Event],
    matcher: TargetMatcher | None,
    gates: Sequence[dict[str, Any]],
    redact: Callable[[str], str],
    *,
    target: str,
    reason: str,
) -> dict[str, Any]:
    """The triage of a failed run. `target`: the target's program name (for the roll-up's
    "`git tag`"); `reason`: the outcome's reason, said when neither a command nor a gate
    failed (a judge that did not pass, a timeout alone). Output is masked before it is cut."""
    first = _first_failure(events, matcher, redact)
    gate = next((g for g in gates if g.get("passed") is False), None)
    failed_gate = None
    if gate is not None:
        failed_gate = {
            "index": gate["index"],
            "type": gate["type"],
            "message": redact(str(gate.get("message") or "")),
        }
    parts = []
    if first is not None:
        said = first["output_head"].split("\n", 1)[0]
        after = (
            f"then the agent ran `{_cut(first['next_command'])}`"
            if first["next_command"] is not None
            else "then the agent stopped"
        )
        parts.append(
            f"`{_cut(first['command'])}` exited {first['exit_code']}"
            + (f" ({said})" if said else "")
            + f", {after}"
        )
    if failed_gate is not None:
        first_gate = f"gate {failed_gate['index']} ({failed_gate['type']})"
        parts.append(
            f"{'first failed gate' if first else 'no target command failed; first failed gate'}"
            f": {first_gate}: {failed_gate['message']}"
        )
    if not parts:
        parts.append(f"no target command or gate failed: {reason}")
    return {
        "format": TRIAGE_FORMAT,
        "target": target,
        "first_failure": first,
        "gate": failed_gate,
        "line": " ".join("; ".join(parts).split()),  # one line, whatever the output held
    }


def target_name(binary: str | None) -> str:
    """The target's program as the roll-up names it (`git`, not `/usr/bin/git`)."""
    return Path(binary or "").name


def _first_failure(
    events: Sequence[Event], matcher: TargetMatcher | None, redact: Callable[[str], str]
) -> dict[str, Any] | None:
    """The first target command whose exit code is known and not 0, with what it printed
    and the next tool call's command (None: the agent made none after it)."""
    if matcher is None:
        return None
    calls = paired_calls(events)
    for at, (call, result) in enumerate(calls):
        code = result.exit_code if result else None
        for command in target_commands(call.command, code, matcher):
            if command.exit_code in (0, None):
                continue
            following = calls[at + 1][0].command if at + 1 < len(calls) else None
            return {
                "command": redact(command.command),
                "subcommand": command.subcommand,
                "exit_code": command.exit_code,
                "output_head": _head(redact(result.output if result else "")),
                "next_command": None if following is None else redact(following),
            }
    return None


def _head(text: str) -> str:
    text = strip_ansi(text).replace("\r\n", "\n").replace("\r", "\n").strip()
    head = "\n".join(line.rstrip() for line in text.split("\n")[:HEAD_LINES])
    return head[:HEAD_CHARS]


def _cut(command: str) -> str:
    flat = " ".join(command.split())
    return flat if len(flat) <= SHOWN_COMMAND else flat[: SHOWN_COMMAND - 3] + "..."
