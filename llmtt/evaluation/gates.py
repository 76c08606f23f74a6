"""Layer 2: deterministic gates, all run in order, each on its own scratch copy of the workspace."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import regex

from llmtt.evaluation.evaluators.runner import criterion_score
from llmtt.evaluation.interaction import TargetCommand
from llmtt.scenario import (
    ASSERTION_RE,
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
    Script,
)
from llmtt.shell import ShellResult, run_shell
from llmtt.workspace import make_home, within

_COMMAND_GATES = (
    CommandSucceeds,
    CommandOutputContains,
    CommandOutputMatches,
    CommandJsonPath,
    Script,
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


def run_gates(gates: Sequence[Gate], ctx: GateContext) -> list[dict[str, Any]]:
    """Evaluate every gate in declaration order, without short-circuit."""
    return [_run_one(index, gate, ctx) for index, gate in enumerate(gates, start=1)]


def _run_one(index: int, gate: Gate, ctx: GateContext) -> dict[str, Any]:
    record: dict[str, Any] = {"index": index, "type": gate.type, "description": gate.description}
    record.update(gate.model_dump(exclude={"type", "description", "timeout_secs"}))
    timeout = gate.timeout_secs or ctx.timeout_secs
    if isinstance(gate, _COMMAND_GATES):
        result = _run_command(gate.command, ctx, timeout)
        passed, message = _judge_command(gate, result, timeout)
        record.update(
            {
                "exit_code": result.exit_code,
                "timed_out": result.timed_out,
                "duration_secs": round(result.duration_secs, 3),
                "stdout": _tail(result.stdout),
                "stderr": _tail(result.stderr),
            }
        )
        if isinstance(gate, Script):
            data = _trailing_json(result.stdout)
            if data is not None:
                record["data"] = data
    else:
        passed, message = _judge_static(gate, ctx, timeout)
    record["passed"] = passed
    record["message"] = message
    return record


def _run_command(command: str, ctx: GateContext, timeout: float) -> ShellResult:
    """Run a gate's command in scratch folders of its own, removed when it is done.

    A copy of the workspace, an empty HOME with its XDG folders and a TMPDIR, all outside the
    run folder: nothing one gate writes is seen by the next gate or kept with the run.
    """
    with tempfile.TemporaryDirectory(prefix="llmtt-gate-") as scratch:
        work = Path(scratch) / "workspace"
        if ctx.workspace.is_dir():
            try:
                # The kernel copies the data (sendfile), not Python, whatever the files' size.
                shutil.copytree(ctx.workspace, work, symlinks=True)
            except shutil.Error:
                pass  # named pipes and sockets are not copied; the rest is
        else:
            work.mkdir()
        tmp = Path(scratch) / "tmp"
        tmp.mkdir()
        env = {
            **ctx.env,
            **make_home(Path(scratch) / "home"),
            "TMPDIR": str(tmp),
            "PWD": str(work),
        }
        return run_shell(command, cwd=work, env=env, timeout_secs=timeout)


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
    if isinstance(gate, CommandSucceeds | Script):
        if result.ok:
            return True, f"`{gate.command}` exited 0"
        err = _last_line(result.stderr or result.stdout)
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
    except ValueError as exc:
        return (
            False,
            f"output of `{gate.command}` ({result.describe()}) is not JSON: {exc}" + _seen(result),
        )
    values = [m.value for m in parse(gate.path).find(document)]
    value: Any = values[0] if len(values) == 1 else (values or None)
    ok, detail = check_assertion(gate.assertion, value, found=bool(values))
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
    except ValueError:
        return text.strip("'\"") if len(text) >= 2 and text[0] == text[-1] == "'" else text


def _judge_static(gate: Gate, ctx: GateContext, timeout: float) -> tuple[bool, str]:
    if isinstance(gate, EvaluatorGate):
        score, problem = criterion_score(ctx.evaluators, gate.criterion)
        if score is None:
            return False, f"criterion {gate.criterion!r}: {problem}"
        verdict = ">=" if score >= gate.threshold else "<"
        return score >= gate.threshold, (
            f"criterion {gate.criterion!r} scored {score:.4g} {verdict} {gate.threshold:g}"
        )
    if isinstance(gate, NoTranscriptErrors):
        failed = [c for c in ctx.target_commands if c.exit_code not in (0, None)]
        if not failed:
            return True, f"none of {len(ctx.target_commands)} target commands failed"
        listed = "; ".join(f"`{c.normalised}` (exit {c.exit_code})" for c in failed[:5])
        return False, f"{len(failed)} target command(s) failed: {listed}"
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
        err = _last_line(result.stderr)
        return "; stdout was empty" + (f", stderr: {err}" if err else "")
    return f"; stdout began {out[:120]!r}"


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def _tail(text: str, limit: int = 4000) -> str:
    return text if len(text) <= limit else "[...]\n" + text[-limit:]


def _trailing_json(stdout: str) -> Any:
    lines = [line for line in stdout.strip().splitlines() if line.strip()]
    if not lines:
        return None
    try:
        data = json.loads(lines[-1])
    except ValueError:
        return None
    return data if isinstance(data, dict) else None
