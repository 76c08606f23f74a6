"""bashkit-eval's expectation checks in their string form (specs/bashkit-eval-metrics.md), for
the `check` gate: `exit_code:N`, `stdout_contains:TEXT`, `stdout_regex:PATTERN`,
`stderr_empty`, `file_exists:/PATH`, `dir_exists:/PATH`, `file_contains:/PATH:TEXT`,
`tool_calls_min:N`, `tool_calls_max:N`. bashkit's virtual file system root is the workspace: a
path `/out/a.txt` is the workspace's `out/a.txt`. `llm_judge:PROMPT` is not a gate check: it is
carried by an `llm_judge` evaluator and an `evaluator` gate (`llmtt import bashkit-eval` writes
both).

Trace checks read the run's tool calls: `exit_code` the last one's, `stdout_*` any one's output
(agents report a command's stdout and stderr as one output, so stderr text counts too), and
`stderr_empty` every call's stderr, which only an agent that keeps it apart reports: without it
the check cannot pass.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import regex

KINDS = (
    "exit_code",
    "stdout_contains",
    "stdout_regex",
    "stderr_empty",
    "file_exists",
    "dir_exists",
    "file_contains",
    "tool_calls_min",
    "tool_calls_max",
    "llm_judge",
)
_NUMBER = ("exit_code", "tool_calls_min", "tool_calls_max")
_PATH = ("file_exists", "dir_exists", "file_contains")


@dataclass(frozen=True)
class Check:
    """One parsed check."""

    kind: str
    number: int | None = None
    text: str | None = None  # the text, pattern or judge prompt
    path: str | None = None  # relative to the workspace


@dataclass(frozen=True)
class Call:
    """What a check sees of one tool call."""

    output: str
    exit_code: int | None
    stderr: str | None = None  # None: the agent did not keep it apart


def parse_check(text: str) -> Check:
    """`kind:argument` -> Check; ValueError says what is wrong and what is expected."""
    kind, colon, arg = text.partition(":")
    if kind not in KINDS:
        raise ValueError(f"unknown check kind {kind!r} (known: {', '.join(KINDS)})")
    if kind == "stderr_empty":
        if colon:
            raise ValueError("stderr_empty takes no argument")
        return Check(kind)
    if not colon or not arg:
        raise ValueError(f"{kind} needs an argument: {kind}:{_ARGUMENT[kind]}")
    if kind in _NUMBER:
        try:
            number = int(arg)
        except ValueError:
            raise ValueError(f"{kind} takes a whole number, not {arg!r}") from None
        if kind != "exit_code" and number < 0:
            raise ValueError(f"{kind} takes a number >= 0, not {number}")
        return Check(kind, number=number)
    if kind in _PATH:
        path, _, rest = arg.partition(":") if kind == "file_contains" else (arg, "", "")
        if kind == "file_contains" and not rest:
            raise ValueError("file_contains needs a path and a text: file_contains:/PATH:TEXT")
        return Check(kind, path=_workspace_path(path), text=rest or None)
    if kind == "stdout_regex":
        try:
            regex.compile(arg)
        except regex.error as exc:
            raise ValueError(f"stdout_regex pattern {arg!r} does not compile: {exc}") from None
    return Check(kind, text=arg)


_ARGUMENT = {
    "exit_code": "N",
    "stdout_contains": "TEXT",
    "stdout_regex": "PATTERN",
    "file_exists": "/PATH",
    "dir_exists": "/PATH",
    "file_contains": "/PATH:TEXT",
    "tool_calls_min": "N",
    "tool_calls_max": "N",
    "llm_judge": "PROMPT",
}


def _workspace_path(path: str) -> str:
    """bashkit's `/a/b` (its VFS root is the workspace) as the workspace path `a/b`."""
    if "\0" in path:
        raise ValueError(f"path {path!r} contains a NUL byte, which no file name can hold")
    parts = PurePosixPath(path).parts
    rel = [p for p in parts if p not in ("/", ".")]
    if not rel or ".." in rel:
        raise ValueError(f"path {path!r} must name something inside the workspace, without '..'")
    return "/".join(rel)


def run_check(
    check: Check,
    calls: Sequence[Call],
    workspace: Path,
    search: Callable[[str, str], bool | str],
    read_file: Callable[[Path, str], tuple[Path | None, str]],
    contains: Callable[[Path, str], bool],
) -> tuple[bool, str]:
    """Whether the run meets `check`, and the detail. `search(pattern, text)` is a regex search
    under the gate's timeout (True, False, or why there is no answer); `read_file(workspace,
    rel)` the workspace file or why it may not be read; `contains(path, text)` a file test."""
    kind = check.kind
    if kind == "exit_code":
        if not calls:
            return False, "no tool call was made"
        last = calls[-1].exit_code
        return last == check.number, f"the last tool call exited {_code(last)}"
    if kind == "stdout_contains":
        assert check.text is not None
        hits = sum(check.text in c.output for c in calls)
        return hits > 0, f"{hits} of {len(calls)} tool call outputs contain {check.text!r}"
    if kind == "stdout_regex":
        assert check.text is not None
        for index, call in enumerate(calls, start=1):
            found = search(check.text, call.output)
            if isinstance(found, str):
                return False, found
            if found:
                return True, f"tool call {index}'s output matches /{check.text}/"
        return False, f"no tool call output of {len(calls)} matches /{check.text}/"
    if kind == "stderr_empty":
        unknown = sum(c.stderr is None for c in calls)
        if unknown:
            return False, f"{unknown} tool call(s) without a separate stderr: cannot tell"
        noisy = sum(bool(c.stderr) for c in calls)
        return noisy == 0, f"{noisy} of {len(calls)} tool calls wrote to stderr"
    if kind in ("tool_calls_min", "tool_calls_max"):
        assert check.number is not None
        ok = len(calls) >= check.number if kind == "tool_calls_min" else len(calls) <= check.number
        limit = "at least" if kind == "tool_calls_min" else "at most"
        return ok, f"{len(calls)} tool call(s); {limit} {check.number} expected"
    assert check.path is not None
    if kind in ("file_exists", "dir_exists"):
        # bashkit stats the path: file_exists holds for a folder too.
        target = workspace / check.path
        inside = target.exists() and target.resolve().is_relative_to(workspace.resolve())
        if kind == "dir_exists":
            ok = inside and target.is_dir()
            return ok, f"/{check.path} {'is' if ok else 'is not'} a folder in the workspace"
        return inside, f"/{check.path} {'exists' if inside else 'does not exist'} in the workspace"
    path, problem = read_file(workspace, check.path)
    if path is None:
        return False, problem
    assert check.text is not None
    if contains(path, check.text):
        return True, f"/{check.path} contains {check.text!r}"
    return False, f"/{check.path} lacks {check.text!r}"


def _code(code: int | None) -> str:
    return "with an unknown code" if code is None else str(code)
