"""A Python without litellm (`pip install llmtt`, no extra): the oracle and the example suite run;
what needs litellm (its agent, the judge, an evaluator that calls a model) says so in one line,
`pip install 'llmtt[litellm]'`, before anything is asked of a model, never with a traceback, and
never when doit only lists the tasks. litellm is made unimportable in each subprocess (conftest's
`without_litellm`); the test of the installed wheel (test_install_wheel.py) has none at all."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from conftest import BIN, GIT_TOML, FakeProvider, Project, chat_answer, without_litellm
from test_example_suite import example_copy

INSTALL = "pip install 'llmtt[litellm]'"
SCENARIO = "task: {prompt: Commit a file.}\nsolution: [git init -q ., 'echo a > a']\n"
GATE = "evaluation:\n  gates:\n    - {type: file_exists, path: a}\n"
JUDGE = "  judge: {enabled: true, rubric: rubrics/r.yaml, pass_threshold: 0.5}\n"
EVALUATOR = (
    "  evaluators:\n    - type: llm_judge\n      config: {criterion: helpful}\n"
    "      criteria: [{name: helpful, description: Was it helpful?, scale: numeric}]\n"
)
RUBRIC = "criteria:\n  - {id: done, weight: 1.0, description: The file is there.}\n"


def paid_project(project: Project, url: str, matrix: str = "") -> None:
    """A project whose paid models (`paid` and the judge's `grader`) are the provider at `url`."""
    models = "".join(
        f'\n[models.{name}]\nlitellm = "openai/{name}"\napi_base = "{url}"\n'
        'api_key_env = "PAID_KEY"\ninput_usd_per_mtok = 1.0\noutput_usd_per_mtok = 1.0\n'
        for name in ("paid", "grader")
    )
    project.write("llmtt.toml", GIT_TOML + models + '\n[judge]\nmodel = "grader"\n' + matrix)
    project.write("rubrics/r.yaml", RUBRIC)


def llmtt(project: Project, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "llmtt"), *args],
        cwd=project.root,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("LLMTT_")}, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_validate_names_what_needs_litellm_and_doit_list_still_lists(
    project: Project, provider: tuple[str, type[FakeProvider]]
) -> None:
    url, _ = provider
    paid_project(project, url, '\n[matrix]\nagents = ["oracle", "litellm"]\nmodels = ["paid"]\n')
    project.write("scenarios/s.yaml", SCENARIO + GATE + JUDGE + EVALUATOR)
    env = without_litellm(project.root.parent)
    checked = llmtt(project, "validate", env=env)
    assert checked.returncode == 2, checked.stdout + checked.stderr
    assert checked.stderr == (
        f"llmtt: the litellm agent needs litellm: {INSTALL}; the judge needs litellm: {INSTALL}; "
        f"evaluator llm_judge needs litellm: {INSTALL}\n"
    )
    listed = project.doit("list", env=env)
    assert listed.code == 0, listed.out + listed.err
    assert "s/litellm-paid/r1" in listed.out and "s/oracle/r1" in listed.out
    # with litellm, the same project is valid: it is litellm's absence that was said
    assert llmtt(project, "validate", env={}).returncode == 0


def test_a_litellm_run_stops_before_a_model_is_asked(
    project: Project, provider: tuple[str, type[FakeProvider]]
) -> None:
    url, handler = provider
    handler.queue = [(200, chat_answer("done"))]
    paid_project(project, url, '\n[matrix]\nagents = ["oracle", "litellm"]\nmodels = ["paid"]\n')
    project.write("scenarios/s.yaml", SCENARIO + GATE)
    env = {"LLMTT_ENABLED": "1", "PAID_KEY": "k", **without_litellm(project.root.parent)}
    result = project.doit("run", env=env)
    assert result.code == 1, result.out + result.err
    said = f"the litellm agent needs litellm: {INSTALL}"
    assert f"llmtt: s/litellm-paid/r1: could not be carried out: {said}" in result.out
    assert "Traceback" not in result.out + result.err
    assert handler.hits == []  # nothing asked, nothing spent
    assert project.json("s/litellm-paid/r1/run.json")["error"] == said
    assert project.json("s/oracle/r1/metrics.json")["outcome"] == "pass"


def test_the_judge_and_a_model_evaluator_wait_for_litellm(
    project: Project, provider: tuple[str, type[FakeProvider]]
) -> None:
    url, handler = provider
    handler.queue = [(200, chat_answer('{"score": 1, "reasoning": "yes"}'))]
    paid_project(project, url)
    project.write("scenarios/judged.yaml", SCENARIO + GATE + JUDGE)
    project.write("scenarios/evaluated.yaml", SCENARIO + GATE + EVALUATOR)
    env = {"LLMTT_ENABLED": "1", "PAID_KEY": "k", **without_litellm(project.root.parent)}
    result = project.doit("run", env=env)
    assert result.code == 1, result.out + result.err
    assert "Traceback" not in result.out + result.err
    assert handler.hits == []
    judge = project.json("judged/oracle/r1/judge.json")
    assert judge["skipped"] == f"the judge needs litellm: {INSTALL}"
    metrics = project.json("evaluated/oracle/r1/metrics.json")
    assert metrics["evaluators"]["refused"] == [f"evaluator llm_judge needs litellm: {INSTALL}"]
    assert "2 could not be carried out" in result.out  # both stay pending, to be redone


def test_the_example_suite_passes_without_litellm(tmp_path: Path) -> None:
    project = Project(example_copy(tmp_path))
    result = project.doit("run", "-n", "2", env=without_litellm(tmp_path))
    assert result.code == 0, result.out + result.err
    outcomes = {r["scenario"]: r["outcome"] for r in project.json("report.json")["runs"]}
    assert outcomes.pop("negative-control-git-tag") == "fail"
    assert len(outcomes) >= 4 and set(outcomes.values()) == {"pass"}, outcomes
