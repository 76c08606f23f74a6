"""Malformed llmtt.toml, scenario and rubric files, each in a real project on disk.

Every case asserts the exact file, 1-based line, dotted field and the words of the message a
user needs to fix the mistake. The last tests drive `llmtt validate` and `doit list` as
processes: a bad project is exit code 2 with the located message, never a traceback.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import TOOL_TOML

from llmtt.commands.main import main as llmtt_main
from llmtt.errors import ConfigError, Problem
from llmtt.spec.project import load_project

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = REPO / ".venv" / "bin"


def rows(*lines: str) -> str:
    """A file whose line N is the Nth argument: expected line numbers read off directly."""
    return "\n".join(lines) + "\n"


PROMPT = "task: {prompt: Do it.}"  # a one-line valid task, so line 2 is the first free line
RUBRIC = rows(
    "name: r",  # 1
    "criteria:",  # 2
    "  - id: correct",  # 3
    "    weight: 0.6",  # 4
    "    description: the right answer",  # 5
    "  - id: tidy",  # 6
    "    weight: 0.4",  # 7
    "    description: few commands",  # 8
)
JUDGED = rows(
    PROMPT,
    "evaluation:",
    "  judge: {enabled: true, rubric: rubrics/r.yaml}",
)


def judged(rubric: str) -> dict[str, str | bytes]:
    """A valid scenario whose judge uses `rubrics/r.yaml` with the given text."""
    return {"scenarios/s.yaml": JUDGED, "rubrics/r.yaml": rubric}


def case(
    name: str,
    files: dict[str, str | bytes],
    where: str,
    line: int | None,
    field: str | None,
    *words: str,
) -> object:
    return pytest.param(files, where, line, field, words, id=name)


TOML_CASES = [
    case(
        "toml-unknown-key-suggestion",
        {"llmtt.toml": rows("# my project", "[matrix]", "agnets = ['oracle']")},
        "llmtt.toml",
        3,
        "matrix.agnets",
        "unknown key 'agnets'",
        "did you mean 'agents'",
    ),
    case(
        "toml-unknown-table-suggestion",
        {"llmtt.toml": rows("[judge]", "model = 'x'", "", "[budjet]", "max_usd = 1")},
        "llmtt.toml",
        4,
        "budjet",
        "did you mean 'budget'",
    ),
    case(
        "toml-wrong-type",
        {"llmtt.toml": rows("[matrix]", "agents = ['oracle']", "repeats = 'three'")},
        "llmtt.toml",
        3,
        "matrix.repeats",
        "valid integer",
        "'three'",
    ),
    case(
        "toml-out-of-range",
        {"llmtt.toml": rows("[matrix]", "", "repeats = 1001")},
        "llmtt.toml",
        3,
        "matrix.repeats",
        "less than or equal to 1000",
    ),
    case(
        "toml-repeats-zero",
        {"llmtt.toml": rows("[matrix]", "repeats = 0")},
        "llmtt.toml",
        2,
        "matrix.repeats",
        "greater than or equal to 1",
    ),
    case(
        "toml-bad-command-pattern",
        {"llmtt.toml": rows("[target]", "binary = 'git'", "command_pattern = 'git ('")},
        "llmtt.toml",
        3,
        "target.command_pattern",
        "invalid regular expression",
    ),
    case(
        "toml-bad-pattern-dotted-key",
        {"llmtt.toml": rows("# dotted keys, no table header", "target.command_pattern = '(['")},
        "llmtt.toml",
        2,
        "target.command_pattern",
        "invalid regular expression",
    ),
    case(
        "toml-syntax-error",
        {"llmtt.toml": rows("[matrix]", "agents = ['oracle']", "repeats = ")},
        "llmtt.toml",
        3,
        None,
        "invalid TOML",
    ),
    case(
        "toml-duplicate-key",
        {"llmtt.toml": rows("[matrix]", "repeats = 1", "repeats = 2")},
        "llmtt.toml",
        3,
        None,
        "invalid TOML",
    ),
    case(
        "toml-undeclared-variant",
        {
            "llmtt.toml": rows(
                "[variants.docs]", "files = {}", "[matrix]", "variants = ['none', 'doc']"
            )
        },
        "llmtt.toml",
        4,
        "matrix.variants[1]",
        "no [variants.doc] table",
        "did you mean 'docs'",
        "declared: docs, none",
    ),
    case(
        "toml-unknown-agent",
        {
            "llmtt.toml": rows(
                "[run]", "timeout_secs = 9", "[matrix]", "agents = ['oracle', 'claud-code']"
            )
        },
        "llmtt.toml",
        4,
        "matrix.agents[1]",
        "unknown agent 'claud-code'",
        "did you mean 'claude-code'",
        "[agents.claud-code] table with command = [...]",
    ),
    case(
        "toml-settings-for-unknown-agent",
        {"llmtt.toml": rows("[run]", "timeout_secs = 60", "[agents.opencod]", "args = ['-q']")},
        "llmtt.toml",
        3,
        "agents.opencod",
        "unknown agent 'opencod'",
        "did you mean 'opencode'",
    ),
    case(
        "toml-targets-unknown-key",
        {"llmtt.toml": rows('[targets."my-tool"]', "binary = 'x'", "binry = 'x'")},
        "llmtt.toml",
        3,
        "targets.my-tool.binry",
        "did you mean 'binary'",
    ),
    case(
        "toml-agents-unknown-key",
        {"llmtt.toml": rows("[agents.claude-code]", "argz = ['--verbose']")},
        "llmtt.toml",
        2,
        "agents.claude-code.argz",
        "did you mean 'args'",
    ),
    case(
        "toml-agent-parser-literal",
        {
            "llmtt.toml": rows(
                "[agents.mine]", "command = ['mine', '{prompt}']", "parser = 'claude'"
            )
        },
        "llmtt.toml",
        3,
        "agents.mine.parser",
        "'claude-code'",
        "'claude'",
    ),
    case(
        "toml-negative-price",
        {"llmtt.toml": rows("[models.m]", "litellm = 'x/y'", "input_usd_per_mtok = -2")},
        "llmtt.toml",
        3,
        "models.m.input_usd_per_mtok",
        "greater than or equal to 0",
    ),
    case(
        "toml-judge-chars-zero",
        {"llmtt.toml": rows("[judge]", "max_transcript_chars = 0")},
        "llmtt.toml",
        2,
        "judge.max_transcript_chars",
        "greater than 0",
    ),
    case(
        "toml-empty-agents",
        {"llmtt.toml": rows("[matrix]", "agents = []")},
        "llmtt.toml",
        2,
        "matrix.agents",
        "at least 1 item",
    ),
    case(
        "toml-inline-table-wrong-type",
        {"llmtt.toml": rows("", "target = { binary = 1 }")},
        "llmtt.toml",
        2,
        "target.binary",
        "valid string",
    ),
    case(
        "toml-negative-run-timeout",
        {"llmtt.toml": rows("[run]", "max_turns = 3", "timeout_secs = -5")},
        "llmtt.toml",
        3,
        "run.timeout_secs",
        "greater than 0",
    ),
    case(
        "toml-array-of-tables-for-table",
        {"llmtt.toml": rows("[[matrix]]", "repeats = 1")},
        "llmtt.toml",
        1,
        "matrix",
        "valid dictionary",
    ),
    case(
        # the folder is named on line 2; the message must point there, not only at the file
        "toml-scenario-folder-missing",
        {"llmtt.toml": rows("[paths]", "scenarios = 'nope'")},
        "llmtt.toml",
        2,
        "paths.scenarios",
        "does not exist",
    ),
]

SCENARIO_CASES = [
    case(
        "scenario-matrix-unknown-agent",
        {"scenarios/s.yaml": rows(PROMPT, "matrix:", "  agents: [oracle, codx]")},
        "scenarios/s.yaml",
        3,
        "matrix.agents[1]",
        "unknown agent 'codx'",
        "did you mean 'codex'",
    ),
    case(
        "scenario-matrix-undeclared-variant",
        {
            "llmtt.toml": rows("[variants.v1]", "files = {}"),
            "scenarios/s.yaml": rows(PROMPT, "matrix:", "  variants:", "    - v1", "    - v2"),
        },
        "scenarios/s.yaml",
        5,
        "matrix.variants[1]",
        "no [variants.v2] table in llmtt.toml",
        "declared: v1, none",
    ),
    case(
        "yaml-syntax-error",
        {"scenarios/s.yaml": rows("task:", "  prompt: a: b")},
        "scenarios/s.yaml",
        2,
        None,
        "invalid YAML",
    ),
    case(
        "yaml-tab-indent",
        {"scenarios/s.yaml": rows("task:", "\tprompt: a")},
        "scenarios/s.yaml",
        2,
        None,
        "invalid YAML",
    ),
    case(
        "yaml-not-a-mapping",
        {"scenarios/s.yaml": rows("- task", "- prompt")},
        "scenarios/s.yaml",
        1,
        None,
        "must be a YAML mapping",
    ),
    case(
        "yaml-empty-file",
        {"scenarios/s.yaml": ""},
        "scenarios/s.yaml",
        1,
        None,
        "must be a YAML mapping",
    ),
    case(
        # PyYAML keeps the last of two equal keys; the first block of gates would vanish
        "yaml-duplicate-key",
        {
            "scenarios/s.yaml": rows(
                PROMPT,
                "evaluation:",
                "  gates:",
                "    - {type: file_exists, path: out.txt}",
                "evaluation:",
                "  judge: {enabled: false}",
            )
        },
        "scenarios/s.yaml",
        5,
        "evaluation",
        "duplicate",
    ),
    case(
        "yaml-not-utf8",
        {"scenarios/s.yaml": b"name: s\ntask:\n  prompt: caf\xe9\n"},
        "scenarios/s.yaml",
        3,
        None,
        "utf-8",
    ),
    case(
        "missing-task-prompt",
        {"scenarios/s.yaml": rows("name: s", "task: {}")},
        "scenarios/s.yaml",
        2,
        "task.prompt",
        "required field is missing",
    ),
    case(
        "null-task-prompt",
        {"scenarios/s.yaml": rows("name: s", "task:", "  prompt:")},
        "scenarios/s.yaml",
        3,
        "task.prompt",
        "valid string",
    ),
    case(
        "unknown-top-level-key",
        {"scenarios/s.yaml": rows(PROMPT, "evalution:", "  gates: []")},
        "scenarios/s.yaml",
        2,
        "evalution",
        "unknown key 'evalution'",
        "did you mean 'evaluation'",
    ),
    case(
        "unknown-gate-type",
        {
            "scenarios/s.yaml": rows(
                PROMPT,
                "evaluation:",
                "  gates:",
                "    - {type: file_exists, path: a}",
                "    - path: a",
                "      type: file_exist",
            )
        },
        "scenarios/s.yaml",
        6,
        "evaluation.gates[1].type",
        "unknown type 'file_exist'",
        "did you mean 'file_exists'",
    ),
    case(
        "gate-missing-type",
        {"scenarios/s.yaml": rows(PROMPT, "evaluation:", "  gates:", "    - path: a")},
        "scenarios/s.yaml",
        4,
        "evaluation.gates[0].type",
        "missing",
        "file_exists",
    ),
    case(
        "gate-not-a-mapping",
        {"scenarios/s.yaml": rows(PROMPT, "evaluation:", "  gates:", "    - file_exists")},
        "scenarios/s.yaml",
        4,
        "evaluation.gates[0]",
        "valid dictionary",
    ),
    case(
        "gate-missing-field",
        {
            "scenarios/s.yaml": rows(
                PROMPT,
                "evaluation:",
                "  gates:",
                "    - {type: file_exists, path: a}",
                "    - type: file_contains",
                "      path: a",
            )
        },
        "scenarios/s.yaml",
        5,
        "evaluation.gates[1].substring",
        "required field is missing",
    ),
    case(
        "gate-unknown-field-suggestion",
        {
            "scenarios/s.yaml": rows(
                PROMPT,
                "evaluation:",
                "  gates:",
                "    - {type: file_exists, path: a}",
                "    - type: command_output_contains",
                "      command: ls",
                "      substring: x",
                "      timeout: 5",
            )
        },
        "scenarios/s.yaml",
        8,
        "evaluation.gates[1].timeout",
        "unknown key 'timeout'",
        "did you mean 'timeout_secs'",
    ),
    case(
        "command-output-matches-bad-regex",
        {
            "scenarios/s.yaml": rows(
                PROMPT,
                "evaluation:",
                "  gates:",
                "    - type: command_output_matches",
                "      command: ls",
                "      pattern: '(['",
            )
        },
        "scenarios/s.yaml",
        6,
        "evaluation.gates[0].pattern",
        "invalid regular expression",
    ),
    case(
        "file-matches-bad-regex",
        {
            "scenarios/s.yaml": rows(
                PROMPT,
                "evaluation:",
                "  gates:",
                "    - {type: file_matches, path: a, pattern: 'x+'}",
                "    - {type: file_matches, path: a, pattern: '*x'}",
            )
        },
        "scenarios/s.yaml",
        5,
        "evaluation.gates[1].pattern",
        "invalid regular expression",
    ),
    case(
        "invalid-jsonpath",
        {
            "scenarios/s.yaml": rows(
                PROMPT,
                "evaluation:",
                "  gates:",
                "    - type: command_json_path",
                "      command: cat data.json",
                "      path: '$[?'",
                "      assertion: exists",
            )
        },
        "scenarios/s.yaml",
        6,
        "evaluation.gates[0].path",
        "invalid JSONPath",
    ),
    case(
        "bad-assertion",
        {
            "scenarios/s.yaml": rows(
                PROMPT,
                "evaluation:",
                "  gates:",
                "    - type: command_json_path",
                "      command: cat data.json",
                "      path: $.items",
                "      assertion: size > 2",
            )
        },
        "scenarios/s.yaml",
        7,
        "evaluation.gates[0].assertion",
        "'exists'",
        "'len >= N'",
    ),
    case(
        "absolute-gate-path",
        {
            "scenarios/s.yaml": rows(
                PROMPT, "evaluation:", "  gates:", "    - {type: file_exists, path: /etc/passwd}"
            )
        },
        "scenarios/s.yaml",
        4,
        "evaluation.gates[0].path",
        "relative path inside the workspace",
        "/etc/passwd",
    ),
    case(
        "dotdot-gate-path",
        {
            "scenarios/s.yaml": rows(
                PROMPT,
                "evaluation:",
                "  gates:",
                "    - type: file_matches",
                "      pattern: x",
                "      path: sub/../../secret",
            )
        },
        "scenarios/s.yaml",
        6,
        "evaluation.gates[0].path",
        "without '..'",
    ),
    case(
        "negative-gate-timeout",
        {
            "scenarios/s.yaml": rows(
                PROMPT,
                "evaluation:",
                "  gates:",
                "    - type: command_succeeds",
                "      command: ls",
                "      timeout_secs: -1",
            )
        },
        "scenarios/s.yaml",
        6,
        "evaluation.gates[0].timeout_secs",
        "greater than 0",
    ),
    case(
        "negative-run-timeout",
        {"scenarios/s.yaml": rows(PROMPT, "run:", "  max_turns: 4", "  timeout_secs: -30")},
        "scenarios/s.yaml",
        4,
        "run.timeout_secs",
        "greater than 0",
        "-30",
    ),
    case(
        "zero-setup-timeout",
        {"scenarios/s.yaml": rows(PROMPT, "setup:", "  commands: [ls]", "  timeout_secs: 0")},
        "scenarios/s.yaml",
        4,
        "setup.timeout_secs",
        "greater than 0",
    ),
    case(
        "negative-cost",
        {"scenarios/s.yaml": rows(PROMPT, "cost:", "  max_usd: -1")},
        "scenarios/s.yaml",
        3,
        "cost.max_usd",
        "greater than or equal to 0",
    ),
    case(
        "fixture-missing",
        {"scenarios/s.yaml": rows(PROMPT, "description: d", "fixture: fixtures/nope")},
        "scenarios/s.yaml",
        3,
        "fixture",
        "does not exist",
        "nope",
    ),
    case(
        "undeclared-target",
        {
            "llmtt.toml": rows("[targets.git]", "binary = 'git'"),
            "scenarios/s.yaml": rows(PROMPT, "tags: [a]", "target: gti"),
        },
        "scenarios/s.yaml",
        3,
        "target",
        "no [targets.gti]",
        "did you mean 'git'",
    ),
    case(
        "target-override-unknown-key",
        {"scenarios/s.yaml": rows(PROMPT, "target:", "  binary: git", "  binarie: git")},
        "scenarios/s.yaml",
        4,
        "target.binarie",
        "unknown key 'binarie'",
        "did you mean 'binary'",
    ),
    case(
        "target-override-bad-regex",
        {"scenarios/s.yaml": rows(PROMPT, "target:", "  command_pattern: '('")},
        "scenarios/s.yaml",
        3,
        "target.command_pattern",
        "invalid regular expression",
    ),
    case(
        "duplicate-scenario-names",
        {
            "scenarios/a.yaml": rows("name: same", PROMPT),
            "scenarios/b.yaml": rows(PROMPT, "tags: [x]", "name: same"),
        },
        "scenarios/b.yaml",
        3,
        "name",
        "'same'",
        "a.yaml",
    ),
    case(
        "bad-name-characters",
        {"scenarios/s.yaml": rows(PROMPT, "name: has space!")},
        "scenarios/s.yaml",
        2,
        "name",
        "use letters, digits",
    ),
    case(
        "bad-name-from-file-stem",
        {"scenarios/bad name.yaml": rows(PROMPT)},
        "scenarios/bad name.yaml",
        1,
        "name",
        "rename the file or set `name:`",
    ),
    case(
        "name-of-the-report-panels-folder",
        {"scenarios/s.yaml": rows(PROMPT, "tags: [x]", "name: report-runs")},
        "scenarios/s.yaml",
        3,
        "name",
        "'report-runs' is reserved for report.html's folder of run panels",
        "rename the file or set another `name:`",
    ),
    case(
        "file-stem-of-the-report-panels-folder",
        {"scenarios/Report-Runs.yaml": rows(PROMPT)},
        "scenarios/Report-Runs.yaml",
        1,
        "name",
        "'report-runs' is reserved",
    ),
    case(
        "judge-enabled-without-rubric",
        {"scenarios/s.yaml": rows(PROMPT, "evaluation:", "  judge:", "    enabled: true")},
        "scenarios/s.yaml",
        3,
        "evaluation.judge",
        "no rubric is named",
    ),
    case(
        "judge-unknown-key",
        {"scenarios/s.yaml": rows(PROMPT, "evaluation:", "  judge:", "    rubrik: r.yaml")},
        "scenarios/s.yaml",
        4,
        "evaluation.judge.rubrik",
        "did you mean 'rubric'",
    ),
    case(
        "judge-threshold-out-of-range",
        {"scenarios/s.yaml": rows(PROMPT, "evaluation:", "  judge:", "    pass_threshold: 1.5")},
        "scenarios/s.yaml",
        4,
        "evaluation.judge.pass_threshold",
        "less than or equal to 1",
    ),
    case(
        "rubric-file-missing",
        {
            "scenarios/s.yaml": rows(
                PROMPT,
                "evaluation:",
                "  judge:",
                "    enabled: true",
                "    rubric: rubrics/gone.yaml",
            )
        },
        "scenarios/s.yaml",
        5,
        "evaluation.judge.rubric",
        "rubric file",
        "gone.yaml",
        "does not exist",
    ),
    case(
        "composite-weights-not-1",
        {
            "scenarios/s.yaml": rows(
                PROMPT,
                "evaluation:",
                "  composite:",
                "    gate_weight: 0.5",
                "    judge_weight: 0.2",
            )
        },
        "scenarios/s.yaml",
        3,
        "evaluation.composite",
        "must sum to 1",
        "0.7",
    ),
    case(
        "scenario-matrix-unknown-key",
        {"scenarios/s.yaml": rows(PROMPT, "matrix:", "  repeats: 2", "  agentz: [oracle]")},
        "scenarios/s.yaml",
        4,
        "matrix.agentz",
        "unknown key 'agentz'",
        "did you mean 'agents'",
    ),
    case(
        "scenario-matrix-repeats-zero",
        {"scenarios/s.yaml": rows(PROMPT, "matrix:", "  agents: [oracle]", "  repeats: 0")},
        "scenarios/s.yaml",
        4,
        "matrix.repeats",
        "1",
    ),
    case(
        "scenario-matrix-agents-not-a-list",
        {"scenarios/s.yaml": rows(PROMPT, "matrix:", "  agents: oracle")},
        "scenarios/s.yaml",
        3,
        "matrix.agents",
        "list",
    ),
]

RUBRIC_CASES = [
    case(
        "rubric-weights-not-1",
        judged(RUBRIC.replace("weight: 0.4", "weight: 0.5")),
        "rubrics/r.yaml",
        2,
        "criteria",
        "weights must sum to 1",
        "1.1",
    ),
    case(
        "rubric-duplicate-criterion-id",
        judged(RUBRIC.replace("id: tidy", "id: correct")),
        "rubrics/r.yaml",
        6,
        "criteria[1].id",
        "'correct'",
        "more than once",
    ),
    case(
        "rubric-missing-description",
        judged(RUBRIC.replace("    description: few commands\n", "")),
        "rubrics/r.yaml",
        6,
        "criteria[1].description",
        "required field is missing",
    ),
    case(
        "rubric-empty-description",
        judged(RUBRIC.replace("few commands", "''")),
        "rubrics/r.yaml",
        8,
        "criteria[1].description",
        "at least 1 character",
    ),
    case(
        "rubric-unknown-criterion-key",
        judged(RUBRIC.replace("weight: 0.4", "wieght: 0.4")),
        "rubrics/r.yaml",
        7,
        "criteria[1].wieght",
        "unknown key 'wieght'",
        "did you mean 'weight'",
    ),
    case(
        "rubric-unknown-top-level-key",
        judged(
            rows("name: r", "descripton: d", "criteria:", "  - {id: a, weight: 1, description: d}")
        ),
        "rubrics/r.yaml",
        2,
        "descripton",
        "did you mean 'description'",
    ),
    case(
        "rubric-empty-criteria",
        judged(rows("name: r", "criteria: []")),
        "rubrics/r.yaml",
        2,
        "criteria",
        "at least 1 item",
    ),
    case(
        "rubric-zero-weight",
        judged(RUBRIC.replace("weight: 0.6", "weight: 0")),
        "rubrics/r.yaml",
        4,
        "criteria[0].weight",
        "greater than 0",
    ),
    case(
        "rubric-bad-criterion-id",
        judged(rows("criteria:", "  - weight: 1", "    description: d", "    id: 'a b'")),
        "rubrics/r.yaml",
        4,
        "criteria[0].id",
        "'a b'",
        "use letters, digits",
    ),
    case(
        "rubric-not-a-mapping",
        judged(rows("- correct", "- tidy")),
        "rubrics/r.yaml",
        1,
        None,
        "must be a YAML mapping",
    ),
]


def write_project(root: Path, files: dict[str, str | bytes]) -> Path:
    """Lay out a project: an empty llmtt.toml and scenarios/ unless `files` says otherwise."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "scenarios").mkdir(exist_ok=True)
    for rel, text in {"llmtt.toml": TOOL_TOML, **files}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8")
    return root.resolve()


_PYTHON_NAMES = {"str", "int", "float", "bool", "none", "dict", "list"}


def leaks_internals(field: str | None) -> bool:
    """A field path naming pydantic's union members or types rather than the user's keys."""
    if not field:
        return False
    for part in re.sub(r"\[\d+\]", "", field).split("."):
        if part.lower() in _PYTHON_NAMES or "[" in part or part[:1].isupper():
            return True
        if part.startswith("function-"):
            return True
    return False


def describe(problems: list[Problem]) -> str:
    return "\n".join(f"  {p.file}:{p.line}: field={p.field!r}: {p.message}" for p in problems)


@pytest.mark.parametrize(
    ("files", "where", "line", "field", "words"), TOML_CASES + SCENARIO_CASES + RUBRIC_CASES
)
def test_malformed_input_is_located(
    tmp_path: Path,
    files: dict[str, str | bytes],
    where: str,
    line: int | None,
    field: str | None,
    words: tuple[str, ...],
) -> None:
    root = write_project(tmp_path / "proj", files)
    with pytest.raises(ConfigError) as info:
        load_project(root)
    problems = info.value.problems
    expected_file = root / where
    found = [
        p
        for p in problems
        if p.file is not None
        and Path(p.file).resolve() == expected_file
        and p.line == line
        and p.field == field
        and all(w in p.message for w in words)
    ]
    assert found, (
        f"wanted {where}:{line}: field={field!r}: message with {list(words)}; got:\n"
        + describe(problems)
    )
    # str(ConfigError) is one `path:line: field: message` line per problem
    text = str(info.value)
    assert len(text.splitlines()) == len(problems)
    prefix = f"{found[0].file}:{line}: " if line is not None else f"{found[0].file}: "
    assert prefix + (f"{field}: " if field else "") + found[0].message in text.splitlines()
    leaked = [p for p in problems if leaks_internals(p.field)]
    assert not leaked, "fields name pydantic internals, not the user's keys:\n" + describe(leaked)


def test_every_broken_file_is_reported_together(tmp_path: Path) -> None:
    """One load reports the problems of all scenarios and rubrics, not just the first."""
    root = write_project(
        tmp_path / "proj",
        {
            "scenarios/a.yaml": rows("name: a", "task: {}"),
            "scenarios/b.yaml": rows(PROMPT, "evalution: {}"),
            "scenarios/c.yaml": JUDGED,
            "rubrics/r.yaml": rows("criteria: []"),
        },
    )
    with pytest.raises(ConfigError) as info:
        load_project(root)
    located = {
        (Path(p.file).name if p.file else None, p.line, p.field) for p in info.value.problems
    }
    assert ("a.yaml", 2, "task.prompt") in located
    assert ("b.yaml", 2, "evalution") in located
    assert ("r.yaml", 1, "criteria") in located


VALID_TOML = rows(
    "[target]",
    "binary = 'mytool'",
    "command_pattern = '(?<![\\w./-])mytool(?![\\w.-])(?:\\s+([a-z][\\w-]*))?'",
    "version_command = 'echo mytool 1.0'",
    "env.MYTOOL_HOME = '.'",
    "",
    "[targets.other]",
    "binary = 'othertool'",
    "",
    "[agents.claude-code]",
    "args = ['--verbose']",
    "",
    "[models.m]",
    "litellm = 'openai/m'",
    "input_usd_per_mtok = 1.0",
    "",
    "[matrix]",
    "agents = ['oracle']",
    "variants = ['none', 'docs']",
    "repeats = 1",
    "",
    "[variants.docs]",
    "files = { 'AGENTS.md' = 'guide.md' }",
    "",
    "[paths]",
    "scenarios = 'scenarios'",
    "",
    "[budget]",
    "max_usd = 5",
    "",
    "[judge]",
    "model = 'm'",
    "max_transcript_chars = 1000",
    "",
    "[run]",
    "timeout_secs = 60",
)
VALID_SCENARIO = rows(
    "name: full",
    "description: every section, each well formed",
    "tags: [smoke]",
    "tier: 1",
    "target: other",
    "task:",
    "  prompt: Create out.txt.",
    "fixture: fixtures/base",
    "setup:",
    "  commands: ['true']",
    "  timeout_secs: 10",
    "solution: ['echo hi > out.txt']",
    "evaluation:",
    "  gates:",
    "    - {type: command_succeeds, command: 'true'}",
    "    - {type: command_output_contains, command: 'echo ab', substring: a}",
    "    - {type: command_output_matches, command: 'echo ab', pattern: 'a+b'}",
    "    - type: command_json_path",
    "      command: 'echo {\"a\": [1]}'",
    "      path: $.a",
    "      assertion: len >= 1",
    "    - {type: file_exists, path: out.txt, timeout_secs: 5}",
    "    - {type: file_contains, path: out.txt, substring: hi}",
    "    - {type: file_matches, path: sub/out.txt, pattern: '^h'}",
    "    - {type: no_transcript_errors}",
    "    - {type: script, command: 'true', description: a script}",
    "  judge: {enabled: true, rubric: rubrics/r.yaml, pass_threshold: 0.5}",
    "  composite: {gate_weight: 0.5, judge_weight: 0.3, interaction_weight: 0.2}",
    "cost:",
    "  max_usd: 1",
    "run:",
    "  timeout_secs: 30",
    "  max_turns: 5",
    "matrix:",
    "  agents: [oracle]",
    "  repeats: 2",
)


def write_valid_project(root: Path) -> Path:
    root = write_project(
        root,
        {
            "llmtt.toml": VALID_TOML,
            "guide.md": "Use mytool.\n",
            "scenarios/full.yaml": VALID_SCENARIO,
            "scenarios/fixtures/base/README": "fixture\n",
            "scenarios/minimal.yml": rows(PROMPT),
            "rubrics/r.yaml": RUBRIC,
        },
    )
    return root


def test_valid_project_loads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The building blocks of the cases above are valid on their own."""
    root = write_valid_project(tmp_path / "proj")
    project = load_project(root)
    assert sorted(s.name for s in project.scenarios) == ["full", "minimal"]
    full = project.scenario("full")
    assert len(full.spec.evaluation.gates) == 9
    assert project.rubric_path(full) in project.rubrics
    assert project.target_for(full).binary == "othertool"
    assert llmtt_main(["validate", str(root)]) == 0
    assert "2 scenarios, 1 rubrics" in capsys.readouterr().out


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("LLMTT_")}


def _broken_project(root: Path) -> Path:
    return write_project(
        root,
        {
            "dodo.py": "from llmtt.tasks import *  # noqa: F403\n",
            "scenarios/s.yaml": rows(
                PROMPT, "evaluation:", "  gates:", "    - {type: file_exists, path: ../x}"
            ),
            "scenarios/t.yaml": rows(PROMPT, "evalution: {}"),
        },
    )


def test_llmtt_validate_process_reports_problems(tmp_path: Path) -> None:
    root = _broken_project(tmp_path / "proj")
    proc = subprocess.run(
        [str(VENV_BIN / "llmtt"), "validate", str(root)],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.stderr.startswith("llmtt: ")
    assert f"{root / 'scenarios/s.yaml'}:4: evaluation.gates[0].path: " in proc.stderr
    assert "without '..'" in proc.stderr
    assert f"{root / 'scenarios/t.yaml'}:2: evalution: " in proc.stderr
    assert "did you mean 'evaluation'" in proc.stderr


def test_doit_list_on_broken_project_exits_2(tmp_path: Path) -> None:
    root = _broken_project(tmp_path / "proj")
    (root / "llmtt.toml").write_text(rows("[matrix]", "agents = ['oracle']", "repeats = 0"))
    proc = subprocess.run(
        [str(VENV_BIN / "doit"), "list"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out
    assert f"llmtt: {root / 'llmtt.toml'}:3: matrix.repeats: " in proc.stderr
    assert "greater than or equal to 1" in proc.stderr
    assert not (root / "llm-tool-test-results").exists()
