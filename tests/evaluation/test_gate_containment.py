"""File gates read only files inside the workspace, and no regex gate can hang a run."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import GIT_TOML, Project
from pydantic import TypeAdapter

from llmtt.evaluation.gates import GateContext, run_gates
from llmtt.spec.gates import FileContains, FileExists, FileMatches, Gate

GATE = TypeAdapter(Gate)


def check(work: Path, *specs: dict[str, Any] | Gate, timeout: float = 10) -> list[dict[str, Any]]:
    gates = [s if not isinstance(s, dict) else GATE.validate_python(s) for s in specs]
    env = {"PATH": os.environ["PATH"], "HOME": str(work.parent)}
    return run_gates(gates, GateContext(work, env, timeout, []))


@pytest.fixture
def work(tmp_path: Path) -> Path:
    work = tmp_path / "workspace"
    work.mkdir()
    (work / "inside.txt").write_text("inside content\n")
    (tmp_path / "outside.txt").write_text("outside content\n")
    return work


def test_links_out_of_the_workspace_fail_without_being_read(work: Path) -> None:
    (work / "environ").symlink_to("/proc/self/environ")  # llmtt's own environment
    (work / "passwd").symlink_to("/etc/passwd")
    (work / "up").symlink_to("../outside.txt")
    (work / "etc").symlink_to("/etc")  # a linked folder
    results = check(
        work,
        {"type": "file_contains", "path": "environ", "substring": "PATH="},
        {"type": "file_exists", "path": "passwd"},
        {"type": "file_matches", "path": "up", "pattern": "outside"},
        {"type": "file_contains", "path": "etc/passwd", "substring": "root"},
    )
    assert [r["passed"] for r in results] == [False] * 4
    messages = [r["message"] for r in results]
    assert messages[0].startswith("environ resolves outside the workspace (to /proc/")
    assert messages[0].endswith("/environ); gates read only workspace files")
    assert messages[1] == (
        "passwd resolves outside the workspace (to /etc/passwd); gates read only workspace files"
    )
    assert f"(to {work.parent / 'outside.txt'})" in messages[2]
    assert "etc/passwd resolves outside the workspace (to /etc/passwd)" in messages[3]
    assert not any("PATH=" in m or "outside content" in m or "root:" in m for m in messages)


def test_absolute_and_dotdot_paths_are_refused_at_run_time_too(work: Path) -> None:
    # The scenario loader refuses these; gates built some other way must not read them either.
    (work / "sub").mkdir()
    results = check(
        work,
        FileExists.model_construct(path="/etc/passwd"),
        FileContains.model_construct(path="../outside.txt", substring="outside"),
        FileContains.model_construct(path="sub/../inside.txt", substring="inside"),
    )
    assert [r["passed"] for r in results] == [False, False, True]
    assert "/etc/passwd resolves outside the workspace" in results[0]["message"]
    assert "../outside.txt resolves outside the workspace" in results[1]["message"]


def test_links_within_the_workspace_are_followed(work: Path) -> None:
    (work / "docs").mkdir()
    (work / "docs" / "alias").symlink_to("../inside.txt")
    (work / "loop").symlink_to("loop")
    (work / "dangling").symlink_to("/nonexistent/file")
    results = check(
        work,
        {"type": "file_contains", "path": "docs/alias", "substring": "inside"},
        {"type": "file_exists", "path": "loop"},
        {"type": "file_exists", "path": "dangling"},
    )
    assert [r["passed"] for r in results] == [True, False, False]
    assert results[1]["message"].startswith("loop cannot be resolved")
    assert results[2]["message"] == "dangling does not exist"


def test_a_named_pipe_hangs_neither_a_file_gate_nor_a_command_gate(work: Path) -> None:
    os.mkfifo(work / "pipe")
    started = time.monotonic()
    results = check(
        work,
        {"type": "file_contains", "path": "pipe", "substring": "x"},
        {"type": "command_succeeds", "command": "test -f inside.txt"},
    )
    assert [r["passed"] for r in results] == [False, True]
    assert results[0]["message"] == "pipe is not a regular file"
    assert time.monotonic() - started < 5


PATTERNS = [
    "^body",
    "line$",
    "^# Title$",
    "(?i)TITLE",
    r"\bbody\b",
    r"\d+",
    "^$",
    "(?s)Title.*line",
    "Title.line",
    r"(?P<w>l)ine",
    "[]x]",
    r"\Abody",
    r"line\Z",
    "é",
    "x*",
]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_regex_gates_agree_with_re_multiline(work: Path, pattern: str) -> None:
    text = "# Title\nbody line\n\nnumber 42 é\n"
    (work / "notes.md").write_text(text)
    expected = re.search(pattern, text, re.MULTILINE) is not None
    results = check(
        work,
        {"type": "file_matches", "path": "notes.md", "pattern": pattern},
        {"type": "command_output_matches", "command": "cat notes.md", "pattern": pattern},
    )
    assert [r["passed"] for r in results] == [expected, expected]


@pytest.mark.filterwarnings("ignore:Possible nested set:FutureWarning")  # re, at load
def test_posix_classes_work_and_a_pattern_regex_refuses_fails_the_gate(work: Path) -> None:
    # `re` reads [[:digit:]] as a set of "[:digt" then "]"; `regex` as grep does: a digit.
    (work / "notes.md").write_text("version 42\n")
    results = check(
        work,
        {"type": "file_matches", "path": "notes.md", "pattern": "^version [[:digit:]]+$"},
        FileMatches.model_construct(path="notes.md", pattern="(unclosed"),
    )
    assert results[0]["passed"] is True
    assert results[1]["passed"] is False
    assert results[1]["message"].startswith("notes.md: pattern /(unclosed/ cannot be used: ")


CATASTROPHIC = "(a|aa)+$"  # exponential backtracking on a run of a's that ends in b


def test_planted_links_and_catastrophic_patterns_in_a_real_run(project: Project) -> None:
    """The agent plants links to llmtt's environment and /etc; patterns that would backtrack
    for ever are stopped at the gate's timeout; the run ends in time with every gate reported."""
    secret = "sk-planted-3c1a9e7f5b2d4068"
    project.write("llmtt.toml", GIT_TOML)
    project.write(
        "scenarios/hostile.yaml",
        f"""\
        task: {{prompt: Leave files.}}
        solution:
          - ln -s /proc/self/environ env.txt
          - ln -s /etc/passwd passwd
          - printf '{"a" * 64}b\\n' > a.txt
        evaluation:
          gates:
            - {{type: file_contains, path: env.txt, substring: "{secret}"}}
            - {{type: file_exists, path: passwd}}
            - {{type: file_matches, path: a.txt, pattern: '{CATASTROPHIC}', timeout_secs: 1}}
            - type: command_output_matches
              command: cat a.txt
              pattern: '{CATASTROPHIC}'
              timeout_secs: 1
            - {{type: file_exists, path: a.txt}}
        """,
    )
    started = time.monotonic()
    result = project.doit("run", env={"PLANTED_API_KEY": secret}, timeout=60)
    assert result.code == 0, result.out + result.err
    assert time.monotonic() - started < 60
    gates = project.json("hostile/oracle/r1/gates.json")["gates"]
    assert [g["passed"] for g in gates] == [False, False, False, False, True]
    assert "env.txt resolves outside the workspace (to /proc/" in gates[0]["message"]
    assert "passwd resolves outside the workspace (to /etc/passwd)" in gates[1]["message"]
    assert gates[2]["message"] == f"a.txt: pattern /{CATASTROPHIC}/ took longer than 1 s"
    assert gates[3]["message"] == (
        f"output of `cat a.txt`: pattern /{CATASTROPHIC}/ took longer than 1 s"
    )
    assert project.json("hostile/oracle/r1/metrics.json")["outcome"] == "fail"
