"""The importers. `llmtt import bashkit-eval`: a dataset in bashkit-eval's record format
(tests/data/bashkit, written for these tests) becomes scenarios that run end to end with the
oracle (its reference solutions from `--solutions`) and with an agent on the scripted model;
records that cannot be carried over are reported by line; the weighted task score and rate are
bashkit-eval's. `llmtt import llm-tool-test`: the seed's own scenario files (tests/data/
llm_tool_test) become llmtt scenarios that load and run, with a report of what has no
equivalent."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

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


def test_the_seeds_own_scenarios_import_with_a_report_of_what_did_not_carry_over(
    project: Project,
) -> None:
    project.write("llmtt.toml", GIT_TOML)
    done = subprocess.run(
        [
            str(BIN / "llmtt"),
            "import",
            "llm-tool-test",
            str(SEED / "notes_commit.yaml"),
            str(SEED / "domain_gates.yaml"),
            "--out",
            "scenarios",
        ],
        cwd=project.root,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    seed = SEED / "notes_commit.yaml"
    assert f"{seed}: cost.cache: false has no equivalent" in done.stderr
    assert f"{seed}: tool_matrix gives its tools different models" in done.stderr
    assert "opencode, claude-code x gpt-4o, claude-sonnet" in done.stderr
    assert f"{seed}: fields not carried over: owner" in done.stderr
    assert f"{SEED / 'domain_gates.yaml'}: evaluation.gates[0].type:" in done.stderr
    assert "MinNotes" in done.stderr and "not imported" in done.stderr
    written = project.root / "scenarios" / "notes_commit.yaml"
    imported = yaml.safe_load(written.read_text())
    assert imported["fixture"] == os.path.relpath(
        SEED / "fixtures" / "notes", project.root / "scenarios"
    )
    assert imported["matrix"] == {
        "agents": ["opencode", "claude-code"],
        "models": ["gpt-4o", "claude-sonnet"],
    }
    assert imported["target"]["health_check"] == "git --version"
    assert imported["scripts"]["evaluators"][0]["name"] == "log_quality"
    assert imported["cost"] == {"max_usd": 0.5}
    # The file loads as an llmtt scenario, and runs: the oracle (no solution) fails its gates.
    project.write(
        "llmtt.toml", GIT_TOML + "\n[paths]\nallow_outside = true\n"
    )  # the fixture stays in tests/data
    project.doit("run", "agent=oracle", "scenario=notes_commit")
    metrics = project.json("notes_commit/oracle/r1/metrics.json")
    assert metrics["outcome"] == "fail", metrics["outcome_reason"]
    assert metrics["script_evaluators"]["log_quality"]["score"] == 1


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
