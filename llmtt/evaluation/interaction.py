"""Layer 1: interaction metrics from the event log, exactly as DESIGN.md defines them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llmtt.evaluation.shell.target_commands import TargetCommand, TargetMatcher, target_commands
from llmtt.events import Complete, Event, ToolCall, ToolResult, Usage, usage_metrics

__all__ = [
    "NO_SUBCOMMAND",
    "TargetCommand",
    "find_target_commands",
    "interaction_metrics",
    "target_commands_by_call",
]
NO_SUBCOMMAND = "(none)"


def find_target_commands(
    events: Sequence[Event], matcher: TargetMatcher | None
) -> list[TargetCommand]:
    """Target commands in order, from every tool call's line, with exit codes where certain
    (docs/metrics.md, "Target commands")."""
    return [c for commands, _ in target_commands_by_call(events, matcher) for c in commands]


def target_commands_by_call(
    events: Sequence[Event], matcher: TargetMatcher | None
) -> list[tuple[list[TargetCommand], ToolResult | None]]:
    """Each tool call's target commands (none for a call without), in order, with the call's
    result."""
    if matcher is None:
        return []
    return [
        (target_commands(call.command, result.exit_code if result else None, matcher), result)
        for call, result in paired_calls(events)
    ]


def paired_calls(events: Sequence[Event]) -> list[tuple[ToolCall, ToolResult | None]]:
    """Every tool call in order, with its result: the one with its id, else (no id, or an
    unknown one) a result answers the oldest open call."""
    results: dict[str, ToolResult] = {}
    pending: list[ToolCall] = []
    unpaired: dict[int, ToolResult] = {}
    calls: list[ToolCall] = []
    for event in events:
        if isinstance(event, ToolCall):
            calls.append(event)
            pending.append(event)
        elif isinstance(event, ToolResult):
            if event.id is not None and any(c.id == event.id for c in pending):
                results[event.id] = event
                pending = [c for c in pending if c.id != event.id]
            elif pending:
                unpaired[id(pending.pop(0))] = event
    out = []
    for call in calls:
        result = results.get(call.id) if call.id is not None else None
        out.append((call, result or unpaired.get(id(call))))
    return out


def _rate(part: int, whole: int) -> float | None:
    return None if whole == 0 else round(part / whole, 6)


def interaction_metrics(
    events: Sequence[Event], matcher: TargetMatcher | None, *, free: bool
) -> dict[str, Any]:
    """Every metric of DESIGN.md's table, under its name. Rates over zero commands are null.
    The rates over exit codes (errors, first-try successes) are over the target commands whose
    exit is known, `unknown_exit_count` beside them: null when no exit is known."""
    commands = find_target_commands(events, matcher)
    total = len(commands)
    unique = len({c.normalised for c in commands})
    errors = sum(1 for c in commands if c.exit_code not in (0, None))
    unknown = sum(1 for c in commands if c.exit_code is None)
    known = total - unknown  # the commands whose exit is known: the exit rates' denominator
    after_failure = _retries_after_failure(commands)
    first_try = sum(
        1
        for c, retry in zip(commands, after_failure, strict=True)
        if c.exit_code == 0 and not retry
    )
    by_sub: dict[str, dict[str, int]] = {}
    for c, retry in zip(commands, after_failure, strict=True):
        entry = by_sub.setdefault(
            c.subcommand or NO_SUBCOMMAND, {"count": 0, "errors": 0, "help": 0, "retries": 0}
        )
        entry["count"] += 1
        entry["errors"] += c.exit_code not in (0, None)
        entry["help"] += c.help
        entry["retries"] += retry
    metrics: dict[str, Any] = {
        "total_commands": total,
        "unique_commands": unique,
        "error_count": errors,
        "unknown_exit_count": unknown,
        "retry_count": total - unique,
        "retry_rate": _rate(total - unique, total),
        "retries_after_failure": sum(after_failure),
        "help_invocations": sum(1 for c in commands if c.help),
        "first_try_success_rate": _rate(first_try, known),
        "iteration_ratio": _rate(unique, total),
        "error_rate": _rate(errors, known),
        "by_subcommand": dict(sorted(by_sub.items())),
    }
    metrics.update(_run_totals(events, free=free))
    return metrics


def _retries_after_failure(commands: Sequence[TargetCommand]) -> list[bool]:
    last_failed: dict[str, bool] = {}
    flags = []
    for c in commands:
        key = f"sub:{c.subcommand}" if c.subcommand else f"cmd:{c.normalised}"
        flags.append(last_failed.get(key, False))
        last_failed[key] = c.exit_code not in (0, None)
    return flags


def _run_totals(events: Sequence[Event], *, free: bool) -> dict[str, Any]:
    calls = [e for e in events if isinstance(e, ToolCall)]
    results = [e for e in events if isinstance(e, ToolResult)]
    usages = [e for e in events if isinstance(e, Usage)]
    complete = next((e for e in reversed(events) if isinstance(e, Complete)), None)
    return {
        "completed": bool(complete and complete.exit_code == 0 and not complete.timed_out),
        "tool_calls": len(calls),
        "tool_calls_ok": sum(1 for r in results if r.exit_code == 0),
        "tool_calls_error": sum(1 for r in results if r.exit_code not in (0, None)),
        **usage_metrics(usages, complete.turns if complete else None, free=free),
        "duration_secs": complete.duration_secs if complete else None,
        "natural_stop": complete.natural_stop if complete else None,
        "stop_reason": complete.reason if complete else None,
    }
