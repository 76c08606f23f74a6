"""`llmtt import bashkit-eval TASKS.jsonl`: a bashkit-eval dataset as llmtt scenarios.

Each record `{id, category, description, system, prompt, files, expectations}` becomes
`<out>/<id>.yaml`: `prompt` the task, `category` a tag, `files` the fixture (bashkit's file
system root is the workspace, so each top folder the task names, such as /data or /home/eval, is
a scenario `mount` of the workspace's folder of that name, and prompts with absolute paths work
unchanged in the sandbox), `system` the fixture's AGENTS.md (the guidance the agents read),
each expectation a `check` gate with its weight, and an `llm_judge:PROMPT` expectation an
`llm_judge` evaluator whose criterion an `evaluator` gate requires. A `--solutions` file
(JSON lines `{id, solution: [commands]}`) gives the oracle a reference solution. Lines that
start with `#` or `//` are comments, as bashkit-eval reads them.

A scripting-tool record (`tools`, `discovery_mode`) gets its mock tools as commands: the
fixture's `.bashkit/` holds the tools (`tools.json`), their dispatcher (`mock.py`,
llmtt/importers/mock_tools.py) and a link to it per tool and for `help` and `discover` in
`.bashkit/bin`, which the scenario's `path` puts first on PATH (bash's own `help` builtin gives
way to the tools' through an exported function in the scenario's `target.env`). Without a
`system`, the AGENTS.md says what bashkit's scripted tool tells the model: the commands with
their flags (with `discovery_mode`, their names and descriptions only, and how to discover
them).

A record that cannot be carried over whole (bad JSON, a missing field, an unknown check, a mock
tool the commands cannot play, a file where the sandbox shows the system's own) is reported
with its line and not written: a task missing a check would score differently. What is
carried over but means less in llmtt is a warning naming the task: `stderr_empty` (llmtt's
agents report a command's stdout and stderr as one output, so its gate cannot tell, and
counts neither as a pass nor as a fail), and fields bashkit-eval does not read either.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from llmtt.errors import LlmttError
from llmtt.spec.checks import Check, parse_check
from llmtt.spec.scenario import RESERVED, mount_problem

GUIDANCE = "AGENTS.md"
# The fields bashkit-eval reads of a record (dataset.rs, scripting_dataset.rs).
FIELDS = (
    "id",
    "category",
    "description",
    "system",
    "prompt",
    "files",
    "expectations",
    "tools",
    "discovery_mode",
)
TOOL_FIELDS = ("name", "description", "schema", "tags", "category", "mock")
FILE_CHECKS = ("file_exists", "dir_exists", "file_contains", "file_line_regex")
# Where a scripting task's mock tools live in its workspace, and the folder put on PATH.
TOOLS_DIR = ".bashkit"
TOOLS_BIN = f"{TOOLS_DIR}/bin"
# bash's `help` is a builtin, found before any `help` on PATH: an exported function (bash imports
# `BASH_FUNC_NAME%%` from the environment) runs the tools' `help` instead, and bash's own where
# no `help` is on PATH.
HELP_FUNCTION = '() { local h; if h=$(type -P help); then "$h" "$@"; else builtin help "$@"; fi; }'
HELP_ENV = "BASH_FUNC_help%%"
# A command of these names is bash's own (a builtin or keyword), found before any on PATH.
BASH_OWN = frozenset(
    """alias bg bind break builtin caller case cd command compgen complete compopt continue
    coproc declare dirs disown do done echo elif else enable esac eval exec exit export false fc
    fg fi for function getopts hash history if in jobs kill let local logout mapfile popd printf
    pushd pwd read readarray readonly return select set shift shopt source suspend test then
    time times trap true type typeset ulimit umask unalias unset until wait while""".split()
)
TOOL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
# The flag types the mock commands read (bashkit's array and object forms are not reproduced).
FLAG_TYPES = ("string", "integer", "number", "boolean")
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
    # records imported with something left out, or that means less under llmtt
    warnings: list[str] = field(default_factory=list)


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
        if not line.strip() or line.strip().startswith(("#", "//")):
            continue  # bashkit-eval's loader skips these lines too
        where = f"{tasks}:{number}"
        try:
            record = json.loads(line)
            task = _scenario(record, known, fixtures, out)
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            result.problems.append(f"{where}: {_why(exc)}; not imported")
            continue
        name = task.name
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
        _write(target, task, fixtures / name)
        result.written.append(target)
        result.warnings.extend(f"{where}: {name}: {note}" for note in task.left_out)
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


@dataclass
class _Task:
    """One record as a scenario: its YAML, its fixture, and what it says at import."""

    name: str
    scenario: dict[str, Any]
    files: dict[str, str]  # workspace path -> content
    tools: list[dict[str, Any]] | None = None  # a scripting task's mock tools
    left_out: list[str] = field(default_factory=list)


def _scenario(record: Any, solutions: dict[str, list[str]], fixtures: Path, out: Path) -> _Task:
    """The record as a scenario, with its fixture's files and its warnings."""
    if not isinstance(record, dict):
        raise TypeError("a record must be a JSON object")
    name = _name(str(record["id"]))
    prompt = record["prompt"]
    if not isinstance(prompt, str) or not prompt.strip():
        raise TypeError("prompt must be a non-empty string")
    left_out: list[str] = []
    unread = [str(k) for k in record if k not in FIELDS]
    if "discovery_mode" in record and "tools" not in record:
        unread.append("discovery_mode (a record without tools)")
    if unread:
        left_out.append(f"fields bashkit-eval does not read, left out: {', '.join(unread)}")
    # bashkit's paths are absolute; one written without the leading / means the same.
    record_paths = [str(PurePosixPath("/") / str(p)) for p in (record.get("files") or {})]
    files = _files(record.get("files") or {})
    tools, guidance = _mock_tools(record, left_out) if "tools" in record else (None, None)
    if tools is not None and any(p.split("/")[0] == TOOLS_DIR for p in files):
        raise ValueError(f"files has its own {TOOLS_DIR}/, where the mock tools would go")
    system = record.get("system")
    if isinstance(system, str) and system.strip():
        guidance = system  # bashkit-eval gives it in place of the tools' own prompt
    if guidance is not None:
        if GUIDANCE in files:
            raise ValueError(f"files has its own {GUIDANCE}, where `system` would go")
        files[GUIDANCE] = guidance
    gates: list[dict[str, Any]] = []
    evaluators: list[dict[str, Any]] = []
    checked: list[tuple[str, Check]] = []
    expectations = record["expectations"]
    if not isinstance(expectations, list):
        raise TypeError("expectations must be a list of objects {check, weight}")
    for index, expectation in enumerate(expectations, start=1):
        if not isinstance(expectation, dict):
            raise TypeError(f"expectation {index} must be an object {{check, weight}}")
        text = expectation["check"]
        weight = float(expectation.get("weight", 1.0))
        if weight < 0:
            raise ValueError(f"expectation {index} ({text}): weight must be >= 0")
        check = parse_check(str(text))
        checked.append((f"expectation {index} ({text})", check))
        if check.kind == "stderr_empty":
            # An agent's tool result holds stdout and stderr as one output.
            left_out.append(
                f"expectation {index} (stderr_empty): llmtt's agents report a command's stdout "
                "and stderr as one output, so its gate will say it cannot tell, counting "
                "neither as a pass nor as a fail"
            )
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
    # The paths the workspace must hold: the task's files and those its file checks read.
    held = [(f"file {p!r}", p) for p in record_paths] + [
        (where, f"/{c.path}") for where, c in checked if c.kind in FILE_CHECKS and c.path
    ]
    # ... and those that must be regular files (a folder's checks may name a root folder).
    read = [(f"file {p!r}", p) for p in record_paths] + [
        (where, f"/{c.path}")
        for where, c in checked
        if c.kind in ("file_contains", "file_line_regex") and c.path
    ]
    _check_places(held, read)
    scenario: dict[str, Any] = {"name": name}
    if record.get("description"):
        scenario["description"] = str(record["description"])
    scenario["tags"] = [str(record["category"])] if record.get("category") else []
    scenario["tags"].append("bashkit-eval")
    scenario["task"] = {"prompt": prompt}
    if files or tools is not None:
        scenario["fixture"] = _relative(fixtures / name, out)
    mounts = _mounts([prompt, *(path for _, path in held)])
    if mounts:
        # bashkit's file system root is the workspace: the task's /data is its data folder.
        scenario["mounts"] = mounts
    # What bashkit-eval measures is the agent's use of bash: the scenario's own target, so it
    # validates in a project with no [target] and is keyed on bash's version.
    scenario["target"] = {"binary": "bash", "version_command": "bash --version"}
    if tools is not None:
        # The mock tools are commands on PATH; `help` is theirs, not bash's builtin.
        scenario["path"] = [TOOLS_BIN]
        scenario["target"]["env"] = {HELP_ENV: HELP_FUNCTION}
    if name in solutions:
        scenario["solution"] = solutions[name]
    evaluation: dict[str, Any] = {"gates": gates}
    if evaluators:
        evaluation["evaluators"] = evaluators
    scenario["evaluation"] = evaluation
    return _Task(name, scenario, files, tools, left_out)


def _check_places(held: list[tuple[str, str]], read: list[tuple[str, str]]) -> None:
    """Refuse a task whose files the agent could not find or make where the task says: under a
    folder the sandbox shows as the system's own (`held`), or a file (`read`) at the root (a
    mount shows a workspace folder at a path the task names, never a file)."""
    for where, path in held:
        pure = PurePosixPath("/") / path
        for reserved in RESERVED:
            if pure.is_relative_to(reserved):
                raise ValueError(
                    f"{where} names {pure}, under {reserved}, which llmtt's sandbox shows as "
                    "the system's own (read-only): the agent could neither find the task's "
                    "file there nor make it"
                )
    for where, path in read:
        pure = PurePosixPath("/") / path
        if len(pure.parts) == 2:
            raise ValueError(
                f"{where} names {pure}, a file at the file system's root: llmtt shows "
                "workspace folders at the paths a task names, not files"
            )


def _mock_tools(record: dict[str, Any], notes: list[str]) -> tuple[list[dict[str, Any]], str]:
    """A scripting record's mock tools, as `tools.json` holds them, and the guidance that
    introduces them; ValueError or TypeError names what the commands could not play."""
    tools = record["tools"]
    discovery = record.get("discovery_mode", False)
    if not isinstance(tools, list):
        raise TypeError("tools must be a list of tool objects")
    if not isinstance(discovery, bool):
        raise TypeError("discovery_mode must be true or false")
    out: list[dict[str, Any]] = []
    for index, tool in enumerate(tools, start=1):
        if not isinstance(tool, dict):
            raise TypeError(f"tool {index} must be an object {{name, description, mock, ...}}")
        out.append(_mock_tool(index, tool, notes))
    names = [t["name"] for t in out]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"tools named more than once: {', '.join(twice)}")
    return out, _tools_guidance(out, discovery)


def _mock_tool(index: int, tool: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    name = tool.get("name")
    if not isinstance(name, str) or not TOOL_NAME.match(name):
        raise ValueError(
            f"tool {index}: name {name!r} must be a command name (letters, digits, '_', '.', "
            "'-'; not starting with a digit, '.' or '-')"
        )
    where = f"tool {index} ({name})"
    if name in ("help", "discover"):
        raise ValueError(f"{where}: the scripted tool's own `{name}` command takes that name")
    if name in BASH_OWN:
        raise ValueError(f"{where}: `{name}` is bash's own, found before any command on PATH")
    description = tool.get("description")
    if not isinstance(description, str):
        raise TypeError(f"{where}: description must be a string")
    schema = tool.get("schema", {})
    schema = {} if schema is None else schema
    if not isinstance(schema, dict):
        raise TypeError(f"{where}: schema must be a JSON Schema object")
    _check_schema(where, schema)
    tags = tool.get("tags") or []
    if not (isinstance(tags, list) and all(isinstance(t, str) for t in tags)):
        raise TypeError(f"{where}: tags must be a list of strings")
    category = tool.get("category")
    if category is not None and not isinstance(category, str):
        raise TypeError(f"{where}: category must be a string")
    mock = tool["mock"] if "mock" in tool else None
    if not isinstance(mock, str):
        _check_mock(where, mock)
    unread = [str(k) for k in tool if k not in TOOL_FIELDS]
    if unread:
        notes.append(f"{where}: fields bashkit-eval does not read, left out: {', '.join(unread)}")
    return {
        "name": name,
        "description": description,
        "schema": schema,
        "tags": tags,
        "category": category,
        "mock": mock,
    }


def _check_schema(where: str, schema: dict[str, Any]) -> None:
    combined = [k for k in ("$ref", "oneOf", "anyOf", "allOf") if k in schema]
    if combined:
        raise ValueError(
            f"{where}: schema uses {combined[0]}: the mock commands read flags of a plain "
            "object schema only"
        )
    props = schema.get("properties", {})
    if not isinstance(props, dict):
        raise TypeError(f"{where}: schema.properties must be an object")
    for key, prop in props.items():
        if not isinstance(prop, dict):
            raise TypeError(f"{where}: schema property {key!r} must be an object")
        kind = prop.get("type")
        kinds = kind if isinstance(kind, list) else [] if kind is None else [kind]
        odd = [k for k in kinds if k not in (*FLAG_TYPES, "null")]
        deep = [k for k in ("$ref", "oneOf", "anyOf", "allOf", "items", "properties") if k in prop]
        if odd or deep or len([k for k in kinds if k != "null"]) > 1:
            shown = odd[0] if odd else deep[0] if deep else " or ".join(map(str, kinds))
            raise ValueError(
                f"{where}: parameter {key!r} is {shown}: the mock commands read "
                f"{', '.join(FLAG_TYPES)} flags only (bashkit's array and object flag forms are "
                "not reproduced)"
            )


def _check_mock(where: str, mock: Any) -> None:
    """A mock that is not a string must be `{param, responses, default?}` of strings."""
    shape = f"{where}: mock must be a string or {{param, responses, default}}"
    if not isinstance(mock, dict) or not isinstance(mock.get("param"), str):
        raise TypeError(shape)
    responses = mock.get("responses")
    if not isinstance(responses, dict) or not all(isinstance(v, str) for v in responses.values()):
        raise TypeError(f"{shape}: responses must map values to strings")
    if mock.get("default") is not None and not isinstance(mock["default"], str):
        raise TypeError(f"{shape}: default must be a string")
    extra = sorted(set(mock) - {"param", "responses", "default"})
    if extra:
        raise ValueError(f"{shape}, not {', '.join(extra)}")


def _tools_guidance(tools: list[dict[str, Any]], discovery: bool) -> str:
    """What bashkit's scripted tool tells the model of its tools, in llmtt's words: every
    command with its flags; in discovery mode, their names and descriptions only."""
    from llmtt.importers.mock_tools import usage

    if discovery:
        listed = "\n".join(f"- `{t['name']}`: {t['description']}" for t in tools)
        how = (
            "Find the tools you need, and their flags, with `discover --categories`, "
            "`discover --category NAME`, `discover --tag TAG`, `discover --search WORD`, "
            "`help TOOL` and `help TOOL --json` before calling them."
        )
    else:
        lines = []
        for tool in tools:
            flags = usage(tool["schema"])
            lines.append(f"- `{tool['name']}{' ' + flags if flags else ''}`: {tool['description']}")
        listed = "\n".join(lines)
        how = (
            "`help TOOL` (`help TOOL --json` for its schema) and `discover --categories | "
            "--category NAME | --tag TAG | --search WORD` describe them."
        )
    return (
        "# Tools\n\nThis task's tools are commands on your PATH:\n\n"
        f"{listed}\n\nPass arguments as `--key value` or `--key=value`; a tool prints its "
        f"answer on stdout, to be combined with the shell's pipes, variables and loops. {how}\n"
    )


def _mounts(texts: list[str]) -> dict[str, str]:
    """Each top folder the task's absolute paths name (under /home, a user's home), seen there
    from the workspace; the system's own folders (/dev/null, /usr/bin, ...) stay the
    sandbox's."""
    tops = sorted(
        {
            # A sentence's full stop ends the path before it ("... in /backup.").
            f"{m.group(1)}/{m.group(2).rstrip('.')}"
            if m.group(1) in HOMES and m.group(2) and m.group(2).rstrip(".")
            else m.group(1).rstrip(".")
            for text in texts
            for m in ABSOLUTE.finditer(text)
        }
        - {""}
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
    return Path(os.path.relpath(path, start)).as_posix()


def _write(target: Path, task: _Task, fixture: Path) -> None:
    for rel, content in task.files.items():
        path = fixture / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
    if task.tools is not None:
        _write_tools(fixture / TOOLS_DIR, task.tools)
    dump_scenario(
        target, task.scenario, "Imported from bashkit-eval by `llmtt import bashkit-eval`."
    )


def _write_tools(folder: Path, tools: list[dict[str, Any]]) -> None:
    """The mock tools' folder: tools.json, the dispatcher, and a link to it per command."""
    from llmtt.importers import mock_tools

    if folder.is_symlink() or folder.is_file():
        folder.unlink()
    elif folder.exists():
        shutil.rmtree(folder)  # a tool of an earlier import must not linger
    (folder / "bin").mkdir(parents=True)
    (folder / "tools.json").write_text(
        json.dumps(tools, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    dispatcher = folder / "mock.py"
    shutil.copyfile(mock_tools.__file__, dispatcher)
    dispatcher.chmod(0o755)
    for name in [*(t["name"] for t in tools), "help", "discover"]:
        (folder / "bin" / name).symlink_to("../mock.py")


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
