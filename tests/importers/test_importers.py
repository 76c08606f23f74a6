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


def _import(
    project: Project, *, fresh: bool = True, dataset: str = "tasks", toml: str = GIT_TOML
) -> subprocess.CompletedProcess[str]:
    project.write("llmtt.toml", toml)
    if fresh:
        shutil.rmtree(project.root / "scenarios")
    solutions = "solutions" if dataset == "tasks" else f"{dataset}-solutions"
    return subprocess.run(
        [
            str(BIN / "llmtt"),
            "import",
            "bashkit-eval",
            str(DATA / f"{dataset}.jsonl"),
            "--solutions",
            str(DATA / f"{solutions}.jsonl"),
        ],
        cwd=project.root,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_dataset_imported_into_a_project_without_a_target_validates(project: Project) -> None:
    """bashkit-eval measures the agent's use of bash: each scenario names bash as its own
    target, so a fresh project needs no [target] (a project without one is refused)."""
    _import(project, toml="")
    checked = subprocess.run(
        [str(BIN / "llmtt"), "validate"],
        cwd=project.root,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    scenario = yaml.safe_load(next((project.root / "scenarios").glob("*.yaml")).read_text())
    assert scenario["target"]["binary"] == "bash"


def test_records_that_cannot_be_carried_over_are_reported_by_line(project: Project) -> None:
    done = _import(project)
    assert done.returncode == 1
    tasks = DATA / "tasks.jsonl"
    assert f"{tasks}:6: unknown check kind 'stdout_has'" in done.stderr
    assert f"{tasks}:7: not JSON" in done.stderr
    assert f"{tasks}:8: the record lacks 'prompt'; not imported" in done.stderr
    # Kept as its gate, which cannot tell under llmtt's agents: said with the task and check.
    assert (
        f"warning: {tasks}:1: copy-file: expectation 4 (stderr_empty): llmtt's agents report a "
        "command's stdout and stderr as one output, so its gate will say it cannot tell, "
        "counting neither as a pass nor as a fail"
    ) in done.stderr
    assert "wrote 5 scenario(s) to scenarios" in done.stdout
    written = sorted(p.name for p in (project.root / "scenarios").glob("*.yaml"))
    assert written == [
        "copy-file.yaml",
        "count-lines.yaml",
        "csv-export.yaml",
        "judged.yaml",
        "make-dirs.yaml",
    ]
    copy = yaml.safe_load((project.root / "scenarios" / "copy-file.yaml").read_text())
    assert copy["mounts"] == {"/data": "data", "/out": "out"}  # the folders its paths name
    assert {"type": "check", "check": "stderr_empty", "weight": 1.0} in copy["evaluation"]["gates"]
    csv = yaml.safe_load((project.root / "scenarios" / "csv-export.yaml").read_text())
    assert csv["evaluation"]["gates"][2] == {
        "type": "check",
        "check": 'file_line_regex:/data/people.csv:^(?:"Ada Park"|Ada Park),(?:"Eng"|Eng),'
        '(?:"120"|120)$',
        "weight": 2.0,
    }
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
        for name in ("copy-file", "count-lines", "make-dirs", "judged", "csv-export")
    }
    # copy-file's reference solution makes the file but not its content: 2 of 4 weight; its
    # stderr_empty cannot tell (the oracle reports one output), in neither the 2 nor the 4.
    assert outcomes["copy-file"]["outcome"] == "fail", result.out
    assert outcomes["copy-file"]["gates_score"] == 2.0
    assert outcomes["copy-file"]["gates_max"] == 4.0
    assert outcomes["copy-file"]["gates_unknown"] == 1
    assert (
        "gate 4 (check) cannot tell: 2 of 2 tool call(s) without a separate stderr"
        in (outcomes["copy-file"]["outcome_reason"])
    )
    gates = project.json("copy-file/oracle/r1/gates.json")["gates"]
    assert [g["passed"] for g in gates] == [True, False, True, None]
    evaluation = (project.results() / "copy-file/oracle/r1/evaluation.md").read_text()
    assert "## Gates (2/3 passed, 1 cannot tell: counted neither way)" in evaluation
    for name in ("count-lines", "make-dirs", "judged", "csv-export"):
        assert outcomes[name]["outcome"] == "pass", (name, outcomes[name]["outcome_reason"])
    assert outcomes["make-dirs"]["gates_max"] == 1.5
    assert outcomes["judged"]["gates_max"] == 2.0
    assert outcomes["csv-export"]["gates_score"] == outcomes["csv-export"]["gates_max"] == 7.0
    report = json.loads((project.results() / "report.json").read_text())
    summary = report["summary"]
    assert summary["passed"] == 4 and summary["failed"] == 1
    # bashkit-eval's overall rate: the weight of the passed checks over all checks' weight.
    assert summary["gate_rate"] == pytest.approx(
        (2 + 2 + 1.5 + 2 + 7) / (4 + 2 + 1.5 + 2 + 7), abs=1e-4
    )
    # bashkit-eval's per-task figures: 2 + 1 + 1 + 1 + 2 tool calls over 5 tasks, all of
    # which the oracle ends on its own.
    assert summary["avg_tool_calls_per_task"] == 1.4
    assert summary["natural_stops"] == 5 and summary["natural_stop_rate"] == 1.0
    durations = [project.json(f"{n}/oracle/r1/metrics.json")["duration_secs"] for n in outcomes]
    assert summary["avg_duration_ms"] == pytest.approx(sum(durations) * 1000 / 5, abs=0.1)
    (group,) = report["groups"]
    assert group["avg_tool_calls_per_task"] == 1.4
    md = (project.results() / "report.md").read_text()
    assert "| oracle | no model | no variant | 5 | 1.4 | " in md
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


def test_scripting_tool_records_get_their_mock_tools_as_commands(project: Project) -> None:
    """bashkit-eval's scripting-tool records (`tools`, `discovery_mode`): the tools become
    commands on the agent's PATH, with `help` and `discover`; what they cannot play is refused
    with its reason, never changed."""
    done = _import(project, dataset="scripting")
    data = DATA / "scripting.jsonl"
    assert done.returncode == 1
    assert (
        f"{data}:4: tool 1 (tag_item): parameter 'tags' is array: the mock commands read "
        "string, integer, number, boolean flags only"
    ) in done.stderr
    assert f"{data}:5: tool 1 (test): `test` is bash's own" in done.stderr
    assert "wrote 2 scenario(s) to scenarios" in done.stdout
    scenarios = project.root / "scenarios"
    pages = yaml.safe_load((scenarios / "team-pages.yaml").read_text())
    assert pages["path"] == [".bashkit/bin"]
    assert pages["target"]["env"]["BASH_FUNC_help%%"].startswith("() {")
    fixture = scenarios / "fixtures" / "team-pages"
    assert sorted(p.name for p in (fixture / ".bashkit" / "bin").iterdir()) == [
        "discover",
        "get_team",
        "get_weather",
        "help",
        "list_members",
    ]
    tools = json.loads((fixture / ".bashkit" / "tools.json").read_text())
    record = json.loads(data.read_text().splitlines()[1])
    assert [t["mock"] for t in tools] == [t["mock"] for t in record["tools"]]  # as given
    guidance = (fixture / "AGENTS.md").read_text()
    assert "- `get_team --team_id <integer>`: Fetch a team by id" in guidance
    # discovery_mode: the names and descriptions only, and how to find the rest.
    found = (scenarios / "fixtures" / "find-forecast" / "AGENTS.md").read_text()
    assert "- `get_forecast`: 3-day weather forecast for a city" in found
    assert "--place_name" not in found and "discover --category NAME" in found


def test_imported_scripting_tasks_validate_and_run_with_the_oracle(project: Project) -> None:
    _import(project, dataset="scripting")
    validated = subprocess.run(
        [str(BIN / "llmtt"), "validate"],
        cwd=project.root,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert validated.returncode == 0, validated.stdout + validated.stderr
    result = project.doit("run", "agent=oracle")
    assert result.code == 0, result.out + result.err
    for name in ("team-pages", "find-forecast"):
        metrics = project.json(f"{name}/oracle/r1/metrics.json")
        assert metrics["outcome"] == "pass", (name, metrics["outcome_reason"])
    transcript = (project.results() / "find-forecast/oracle/r1/transcript.raw.txt").read_text()
    # `discover` and bash's `help` builtin given way to the tools' (through the sandbox).
    assert "get_forecast         3-day weather forecast for a city" in transcript
    assert '"name": "get_forecast"' in transcript
    assert project.json("find-forecast/oracle/r1/result.json")["isolation"] == "bwrap"


def test_a_scripting_task_runs_with_a_real_cli_on_the_scripted_model(tmp_path: Path) -> None:
    """claude-code's Bash tool calls the mock tools and the tools' `help` (the scripted model
    plays the reference solution, one command a turn)."""
    from conftest import cli_project

    project = cli_project(tmp_path / "proj")
    done = subprocess.run(
        [
            str(BIN / "llmtt"),
            "import",
            "bashkit-eval",
            str(DATA / "scripting.jsonl"),
            "--solutions",
            str(DATA / "scripting-solutions.jsonl"),
        ],
        cwd=project.root,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "wrote 2 scenario(s)" in done.stdout, done.stderr
    result = project.doit("run", "agent=claude-code", "model=scripted", "scenario=find-forecast")
    assert result.code == 0, result.out + result.err
    metrics = project.json("find-forecast/claude-code-scripted/r1/metrics.json")
    assert metrics["outcome"] == "pass", metrics["outcome_reason"]
    events = [
        json.loads(line)
        for line in (project.results() / "find-forecast/claude-code-scripted/r1/events.jsonl")
        .read_text()
        .splitlines()
    ]
    outputs = [e["output"] for e in events if e["event"] == "tool_result"]
    assert any('"name": "get_forecast"' in o for o in outputs), outputs  # the tools' help
    assert any('"condition":"Snow"' in o for o in outputs), outputs  # the mock's answer


def test_every_path_a_task_names_resolves_through_its_mounts(project: Project) -> None:
    """Paths shaped as bashkit-eval's datasets name them (/home/eval/..., /var/log, /tmp,
    /workspace/sub/deep, /backup at a sentence's end) lead to the workspace: the files are
    where the mounts show them, and the reference solutions pass. A path the sandbox cannot
    show as the workspace's (under /etc, /lib; a file at the root) is refused, with why."""
    done = _import(project, dataset="paths")
    data = DATA / "paths.jsonl"
    assert done.returncode == 1
    assert (
        f"{data}:4: file '/etc/app.conf' names /etc/app.conf, under /etc, which llmtt's "
        "sandbox shows as the system's own (read-only): the agent could neither find the "
        "task's file there nor make it; not imported"
    ) in done.stderr
    assert f"{data}:5: expectation 1 (file_exists:/lib/utils.sh) names /lib/utils.sh" in (
        done.stderr
    )
    assert f"{data}:6: expectation 1 (file_contains:/note.txt:hi) names /note.txt, a file" in (
        done.stderr
    )
    records = {json.loads(line)["id"]: json.loads(line) for line in data.read_text().splitlines()}
    for name in ("scaffold", "log-archive", "tidy-workspace"):
        scenario = yaml.safe_load((project.root / "scenarios" / f"{name}.yaml").read_text())
        mounts = scenario["mounts"]
        record = records[name]
        held = list(record["files"]) + [
            e["check"].split(":")[1] for e in record["expectations"] if "_exists" in e["check"]
        ]
        for path in held:
            (top,) = [m for m in mounts if Path(path).is_relative_to(m)]
            inside = Path(mounts[top]) / Path(path).relative_to(top)
            if path in record["files"]:
                fixture = project.root / "scenarios" / "fixtures" / name / inside
                assert fixture.read_text() == record["files"][path]
    archive = yaml.safe_load((project.root / "scenarios" / "log-archive.yaml").read_text())
    assert archive["mounts"] == {
        "/backup": "backup",  # "... exist in /backup." ends a sentence
        "/project": "project",
        "/tmp": "tmp",
        "/var": "var",
    }
    assert yaml.safe_load((project.root / "scenarios" / "scaffold.yaml").read_text())["mounts"] == {
        "/home/eval": "home/eval"
    }
    result = project.doit("run", "agent=oracle")
    assert result.code == 0, result.out + result.err
    for name in ("scaffold", "log-archive", "tidy-workspace"):
        metrics = project.json(f"{name}/oracle/r1/metrics.json")
        assert metrics["outcome"] == "pass", (name, metrics["outcome_reason"])


# The absolute paths bashkit-eval's own datasets (eval-tasks.jsonl, smoke-test.jsonl) give as
# files and in file checks: each is mounted from the workspace, or its task refused.
REAL_PATHS = """/app/.env /app/data/file1.txt /build/program /config/merged.ini /data/employees.csv
/dist/release.tar.gz /doc/README.md /home/eval/myproject/src/__init__.py /home/eval/myproject/docs
/output/notes.txt /project/src/main.sh /release/CHANGELOG.md /reports/test-summary.md
/scripts/healthcheck.sh /src/tests/test_utils.py /tmp/greeting.txt /tmp/project.tar.gz
/uploads/csv/data.csv /var/log/.keep /var/log/services.jsonl /workspace/sub/deep/e.log""".split()
REFUSED_PATHS = ["/etc/app.conf", "/etc/app/config.yaml", "/etc/env.conf", "/lib/utils.sh"]


@pytest.mark.parametrize("path", REAL_PATHS + REFUSED_PATHS)
def test_the_real_datasets_paths_resolve_or_are_refused(path: str) -> None:
    from llmtt.importers.bashkit import _check_places, _mounts

    if path in REFUSED_PATHS:
        with pytest.raises(ValueError, match="which llmtt's sandbox shows as the system's own"):
            _check_places([("file", path)], [])
        return
    _check_places([("file", path)], [("file", path)])
    mounts = _mounts([path])
    (top,) = [m for m in mounts if Path(path).is_relative_to(m)]
    assert mounts[top] == top.lstrip("/")  # the workspace's folder of that name
