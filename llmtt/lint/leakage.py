"""Leakage: a scenario whose prompt or guidance holds what its gates look for, verbatim, tests
copying rather than the tool. Expected texts and solution commands are warnings; a path is a
note, since a task usually has to name the file it wants written."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

from llmtt.lint.findings import Finding
from llmtt.spec.checks import parse_check
from llmtt.spec.gates import (
    CheckGate,
    CommandJsonPath,
    CommandOutputContains,
    FileContains,
    FileExists,
    FileMatches,
    Gate,
)
from llmtt.spec.loading import line_of
from llmtt.spec.scenario import LoadedScenario

# Shorter expectations ("1", "ok") appear in any text by chance: they are not looked for.
MIN_TEXT = 4
MIN_SOLUTION = 8


def expectations(gate: Gate) -> Iterator[tuple[str, str]]:
    """(kind, value) of what a gate looks for verbatim: ("text", ...) or ("path", ...)."""
    if isinstance(gate, CommandOutputContains):
        yield "text", gate.substring
    elif isinstance(gate, FileContains):
        yield "path", gate.path
        yield "text", gate.substring
    elif isinstance(gate, FileExists | FileMatches):
        yield "path", gate.path
    elif isinstance(gate, CommandJsonPath):
        verb, _, value = gate.assertion.partition(" ")
        if verb in ("equals", "contains"):
            yield "text", value.strip().strip("\"'")
    elif isinstance(gate, CheckGate):
        check = parse_check(gate.check)
        if check.path is not None:
            yield "path", check.path
        if check.text is not None and check.kind in ("stdout_contains", "file_contains"):
            yield "text", check.text


def leaks(scenario: LoadedScenario, guidance: Mapping[str, str], root: Path) -> list[Finding]:
    """The scenario's gate expectations and solution commands found verbatim in its prompt or
    in one of its guidance files (`guidance`: name -> text)."""
    spec = scenario.spec
    texts = {"the prompt": spec.task.prompt, **{f"guidance {k}": v for k, v in guidance.items()}}
    where = _relative(scenario.path, root)
    found: list[Finding] = []
    for index, gate in enumerate(spec.evaluation.gates):
        line = line_of(scenario.lines, ("evaluation", "gates", index))
        for kind, value in expectations(gate):
            value = value.strip()
            if len(value) < MIN_TEXT:
                continue
            for name, text in texts.items():
                if value in text:
                    found.append(
                        Finding(
                            f"leak-{kind}",
                            f"gate {index + 1} ({gate.type}) looks for {kind} {_short(value)!r}, "
                            f"which {name} holds verbatim",
                            file=where,
                            line=line,
                            scenario=scenario.name,
                        )
                    )
    for index, command in enumerate(spec.solution):
        command = command.strip()
        if len(command) < MIN_SOLUTION:
            continue
        for name, text in texts.items():
            if command in text:
                found.append(
                    Finding(
                        "leak-solution",
                        f"solution command {index + 1} {_short(command)!r} stands verbatim in "
                        f"{name}",
                        file=where,
                        line=line_of(scenario.lines, ("solution", index)),
                        scenario=scenario.name,
                    )
                )
    return found


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


def _short(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
