"""The judge over real HTTP through litellm, with a provider stood in for at the wire:
well-formed, repaired and twice-malformed answers; re-judging alone; the money switch."""

from __future__ import annotations

import json

import pytest
from conftest import GIT_TOML, FakeProvider, Project, chat_answer

from llmtt.evaluation.judge import parse_answer
from llmtt.spec.rubric import Rubric

ENABLED = {"LLMTT_ENABLED": "1", "JUDGE_KEY": "k"}
RUBRIC = """\
criteria:
  - {id: correct, weight: 0.6, description: The repository has the commit.}
  - {id: tidy, weight: 0.4, description: No wasted commands.}
"""


def good(correct: float = 1.0, tidy: float = 0.5, said: float = 0.8) -> str:
    return json.dumps(
        {
            "scores": {"correct": correct, "tidy": tidy},
            "weighted_score": said,
            "confidence": 0.9,
            "issues": ["one retry"],
            "highlights": ["clean commit"],
        }
    )


def judged_project(project: Project, url: str, threshold: float = 0.7) -> None:
    project.write(
        "llmtt.toml",
        GIT_TOML + f'\n[models.judge-m]\nlitellm = "openai/judge-m"\napi_base = "{url}"\n'
        'api_key_env = "JUDGE_KEY"\ninput_usd_per_mtok = 1.0\noutput_usd_per_mtok = 1.0\n'
        '\n[judge]\nmodel = "judge-m"\n',
    )
    project.write("rubrics/r.yaml", RUBRIC)
    project.write(
        "scenarios/s.yaml",
        "task: {prompt: Commit a file.}\nsolution: [git init -q ., 'echo a > a', git add a, git commit -q -m a]\n"
        f"evaluation:\n  gates:\n    - {{type: file_exists, path: .git/HEAD}}\n"
        f"  judge: {{enabled: true, rubric: rubrics/r.yaml, pass_threshold: {threshold}}}\n",
    )


def test_well_formed_answer_decides_with_the_recomputed_score(
    project: Project, provider: tuple[str, type[FakeProvider]]
) -> None:
    url, handler = provider
    handler.queue = [(200, chat_answer(good(said=0.99)))]
    judged_project(project, url)
    result = project.doit("run", env=ENABLED)
    assert result.code == 0, result.out + result.err
    judge = project.json("s/oracle/r1/judge.json")
    assert judge["weighted_score"] == 0.8  # 0.6 * 1.0 + 0.4 * 0.5, not the 0.99 it claimed
    assert "the judge said 0.99; recomputed from its scores: 0.8" == judge["mismatch"]
    assert judge["passed"] is True and judge["attempts"] == 1
    assert judge["cost_usd"] == pytest.approx(15 / 1e6)
    metrics = project.json("s/oracle/r1/metrics.json")
    assert metrics["outcome"] == "pass" and metrics["judge_score"] == 0.8
    prompt = handler.bodies[0]["messages"][1]["content"]
    assert "correct (weight 0.6)" in prompt and "$ git commit -q -m a" in prompt
    assert "gate 1 file_exists: pass" in prompt
    evaluation = (project.results() / "s/oracle/r1/evaluation.md").read_text()
    assert "Judge" in evaluation and "0.8" in evaluation


def test_below_threshold_fails_the_outcome(
    project: Project, provider: tuple[str, type[FakeProvider]]
) -> None:
    url, handler = provider
    handler.queue = [(200, chat_answer(good(correct=0.5, tidy=0.5, said=0.5)))]
    judged_project(project, url)
    assert project.doit("run", env=ENABLED).code == 0
    metrics = project.json("s/oracle/r1/metrics.json")
    assert (
        metrics["outcome"] == "fail"
        and "judge score 0.5 < threshold 0.7" in metrics["outcome_reason"]
    )


def test_an_answer_without_a_message_is_malformed_and_repaired_once(
    project: Project, provider: tuple[str, type[FakeProvider]]
) -> None:
    """A 200 whose `choices` is empty: the judge used to fail on it with an IndexError, its
    paid answer lost and the run's evaluation left to pay for again."""
    url, handler = provider
    handler.queue = [(200, {**chat_answer(""), "choices": []}), (200, chat_answer(good()))]
    judged_project(project, url)
    assert project.doit("run", env=ENABLED).code == 0
    judge = project.json("s/oracle/r1/judge.json")
    assert judge["attempts"] == 2 and judge["passed"] is True
    assert judge["cost_usd"] == pytest.approx(30 / 1e6)
    assert (
        "not valid (no JSON object in the answer)" in handler.bodies[1]["messages"][-1]["content"]
    )


def test_malformed_answer_is_repaired_once(
    project: Project, provider: tuple[str, type[FakeProvider]]
) -> None:
    url, handler = provider
    handler.queue = [
        (200, chat_answer("I think it went well!")),
        (200, chat_answer("```json\n" + good() + "\n```")),
    ]
    judged_project(project, url)
    assert project.doit("run", env=ENABLED).code == 0
    judge = project.json("s/oracle/r1/judge.json")
    assert judge["attempts"] == 2 and judge["passed"] is True
    repair = handler.bodies[1]["messages"][-1]["content"]
    assert "not valid (no JSON object in the answer)" in repair


def test_malformed_twice_is_a_judge_error_and_a_fail(
    project: Project, provider: tuple[str, type[FakeProvider]]
) -> None:
    url, handler = provider
    handler.queue = [(200, chat_answer('{"scores": {"correct": 1}}'))]
    judged_project(project, url)
    result = project.doit("run", env=ENABLED)
    assert result.code == 0, result.out + result.err  # a judge error is a result, not a crash
    assert len(handler.hits) == 2
    metrics = project.json("s/oracle/r1/metrics.json")
    assert metrics["outcome"] == "fail"
    assert "judge error: malformed answer twice" in metrics["outcome_reason"]


def test_rubric_edit_rejudges_without_rerunning_agent_or_gates(
    project: Project, provider: tuple[str, type[FakeProvider]]
) -> None:
    url, handler = provider
    handler.queue = [(200, chat_answer(good()))]
    judged_project(project, url)
    assert project.doit("run", env=ENABLED).code == 0
    assert project.doit("run", env=ENABLED).executed() == []
    rubric = project.root / "rubrics/r.yaml"
    rubric.write_text(rubric.read_text().replace("No wasted commands.", "Few commands."))
    again = project.doit("run", env=ENABLED)
    assert sorted(again.executed()) == ["aggregate", "s/oracle/r1", "s/oracle/r1:judge"], again.out


def test_the_judge_is_asked_about_runs_whose_gates_passed_unless_told_always(
    project: Project, provider: tuple[str, type[FakeProvider]]
) -> None:
    """The seed runs the judge "if enabled and gates pass" ([judge] when = "gates_pass", the
    default): a run with a failed gate fails on its gates, nothing paid, and says so. Changing
    the setting asks only about the runs not asked yet; no agent runs again, and a verdict the
    judge gave stands whichever way it is set."""
    url, handler = provider
    handler.queue = [(200, chat_answer(good()))]
    judged_project(project, url)
    failing = (project.root / "scenarios/s.yaml").read_text().replace(".git/HEAD", "missing")
    project.write("scenarios/f.yaml", failing)
    assert project.doit("run", env=ENABLED).code == 0
    assert len(handler.hits) == 1  # s, whose gate passed; never f
    assert project.json("s/oracle/r1/metrics.json")["outcome"] == "pass"
    metrics = project.json("f/oracle/r1/metrics.json")
    assert metrics["outcome"] == "fail" and "judge_score" not in metrics
    reason = metrics["outcome_reason"]
    assert reason.startswith("gate 1 (file_exists): missing does not exist; the judge was not")
    assert '1 gate(s) failed, and [judge] when is "gates_pass"' in reason
    assert project.json("f/oracle/r1/judge.json")["not_asked"] is True
    evaluation = (project.results() / "f/oracle/r1/evaluation.md").read_text()
    assert "## Judge: not asked\n\nthe judge was not asked: 1 gate(s) failed" in evaluation
    toml = project.root / "llmtt.toml"
    said = toml.read_text()
    toml.write_text(said.replace('model = "judge-m"', 'model = "judge-m"\nwhen = "always"'))
    again = project.doit("run", env=ENABLED)
    assert again.code == 0, again.out + again.err
    assert len(handler.hits) == 2  # f alone: s's verdict stands
    assert not [t for t in again.executed() if t.endswith((":agent", ":evaluate"))], again.out
    assert "s/oracle/r1:judge" not in again.executed()
    metrics = project.json("f/oracle/r1/metrics.json")
    assert metrics["outcome"] == "fail" and metrics["judge_score"] == 0.8
    toml.write_text(said)  # back to the default: the verdicts given stand, nothing is asked
    back = project.doit("run", env=ENABLED)
    assert len(handler.hits) == 2 and not [t for t in back.executed() if ":" in t], back.out


def test_paid_judge_needs_the_switch(
    project: Project, provider: tuple[str, type[FakeProvider]]
) -> None:
    url, handler = provider
    handler.queue = [(200, chat_answer(good()))]
    judged_project(project, url)
    result = project.doit("run", env={"JUDGE_KEY": "k"})
    assert result.code != 0
    assert "the judge (judge-m) can spend money; set LLMTT_ENABLED=1" in result.out + result.err
    assert handler.hits == []


def test_judge_model_equal_to_tested_model_is_refused(
    project: Project, provider: tuple[str, type[FakeProvider]]
) -> None:
    url, _ = provider
    judged_project(project, url)
    result = project.doit("list", "agent=litellm", "model=judge-m")
    assert result.code == 2
    assert "the judge model 'judge-m' is also the model under test" in result.err


def test_no_judge_model_is_a_located_error(
    project: Project, provider: tuple[str, type[FakeProvider]]
) -> None:
    url, _ = provider
    judged_project(project, url)
    toml = project.root / "llmtt.toml"
    toml.write_text(toml.read_text().replace('[judge]\nmodel = "judge-m"\n', ""))
    result = project.doit("list")
    assert result.code == 2
    assert "no judge model is set" in result.err and "LLMTT_JUDGE" in result.err


def test_parse_answer_checks_every_criterion() -> None:
    rubric = Rubric.model_validate(
        {
            "criteria": [
                {"id": "a", "weight": 0.5, "description": "x"},
                {"id": "b", "weight": 0.5, "description": "y"},
            ]
        }
    )
    ok, problem = parse_answer(
        '{"scores": {"a": 1, "b": 0}, "weighted_score": 0.5, "confidence": 1, "issues": [], "highlights": []}',
        rubric,
    )
    assert ok is not None and problem is None
    _, problem = parse_answer(
        '{"scores": {"a": 1}, "weighted_score": 0.5, "confidence": 1, "issues": [], "highlights": []}',
        rubric,
    )
    assert problem == "scores lack criteria: b"
    _, problem = parse_answer(
        '{"scores": {"a": 1, "b": 3}, "weighted_score": 0.5, "confidence": 1, "issues": [], "highlights": []}',
        rubric,
    )
    assert problem == "scores outside 0..1: b"


def test_a_failed_evaluator_keeps_the_judge_from_being_paid_and_the_run_an_error(
    project: Project, provider: tuple[str, type[FakeProvider]]
) -> None:
    """The run's outcome waits for the evaluator to be fixed, so asking the judge now would
    pay for it twice."""
    url, handler = provider
    handler.queue = [(200, chat_answer(good()))]
    judged_project(project, url)
    project.write(
        "broken_evaluator.py",
        "from llmtt.plugins import Evaluator\n\n\nclass Broken(Evaluator):\n"
        '    type = "broken"\n\n    def evaluate(self, input, criteria):\n'
        '        raise ValueError("no")\n',
    )
    toml = (project.root / "llmtt.toml").read_text()
    project.write("llmtt.toml", toml + '\n[evaluators]\nbroken = "broken_evaluator:Broken"\n')
    scenario = (project.root / "scenarios/s.yaml").read_text()
    project.write(
        "scenarios/s.yaml",
        scenario.replace(
            "  judge:", "  evaluators:\n    - {type: broken, criteria: [{name: b}]}\n  judge:"
        ),
    )
    result = project.doit("run", env=ENABLED)
    assert result.code != 0 and "Traceback" not in result.out + result.err
    assert handler.hits == []  # the judge was not asked
    metrics = project.json("s/oracle/r1/metrics.json")
    assert metrics["outcome"] == "error"
    assert metrics["outcome_reason"].startswith(
        "the judge did not run: an evaluator failed: evaluator broken (scenarios/s.yaml:7, "
        "evaluation.evaluators[0]) raised ValueError: no (at broken_evaluator.py:8, in evaluate)"
    )
