"""`expect: fail` (negative controls): the outcome recorded stays what happened; `llmtt check`
and the reports read it against the expectation, and editing `expect` re-runs no agent."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree as ET

from conftest import GIT_TOML, Project

LLMTT = str(Path(sys.executable).parent / "llmtt")
CONTROL = """\
expect: {expect}
task: {{prompt: make a repository and tag it v1.0}}
solution: [git init -q .]
evaluation:
  gates:
    - {{type: file_exists, path: .git/HEAD}}
    - {{type: file_exists, path: .git/refs/tags/v1.0}}
"""
GOOD = "task: {prompt: x}\nsolution: [git init -q .]\n" + (
    "evaluation:\n  gates:\n    - {type: file_exists, path: .git/HEAD}\n"
)


def check(project: Project) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [LLMTT, "check", str(project.root)], capture_output=True, text=True, timeout=60
    )


def test_a_negative_control_that_fails_passes_check_and_reads_failed_as_expected(
    project: Project,
) -> None:
    project.write("llmtt.toml", GIT_TOML)
    project.write("scenarios/good.yaml", GOOD)
    project.write("scenarios/control.yaml", CONTROL.format(expect="pass"))
    assert project.doit("run").code == 0
    assert check(project).returncode == 1  # without `expect: fail`, its Fail fails CI
    project.write("scenarios/control.yaml", CONTROL.format(expect="fail"))
    again = project.doit("run")
    assert again.code == 0, again.out + again.err
    # only the reports are written again: no agent, no evaluation re-runs for an expectation
    assert again.executed() == ["aggregate"], again.out
    done = check(project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed, 1 failed** (1 failed as expected)" in done.stdout
    assert "had the outcome its scenario expects" in done.stdout
    # what happened is recorded as it happened
    assert project.json("control/oracle/r1/result.json")["outcome"] == "fail"
    row = {r["scenario"]: r for r in project.json("report.json")["runs"]}["control"]
    assert (row["outcome"], row["expect"], row["verdict"]) == ("fail", "fail", "fail (as expected)")
    report_md = (project.results() / "report.md").read_text()
    assert "| control/oracle/r1 | fail (as expected) |" in report_md
    assert "(1 failed as expected: `expect: fail`)" in report_md
    assert "FAIL (AS EXPECTED)" in (project.results() / "report.html").read_text()
    suite = ET.parse(project.results() / "junit.xml").getroot()
    assert suite.get("failures") == "0"
    (case,) = [c for c in suite if c.get("classname") == "control"]
    assert case.find("failure") is None
    assert "failed as expected" in (case.findtext("system-out") or "")


def test_a_negative_control_that_passes_fails_check(project: Project) -> None:
    project.write("llmtt.toml", GIT_TOML)
    broken = CONTROL.format(expect="fail").replace("refs/tags/v1.0", "HEAD")
    project.write("scenarios/control.yaml", broken)
    assert project.doit("run").code == 0  # a Pass is a result like any other
    done = check(project)
    assert done.returncode == 1, done.stdout
    assert "**1 passed unexpectedly**" in done.stdout
    assert "| control/oracle/r1 | pass (unexpected) | the scenario expects fail" in done.stdout
    assert "PASS (UNEXPECTED)" in (project.results() / "report.html").read_text()
    suite = ET.parse(project.results() / "junit.xml").getroot()
    assert suite.get("failures") == "1"
    failure = suite.find("testcase/failure")
    assert failure is not None and "expects fail" in (failure.get("message") or "")


def test_expect_takes_pass_or_fail_only(project: Project) -> None:
    project.write("llmtt.toml", GIT_TOML)
    project.write("scenarios/control.yaml", CONTROL.format(expect="maybe"))
    done = subprocess.run(
        [LLMTT, "validate", str(project.root)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "expect" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) <= 3, done.stderr
