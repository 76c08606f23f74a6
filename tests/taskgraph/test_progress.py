"""What `doit run` says while it works (llmtt/taskgraph/progress.py): a line as each run's agent
starts and ends with its turns, tokens, cost and the session's spend, one line when nothing was
to do, and silence under `-v 0` or LLMTT_QUIET=1; doit's own lines and exit codes stay."""

from __future__ import annotations

import re

from conftest import GIT_TOML, Project

SCENARIO = """\
task: {prompt: Make a git repository.}
solution: [git init -q .]
evaluation:
  gates:
    - {type: file_exists, path: .git/HEAD}
"""


def _project(project: Project) -> Project:
    project.write("llmtt.toml", GIT_TOML)
    project.write("scenarios/a.yaml", SCENARIO)
    project.write("scenarios/b.yaml", SCENARIO)
    return project


def test_a_line_per_run_then_one_line_when_nothing_is_to_do(project: Project) -> None:
    _project(project)
    first = project.doit("run", "-n", "2")
    assert first.code == 0, first.out + first.err
    for run in ("a/oracle/r1", "b/oracle/r1"):
        assert f"llmtt: started {run} (" in first.out
        assert re.search(rf"^llmtt: {run}: agent done in \d+\.\d s$", first.out, re.M), first.out
    assert "llmtt: 2 agent run(s) in " in first.out
    assert ".  a/oracle/r1:agent" in first.out  # doit's own lines stay
    second = project.doit("run")
    assert second.code == 0
    assert second.out.strip() == "llmtt: 2 runs up to date; nothing to do"
    assert project.doit("run", "-v", "0").out.strip() == ""
    assert project.doit("run", env={"LLMTT_QUIET": "1"}).out.strip() == ""


def test_an_agent_line_gives_turns_tokens_cost_and_the_session_spend(project: Project) -> None:
    _project(project)
    result = project.doit("run", "agent=litellm", "model=scripted", "scenario=a", "budget=2")
    assert result.code == 0, result.out + result.err
    line = next(x for x in result.out.splitlines() if x.startswith("llmtt: a/litellm-scripted"))
    assert re.fullmatch(
        r"llmtt: a/litellm-scripted/r1: agent done in \d+\.\d s: 2 turn\(s\), [\d,]+ in / "
        r"\d+ out tokens, \$0\.0000; session spend \$0\.0000 of \$2\.00",
        line,
    ), line


def test_progress_keeps_doits_exit_code_for_a_run_not_carried_out(project: Project) -> None:
    _project(project)
    project.write("llmtt.toml", GIT_TOML + '\n[agents.claude-code]\nexecutable = "nowhere"\n')
    loud = project.doit("run", "agent=claude-code", "model=scripted", "scenario=a")
    assert loud.code == 1
    assert "llmtt: a/claude-code-scripted/r1: could not be carried out: claude-code:" in loud.out
    quiet = project.doit("run", "-v", "0", "agent=claude-code", "model=scripted", "scenario=a")
    assert quiet.code == 1
    assert ".  a/claude-code-scripted/r1:agent" in quiet.out
    assert "llmtt: started" not in quiet.out
