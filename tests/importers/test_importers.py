"""The importers. `llmtt import bashkit-eval`: a dataset in bashkit-eval's record format
(tests/data/bashkit, written for these tests) becomes scenarios that run end to end with the
oracle (its reference solutions from `--solutions`) and with an agent on the scripted model;
records that cannot be carried over are reported by line; the weighted task score and rate are
bashkit-eval's. `llmtt import llm-tool-test`: scenario files in the seed's and ax-eval's own formats, laid out
as their projects lay them (tests/data/llm_tool_test/fixtures: templates/, rubrics/, an older
file with the retired domain gates), become llmtt scenarios that validate and run, with a
report of what changed or has no equivalent."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import BIN, GIT_TOML, FakeProvider, Project, chat_answer

DATA = Path(__file__).parents[1] / "data" / "bashkit"


def _import(project: Project, *, fresh: bool = True) -> subprocess.CompletedProcess[str]:
    project.write("llmtt.toml", GIT_TOML)
    if fresh:
        shutil.rmtree(project.root / "scenarios")
    return subprocess.run(
        [
            str(BIN / "llmtt"),
            "import",
            "bashkit-eval",
            str(DATA / "tasks.jsonl"),
            "--solutions",
            str(DATA / "solutions.jsonl"),
        ],
        cwd=project.root,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_records_that_cannot_be_carried_over_are_reported_by_line(project: Project) -> None:
    done = _import(project)
    assert done.returncode == 1
    tasks = DATA / "tasks.jsonl"
    assert f"{tasks}:5: unknown check kind 'stdout_has'" in done.stderr
    assert f"{tasks}:6: not JSON" in done.stderr
    assert f"{tasks}:7: the record lacks 'prompt'; not imported" in done.stderr
    assert f"{tasks}:1: copy-file: expectation 4 (stderr_empty) left out" in done.stderr
    assert "wrote 4 scenario(s) to scenarios" in done.stdout
    written = sorted(p.name for p in (project.root / "scenarios").glob("*.yaml"))
    assert written == ["copy-file.yaml", "count-lines.yaml", "judged.yaml", "make-dirs.yaml"]
    copy = yaml.safe_load((project.root / "scenarios" / "copy-file.yaml").read_text())
    assert copy["mounts"] == {"/data": "data", "/out": "out"}  # the folders its paths name
    fixture = project.root / "scenarios" / "fixtures" / "copy-file"
    assert (fixture / "data" / "in.txt").read_text() == "alpha\nbeta\n"
    assert (fixture / "AGENTS.md").read_text() == "You are a careful shell user."
    again = _import(project, fresh=False)  # nothing is overwritten without --force
    assert "copy-file.yaml exists (use --force to replace it)" in again.stderr


def test_an_imported_dataset_runs_with_the_oracle_and_scores_as_bashkit_eval(
    project: Project, provider: tuple[str, type[FakeProvider]]
) -> None:
    url, handler = provider
    handler.queue[:] = [(200, chat_answer('{"score": true, "reasoning": "It said hello."}'))]
    _import(project)
    toml = (project.root / "llmtt.toml").read_text()
    project.write(
        "llmtt.toml",
        toml + f'\n[judge]\nmodel = "grader"\n\n[models.grader]\nlitellm = "openai/grader"\n'
        f'api_base = "{url}"\napi_key_env = "GRADER_KEY"\n'
        "input_usd_per_mtok = 1.0\noutput_usd_per_mtok = 1.0\n",
    )
    result = project.doit("run", "-n", "2", env={"LLMTT_ENABLED": "1", "GRADER_KEY": "k"})
    outcomes = {
        name: project.json(f"{name}/oracle/r1/metrics.json")
        for name in ("copy-file", "count-lines", "make-dirs", "judged")
    }
    # copy-file's reference solution makes the file but not its content: 2 of 4 weight.
    assert outcomes["copy-file"]["outcome"] == "fail", result.out
    assert outcomes["copy-file"]["gates_score"] == 2.0
    assert outcomes["copy-file"]["gates_max"] == 4.0
    for name in ("count-lines", "make-dirs", "judged"):
        assert outcomes[name]["outcome"] == "pass", (name, outcomes[name]["outcome_reason"])
    assert outcomes["make-dirs"]["gates_max"] == 1.5
    assert outcomes["judged"]["gates_max"] == 2.0
    report = json.loads((project.results() / "report.json").read_text())
    summary = report["summary"]
    assert summary["passed"] == 3 and summary["failed"] == 1
    # bashkit-eval's overall rate: the weight of the passed checks over all checks' weight.
    assert summary["gate_rate"] == pytest.approx((2 + 2 + 1.5 + 2) / (4 + 2 + 1.5 + 2), abs=1e-4)
    categories = {c["tag"]: c for c in report["categories"]}
    assert categories["file_operations"]["gate_rate"] == pytest.approx(3.5 / 5.5, abs=1e-4)
    assert categories["file_operations"]["pass_rate"] == 0.5


def test_an_imported_dataset_runs_with_an_agent_on_the_scripted_model(project: Project) -> None:
    _import(project)
    result = project.doit(
        "run", "agent=litellm", "model=scripted", "scenario=count-lines,make-dirs"
    )
    assert result.code == 0, result.out + result.err
    for name in ("count-lines", "make-dirs"):
        metrics = project.json(f"{name}/litellm-scripted/r1/metrics.json")
        assert metrics["outcome"] == "pass", (name, metrics["outcome_reason"])


SEED = Path(__file__).parents[1] / "data" / "llm_tool_test"
JUDGE_TOML = """
[models.grader]
litellm = "openai/grader"
api_base = "{url}"
api_key_env = "GRADER_KEY"
input_usd_per_mtok = 1.0
output_usd_per_mtok = 1.0
"""


def _import_seed(project: Project, *files: str, env: dict[str, str] | None = None) -> Any:
    """`llmtt import llm-tool-test` of the seed project copied into `project` (seed/), run
    from the project's folder, as a user who ran `llmtt init` in the seed project would."""
    if not (project.root / "seed").exists():
        shutil.copytree(SEED, project.root / "seed")
    names = files or tuple(sorted(p.name for p in (SEED / "fixtures").glob("*.yaml")))
    return subprocess.run(
        [str(BIN / "llmtt"), "import", "llm-tool-test", *(f"seed/fixtures/{n}" for n in names)],
        cwd=project.root,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def test_the_seeds_own_files_import_validate_and_run_with_the_oracle(
    project: Project, provider: tuple[str, type[FakeProvider]]
) -> None:
    """Files laid out as the real projects lay theirs (fixtures/*.yaml, fixtures/templates/,
    fixtures/rubrics/), an older one with the retired domain gates, `${AX_EVAL_FIXTURE_DIR}` in
    target.env: imported, `llmtt validate` clean, run by doit with the oracle. The seed's
    variable names do the work of llmtt's: LLM_TOOL_TEST_TOOL picks the agent,
    LLM_TOOL_TEST_JUDGE the judge, LLM_TOOL_TEST_ENABLED lets it spend."""
    url, handler = provider
    handler.queue = [(200, chat_answer(GOOD_JUDGE))]
    seed_env = {"LLM_TOOL_TEST_JUDGE": "grader"}
    project.write("llmtt.toml", GIT_TOML + JUDGE_TOML.format(url=url))
    shutil.rmtree(project.root / "scenarios")
    done = _import_seed(project, env=seed_env)
    assert done.returncode == 0, done.stderr
    assert "wrote 5 scenario(s) to scenarios" in done.stdout
    warned = done.stderr
    gates = "seed/fixtures/notes_domain_gates.yaml"
    assert (
        f"{gates}:16: gates[0]: the retired gate MinNotes migrated (the seed's table) to " in warned
    )
    assert (
        "command_json_path (command: ./notes list --format json, path: $, assertion: len >= 2)"
        in warned
    )
    for kind in ("min_links", "SearchHit", "note_exists", "LinkExists", "TagExists"):
        assert f"the retired gate {kind} migrated" in warned, kind
    assert f"{gates}:26: gates[8]: gate type CommandSucceeds written as command_succeeds" in warned
    assert f"{gates}:14: task: a text, the older form: written as task.prompt" in warned
    assert f"{gates}:28: tool_matrix[0]: 'mock' is not an llmtt agent" in warned
    help_check = "seed/fixtures/notes_help_check.yaml:16: target.health_check: './notes help': "
    assert help_check + "many tools exit 1 on `help`" in warned
    assert "write `./notes --version`, or one that accepts exit 1" in warned
    commit = "seed/fixtures/notes_commit.yaml"
    version = "target.health_check: 'git --version' is also the target's version_command"
    assert f"{commit}:9: {version}" in warned
    assert f"{commit}:42: cost.cache: false has no equivalent" in warned
    assert "opencode, claude-code x gpt-4o, claude-sonnet" in warned
    assert f"{commit}: fields not carried over: owner" in warned
    scenarios = project.root / "scenarios"
    imported = yaml.safe_load((scenarios / "notes_domain_gates.yaml").read_text())
    assert imported["fixture"] == "../seed/fixtures/templates/notestore"  # fixtures/templates/
    assert imported["target"]["env"] == {"NOTES_STORE": "${AX_EVAL_FIXTURE_DIR}/.notes"}
    assert imported["tier"] == 0 and imported["run"] == {"timeout_secs": 300}  # seed defaults
    assert [g["type"] for g in imported["evaluation"]["gates"]][:3] == [
        "command_json_path",
        "command_json_path",
        "command_output_contains",
    ]
    judged = yaml.safe_load((scenarios / "notes_judged.yaml").read_text())
    assert judged["evaluation"]["judge"] == {
        "enabled": True,
        "rubric": "seed/fixtures/rubrics/quality.yaml",  # fixtures/<rubric>, from the project
        "pass_threshold": 0.5,
    }
    notes = yaml.safe_load((scenarios / "notes_commit.yaml").read_text())
    assert notes["matrix"] == {
        "agents": ["opencode", "claude-code"],
        "models": ["gpt-4o", "claude-sonnet"],
    }
    assert notes["scripts"]["evaluators"][0]["name"] == "log_quality"
    assert notes["cost"] == {"max_usd": 0.5} and notes["tier"] == 1
    valid = subprocess.run(
        [str(BIN / "llmtt"), "validate"],
        cwd=project.root,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **seed_env},
    )
    assert valid.returncode == 0, valid.stderr
    run_env = {**seed_env, "LLM_TOOL_TEST_TOOL": "oracle", "LLM_TOOL_TEST_ENABLED": "1"}
    chosen = "scenario=notes_commit,notes_domain_gates,notes_judged,notes_unfinished"
    result = project.doit("run", chosen, env={**run_env, "GRADER_KEY": "k"})
    assert result.code == 0, result.out + result.err
    runs = sorted(
        p.parent.parent.relative_to(project.results()).as_posix()
        for p in project.results().glob("*/*/r1/result.json")
    )
    assert runs == [
        f"{n}/oracle"
        for n in ("notes_commit", "notes_domain_gates", "notes_judged", "notes_unfinished")
    ]
    # The migrated gates run against the fixture's own store, found through the expanded
    # ${AX_EVAL_FIXTURE_DIR} (in each gate's copy of the workspace).
    metrics = project.json("notes_domain_gates/oracle/r1/metrics.json")
    assert metrics["outcome"] == "pass", metrics["outcome_reason"]
    assert metrics["gates_passed"] == 9
    # A scenario with its own target is keyed on its own tool, not the project's git.
    own = project.json("notes_domain_gates/oracle/r1/run.json")["versions"]["target"]
    assert own == "unversioned"
    git = project.json("notes_commit/oracle/r1/run.json")["versions"]["target"]
    assert git.startswith("git version")
    commit = project.json("notes_commit/oracle/r1/metrics.json")
    assert commit["outcome"] == "fail"  # no solution: the oracle runs nothing
    assert commit["script_evaluators"]["log_quality"]["score"] == 1
    # The judge: asked about the run whose gate passed, not about the one whose gate failed.
    assert len(handler.hits) == 1
    assert project.json("notes_judged/oracle/r1/metrics.json")["judge_score"] == 0.8
    unfinished = project.json("notes_unfinished/oracle/r1/metrics.json")
    assert (
        unfinished["outcome"] == "fail"
        and "the judge was not asked" in unfinished["outcome_reason"]
    )


GOOD_JUDGE = json.dumps(
    {
        "scores": {"task_completion": 1.0, "efficiency": 0.5},
        "weighted_score": 0.8,
        "confidence": 0.9,
        "issues": [],
        "highlights": [],
    }
)


def test_a_file_whose_paths_are_not_there_is_refused_with_where_it_looked(
    project: Project,
) -> None:
    """Never a written scenario that `llmtt validate` then rejects: a template folder or a
    rubric that is not where the seed looks is one located line, and the file is not written."""
    project.write("llmtt.toml", GIT_TOML + '[judge]\nmodel = "m"\n')
    project.write(
        "seed/fixtures/lost.yaml",
        "name: lost\ndescription: d\ntarget: {binary: git}\ntemplate_folder: nowhere\n"
        "task: {prompt: x}\nevaluation:\n  gates: []\n"
        "  judge: {enabled: true, rubric: rubrics/none.yaml, pass_threshold: 0.5}\n",
    )
    done = _import_seed(project, "lost.yaml")
    assert done.returncode == 1
    here = project.root / "seed" / "fixtures"
    lost = "seed/fixtures/lost.yaml"
    assert (
        f"{lost}:4: template_folder: no folder 'nowhere'; looked in {here}/templates/nowhere, "
        f"{here}/nowhere, {project.root}/seed/nowhere, {project.root}/nowhere; not imported"
    ) in done.stderr
    assert f"{lost}:8: evaluation.judge.rubric: no rubric file 'rubrics/none.yaml'" in done.stderr
    assert "wrote 0 scenario(s)" in done.stdout
    assert not (project.root / "scenarios" / "lost.yaml").exists()


def test_a_record_nested_too_deep_is_reported_and_the_rest_imported(tmp_path: Path) -> None:
    """Python's json raises RecursionError on it, which used to end the import with a
    traceback; it is a record that cannot be read, reported by its line."""
    from llmtt.importers.bashkit import import_bashkit

    first = (DATA / "tasks.jsonl").read_text().split("\n")[0]
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("[" * 100_000 + "]" * 100_000 + "\n" + first + "\n")
    done = import_bashkit(tasks, tmp_path / "scenarios", tmp_path / "fixtures", None)
    assert done.problems == [
        f"{tasks}:1: not JSON that can be read (nested too deep); not imported"
    ]
    assert [p.name for p in done.written] == ["copy-file.yaml"]
