"""The evaluator framework (AgentDock's model): a project's own evaluator found through
llmtt.toml's [evaluators], the overall score normalises and weights as AgentDock does, an
`evaluator` gate decides the outcome, results reach metrics.json, evaluation.md and
evaluations.jsonl, editing an evaluator's config re-evaluates without re-running the agent (so
does editing its code, or a project module it imports), and mistakes are located load errors.
Each evaluator is handed only its own criteria: one that scores another's, or raises, makes the
run's outcome `error` (the evaluator's fault, not the agent's), said where it is written, while
the others' results stand."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from conftest import GIT_TOML, Project

from llmtt.evaluation.evaluators.base import EvaluationResult, normalise, overall_score, pass_fail
from llmtt.spec.evaluation import Criterion

EVALUATORS = """\
from llmtt.evaluation.evaluators.base import (
    EvaluationResult, Evaluator, EvaluatorConfig, pass_fail,
)


class CallsConfig(EvaluatorConfig):
    criterion: str
    min_calls: int


class Calls(Evaluator):
    type = "calls"
    Config = CallsConfig

    def evaluate(self, input, criteria):
        n = len(input.tool_calls)
        ok = input.workspace is not None and (input.workspace / ".git").is_dir()
        return [
            EvaluationResult(
                c.name,
                pass_fail(n >= self.config.min_calls and ok, c.scale),
                self.type,
                reasoning=f"{n} tool call(s), first: {input.tool_calls[0].command}",
            )
            for c in self.owned(criteria, [self.config.criterion])
        ]


class Likert(Evaluator):
    type = "likert"

    def evaluate(self, input, criteria):
        return [EvaluationResult(c.name, 4, self.type) for c in self.owned(criteria, ["tidy"])]


class Broken(Evaluator):
    type = "broken"

    def evaluate(self, input, criteria):
        raise RuntimeError("boom")


class Meddler(Evaluator):
    # Scores what it likes, whatever it is handed: its own criterion and another's.
    type = "meddler"

    def evaluate(self, input, criteria):
        assert [c.name for c in criteria] == ["mine"], criteria  # only its own, handed
        return [
            EvaluationResult("enough", False, self.type),
            EvaluationResult("mine", True, self.type),
        ]
"""

TOML = (
    GIT_TOML
    + """
[evaluators]
calls = "my_evaluators:Calls"
likert = "my_evaluators:Likert"
broken = "my_evaluators:Broken"
meddler = "my_evaluators:Meddler"
"""
)

SCENARIO = """\
task: {prompt: Make a git repository.}
solution: [git init -q ., git status --short]
evaluation:
  ground_truth: a repository
  evaluators:
    - type: calls
      criteria: [{name: enough, scale: binary, weight: 2}]
      config: {criterion: enough, min_calls: MIN}
    - type: likert
      criteria: [{name: tidy, scale: likert5}]
  gates:
    - {type: evaluator, criterion: enough, threshold: 1}
"""


def _project(project: Project, min_calls: int = 2) -> Project:
    project.write("llmtt.toml", TOML)
    project.write("my_evaluators.py", EVALUATORS)
    project.write("scenarios/s.yaml", SCENARIO.replace("MIN", str(min_calls)))
    return project


def test_a_projects_evaluators_score_the_run_and_one_gates_it(project: Project) -> None:
    _project(project)
    first = project.doit("run")
    assert first.code == 0, first.out + first.err
    metrics = project.json("s/oracle/r1/metrics.json")
    evaluated = metrics["evaluators"]
    by_criterion = {r["criterion"]: r for r in evaluated["results"]}
    assert by_criterion["enough"]["score"] is True
    assert by_criterion["enough"]["reasoning"] == "2 tool call(s), first: git init -q ."
    assert by_criterion["tidy"]["score"] == 4
    assert evaluated["errors"] == []
    # (1 x 2 + 0.75 x 1) / 3
    assert evaluated["overall_score"] == pytest.approx(2.75 / 3)
    assert metrics["outcome"] == "pass"
    gates = project.json("s/oracle/r1/gates.json")["gates"]
    assert gates[0]["passed"] is True and "scored 1 >= 1" in gates[0]["message"]
    text = (project.results() / "s/oracle/r1/evaluation.md").read_text()
    assert "## Evaluators (overall 0.917)" in text
    assert "| enough | calls | True | 2 tool call(s), first: git init -q . |" in text
    html = project.report_html()
    assert "<p>evaluators: overall 0.917</p>" in html
    assert "<td>enough</td><td>calls</td><td>True</td><td>2 tool call(s)" in html
    report = (project.results() / "report.md").read_text()
    assert "| run | outcome | gates | judge | evaluators | commands |" in report
    assert "| s/oracle/r1 | pass | 1/1 | n/a | 0.917 |" in report
    result = project.json("s/oracle/r1/result.json")
    assert result["evaluators"] == {
        "overall_score": pytest.approx(2.75 / 3),
        "scores": {"enough": True, "tidy": 4},
        "errors": 0,
    }
    assert "evaluators" not in result["metrics"]
    lines = (project.results() / "evaluations.jsonl").read_text().split("\n")
    records = [json.loads(line) for line in lines if line]
    assert len(records) == 1
    assert records[0]["run_id"] == "s/oracle/r1"
    assert records[0]["input_snapshot"]["ground_truth"] == "a repository"
    assert records[0]["config_snapshot"]["criteria"] == ["enough", "tidy"]
    assert records[0]["evaluation_id"] == project.json("s/oracle/r1/result.json")["evaluation_id"]

    again = project.doit("run")
    assert again.executed() == [], again.out

    # Editing an evaluator's config re-evaluates, without paying for the agent again.
    _project(project, min_calls=5)
    third = project.doit("run")
    assert third.code == 0, third.out + third.err  # a failed run is a result
    assert "s/oracle/r1:agent" not in third.executed()
    assert "s/oracle/r1:evaluate" in third.executed()
    metrics = project.json("s/oracle/r1/metrics.json")
    assert metrics["outcome"] == "fail"
    gates = project.json("s/oracle/r1/gates.json")["gates"]
    assert "scored 0 < 1" in gates[0]["message"]
    lines = (project.results() / "evaluations.jsonl").read_text().split("\n")
    assert len([line for line in lines if line]) == 2


FAULTY_SCENARIO = """\
task: {prompt: Make a git repository.}
solution: [git init -q ., git status --short]
evaluation:
  evaluators:
    - type: calls
      criteria: [{name: enough, scale: binary}]
      config: {criterion: enough, min_calls: 2}
    - type: meddler
      criteria: [{name: mine, scale: binary}]
    - type: broken
      criteria: [{name: never, scale: numeric}]
  gates:
    - {type: evaluator, criterion: enough, threshold: 1}
"""


def test_an_evaluator_that_scores_anothers_criterion_or_raises_makes_the_run_an_error(
    project: Project,
) -> None:
    _project(project)
    project.write("scenarios/s.yaml", FAULTY_SCENARIO)
    first = project.doit("run")
    out = first.out + first.err
    assert first.code != 0 and "Traceback" not in out, out
    meddled = (
        "evaluator meddler (scenarios/s.yaml:8, evaluation.evaluators[1]) scored 'enough', "
        "which is not one of its criteria (mine): left out"
    )
    raised = (
        "evaluator broken (scenarios/s.yaml:10, evaluation.evaluators[2]) raised "
        "RuntimeError: boom (at my_evaluators.py:"
    )
    assert f"s/oracle/r1: an evaluator failed: {meddled}; {raised}" in out  # the console
    metrics = project.json("s/oracle/r1/metrics.json")
    assert metrics["outcome"] == "error"
    assert meddled in metrics["outcome_reason"] and raised in metrics["outcome_reason"]
    assert metrics["outcome_reason"].endswith(", in evaluate)")
    evaluated = metrics["evaluators"]
    assert evaluated["errors"][0] == meddled and evaluated["errors"][1].startswith(raised)
    scores = {r["criterion"]: (r["evaluator"], r["score"]) for r in evaluated["results"]}
    # The meddler's False for `enough` was refused: the gate reads the calls evaluator's.
    assert scores == {
        "enough": ("calls", True),
        "mine": ("meddler", True),
        "never": ("broken", None),
    }
    gates = project.json("s/oracle/r1/gates.json")["gates"]
    assert gates[0]["passed"] is True and "scored 1 >= 1" in gates[0]["message"]
    report = (project.results() / "report.md").read_text()
    assert "| s/oracle/r1 | error |" in report and meddled in report
    html = project.report_html()
    assert "RuntimeError: boom" in html
    assert "an evaluator failed" in (project.results() / "s/oracle/r1/evaluation.md").read_text()
    # An error is no result: no results.jsonl line, no evaluation record; it stays pending,
    # and the next run evaluates it again without running its agent.
    assert not (project.results() / "evaluations.jsonl").exists()
    assert not (project.results() / "results.jsonl").exists()
    again = project.doit("run")
    assert again.code != 0
    assert "s/oracle/r1:evaluate" in again.executed()
    assert "s/oracle/r1:agent" not in again.executed()
    # Fixed (the faulty evaluators gone), the run is evaluated and passes.
    project.write(
        "scenarios/s.yaml",
        FAULTY_SCENARIO.split("    - type: meddler")[0]
        + ("  gates:\n    - {type: evaluator, criterion: enough, threshold: 1}\n"),
    )
    fixed = project.doit("run")
    assert fixed.code == 0, fixed.out + fixed.err
    assert "s/oracle/r1:agent" not in fixed.executed()
    assert project.json("s/oracle/r1/metrics.json")["outcome"] == "pass"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            (
                "config: {criterion: enough, min_calls: 2}",
                "config: {criterion: tidy, min_calls: 2}",
            ),
            [
                "s.yaml:8",
                "evaluation.evaluators[0].config.criterion",
                "names criterion 'tidy', which is not among this evaluator's criteria (enough)",
            ],
        ),
        (
            ("type: likert", "type: likret"),
            [
                "s.yaml:",
                "evaluation.evaluators[1].type",
                "unknown evaluator type 'likret'",
                "did you mean 'likert'?",
            ],
        ),
        (
            ("min_calls: 2", "min_calls: many"),
            ["s.yaml:8", "evaluation.evaluators[0].config.min_calls"],
        ),
        (
            ("criterion: enough, threshold: 1", "criterion: enuf, threshold: 1"),
            ["s.yaml:", "evaluation", "criterion 'enuf', which no evaluator scores"],
        ),
        (
            ("{name: tidy, scale: likert5}", "{name: enough, scale: likert5}"),
            ["criterion names must be unique: enough repeated"],
        ),
        (
            ("{name: tidy, scale: likert5}", "{name: tidy, scale: likert7}"),
            ["s.yaml:10", "evaluation.evaluators[1].criteria[0].scale"],
        ),
    ],
)
def test_evaluator_mistakes_are_located_load_errors(
    project: Project, change: tuple[str, str], expected: list[str]
) -> None:
    _project(project)
    path = project.root / "scenarios/s.yaml"
    path.write_text(path.read_text().replace(*change))
    result = project.doit("list")
    text = result.out + result.err
    assert result.code != 0
    assert "Traceback" not in text
    for part in expected:
        assert part in text, text


def test_a_third_party_target_that_is_not_an_evaluator_is_a_load_error(project: Project) -> None:
    _project(project)
    toml = (project.root / "llmtt.toml").read_text()
    project.write("llmtt.toml", toml.replace("my_evaluators:Likert", "my_evaluators:CallsConfig"))
    result = project.doit("list")
    assert result.code != 0
    assert "my_evaluators:CallsConfig is not a subclass of" in result.out + result.err


@pytest.mark.parametrize(
    ("score", "scale", "expected"),
    [
        (4, "likert5", 0.75),
        (6, "likert5", None),
        (0.4, "numeric", 0.4),
        (40, "numeric", 0.4),
        (140, "numeric", None),
        (True, "numeric", 1.0),
        (False, "likert5", 0.0),
        ("pass", "pass/fail", 1.0),
        ("No", "binary", 0.0),
        ("maybe", "binary", None),
        ("3", "likert5", 0.5),
        (1, "binary", 1.0),
        (0.5, "binary", None),
        ("positive", "string", None),
    ],
)
def test_scores_normalise_as_agentdock_normalises_them(
    score: object, scale: str, expected: float | None
) -> None:
    assert normalise(score, scale) == expected  # type: ignore[arg-type]


def test_the_overall_score_weights_each_result() -> None:
    criteria = [
        Criterion(name="a", scale="likert5", weight=3),
        Criterion(name="b", scale="binary"),
        Criterion(name="c", scale="string"),
    ]
    results = [
        EvaluationResult("a", 5, "x"),
        EvaluationResult("a", 1, "y"),  # a criterion scored twice counts twice
        EvaluationResult("b", pass_fail(False, "binary"), "x"),
        EvaluationResult("c", "neutral", "x"),  # does not normalise: left out
        EvaluationResult("b", True, "z", error="failed"),  # an error: left out
        EvaluationResult("d", 1, "x"),  # no such criterion: left out
    ]
    assert overall_score(results, criteria) == pytest.approx((3 * 1 + 3 * 0 + 0) / 7)
    assert overall_score([EvaluationResult("c", "neutral", "x")], criteria) is None


PLUGIN_SCENARIO = """\
task: {prompt: Make a git repository.}
solution: [git init -q .]
evaluation:
  evaluators:
    - type: word_count
      criteria: [{name: brief, scale: binary}]
      config: {criterion: brief, max_words: 40}
"""


def test_an_evaluator_installed_through_entry_points_runs(project: Project) -> None:
    # tests/data/evaluator_plugin, installed by scripts/test: not named in llmtt.toml.
    from llmtt.evaluation.evaluators.registry import installed

    assert installed()["word_count"] == "llmtt_word_count:WordCount"
    project.write("llmtt.toml", GIT_TOML)
    project.write("scenarios/s.yaml", PLUGIN_SCENARIO)
    result = project.doit("run", "agent=litellm", "model=scripted")
    assert result.code == 0, result.out + result.err
    evaluated = project.json("s/litellm-scripted/r1/metrics.json")["evaluators"]
    [found] = evaluated["results"]
    words = len(evaluated["response"].split())
    assert found == {
        "criterion": "brief",
        "score": True,
        "evaluator": "word_count",
        "reasoning": f"The answer has {words} word(s); at most 40 allowed.",
        "metadata": {"words": words},
    }
    assert evaluated["overall_score"] == 1.0


OWN_EVALUATOR = """\
from llmtt.evaluation.evaluators.base import EvaluationResult, Evaluator
from kit.scoring import verdict


class Own(Evaluator):
    type = "own"

    def evaluate(self, input, criteria):
        return [EvaluationResult(c.name, True, self.type, reasoning=verdict()) for c in criteria]
"""

OWN_SCENARIO = """\
task: {prompt: Make a git repository.}
solution: [git init -q .]
evaluation:
  evaluators:
    - type: own
      criteria: [{name: mine, scale: binary}]
"""


def _age(root: Path) -> None:
    """Age every file of the project, so that doit caches the plan it builds (a plan read from
    files changed just now is not cached)."""
    past = time.time() - 60
    for path in [root, *root.rglob("*")]:
        os.utime(path, (past, past))


def test_editing_a_project_evaluators_code_re_evaluates_only_its_runs(project: Project) -> None:
    project.write("llmtt.toml", GIT_TOML + '\n[evaluators]\nown = "own_evaluators:Own"\n')
    project.write("own_evaluators.py", OWN_EVALUATOR)
    project.write("kit/__init__.py", "")
    project.write(
        "kit/scoring.py", "from .words import WORD\n\n\ndef verdict():\n    return WORD\n"
    )
    project.write("kit/words.py", 'WORD = "first"\n')
    project.write("unrelated.py", "X = 1\n")
    project.write("scenarios/s.yaml", OWN_SCENARIO)
    project.write("scenarios/t.yaml", "task: {prompt: Init.}\nsolution: [git init -q .]\n")
    _age(project.root)
    first = project.doit("run")
    assert first.code == 0, first.out + first.err
    [result] = project.json("s/oracle/r1/metrics.json")["evaluators"]["results"]
    assert result["reasoning"] == "first"
    runs = ("s/oracle/r1", "t/oracle/r1")
    ran = {rid: (project.results() / rid / "run.json").read_bytes() for rid in runs}
    assert project.doit("run").executed() == []  # from the plan cached by the first

    # The module the evaluator's module imports through a relative import: its runs re-evaluate.
    project.write("kit/words.py", 'WORD = "second"\n')
    second = project.doit("run")
    assert second.code == 0, second.out + second.err
    assert "s/oracle/r1:evaluate" in second.executed(), second.out
    assert not any(task.startswith("t/") for task in second.executed()), second.out
    assert not any(task.endswith(":agent") for task in second.executed()), second.out
    [result] = project.json("s/oracle/r1/metrics.json")["evaluators"]["results"]
    assert result["reasoning"] == "second"
    for rid, before in ran.items():
        assert (project.results() / rid / "run.json").read_bytes() == before
    lines = (project.results() / "evaluations.jsonl").read_text().splitlines()
    assert len(lines) == 2

    # A project file the evaluator does not import changes nothing.
    project.write("unrelated.py", "X = 2\n")
    assert project.doit("run").executed() == []
