"""Layer 2: deterministic gates, all run in order, each on its own scratch copy of the workspace."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import regex

from llmtt.evaluation.approximate import Sign
from llmtt.evaluation.evaluators.runner import criterion_score
from llmtt.evaluation.interaction import TargetCommand
from llmtt.evaluation.scripts import (
    UNCONFINED,
    Checks,
    last_line,
    run_in_scratch,
    script_command,
    script_label,
    script_verdict,
    tail,
)
from llmtt.execution.workspace import within
from llmtt.process.shell import ShellResult
from llmtt.spec.checks import Call, parse_check, run_check
from llmtt.spec.gates import (
    ASSERTION_RE,
    CheckGate,
    CommandJsonPath,
    CommandOutputContains,
    CommandOutputMatches,
    CommandSucceeds,
    EvaluatorGate,
    FileContains,
    FileExists,
    FileMatches,
    Gate,
    NoTranscriptErrors,
    ScriptGate,
    SkillTriggersGate,
)
from llmtt.spec.scenario import LoadedScenario

_COMMAND_GATES = (
    CommandSucceeds,
    CommandOutputContains,
    CommandOutputMatches,
    CommandJsonPath,
    ScriptGate,
)

CHUNK = 1 << 20  # file_contains reads a file this many characters at a time
MATCH_LIMIT = 16 << 20  # file_matches reads files up to this many bytes; larger ones fail


@dataclass(frozen=True)
class GateContext:
    """What gates see: the post-run workspace, an environment, the run's target commands."""

    workspace: Path
    env: Mapping[str, str]
    timeout_secs: float
    target_commands: Sequence[TargetCommand]
    evaluators: Mapping[str, Any] = field(default_factory=dict)  # metrics.json's `evaluators`
    scenario: LoadedScenario | None = None  # where a `script` gate's `path` is resolved from
    health_check: str | None = None  # the target's, run as a last gate (`health_check_gate`)
    calls: Sequence[Call] = ()  # the run's tool calls, for `check` gates
    checks: Checks = UNCONFINED  # how command gates are confined
    # Target commands of unknown exit whose output shows a failure (no_transcript_errors)
    failure_signs: Sequence[Sign] = ()
    source: str = "events"  # where the tool calls came from: events, or the transcript
    # metrics.json's `skill_triggers` (skill: tp, fn, fp or tn); None: no wire record to tell
    triggers: Mapping[str, str] | None = field(default_factory=dict)


def run_gates(gates: Sequence[Gate], ctx: GateContext) -> list[dict[str, Any]]:
    """Evaluate every gate in declaration order, without short-circuit; then the target's
    health check, when the context carries one."""
    records = [_run_one(index, gate, ctx) for index, gate in enumerate(gates, start=1)]
    if ctx.health_check is not None:
        health = CommandSucceeds(command=ctx.health_check, description="target health check")
        records.append(_run_one(len(records) + 1, health, ctx))
    return records


def _run_one(index: int, gate: Gate, ctx: GateContext) -> dict[str, Any]:
    passed: bool | None
    record: dict[str, Any] = {"index": index, "type": gate.type, "description": gate.description}
    record.update(gate.model_dump(exclude={"type", "description", "timeout_secs"}))
    timeout = gate.timeout_secs or ctx.timeout_secs
    if isinstance(gate, _COMMAND_GATES):
        command = _command(gate, ctx)
        result = run_in_scratch(command, ctx.workspace, ctx.env, timeout, ctx.checks)
        if isinstance(gate, ScriptGate):
            passed, message, kept = script_verdict(result, script_label(gate))
            record.update(kept)
        else:
            passed, message = _judge_command(gate, result, timeout)
        record.update(
            {
                "exit_code": result.exit_code,
                "timed_out": result.timed_out,
                "duration_secs": round(result.duration_secs, 3),
                "stdout": tail(result.stdout),
                "stderr": tail(result.stderr),
            }
        )
    else:
        passed, message = _judge_static(gate, ctx, timeout)
    record["passed"] = passed  # None: cannot tell (llmtt.evaluation.outcome)
    record["message"] = message
    return record


def _command(gate: Gate, ctx: GateContext) -> str:
    """The shell command a command gate runs (a `script` gate's file, by its absolute path)."""
    if isinstance(gate, ScriptGate) and ctx.scenario is not None:
        return script_command(gate, ctx.scenario)
    command = getattr(gate, "command", None)
    assert command is not None, "a script gate given by `path` needs its scenario"
    return str(command)


def _search(pattern: str, text: str, timeout: float) -> bool | str:
    """`re.search(pattern, text, re.MULTILINE)` found something, or why there is no answer.

    The `regex` module's matcher can be stopped; a catastrophic pattern cannot hang a gate.
    """
    try:
        return regex.search(pattern, text, regex.MULTILINE, timeout=timeout) is not None
    except TimeoutError:
        return f"pattern /{pattern}/ took longer than {timeout:g} s"
    except regex.error as exc:  # checked with `re` at load time; `regex` differs at the edges
        return f"pattern /{pattern}/ cannot be used: {exc}"


def _judge_command(gate: Gate, result: ShellResult, timeout: float) -> tuple[bool, str]:
    if result.timed_out:
        return False, f"`{_cmd(gate)}` {result.describe()}"
    if isinstance(gate, CommandSucceeds):
        if result.ok:
            return True, f"`{gate.command}` exited 0"
        err = last_line(result.stderr or result.stdout)
        return False, f"`{gate.command}` {result.describe()}" + (f": {err}" if err else "")
    if isinstance(gate, CommandOutputContains):
        if gate.substring in result.stdout:
            return True, f"output of `{gate.command}` contains {gate.substring!r}"
        return (
            False,
            f"output of `{gate.command}` ({result.describe()}) lacks {gate.substring!r}"
            + _seen(result),
        )
    if isinstance(gate, CommandOutputMatches):
        found = _search(gate.pattern, result.stdout, timeout)
        if isinstance(found, str):
            return False, f"output of `{gate.command}`: {found}"
        if found:
            return True, f"output of `{gate.command}` matches /{gate.pattern}/"
        return (
            False,
            f"output of `{gate.command}` ({result.describe()}) does not match /{gate.pattern}/"
            + _seen(result),
        )
    assert isinstance(gate, CommandJsonPath)
    return _json_path(gate, result)


def _json_path(gate: CommandJsonPath, result: ShellResult) -> tuple[bool, str]:
    from jsonpath_ng.ext.parser import parse

    try:
        document = json.loads(result.stdout)
    except RecursionError:
        return False, f"output of `{gate.command}` is JSON nested too deep to read" + _seen(result)
    except ValueError as exc:
        return (
            False,
            f"output of `{gate.command}` ({result.describe()}) is not JSON: {exc}" + _seen(result),
        )
    try:
        values = [m.value for m in parse(gate.path).find(document)]
        value: Any = values[0] if len(values) == 1 else (values or None)
        ok, detail = check_assertion(gate.assertion, value, found=bool(values))
    except RecursionError:  # read, but too deep to walk, compare or show
        return False, f"output of `{gate.command}` is JSON nested too deep to check" + _seen(result)
    verdict = "holds" if ok else "fails"
    return ok, f"{gate.path} {gate.assertion!r} {verdict}: {detail}"


def check_assertion(assertion: str, value: Any, *, found: bool) -> tuple[bool, str]:
    """Apply a `command_json_path` assertion to the value found at the path."""
    match = ASSERTION_RE.match(assertion)
    assert match is not None  # validated when the scenario was loaded
    shown = json.dumps(value)[:200] if found else "nothing at that path"
    if assertion == "exists":
        return found and value is not None, f"found {shown}"
    if match.group("eq") is not None:
        expected = _literal(match.group("eq"))
        return found and value == expected, f"expected {json.dumps(expected)}, found {shown}"
    if match.group("sub") is not None:
        needle = _literal(match.group("sub"))
        if isinstance(value, str):
            return isinstance(needle, str) and needle in value, f"found {shown}"
        if isinstance(value, list):
            return needle in value or str(needle) in value, f"found {shown}"
        return False, f"found {shown}, which is not a string or list"
    op, n = match.group("op"), int(match.group("n"))
    if not isinstance(value, list | dict | str):
        return False, f"found {shown}, which has no length"
    size = len(value)
    ok = {">=": size >= n, "==": size == n, ">": size > n}[op]
    return ok, f"length is {size}"


def _literal(text: str) -> Any:
    text = text.strip()
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text.strip("'\"") if len(text) >= 2 and text[0] == text[-1] == "'" else text


def _judge_static(gate: Gate, ctx: GateContext, timeout: float) -> tuple[bool | None, str]:
    """Whether a gate that runs no command passed; None: the run cannot tell (a `check` whose
    answer the agent's record does not hold), which counts neither as a pass nor as a fail."""
    if isinstance(gate, CheckGate):
        return run_check(
            parse_check(gate.check),
            ctx.calls,
            ctx.workspace,
            lambda pattern, text: _search(pattern, text, timeout),
            _workspace_file,
            _file_contains,
        )
    if isinstance(gate, EvaluatorGate):
        score, problem = criterion_score(ctx.evaluators, gate.criterion)
        if score is None:
            return False, f"criterion {gate.criterion!r}: {problem}"
        verdict = ">=" if score >= gate.threshold else "<"
        return score >= gate.threshold, (
            f"criterion {gate.criterion!r} scored {score:.4g} {verdict} {gate.threshold:g}"
        )
    if isinstance(gate, NoTranscriptErrors):
        return _no_errors(ctx)
    if isinstance(gate, SkillTriggersGate):
        return _triggers(gate, ctx.triggers)
    assert isinstance(gate, FileExists | FileContains | FileMatches)
    path, problem = _workspace_file(ctx.workspace, gate.path)
    if path is None:
        return False, problem
    if isinstance(gate, FileExists):
        return True, f"{gate.path} exists"
    if isinstance(gate, FileContains):
        if _file_contains(path, gate.substring):
            return True, f"{gate.path} contains {gate.substring!r}"
        return False, f"{gate.path} lacks {gate.substring!r}"
    size = path.stat().st_size
    if size > MATCH_LIMIT:
        return False, (
            f"{gate.path} has {size:,} bytes; file_matches reads files up to {MATCH_LIMIT:,} "
            "bytes (a command_succeeds gate with `grep -E` has no such limit)"
        )
    text = path.read_text(encoding="utf-8", errors="replace")
    found = _search(gate.pattern, text, timeout)
    if isinstance(found, str):
        return False, f"{gate.path}: {found}"
    if found:
        return True, f"{gate.path} matches /{gate.pattern}/"
    return False, f"{gate.path} does not match /{gate.pattern}/"


def _triggers(
    gate: SkillTriggersGate, verdicts: Mapping[str, str] | None
) -> tuple[bool | None, str]:
    if verdicts is None:
        return None, (
            "the run has no wire record (its agent reached its model by itself), "
            "so what the model was sent is unknown"
        )
    held = {s: v for s, v in verdicts.items() if not gate.skills or s in gate.skills}
    if not held:
        return None, "the run placed none of the skills this gate holds"
    wrong = [
        f"{s} {'not loaded though it should be' if v == 'fn' else 'loaded though it should not be'}"
        for s, v in sorted(held.items())
        if v in ("fn", "fp")
    ]
    if wrong:
        return False, "; ".join(wrong)
    return True, ", ".join(
        f"{s} {'loaded' if v == 'tp' else 'left alone'} as it should be"
        for s, v in sorted(held.items())
    )


def _no_errors(ctx: GateContext) -> tuple[bool, str]:
    """no_transcript_errors: no target command exited non-zero, nor, of those whose exit is
    unknown, shows a failure in its output (approximately: docs/metrics.md). Whether it can
    tell is in its message."""
    commands = ctx.target_commands
    failed = [c for c in commands if c.exit_code not in (0, None)]
    unknown = [c for c in commands if c.exit_code is None]
    found = []
    if failed:
        listed = "; ".join(f"`{c.normalised}` (exit {c.exit_code})" for c in failed[:5])
        found.append(f"{len(failed)} target command(s) failed: {listed}")
    if ctx.failure_signs:
        listed = "; ".join(
            f"`{' / '.join(c.normalised for c in s.commands)}` (its output: {s.line!r})"
            for s in ctx.failure_signs[:5]
        )
        found.append(
            f"{len(ctx.failure_signs)} tool call(s) with target commands of unknown exit show a "
            f"failure in their output (approximate): {listed}"
        )
    if found:
        return False, "; ".join(found)
    if not unknown:
        return True, f"none of {len(commands)} target commands failed"
    where = (
        "the transcript shows no exit code"
        if ctx.source == "transcript"
        else "their exit code is unknown (docs/metrics.md)"
    )
    listed = "; ".join(f"`{c.normalised}`" for c in unknown[:3])
    more = f"; ... ({len(unknown) - 3} more)" if len(unknown) > 3 else ""
    return True, (
        f"none of {len(commands)} target commands is known to have failed, but llmtt cannot "
        f"tell for {len(unknown)} ({listed}{more}): {where}; their output shows no failure"
    )


def _workspace_file(workspace: Path, rel: str) -> tuple[Path | None, str]:
    """The regular file `rel` names, with every link followed, or why a gate may not read it.

    A link the agent planted may point anywhere (`/proc/self/environ` would be llmtt's own
    environment); what it leads to must be inside the workspace.
    """
    try:
        path = (workspace / rel).resolve(strict=True)
    except FileNotFoundError:
        return None, f"{rel} does not exist"
    except (OSError, RuntimeError) as exc:  # a link loop, a folder we may not enter
        return None, f"{rel} cannot be resolved: {exc}"
    if not within(workspace, path):
        return None, (
            f"{rel} resolves outside the workspace (to {path}); gates read only workspace files"
        )
    if path.is_dir():
        return None, f"{rel} is a folder, not a file"
    if not path.is_file():
        return None, f"{rel} is not a regular file"
    return path, ""


def _file_contains(path: Path, needle: str) -> bool:
    """Whether the text of `path` holds `needle`, read a chunk at a time (files may be large)."""
    keep = len(needle) - 1  # what a match straddling two chunks needs of the earlier one
    tail = ""
    with open(path, encoding="utf-8", errors="replace") as handle:
        while chunk := handle.read(CHUNK):
            window = tail + chunk
            if needle in window:
                return True
            tail = window[max(len(window) - keep, 0) :] if keep > 0 else ""
    return needle in tail


def _cmd(gate: Gate) -> str:
    return str(getattr(gate, "command", gate.type))


def _seen(result: ShellResult) -> str:
    out = result.stdout.strip()
    if not out:
        err = last_line(result.stderr)
        return "; stdout was empty" + (f", stderr: {err}" if err else "")
    return f"; stdout began {out[:120]!r}"
