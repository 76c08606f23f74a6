"""Malformed configs, scenarios and rubrics: each error names file, line, field and the fix."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TOOL_TOML

from llmtt.errors import ConfigError
from llmtt.spec.project import load_project

OK_SCENARIO = "task:\n  prompt: Do it.\n"
RUBRIC = """\
criteria:
  - id: correct
    weight: 0.6
    description: right answer
  - id: tidy
    weight: 0.4
    description: few commands
"""
JUDGED = "task: {prompt: x}\nevaluation:\n  judge: {enabled: true, rubric: rubrics/r.yaml}\n"

# (case id, files, file with the error, line, field, words the message must contain)
CASES = [
    # llmtt.toml
    (
        "toml-unknown-key",
        {"llmtt.toml": "[matrix]\nagentz = ['oracle']\n"},
        "llmtt.toml",
        2,
        "matrix.agentz",
        "did you mean 'agents'",
    ),
    (
        "toml-unknown-table",
        {"llmtt.toml": "[matrx]\nrepeats = 2\n"},
        "llmtt.toml",
        1,
        "matrx",
        "did you mean 'matrix'",
    ),
    (
        "toml-wrong-type",
        {"llmtt.toml": "[matrix]\n\nrepeats = 'three'\n"},
        "llmtt.toml",
        3,
        "matrix.repeats",
        "valid integer",
    ),
    (
        "toml-out-of-range",
        {"llmtt.toml": "[matrix]\nrepeats = 0\n"},
        "llmtt.toml",
        2,
        "matrix.repeats",
        "greater than or equal to 1",
    ),
    (
        "toml-syntax",
        {"llmtt.toml": "[matrix]\nrepeats = = 2\n"},
        "llmtt.toml",
        2,
        None,
        "invalid TOML",
    ),
    (
        "toml-bad-pattern",
        {"llmtt.toml": "[target]\nbinary = 'git'\ncommand_pattern = 'git ('\n"},
        "llmtt.toml",
        3,
        "target.command_pattern",
        "invalid regular expression",
    ),
    (
        "toml-undeclared-variant",
        {"llmtt.toml": "[matrix]\nvariants = ['v9']\n"},
        "llmtt.toml",
        2,
        "matrix.variants[0]",
        "no [variants.v9] table",
    ),
    (
        "toml-targets-unknown-key",
        {"llmtt.toml": "[targets.git]\nbinary = 'git'\nenviron = {}\n"},
        "llmtt.toml",
        3,
        "targets.git.environ",
        "did you mean 'env'",
    ),
    (
        "toml-env-not-strings",
        {"llmtt.toml": "[target]\nenv = { A = 1 }\n"},
        "llmtt.toml",
        2,
        "target.env.A",
        "valid string",
    ),
    (
        "toml-negative-timeout",
        {"llmtt.toml": "[run]\ntimeout_secs = -5\n"},
        "llmtt.toml",
        2,
        "run.timeout_secs",
        "greater than 0",
    ),
    (
        "toml-paths-unknown",
        {"llmtt.toml": "[paths]\nresult = 'out'\n"},
        "llmtt.toml",
        2,
        "paths.result",
        "did you mean 'results'",
    ),
    # scenarios
    (
        "yaml-syntax",
        {"scenarios/s.yaml": "task:\n  prompt: [unclosed\n"},
        "scenarios/s.yaml",
        3,
        None,
        "invalid YAML",
    ),
    (
        "yaml-not-mapping",
        {"scenarios/s.yaml": "- just\n- a list\n"},
        "scenarios/s.yaml",
        1,
        None,
        "must be a YAML mapping",
    ),
    (
        "missing-prompt",
        {"scenarios/s.yaml": "name: s\ntask:\n  promt: hi\n"},
        "scenarios/s.yaml",
        2,
        "task.prompt",
        "required field is missing",
    ),
    (
        "unknown-top-level",
        {"scenarios/s.yaml": OK_SCENARIO + "evalution:\n  gates: []\n"},
        "scenarios/s.yaml",
        3,
        "evalution",
        "did you mean 'evaluation'",
    ),
    (
        "missing-task",
        {"scenarios/s.yaml": "name: s\ntags: [a]\n"},
        "scenarios/s.yaml",
        1,
        "task",
        "required field is missing",
    ),
    (
        "unknown-gate-type",
        {
            "scenarios/s.yaml": OK_SCENARIO
            + "evaluation:\n  gates:\n    - type: file_exist\n      path: a\n"
        },
        "scenarios/s.yaml",
        5,
        "evaluation.gates[0].type",
        "did you mean 'file_exists'",
    ),
    (
        "gate-missing-field",
        {
            "scenarios/s.yaml": OK_SCENARIO
            + "evaluation:\n  gates:\n    - {type: file_exists, path: a}\n    - type: file_contains\n      path: a\n"
        },
        "scenarios/s.yaml",
        6,
        "evaluation.gates[1].substring",
        "required field is missing",
    ),
    (
        "gate-unknown-field",
        {
            "scenarios/s.yaml": OK_SCENARIO
            + "evaluation:\n  gates:\n    - type: command_succeeds\n      command: 'true'\n      timeout: 5\n"
        },
        "scenarios/s.yaml",
        7,
        "evaluation.gates[0].timeout",
        "did you mean 'timeout_secs'",
    ),
    (
        "gate-bad-regex",
        {
            "scenarios/s.yaml": OK_SCENARIO
            + "evaluation:\n  gates:\n    - type: command_output_matches\n      command: ls\n      pattern: '(['\n"
        },
        "scenarios/s.yaml",
        7,
        "evaluation.gates[0].pattern",
        "invalid regular expression",
    ),
    (
        "file-matches-bad-regex",
        {
            "scenarios/s.yaml": OK_SCENARIO
            + "evaluation:\n  gates:\n    - {type: file_matches, path: a, pattern: 'x{2'}\n    - {type: file_matches, path: a, pattern: '*x'}\n"
        },
        "scenarios/s.yaml",
        6,
        "evaluation.gates[1].pattern",
        "invalid regular expression",
    ),
    (
        "bad-jsonpath",
        {
            "scenarios/s.yaml": OK_SCENARIO
            + "evaluation:\n  gates:\n    - type: command_json_path\n      command: cat x\n      path: '$[?'\n      assertion: exists\n"
        },
        "scenarios/s.yaml",
        7,
        "evaluation.gates[0].path",
        "invalid JSONPath",
    ),
    (
        "bad-assertion",
        {
            "scenarios/s.yaml": OK_SCENARIO
            + "evaluation:\n  gates:\n    - type: command_json_path\n      command: cat x\n      path: $.a\n      assertion: size > 2\n"
        },
        "scenarios/s.yaml",
        8,
        "evaluation.gates[0].assertion",
        "'len >= N'",
    ),
    (
        "absolute-path",
        {
            "scenarios/s.yaml": OK_SCENARIO
            + "evaluation:\n  gates:\n    - {type: file_exists, path: /etc/passwd}\n"
        },
        "scenarios/s.yaml",
        5,
        "evaluation.gates[0].path",
        "relative path inside the workspace",
    ),
    (
        "dotdot-path",
        {
            "scenarios/s.yaml": OK_SCENARIO
            + "evaluation:\n  gates:\n    - type: file_contains\n      path: ../secret\n      substring: x\n"
        },
        "scenarios/s.yaml",
        6,
        "evaluation.gates[0].path",
        "without '..'",
    ),
    (
        "negative-gate-timeout",
        {
            "scenarios/s.yaml": OK_SCENARIO
            + "evaluation:\n  gates:\n    - type: command_succeeds\n      command: ls\n      timeout_secs: -1\n"
        },
        "scenarios/s.yaml",
        7,
        "evaluation.gates[0].timeout_secs",
        "greater than 0",
    ),
    (
        "missing-fixture",
        {"scenarios/s.yaml": OK_SCENARIO + "fixture: fixtures/nope\n"},
        "scenarios/s.yaml",
        3,
        "fixture",
        "does not exist",
    ),
    (
        "undeclared-target",
        {
            "llmtt.toml": "[targets.git]\nbinary = 'git'\n",
            "scenarios/s.yaml": OK_SCENARIO + "target: gti\n",
        },
        "scenarios/s.yaml",
        3,
        "target",
        "did you mean 'git'",
    ),
    (
        "duplicate-names",
        {
            "scenarios/a.yaml": "name: same\n" + OK_SCENARIO,
            "scenarios/b.yaml": OK_SCENARIO + "name: same\n",
        },
        "scenarios/b.yaml",
        3,
        "name",
        "also used by",
    ),
    (
        "bad-name",
        {"scenarios/s.yaml": "name: has space\n" + OK_SCENARIO},
        "scenarios/s.yaml",
        1,
        "name",
        "use letters, digits",
    ),
    (
        "judge-without-rubric",
        {"scenarios/s.yaml": OK_SCENARIO + "evaluation:\n  judge:\n    enabled: true\n"},
        "scenarios/s.yaml",
        4,
        "evaluation.judge",
        "no rubric is named",
    ),
    (
        "missing-rubric-file",
        {"scenarios/s.yaml": JUDGED},
        "scenarios/s.yaml",
        3,
        "evaluation.judge.rubric",
        "does not exist",
    ),
    (
        "composite-sum",
        {
            "scenarios/s.yaml": OK_SCENARIO
            + "evaluation:\n  composite:\n    gate_weight: 0.5\n    judge_weight: 0.2\n"
        },
        "scenarios/s.yaml",
        4,
        "evaluation.composite",
        "sum to 1",
    ),
    (
        "scenario-matrix-key",
        {"scenarios/s.yaml": OK_SCENARIO + "matrix:\n  agent: [oracle]\n"},
        "scenarios/s.yaml",
        4,
        "matrix.agent",
        "did you mean 'agents'",
    ),
    (
        "tier-type",
        {"scenarios/s.yaml": OK_SCENARIO + "tier: first\n"},
        "scenarios/s.yaml",
        3,
        "tier",
        "valid integer",
    ),
    (
        "tags-not-list",
        {"scenarios/s.yaml": OK_SCENARIO + "tags: 7\n"},
        "scenarios/s.yaml",
        3,
        "tags",
        "valid list",
    ),
    # scripts
    (
        "scripts-unknown-key",
        {"scenarios/s.yaml": OK_SCENARIO + "scripts:\n  posts: []\n"},
        "scenarios/s.yaml",
        4,
        "scripts.posts",
        "did you mean 'post'",
    ),
    (
        "scripts-post-neither-command-nor-path",
        {"scenarios/s.yaml": OK_SCENARIO + "scripts:\n  post:\n    - {timeout_secs: 5}\n"},
        "scenarios/s.yaml",
        5,
        "scripts.post[0]",
        "give either `command` (a shell command run in the workspace) or `path`",
    ),
    (
        "scripts-post-both",
        {"scenarios/s.yaml": OK_SCENARIO + "scripts:\n  post:\n    - {command: a, path: b}\n"},
        "scenarios/s.yaml",
        5,
        "scripts.post[0]",
        "not both",
    ),
    (
        "scripts-post-timeout",
        {
            "scenarios/s.yaml": OK_SCENARIO
            + "scripts:\n  post:\n    - command: a\n      timeout_secs: 0\n"
        },
        "scenarios/s.yaml",
        6,
        "scripts.post[0].timeout_secs",
        "greater than 0",
    ),
    (
        "scripts-evaluator-without-name",
        {"scenarios/s.yaml": OK_SCENARIO + "scripts:\n  evaluators:\n    - {command: a}\n"},
        "scenarios/s.yaml",
        5,
        "scripts.evaluators[0].name",
        "required field is missing",
    ),
    (
        "scripts-evaluator-names-twice",
        {
            "scenarios/s.yaml": OK_SCENARIO
            + "scripts:\n  evaluators:\n    - {name: q, command: a}\n    - {name: q, command: b}\n"
        },
        "scenarios/s.yaml",
        4,
        "scripts.evaluators",
        "evaluator names must be unique: q repeated",
    ),
    (
        "scripts-missing-file",
        {"scenarios/s.yaml": OK_SCENARIO + "scripts:\n  post:\n    - path: checks/nope.sh\n"},
        "scenarios/s.yaml",
        5,
        "scripts.post[0].path",
        "nope.sh does not exist (paths are relative to the scenario file)",
    ),
    (
        "scripts-file-not-executable",
        {
            "scenarios/s.yaml": OK_SCENARIO
            + "scripts:\n  evaluators:\n    - name: q\n      path: q.sh\n",
            "scenarios/q.sh": "#!/bin/sh\n",
        },
        "scenarios/s.yaml",
        6,
        "scripts.evaluators[0].path",
        "is not executable (chmod +x it)",
    ),
    (
        "scripts-file-outside-the-project",
        {"scenarios/s.yaml": OK_SCENARIO + "scripts:\n  post:\n    - path: ../../x.sh\n"},
        "scenarios/s.yaml",
        5,
        "scripts.post[0].path",
        "leads outside the project folder",
    ),
    (
        "script-gate-neither-command-nor-path",
        {
            "scenarios/s.yaml": OK_SCENARIO
            + "evaluation:\n  gates:\n    - {type: script, description: d}\n"
        },
        "scenarios/s.yaml",
        5,
        "evaluation.gates[0]",
        "give either `command`",
    ),
    (
        "script-gate-file-missing",
        {
            "scenarios/s.yaml": OK_SCENARIO
            + "evaluation:\n  gates:\n    - {type: script, path: gone.sh}\n"
        },
        "scenarios/s.yaml",
        5,
        "evaluation.gates[0].path",
        "gone.sh does not exist",
    ),
    (
        "toml-health-check-type",
        {"llmtt.toml": "[target]\nbinary = 'git'\nhealth_check = ['git', '--version']\n"},
        "llmtt.toml",
        3,
        "target.health_check",
        "valid string",
    ),
    (
        "health-check-gate-without-health-check",
        {"scenarios/s.yaml": OK_SCENARIO + "target:\n  health_check_gate: true\n"},
        "scenarios/s.yaml",
        3,
        "target",
        "health_check_gate = true but no health_check",
    ),
    # rubrics
    (
        "rubric-weights",
        {"scenarios/s.yaml": JUDGED, "rubrics/r.yaml": RUBRIC.replace("0.4", "0.5")},
        "rubrics/r.yaml",
        1,
        "criteria",
        "weights must sum to 1",
    ),
    (
        "rubric-duplicate-ids",
        {"scenarios/s.yaml": JUDGED, "rubrics/r.yaml": RUBRIC.replace("tidy", "correct")},
        "rubrics/r.yaml",
        5,
        "criteria[1].id",
        "appears more than once",
    ),
    (
        "rubric-missing-description",
        {
            "scenarios/s.yaml": JUDGED,
            "rubrics/r.yaml": RUBRIC.replace("    description: few commands\n", ""),
        },
        "rubrics/r.yaml",
        5,
        "criteria[1].description",
        "required field is missing",
    ),
    (
        "rubric-unknown-key",
        {
            "scenarios/s.yaml": JUDGED,
            "rubrics/r.yaml": RUBRIC.replace("weight: 0.6", "wieght: 0.6"),
        },
        "rubrics/r.yaml",
        3,
        "criteria[0].wieght",
        "did you mean 'weight'",
    ),
    (
        "rubric-empty",
        {"scenarios/s.yaml": JUDGED, "rubrics/r.yaml": "criteria: []\n"},
        "rubrics/r.yaml",
        1,
        "criteria",
        "at least 1 item",
    ),
    (
        "scenario-path-outside-the-workspace",
        {"scenarios/s.yaml": "task: {prompt: x}\npath: [.bashkit/bin, ../bin]\n"},
        "scenarios/s.yaml",
        2,
        "path",
        "must be a relative path inside the workspace",
    ),
    (
        "rubric-weight-range",
        {"scenarios/s.yaml": JUDGED, "rubrics/r.yaml": RUBRIC.replace("0.6", "1.6")},
        "rubrics/r.yaml",
        3,
        "criteria[0].weight",
        "less than or equal to 1",
    ),
]


def build(root: Path, files: dict[str, str]) -> None:
    files = {"llmtt.toml": TOOL_TOML, **files}
    if not any(name.startswith("scenarios/") for name in files):
        files["scenarios/ok.yaml"] = OK_SCENARIO
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (root / "scenarios").mkdir(exist_ok=True)


@pytest.mark.parametrize(
    ("files", "where", "line", "field", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_error_names_file_line_field_and_fix(
    tmp_path: Path, files: dict[str, str], where: str, line: int, field: str | None, words: str
) -> None:
    build(tmp_path, files)
    with pytest.raises(ConfigError) as caught:
        load_project(tmp_path)
    problems = caught.value.problems
    matching = [p for p in problems if p.file == tmp_path / where and words in p.message]
    assert matching, f"no problem in {where} mentioning {words!r}: {caught.value}"
    problem = matching[0]
    assert (problem.line, problem.field) == (line, field), str(problem)
    assert str(problem).startswith(f"{tmp_path / where}:{line}: ")


def test_every_problem_is_reported_not_only_the_first(tmp_path: Path) -> None:
    build(
        tmp_path, {"scenarios/a.yaml": "task: {}\n", "scenarios/b.yaml": "nope: 1\n" + OK_SCENARIO}
    )
    with pytest.raises(ConfigError) as caught:
        load_project(tmp_path)
    assert {p.file.name for p in caught.value.problems if p.file} == {"a.yaml", "b.yaml"}


def test_valid_project_loads(tmp_path: Path) -> None:
    build(tmp_path, {"scenarios/s.yaml": JUDGED, "rubrics/r.yaml": RUBRIC})
    project = load_project(tmp_path)
    assert [s.name for s in project.scenarios] == ["s"] and len(project.rubrics) == 1


@pytest.mark.parametrize("command", [["llmtt", "validate", "."], ["doit", "list"]])
def test_commands_print_the_message_and_exit_2_without_traceback(
    tmp_path: Path, command: list[str]
) -> None:
    build(tmp_path, {"scenarios/s.yaml": OK_SCENARIO + "evalution: {}\n"})
    (tmp_path / "dodo.py").write_text("from llmtt.tasks import *  # noqa: F403\n")
    exe = str(Path(sys.executable).parent / command[0])
    proc = subprocess.run(
        [exe, *command[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2
    assert (
        "scenarios/s.yaml:3: evalution: unknown key 'evalution'; did you mean 'evaluation'?"
        in proc.stderr
    )
    assert "Traceback" not in proc.stdout + proc.stderr
