"""The `llmtt` command in-process, and what loading the task list imports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import GIT_TOML, Project

from llmtt.commands.main import main


def test_schema_writes_json_schema_for_each_file_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["schema", "--out", str(tmp_path)]) == 0
    scenario = json.loads((tmp_path / "scenario.schema.json").read_text())
    assert "task" in scenario["required"]
    assert scenario["additionalProperties"] is False
    config = json.loads((tmp_path / "llmtt.toml.schema.json").read_text())
    assert {"target", "matrix", "paths", "budget", "judge"} <= set(config["properties"])
    assert (tmp_path / "rubric.schema.json").exists()


def test_validate_reports_counts_and_warnings(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    project.write("llmtt.toml", GIT_TOML)
    project.write("scenarios/a.yaml", "task: {prompt: x}\n")
    assert main(["validate", str(project.root)]) == 0
    captured = capsys.readouterr()
    assert "1 scenarios, 0 rubrics, 1 runs planned" in captured.out
    assert "no solution commands" in captured.err


def test_validate_error_exit_code(project: Project, capsys: pytest.CaptureFixture[str]) -> None:
    project.write("llmtt.toml", "[matrix]\nrepeats = -1\n")
    assert main(["validate", str(project.root)]) == 2
    assert "llmtt.toml:2: matrix.repeats" in capsys.readouterr().err


@pytest.mark.parametrize("executor", ["", '\n[executor]\nkind = "ray"\n'])
def test_task_list_loads_without_heavy_modules(project: Project, executor: str) -> None:
    project.write("llmtt.toml", GIT_TOML + executor)
    project.write(
        "scenarios/a.yaml",
        "task: {prompt: x}\nsolution: [git init]\nevaluation:\n  gates:\n"
        "    - {type: command_json_path, command: 'true', path: $.a, assertion: exists}\n",
    )
    # `doit list` as doit carries it out, through llmtt's loader (the lock, the plan, the task
    # list), then what it imported.
    probe = (
        "import contextlib, io, sys\n"
        "from llmtt.taskgraph.loader import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    code = main(['list'])\n"
        "assert code == 0 and 'a/oracle/r1' in out.getvalue(), (code, out.getvalue())\n"
        "heavy = {'litellm', 'jinja2', 'pexpect', 'ptyprocess', 'openai', 'httpx', 'ray'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], cwd=project.root, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
