#!/usr/bin/env python3
"""bashkit-eval's mock tools as commands, for a scripting-tool task imported by `llmtt import
bashkit-eval`.

The importer copies this file into the task's fixture as `.bashkit/mock.py`, the task's `tools`
beside it as `.bashkit/tools.json`, and makes `.bashkit/bin/NAME` a link to it for each tool and
for `help` and `discover`; the scenario's `path` puts `.bashkit/bin` first on PATH. Run under a
link's name, it answers as bashkit's ScriptedTool answers that command (bashkit's
crates/bashkit/src/scripted_tool and tool_def.rs; bashkit-eval's scripting_agent.rs):

- a tool: `--key value` or `--key=value` flags, each value read as its schema property's type
  says (`integer`, `number`, `boolean`; anything else a string; a bare `--flag` is true); the
  flags checked against the schema (`type`, `required`, `enum`, `additionalProperties: false`:
  exit 2, `NAME: schema error: ...`); then its mock: a string is the answer, `{param,
  responses, default}` the response for the flag `param`'s value (a string as it is, another
  value as JSON writes it; the empty string when the flag is missing), else `default`, else
  `NAME: callback failed` and exit 1. The answer goes to stdout as it is, with no newline
  added. `--help` prints the tool's usage; `--dry-run` its parsed flags as JSON.
- `help` (`--list`, `TOOL`, `TOOL --json`) and `discover` (`--categories`, `--category NAME`,
  `--tag TAG`, `--search WORD`, each with `--json`).

Standard library only: it runs on whichever `python3` the agent's PATH finds.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from typing import Any

USAGE_HELP = "usage: help [--list] [<tool>] [--json]"
USAGE_DISCOVER = (
    "usage: discover --categories | --category <name> | --tag <tag> | --search <keyword> [--json]"
)
_INTEGER = re.compile(r"^[+-]?[0-9]+$")
_NUMBER = re.compile(
    r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$|^[+-]?(inf|infinity|nan)$"
)


class Answer:
    """What a command prints and how it exits."""

    def __init__(self, stdout: str = "", stderr: str = "", code: int = 0) -> None:
        self.stdout, self.stderr, self.code = stdout, stderr, code


def main(argv: list[str]) -> int:
    """Answer as the command named by how this file was called (argv[0])."""
    name = os.path.basename(argv[0])
    here = os.path.dirname(os.path.realpath(__file__))
    with open(os.path.join(here, "tools.json"), encoding="utf-8") as handle:
        tools: list[dict[str, Any]] = json.load(handle)
    answer = answer_for(tools, name, argv[1:])
    sys.stdout.buffer.write(answer.stdout.encode("utf-8", "surrogateescape"))
    sys.stdout.buffer.flush()
    sys.stderr.buffer.write(answer.stderr.encode("utf-8", "surrogateescape"))
    sys.stderr.buffer.flush()
    return answer.code


def answer_for(tools: list[dict[str, Any]], name: str, args: list[str]) -> Answer:
    """The answer of command `name` (a tool, `help` or `discover`) to `args`."""
    if name == "help":
        return _help(tools, args)
    if name == "discover":
        return _discover(tools, args)
    for tool in tools:
        if tool["name"] == name:
            return _tool(tool, args)
    return Answer(stderr=f"{name}: unknown tool\n", code=127)


def _schema(tool: dict[str, Any]) -> dict[str, Any]:
    schema = tool.get("schema")
    return schema if isinstance(schema, dict) else {}


def _properties(schema: dict[str, Any]) -> dict[str, Any]:
    props = schema.get("properties")
    return props if isinstance(props, dict) else {}


def _type(prop: Any) -> str | None:
    """A property's one type (`["string", "null"]` is a string), or None."""
    kind = prop.get("type") if isinstance(prop, dict) else None
    if isinstance(kind, list):
        kinds = [k for k in kind if isinstance(k, str) and k != "null"]
        kind = kinds[0] if len(kinds) == 1 else None
    return kind if isinstance(kind, str) else None


def usage(schema: dict[str, Any]) -> str | None:
    """`--id <integer> --name <string>`, or None for a tool without properties."""
    props = _properties(schema)
    if not props:
        return None
    flags = []
    for key, prop in props.items():
        kind = _type(prop)
        if kind not in ("integer", "number", "boolean", "string"):
            raw = prop.get("type") if isinstance(prop, dict) else None
            kind = raw if isinstance(raw, str) else "value"
        flags.append(f"--{key} <{kind}>")
    return " ".join(flags)


def _coerce(raw: str, prop: Any) -> Any:
    kind = _type(prop)
    if kind == "integer" and _INTEGER.match(raw) and -(2**63) <= int(raw) < 2**63:
        return int(raw)
    if kind == "number" and _NUMBER.match(raw.lower()):
        number = float(raw)
        return number if math.isfinite(number) else None  # JSON has no infinity
    if kind == "boolean" and raw in ("true", "1", "yes", "false", "0", "no"):
        return raw in ("true", "1", "yes")
    return raw


def parse_flags(args: list[str], schema: dict[str, Any]) -> dict[str, Any] | str:
    """The flags as a JSON object, or what is wrong with them."""
    props = _properties(schema)
    out: dict[str, Any] = {}
    index = 0
    while index < len(args):
        arg = args[index]
        if not arg.startswith("--"):
            return f"expected --flag, got: {arg}"
        flag = arg[2:]
        index += 1
        if "=" in flag:
            key, _, raw = flag.partition("=")
            out[key] = _coerce(raw, props.get(key))
            continue
        prop = props.get(flag)
        if _type(prop) == "boolean":
            out[flag] = True
        elif index < len(args) and not args[index].startswith("--"):
            out[flag] = _coerce(args[index], prop)
            index += 1
        else:
            out[flag] = True
    return out


def _has_type(value: Any, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    return True


def schema_error(params: dict[str, Any], schema: dict[str, Any]) -> str | None:
    """What the parsed flags break of the tool's schema, or None."""
    required = schema.get("required")
    for key in required if isinstance(required, list) else []:
        if isinstance(key, str) and key not in params:
            return f"required property '{key}' is missing"
    props = _properties(schema)
    if schema.get("additionalProperties") is False:
        for key in params:
            if key not in props:
                return f"unknown property '{key}'"
    for key, value in params.items():
        prop = props.get(key)
        if not isinstance(prop, dict):
            continue
        kinds = prop.get("type")
        kinds = [kinds] if isinstance(kinds, str) else kinds if isinstance(kinds, list) else []
        kinds = [k for k in kinds if isinstance(k, str)]
        if kinds and not any(_has_type(value, k) for k in kinds):
            return f"input.{key} must be {' or '.join(kinds)}"
        allowed = prop.get("enum")
        if isinstance(allowed, list) and value not in allowed:
            return f"input.{key} is not an allowed value"
    return None


def _key(value: Any) -> str:
    """A flag's value as a mock's `responses` key: a string as it is, else its JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"))


def _tool(tool: dict[str, Any], args: list[str]) -> Answer:
    name = str(tool["name"])
    schema = _schema(tool)
    if "--help" in args:
        return Answer(_tool_help(tool))
    dry_run = "--dry-run" in args
    params = parse_flags([a for a in args if a != "--dry-run"] if dry_run else args, schema)
    if dry_run:
        report: dict[str, Any] = {"dry_run": True, "tool": name}
        if isinstance(params, str):
            report.update(valid=False, error=params)
            return Answer(stderr=json.dumps(report, sort_keys=True) + "\n", code=1)
        report.update(valid=True, params=params)
        return Answer(json.dumps(report, sort_keys=True) + "\n")
    if isinstance(params, str):
        return Answer(stderr=params, code=2)
    problem = schema_error(params, schema)
    if problem is not None:
        return Answer(stderr=f"{name}: schema error: {problem}\n", code=2)
    mock = tool["mock"]
    if isinstance(mock, str):
        return Answer(mock)
    key = _key(params.get(mock["param"]))
    responses = mock.get("responses") or {}
    if key in responses:
        return Answer(str(responses[key]))
    if mock.get("default") is not None:
        return Answer(str(mock["default"]))
    return Answer(stderr=f"{name}: callback failed\n", code=1)


def _tool_help(tool: dict[str, Any]) -> str:
    text = f"{tool['name']} - {tool.get('description', '')}\n"
    said = usage(_schema(tool))
    return text + (f"Usage: {tool['name']} {said}\n" if said else "")


def _help(tools: list[dict[str, Any]], args: list[str]) -> Answer:
    if not args or args == ["--list"]:
        return Answer("".join(f"{t['name']:<20} {t.get('description', '')}\n" for t in tools))
    name = next((a for a in args if not a.startswith("--")), None)
    if name is None:
        return Answer(stderr=USAGE_HELP, code=1)
    tool = next((t for t in tools if t["name"] == name), None)
    if tool is None:
        return Answer(stderr=f"help: unknown tool: {name}", code=1)
    if "--json" in args:
        described = {
            "name": tool["name"],
            "description": tool.get("description", ""),
            "input_schema": _schema(tool),
        }
        return Answer(json.dumps(described, indent=2, sort_keys=True) + "\n")
    return Answer(_tool_help(tool))


def _after(args: list[str], flag: str) -> str | None:
    if flag not in args:
        return None
    at = args.index(flag) + 1
    return args[at] if at < len(args) else ""


def _discover(tools: list[dict[str, Any]], args: list[str]) -> Answer:
    if not args:
        return Answer(stderr=USAGE_DISCOVER, code=1)
    as_json = "--json" in args
    if "--categories" in args:
        counts: dict[str, int] = {}
        for tool in tools:
            if isinstance(tool.get("category"), str):
                counts[tool["category"]] = counts.get(tool["category"], 0) + 1
        ordered = sorted(counts.items())
        if as_json:
            listed = [{"category": c, "count": n} for c, n in ordered]
            return Answer(json.dumps(listed, indent=2, sort_keys=True) + "\n")
        return Answer("".join(f"{c} ({n} {'tool' if n == 1 else 'tools'})\n" for c, n in ordered))
    found = tools
    category, tag, word = (_after(args, f) for f in ("--category", "--tag", "--search"))
    if category is not None:
        found = [t for t in tools if t.get("category") == category]
    elif tag is not None:
        found = [t for t in tools if tag in (t.get("tags") or [])]
    elif word is not None:
        low = word.lower()
        found = [
            t
            for t in tools
            if low in str(t["name"]).lower() or low in str(t.get("description", "")).lower()
        ]
    if as_json:
        listed = []
        for tool in found:
            entry: dict[str, Any] = {"name": tool["name"], "description": tool.get("description")}
            if tool.get("tags"):
                entry["tags"] = tool["tags"]
            if tool.get("category") is not None:
                entry["category"] = tool["category"]
            listed.append(entry)
        return Answer(json.dumps(listed, indent=2, sort_keys=True) + "\n")
    return Answer("".join(f"{t['name']:<20} {t.get('description', '')}\n" for t in found))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
