"""bashkit-eval's expectation checks in their string form (specs/bashkit-eval-metrics.md and
bashkit-eval's checks.rs), for the `check` gate: `exit_code:N`, `stdout_contains:TEXT`,
`stdout_regex:PATTERN`, `stderr_empty`, `file_exists:/PATH`, `dir_exists:/PATH`,
`file_contains:/PATH:TEXT`, `file_line_regex:/PATH:PATTERN`, `tool_calls_min:N`,
`tool_calls_max:N`. bashkit's virtual file system root is the workspace: a path `/out/a.txt` is
the workspace's `out/a.txt`. `llm_judge:PROMPT` is not a gate check: it is carried by an
`llm_judge` evaluator and an `evaluator` gate (`llmtt import bashkit-eval` writes both).

Trace checks read the run's tool calls: `exit_code` the last one's, `stdout_*` any one's output
(agents report a command's stdout and stderr as one output, so stderr text counts too), and
`stderr_empty` every call's stderr, which only an agent that keeps it apart reports.
`file_line_regex` passes when one line of the file (split at newlines, a line's final `\r`
dropped, as Rust's `str::lines`) matches the pattern.

A check whose answer the run does not hold (`stderr_empty` where a call's stderr was not kept
apart, `exit_code` where the last call's exit code is unknown) *cannot tell*: `run_check`
answers None, which is neither a pass nor a fail (the gate says so and counts on no side).
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
    "file_line_regex",
    "tool_calls_min",
    "tool_calls_max",
    "llm_judge",
)
_NUMBER = ("exit_code", "tool_calls_min", "tool_calls_max")
_PATH = ("file_exists", "dir_exists", "file_contains", "file_line_regex")
_PATH_AND_TEXT = ("file_contains", "file_line_regex")


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
        # bashkit splits at the first ':' after the kind: the path holds none.
        path, _, rest = arg.partition(":") if kind in _PATH_AND_TEXT else (arg, "", "")
        if kind in _PATH_AND_TEXT and not rest:
            raise ValueError(
                f"{kind} needs a path and a {_ARGUMENT[kind].rpartition(':')[2].lower()}: "
                f"{kind}:{_ARGUMENT[kind]}"
            )
        if kind == "file_line_regex":
            _compiles(kind, rest)
        return Check(kind, path=_workspace_path(path), text=rest or None)
    if kind == "stdout_regex":
        _compiles(kind, arg)
    return Check(kind, text=arg)


def _compiles(kind: str, pattern: str) -> None:
    try:
        regex.compile(pattern)
    except regex.error as exc:
        raise ValueError(f"{kind} pattern {pattern!r} does not compile: {exc}") from None


_ARGUMENT = {
    "exit_code": "N",
    "stdout_contains": "TEXT",
    "stdout_regex": "PATTERN",
    "file_exists": "/PATH",
    "dir_exists": "/PATH",
    "file_contains": "/PATH:TEXT",
    "file_line_regex": "/PATH:PATTERN",
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
) -> tuple[bool | None, str]:
    """Whether the run meets `check` (None: the run cannot tell), and the detail.
    `search(pattern, text)` is a regex search under the gate's timeout (True, False, or why
    there is no answer); `read_file(workspace, rel)` the workspace file or why it may not be
    read; `contains(path, text)` a file test."""
    kind = check.kind
    if kind == "exit_code":
        if not calls:
            return False, "no tool call was made"
        last = calls[-1].exit_code
        if last is None:
            return None, "the last tool call's exit code is unknown"
        return last == check.number, f"the last tool call exited {last}"
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
        noisy = sum(bool(c.stderr) for c in calls)
        if noisy:  # one call that wrote to stderr settles it, whatever the others did
            return False, f"{noisy} of {len(calls)} tool calls wrote to stderr"
        unknown = sum(c.stderr is None for c in calls)
        if unknown:
            return None, (
                f"{unknown} of {len(calls)} tool call(s) without a separate stderr (the agent "
                "reports stdout and stderr as one output)"
            )
        return True, f"0 of {len(calls)} tool calls wrote to stderr"
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
    if kind == "file_line_regex":
        return _line_matches(path, check, search)
    if contains(path, check.text):
        return True, f"/{check.path} contains {check.text!r}"
    return False, f"/{check.path} lacks {check.text!r}"


def _line_matches(
    path: Path, check: Check, search: Callable[[str, str], bool | str]
) -> tuple[bool, str]:
    """Whether one line of the file matches the pattern, read a line at a time."""
    assert check.text is not None
    with open(path, encoding="utf-8", errors="replace", newline="\n") as handle:
        for number, line in enumerate(handle, start=1):
            line = line.removesuffix("\n").removesuffix("\r")
            found = search(check.text, line)
            if isinstance(found, str):
                return False, f"/{check.path}: {found}"
            if found:
                return True, f"line {number} of /{check.path} matches /{check.text}/"
    return False, f"no line of /{check.path} matches /{check.text}/"
