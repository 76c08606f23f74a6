"""The scripts protocol (specs/llm-tool-test/scripts.md) on real doit runs with real scripts:
post scripts, the `script` gate's JSON verdict, script evaluators, what every script is told,
script files of the project, and the target's health check."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import GIT_TOML, Project
from pydantic import TypeAdapter

from llmtt.evaluation.gates import GateContext, run_gates
from llmtt.plan import cache as plancache
from llmtt.plan.runs import build_plan
from llmtt.spec.config import TargetSpec
from llmtt.spec.gates import Gate
from llmtt.spec.project import load_project
from llmtt.spec.scenario import Scenario
from llmtt.spec.selection import Selection

TOML = GIT_TOML + 'env.TOOL_HOME_HINT = "from-the-target"\n'

# What each script is told; a script prints `NAME=value` for each, one a line.
TOLD = (
    "LLMTT_WORKSPACE",
    "LLMTT_RUN_DIR",
    "LLMTT_SCENARIO",
    "LLMTT_AGENT",
    "LLMTT_MODEL",
    "LLMTT_TRANSCRIPT",
    "LLMTT_EVENTS",
    "LLM_TOOL_TEST_FIXTURE_DIR",
    "LLM_TOOL_TEST_RESULTS_DIR",
    "LLM_TOOL_TEST_SCENARIO",
    "LLM_TOOL_TEST_AGENT",
    "LLM_TOOL_TEST_MODEL",
    "LLM_TOOL_TEST_TRANSCRIPT",
    "LLM_TOOL_TEST_EVENTS",
    "TOOL_HOME_HINT",
)
SHOW_ENV = "; ".join(f'echo "{name}=${{{name}-unset}}"' for name in TOLD)

POST_SCENARIO = """\
task: {prompt: Write notes.}
fixture: fixtures/f
solution: [echo milk > notes.txt]
scripts:
  post:
    - command: "cp notes.txt .export.txt; echo once >> log.txt"
      description: export the notes
    - path: checks/env.sh
    - {command: "echo 'export broke' >&2; exit 3", timeout_secs: 5}
evaluation:
  gates:
    - {type: file_contains, path: .export.txt, substring: milk}
    - {type: command_succeeds, command: 'test "$(wc -l < log.txt)" -eq 1'}
    - {type: script, path: checks/gate.sh, description: the export says milk}
"""


def _executable(project: Project, rel: str, text: str) -> Path:
    path = project.write(rel, text)
    path.chmod(0o755)
    return path


def _env_lines(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


@pytest.fixture
def post(project: Project) -> Project:
    project.write("llmtt.toml", TOML)
    project.write("scenarios/fixtures/f/readme.txt", "fixture\n")
    project.write("scenarios/p.yaml", POST_SCENARIO)
    _executable(project, "scenarios/checks/env.sh", f"#!/bin/sh\n({SHOW_ENV}) > post-env.txt\n")
    _executable(
        project,
        "scenarios/checks/gate.sh",
        '#!/bin/sh\ngrep -q milk .export.txt && echo \'{"passed": true, "message": "milk"}\'\n',
    )
    return project


def test_post_scripts_prepare_what_gates_read_on_a_copy_and_a_failure_is_a_warning(
    post: Project,
) -> None:
    first = post.doit("run")
    assert first.code == 0, first.out + first.err
    run_dir = post.results() / "p/oracle/r1"
    metrics = post.json("p/oracle/r1/metrics.json")
    assert metrics["outcome"] == "pass", metrics["outcome_reason"]
    records = metrics["post_scripts"]
    assert [(p["index"], p["ok"], p["exit_code"]) for p in records] == [
        (1, True, 0),
        (2, True, 0),
        (3, False, 3),
    ]
    assert records[1]["script"] == "checks/env.sh"
    assert records[2]["message"] == "`echo 'export broke' >&2; exit 3` exit 3: export broke"
    warning = "post script 3 `echo 'export broke' >&2; exit 3` exit 3: export broke"
    assert metrics["warnings"] == [warning]
    assert metrics["outcome_reason"] == f"all 3 gates passed; warning: {warning}"
    gates = post.json("p/oracle/r1/gates.json")["gates"]
    assert [g["passed"] for g in gates] == [True, True, True]
    assert gates[2]["message"] == "milk"

    # The scripts worked on a copy, kept with the run; the agent's workspace is as it left it.
    copy = run_dir / "post-scripts" / "workspace"
    assert (copy / ".export.txt").read_text() == "milk\n"
    assert not (run_dir / "workspace" / ".export.txt").exists()
    told = _env_lines((copy / "post-env.txt").read_text())
    assert told == {
        "LLMTT_WORKSPACE": str(copy),
        "LLMTT_RUN_DIR": str(run_dir),
        "LLMTT_SCENARIO": "p",
        "LLMTT_AGENT": "oracle",
        "LLMTT_MODEL": "",
        "LLMTT_TRANSCRIPT": str(run_dir / "transcript.raw.txt"),
        "LLMTT_EVENTS": str(run_dir / "events.jsonl"),
        "LLM_TOOL_TEST_FIXTURE_DIR": str(copy),
        "LLM_TOOL_TEST_RESULTS_DIR": str(run_dir),
        "LLM_TOOL_TEST_SCENARIO": "p",
        "LLM_TOOL_TEST_AGENT": "oracle",
        "LLM_TOOL_TEST_MODEL": "",
        "LLM_TOOL_TEST_TRANSCRIPT": str(run_dir / "transcript.raw.txt"),
        "LLM_TOOL_TEST_EVENTS": str(run_dir / "events.jsonl"),
        "TOOL_HOME_HINT": "from-the-target",
    }
    assert (run_dir / "events.jsonl").exists()

    text = (run_dir / "evaluation.md").read_text()
    assert "## Post scripts" in text
    assert "| 1 | export the notes: `cp notes.txt .export.txt; echo once >> log.txt` | ok |" in text
    assert "| 3 | `echo 'export broke' >&2; exit 3` | WARNING |" in text
    assert f"warning: {warning}" in (post.results() / "report.md").read_text()

    # Editing a script file re-evaluates without running the agent again, and the second
    # evaluation starts from what the agent left (log.txt is written once, not twice).
    _executable(
        post, "scenarios/checks/env.sh", f"#!/bin/sh\n({SHOW_ENV}) > post-env.txt\necho edited\n"
    )
    second = post.doit("run")
    assert second.code == 0, second.out + second.err
    assert "p/oracle/r1:evaluate" in second.executed()
    assert "p/oracle/r1:agent" not in second.executed()
    assert post.json("p/oracle/r1/metrics.json")["outcome"] == "pass"
    assert (copy / "log.txt").read_text() == "once\n"
    assert post.doit("run").executed() == []


def test_the_agent_never_sees_a_project_script_and_editing_one_moves_the_evaluate_key_only(
    post: Project,
) -> None:
    def key() -> tuple[dict[str, str], dict[str, str]]:
        (run,) = build_plan(load_project(post.root), Selection()).runs
        return run.agent_key, run.eval_key

    agent_before, eval_before = key()
    assert "scripts" in eval_before
    post.write("scenarios/checks/gate.sh", "#!/bin/sh\nexit 1\n")
    agent_after, eval_after = key()
    assert agent_after == agent_before
    assert {k for k in eval_before if eval_before[k] != eval_after[k]} == {"scripts"}
    result = post.doit("run")
    assert result.code == 0, result.out + result.err
    workspace = post.results() / "p/oracle/r1/workspace"
    assert sorted(p.name for p in workspace.iterdir()) == ["notes.txt", "readme.txt"]


def test_a_scenario_without_scripts_keeps_its_evaluate_key(project: Project) -> None:
    project.write("llmtt.toml", GIT_TOML)
    project.write("scenarios/s.yaml", "task: {prompt: x}\nsolution: ['true']\n")
    (run,) = build_plan(load_project(project.root), Selection()).runs
    assert sorted(run.eval_key) == [
        "agent_settings",
        "composite",
        "gate_timeout",
        "gates",
        "llmtt",
        "pattern",
    ]


GATE = TypeAdapter(Gate)


def _script_gates(tmp_path: Path, *commands: str, timeout: float = 10) -> list[dict[str, Any]]:
    work = tmp_path / "workspace"
    work.mkdir(exist_ok=True)
    env = {"PATH": os.environ["PATH"]}
    ctx = GateContext(workspace=work, env=env, timeout_secs=timeout, target_commands=[])
    return run_gates(
        [GATE.validate_python({"type": "script", "command": c}) for c in commands], ctx
    )


def test_a_script_gates_json_verdict_wins_over_its_exit_code(tmp_path: Path) -> None:
    verdict = '{"passed": %s, "message": "%s", "detail": {"count": 5}}'
    results = _script_gates(
        tmp_path,
        "echo '" + verdict % ("true", "found 5") + "'; exit 1",
        "echo log line; echo '" + verdict % ("false", "found 2, need 3") + "'",
        "echo '{\"passed\": true}'",
    )
    assert [r["passed"] for r in results] == [True, False, True]
    assert results[0]["message"] == "found 5 (its JSON verdict decides over its exit 1)"
    assert results[0]["detail"] == {"count": 5}
    assert results[1]["message"] == "found 2, need 3 (its JSON verdict decides over its exit 0)"
    assert results[1]["data"]["detail"] == {"count": 5}
    assert "says it passed" in results[2]["message"]


def test_without_a_json_verdict_the_exit_code_decides_with_a_note(tmp_path: Path) -> None:
    results = _script_gates(
        tmp_path,
        "echo '{\"passed\": tru'",
        'echo \'{"passed": "yes"}\'; exit 2',
        "echo plain words",
        "exit 0",
        "echo '{\"ahead\": 1}'",
        "echo '{\"passed\": true}'; sleep 5",
        timeout=1,
    )
    assert [r["passed"] for r in results] == [True, False, True, True, True, False]
    assert "stdout is not JSON" in results[0]["message"]
    assert "the exit code decides" in results[0]["message"]
    assert results[1]["message"].endswith(
        '(`passed` is "yes", not true or false; the exit code decides)'
    )
    assert "stdout is not JSON" in results[2]["message"]
    assert results[3]["message"] == "`exit 0` exited 0"  # nothing printed: nothing to note
    assert results[4]["message"] == "`echo '{\"ahead\": 1}'` exited 0"  # data, kept
    assert results[4]["data"] == {"ahead": 1}
    assert "timed out" in results[5]["message"]


EVALUATORS = """\
task: {prompt: Write notes.}
solution: [echo milk > notes.txt]
scripts:
  evaluators:
    - name: quality
      command: >-
        echo computing;
        echo '{"metrics": {"words": 1, "ok": true}, "score": 0.75, "summary": "short notes"}'
    - {name: broken_json, command: "echo '{\\"score\\": 0.5'"}
    - {name: crashed, command: "echo half; echo 'no database' >&2; exit 4"}
    - {name: too_high, command: "echo '{\\"score\\": 7}'"}
    - {name: from_file, path: checks/measure.sh, timeout_secs: 5}
evaluation:
  gates:
    - {type: file_exists, path: notes.txt}
"""


def test_script_evaluators_are_stored_by_name_and_a_failure_is_a_warning(
    project: Project,
) -> None:
    project.write("llmtt.toml", TOML)
    project.write("scenarios/e.yaml", EVALUATORS)
    _executable(
        project,
        "scenarios/checks/measure.sh",
        '#!/bin/sh\ntest -f "$LLMTT_EVENTS" && test "$LLMTT_WORKSPACE" = "$PWD" '
        '&& echo "{\\"metrics\\": {\\"lines\\": $(wc -l < notes.txt)}}"\n',
    )
    result = project.doit("run")
    assert result.code == 0, result.out + result.err
    metrics = project.json("e/oracle/r1/metrics.json")
    found = metrics["script_evaluators"]
    assert list(found) == ["quality", "broken_json", "crashed", "too_high", "from_file"]
    quality = found["quality"]
    assert quality["metrics"] == {"words": 1, "ok": True}
    assert (quality["score"], quality["summary"], quality["exit_code"]) == (0.75, "short notes", 0)
    assert "error" not in quality
    assert found["broken_json"]["error"].startswith("stdout is not JSON")
    assert found["broken_json"]["output"] == '{"score": 0.5'
    assert found["crashed"]["error"] == "exit 4: no database"
    assert "metrics" not in found["crashed"] and found["crashed"]["output"] == "half"
    assert "less than or equal to 1" in found["too_high"]["error"]
    assert found["from_file"]["metrics"] == {"lines": 1}
    # Diagnostics never decide: the run passes, with a warning for each that failed.
    assert metrics["outcome"] == "pass"
    assert [w.split(" failed:")[0] for w in metrics["warnings"]] == [
        "script evaluator broken_json",
        "script evaluator crashed",
        "script evaluator too_high",
    ]
    assert (
        "warning: script evaluator crashed failed: exit 4: no database"
        in (metrics["outcome_reason"])
    )
    assert "script_evaluators" in project.json("e/oracle/r1/result.json")["metrics"]
    text = (project.results() / "e/oracle/r1/evaluation.md").read_text()
    assert "## Script evaluators" in text
    assert "| quality | 0.75 | short notes | words = 1, ok = true |" in text
    assert "| crashed | not scored | exit 4: no database | output: half |" in text


def test_a_failing_health_check_means_the_run_could_not_be_carried_out(project: Project) -> None:
    project.write(
        "llmtt.toml",
        GIT_TOML + "health_check = \"echo checking; echo 'tool is broken' >&2; exit 5\"\n",
    )
    project.write("scenarios/h.yaml", "task: {prompt: x}\nsolution: [touch made.txt]\n")
    result = project.doit("run")
    assert result.code != 0
    run = project.json("h/oracle/r1/run.json")
    assert run["status"] == "error"
    assert run["error"].startswith("target health check `echo checking;")
    assert "(exit 5): checking\ntool is broken" in run["error"]
    assert not (project.results() / "h/oracle/r1/workspace/made.txt").exists()
    report = (project.results() / "report.md").read_text()
    assert "could not be carried out: target health check" in report


def test_the_health_check_runs_after_setup_and_again_as_the_last_gate(project: Project) -> None:
    project.write(
        "llmtt.toml",
        GIT_TOML + 'health_check = "test -f ready && test ! -e broken"\nhealth_check_gate = true\n',
    )
    project.write(
        "scenarios/h.yaml",
        """\
        task: {prompt: x}
        setup: {commands: [touch ready]}
        solution: [touch broken]
        evaluation:
          gates: [{type: file_exists, path: broken}]
        """,
    )
    result = project.doit("run")
    assert result.code == 0, result.out + result.err
    gates = project.json("h/oracle/r1/gates.json")["gates"]
    assert [(g["index"], g["type"], g["passed"]) for g in gates] == [
        (1, "file_exists", True),
        (2, "command_succeeds", False),
    ]
    assert gates[1]["description"] == "target health check"
    metrics = project.json("h/oracle/r1/metrics.json")
    assert metrics["outcome"] == "fail"
    assert metrics["outcome_reason"].startswith("gate 2 (command_succeeds): `test -f ready")
    (run,) = build_plan(load_project(project.root), Selection()).runs
    assert "health_check" in run.eval_key


def test_the_readmes_scripts_example_is_a_valid_scenario() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("\n### Scripts\n", 1)[1]
    block = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    spec = Scenario.model_validate({"task": {"prompt": "x"}, **yaml.safe_load(block)})
    assert spec.scripts.post[1].timeout_secs == 120
    assert spec.scripts.evaluators[0].timeout_secs == 60
    assert isinstance(spec.target, TargetSpec) and spec.target.health_check_gate


def test_the_plan_cache_notices_an_edited_script_file(post: Project) -> None:
    past = time.time() - 60
    for path in [post.root, *post.root.rglob("*")]:
        os.utime(path, (past, past))
    before, _ = plancache.load(post.root, Selection())
    assert plancache.load(post.root, Selection())[1] is None  # cached
    script = post.root / "scenarios/checks/gate.sh"
    info = script.stat()
    script.write_text(script.read_text().replace("milk", "mylk"))  # same size
    os.utime(script, ns=(info.st_atime_ns, info.st_mtime_ns))
    after, built = plancache.load(post.root, Selection())
    assert built is not None, "the stale plan was reused"
    assert after.runs[0].keys != before.runs[0].keys
