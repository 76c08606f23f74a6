"""`llmtt import bashkit-eval TASKS.jsonl`: a bashkit-eval dataset as llmtt scenarios.

Each record `{id, category, description, system, prompt, files, expectations}` becomes
`<out>/<id>.yaml`: `prompt` the task, `category` a tag, `files` the fixture (bashkit's file
system root is the workspace, so each top folder the task names, such as /data or /home, is a
scenario `mount` of the workspace's folder of that name, and prompts with absolute paths work
unchanged in the sandbox), `system` the fixture's AGENTS.md (the guidance the agents read),
each expectation a `check` gate with its weight, and an `llm_judge:PROMPT` expectation an
`llm_judge` evaluator whose criterion an `evaluator` gate requires. A `--solutions` file
(JSON lines `{id, solution: [commands]}`) gives the oracle a reference solution. A record that
cannot be carried over whole (bad JSON, a missing field, an unknown check) is reported with
its line and not written: a task missing a check would score differently. The one exception
is `stderr_empty`, which no llmtt agent can meet (each reports a command's stdout and stderr as
one output): it is left out with a warning.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from llmtt.errors import LlmttError
from llmtt.spec.checks import parse_check
from llmtt.spec.scenario import mount_problem

GUIDANCE = "AGENTS.md"
_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")
# The first folder of an absolute path in a task's text (not a URL's, nor "and/or"), and the
# second where the first holds users' homes.
ABSOLUTE = re.compile(r"(?<![\w.~:/-])/([A-Za-z0-9_][\w.-]*)(?:/([A-Za-z0-9_][\w.-]*))?")
HOMES = ("home", "Users")
JUDGE_TEMPLATE = """\
{prompt}

Task given to the agent: {{{{input}}}}

The agent's final answer: {{{{response}}}}

Reply with only a JSON object: {{"score": true or false, "reasoning": "<one sentence>"}}."""


@dataclass
class Imported:
    """What an import wrote and what it could not carry over."""

    written: list[Path] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # records not imported
    warnings: list[str] = field(default_factory=list)  # records imported without something


def import_bashkit(
    tasks: Path, out: Path, fixtures: Path, solutions: Path | None, *, force: bool = False
) -> Imported:
    """Write one scenario (and fixture) per record of `tasks`; never overwrite without `force`."""
    known = _solutions(solutions) if solutions else {}
    result = Imported()
    try:
        lines = tasks.read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise LlmttError(f"{tasks}: cannot be read: {exc}") from None
    seen: set[str] = set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{tasks}:{number}"
        try:
            record = json.loads(line)
            scenario, files, name, left_out = _scenario(record, known, fixtures, out)
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            result.problems.append(f"{where}: {_why(exc)}; not imported")
            continue
        if name in seen:
            result.problems.append(
                f"{where}: task id {name!r} repeats an earlier one; not imported"
            )
            continue
        seen.add(name)
        target = out / f"{name}.yaml"
        if target.exists() and not force:
            result.problems.append(f"{where}: {target} exists (use --force to replace it)")
            continue
        _write(target, scenario, fixtures / name, files)
        result.written.append(target)
        result.warnings.extend(f"{where}: {name}: {note}" for note in left_out)
    unused = sorted(set(known) - seen)
    if unused:
        result.problems.append(f"{solutions}: solutions for unknown task ids: {', '.join(unused)}")
    return result


def _why(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"the record lacks {exc.args[0]!r}"
    if isinstance(exc, json.JSONDecodeError):
        return f"not JSON ({exc.msg} at column {exc.colno})"
    if isinstance(exc, RecursionError):
        return "not JSON that can be read (nested too deep)"
    return str(exc)


def _solutions(path: Path) -> dict[str, list[str]]:
    """`{id, solution: [...]}` per line."""
    out: dict[str, list[str]] = {}
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise LlmttError(f"{path}: cannot be read: {exc}") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            commands = data["solution"]
            if not (isinstance(commands, list) and all(isinstance(c, str) for c in commands)):
                raise TypeError("solution must be a list of command strings")
            out[_name(str(data["id"]))] = commands
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            raise LlmttError(f"{path}:{number}: {_why(exc)}") from None
    return out


def _name(task_id: str) -> str:
    name = _SAFE.sub("-", task_id).strip("-.")
    if not name:
        raise ValueError(f"task id {task_id!r} gives no usable file name")
    return name


def _scenario(
    record: Any, solutions: dict[str, list[str]], fixtures: Path, out: Path
) -> tuple[dict[str, Any], dict[str, str], str, list[str]]:
    """The scenario, its fixture files, its name, and what was left out of it."""
    if not isinstance(record, dict):
        raise TypeError("a record must be a JSON object")
    name = _name(str(record["id"]))
    prompt = record["prompt"]
    if not isinstance(prompt, str) or not prompt.strip():
        raise TypeError("prompt must be a non-empty string")
    record_paths = [str(p) for p in (record.get("files") or {})]
    files = _files(record.get("files") or {})
    system = record.get("system")
    if isinstance(system, str) and system.strip():
        if GUIDANCE in files:
            raise ValueError(f"files has its own {GUIDANCE}, where `system` would go")
        files[GUIDANCE] = system
    gates: list[dict[str, Any]] = []
    evaluators: list[dict[str, Any]] = []
    left_out: list[str] = []
    for index, expectation in enumerate(record["expectations"], start=1):
        if not isinstance(expectation, dict):
            raise TypeError(f"expectation {index} must be an object {{check, weight}}")
        text = expectation["check"]
        weight = float(expectation.get("weight", 1.0))
        if weight < 0:
            raise ValueError(f"expectation {index} ({text}): weight must be >= 0")
        check = parse_check(str(text))
        if check.kind == "stderr_empty":
            # An agent's tool result holds stdout and stderr as one output: no agent could pass.
            left_out.append(
                f"expectation {index} (stderr_empty) left out: llmtt's agents report a "
                "command's stdout and stderr as one output"
            )
            continue
        if check.kind == "llm_judge":
            criterion = f"judge-{index}"
            evaluators.append(
                {
                    "type": "llm_judge",
                    "criteria": [{"name": criterion, "scale": "binary", "description": check.text}],
                    "config": {
                        "criterion": criterion,
                        "prompt_template": JUDGE_TEMPLATE.format(prompt=check.text),
                    },
                }
            )
            gates.append(
                {"type": "evaluator", "criterion": criterion, "threshold": 1, "weight": weight}
            )
        else:
            gates.append({"type": "check", "check": text, "weight": weight})
    scenario: dict[str, Any] = {"name": name}
    if record.get("description"):
        scenario["description"] = str(record["description"])
    scenario["tags"] = [str(record["category"])] if record.get("category") else []
    scenario["tags"].append("bashkit-eval")
    scenario["task"] = {"prompt": prompt}
    if files:
        scenario["fixture"] = _relative(fixtures / name, out)
    named = [prompt, *(str(e.get("check", "")) for e in record["expectations"]), *record_paths]
    mounts = _mounts(named)
    if mounts:
        # bashkit's file system root is the workspace: the task's /data is its data folder.
        scenario["mounts"] = mounts
    if name in solutions:
        scenario["solution"] = solutions[name]
    evaluation: dict[str, Any] = {"gates": gates}
    if evaluators:
        evaluation["evaluators"] = evaluators
    scenario["evaluation"] = evaluation
    return scenario, files, name, left_out


def _mounts(texts: list[str]) -> dict[str, str]:
    """Each top folder the task's absolute paths name (under /home, a user's home), seen there
    from the workspace; the system's own folders (/dev/null, /usr/bin, ...) stay the
    sandbox's."""
    tops = sorted(
        {
            f"{m.group(1)}/{m.group(2)}" if m.group(1) in HOMES and m.group(2) else m.group(1)
            for text in texts
            for m in ABSOLUTE.finditer(text)
        }
    )
    # /home itself would cover the project (and HOME) the sandbox shows: a user's home only.
    return {
        f"/{top}": top for top in tops if top not in HOMES and mount_problem(f"/{top}", top) is None
    }


def _files(files: Any) -> dict[str, str]:
    """bashkit's `{"/path": content}` as workspace paths."""
    if not isinstance(files, dict):
        raise TypeError("files must be an object {path: content}")
    out: dict[str, str] = {}
    for path, content in files.items():
        parts = [p for p in PurePosixPath(str(path)).parts if p not in ("/", ".")]
        if not parts or ".." in parts:
            raise ValueError(f"file path {path!r} must lead inside the workspace, without '..'")
        if not isinstance(content, str):
            raise TypeError(f"file {path!r}: content must be a string")
        out["/".join(parts)] = content
    return out


def _relative(path: Path, start: Path) -> str:
    import os

    return Path(os.path.relpath(path, start)).as_posix()


def _write(target: Path, scenario: dict[str, Any], fixture: Path, files: dict[str, str]) -> None:
    for rel, content in files.items():
        path = fixture / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
    dump_scenario(target, scenario, "Imported from bashkit-eval by `llmtt import bashkit-eval`.")


def dump_scenario(target: Path, scenario: dict[str, Any], header: str) -> None:
    """Write `scenario` as YAML a person would write, under a `# header` line."""
    from llmtt.util.atomic import write_text

    target.parent.mkdir(parents=True, exist_ok=True)
    text = f"# {header}\n" + yaml.dump(
        scenario, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100
    )
    write_text(target, text)


class _Dumper(yaml.SafeDumper):
    """Safe YAML with multi-line strings as literal blocks, as a person would write them."""


def _string(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value and not value.endswith(" ") else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _string)
