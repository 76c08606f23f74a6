"""The judge over real HTTP through litellm, with a provider stood in for at the wire:
well-formed, repaired and twice-malformed answers; re-judging alone; the money switch."""

from __future__ import annotations

import json
import sqlite3

import pytest
from conftest import GIT_TOML, FakeProvider, Project, chat_answer

from llmtt.evaluation.judge import guidance_section, parse_answer
from llmtt.redaction import Redactor
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


def test_a_judge_that_cannot_answer_is_an_error_of_the_judge_asked_again_alone(
    project: Project, provider: tuple[str, type[FakeProvider]]
) -> None:
    """Malformed twice: the run's outcome is `error` (never the agent's fail), `doit run` exits
    non-zero naming it, the reports show it as an error outside the pass rate; the next `doit
    run` asks the judge alone, and judge.json and the run's cost keep both attempts' money."""
    url, handler = provider
    handler.queue = [(200, chat_answer('{"scores": {"correct": 1}}'))]
    judged_project(project, url)
    result = project.doit("run", env=ENABLED)
    assert result.code != 0 and "Traceback" not in result.out + result.err
    assert "s/oracle/r1: judge error: malformed answer twice (weighted_score" in result.out
    said = "llmtt: the judge could not answer about 1 run(s) (the next doit run asks it again)"
    assert f"{said}: s/oracle/r1\n" in result.out
    assert len(handler.hits) == 2  # the answer and one repair
    metrics = project.json("s/oracle/r1/metrics.json")
    assert metrics["outcome"] == "error"
    assert metrics["outcome_reason"].startswith("judge error: malformed answer twice")
    judge = project.json("s/oracle/r1/judge.json")
    assert judge["error"] and judge["cost_usd"] == pytest.approx(30 / 1e6)
    report = project.json("report.json")
    row = report["runs"][0]
    assert row["outcome"] == "error" and row["judge"]["cost_usd"] == pytest.approx(30 / 1e6)
    assert report["summary"]["passed"] == report["summary"]["failed"] == 0
    assert report["summary"]["errors"] == 1 and report["summary"]["pass_rate"] is None
    assert "| s/oracle/r1 | error |" in (project.results() / "report.md").read_text()
    for name in ("report.md", "report.html", "junit.xml"):
        text = (project.results() / name).read_text()
        assert "judge error: malformed answer twice (weighted_score" in text, name
    evaluation = (project.results() / "s/oracle/r1/evaluation.md").read_text()
    assert "## Judge (judge-m): error (the judge's, not the agent's)" in evaluation
    handler.queue = [(200, chat_answer(good()))]
    again = project.doit("run", env=ENABLED)
    assert again.code == 0, again.out + again.err
    assert sorted(again.executed()) == ["aggregate", "s/oracle/r1", "s/oracle/r1:judge"]
    assert len(handler.hits) == 3
    judge = project.json("s/oracle/r1/judge.json")
    assert judge["passed"] is True and judge["weighted_score"] == 0.8
    assert [a["error"][:33] for a in judge["earlier_attempts"]] == [
        "judge error: malformed answer twi"
    ]
    assert judge["attempts"] == 3 and judge["cost_usd"] == pytest.approx(45 / 1e6)
    report = project.json("report.json")
    assert report["runs"][0]["outcome"] == "pass"
    assert report["runs"][0]["judge"]["cost_usd"] == pytest.approx(45 / 1e6)
    assert report["runs"][0]["judge"]["samples"] == [
        {"model": "judge-m", "weighted_score": 0.8, "passed": True}
    ]
    assert project.doit("run", env=ENABLED).executed() == []
    assert len(handler.hits) == 3  # nothing paid twice


def test_samples_are_averaged_and_only_the_missing_ones_asked(
    project: Project, provider: tuple[str, type[FakeProvider]]
) -> None:
    """samples = 3 answering 0.6, 0.8 and 1.0: the mean decides and the spread is kept;
    raising to 4 asks one more (a sample that fails makes the run an error, and only it is
    asked again), lowering to 2 re-uses the first two and asks nothing. The guidance the agent
    was given (the scenario's own, a variant's files) is in the prompt."""
    url, handler = provider
    answers = [chat_answer(good(x, x, x)) for x in (0.6, 0.8, 1.0)]
    answers += [chat_answer("no idea"), chat_answer("none"), chat_answer(good(0.4, 0.4, 0.4))]
    handler.queue = [(200, a) for a in answers]
    judged_project(project, url)
    project.write("scenarios/GUIDE.md", "Always commit with -q.\n")
    project.write("notes.md", "Notes for the agent: git is installed.\n")
    toml = project.root / "llmtt.toml"
    said = toml.read_text() + "samples = 3\n"
    said += '\n[variants.v]\nfiles = {"NOTES.md" = "notes.md"}\n[matrix]\nvariants = ["v"]\n'
    toml.write_text(said)
    scenario = project.root / "scenarios/s.yaml"
    scenario.write_text("guidance: GUIDE.md\n" + scenario.read_text())
    assert project.doit("run", env=ENABLED).code == 0
    assert len(handler.hits) == 3
    prompt = handler.bodies[0]["messages"][1]["content"]
    assert "## Guidance the agent was given\n### NOTES.md\nNotes for the agent" in prompt
    assert "### AGENTS.md\nAlways commit with -q." in prompt
    judge = project.json("s/oracle-v/r1/judge.json")
    assert judge["weighted_score"] == pytest.approx(0.8)
    assert judge["spread"] == {"min": 0.6, "max": 1.0, "sd": pytest.approx(0.2)}
    assert "judge score (mean of 3 samples) 0.8 >= threshold 0.7" == judge["reason"]
    row = project.json("report.json")["runs"][0]
    assert [s["weighted_score"] for s in row["judge"]["samples"]] == [0.6, 0.8, 1.0]
    assert [s["passed"] for s in row["judge"]["samples"]] == [False, True, True]
    toml.write_text(said.replace("samples = 3", "samples = 4"))
    more = project.doit("run", env=ENABLED)  # the fourth sample cannot be read, twice
    assert more.code != 0 and len(handler.hits) == 5
    assert sorted(more.executed()) == ["aggregate", "s/oracle-v/r1", "s/oracle-v/r1:judge"]
    judge = project.json("s/oracle-v/r1/judge.json")
    assert judge["error"].startswith("judge error: malformed answer twice")
    assert project.json("s/oracle-v/r1/metrics.json")["outcome"] == "error"
    more = project.doit("run", env=ENABLED)  # the three scored stand: one more is asked
    assert more.code == 0 and len(handler.hits) == 6
    judge = project.json("s/oracle-v/r1/judge.json")
    assert judge["weighted_score"] == pytest.approx(0.7) and judge["passed"] is True
    assert len(judge["earlier_attempts"]) == 1 and judge["attempts"] == 6
    assert judge["cost_usd"] == pytest.approx(6 * 15 / 1e6)
    toml.write_text(said.replace("samples = 3", "samples = 2"))
    fewer = project.doit("run", env=ENABLED)
    assert fewer.code == 0 and len(handler.hits) == 6
    judge = project.json("s/oracle-v/r1/judge.json")
    assert judge["weighted_score"] == pytest.approx(0.7) and len(judge["samples"]) == 2
    assert judge["cost_usd"] == pytest.approx(6 * 15 / 1e6)  # the two left out were paid for
    toml.write_text(said.replace("samples = 3", "samples = 4"))
    back = project.doit("run", env=ENABLED)  # raised again: the spare two count, none asked
    assert back.code == 0 and len(handler.hits) == 6
    assert project.json("s/oracle-v/r1/judge.json")["weighted_score"] == pytest.approx(0.7)


def test_a_sample_the_budget_refuses_waits_and_the_one_paid_for_stays(
    project: Project, provider: tuple[str, type[FakeProvider]]
) -> None:
    """samples = 2, and a budget the first sample spends: the second is not asked, the run is
    an error saying why, and what the first cost stays in its row; with more budget the next
    `doit run` asks the second alone."""
    url, handler = provider
    handler.queue = [(200, chat_answer(good(), 1000, 100))]  # $0.0011 a sample
    judged_project(project, url)
    toml = project.root / "llmtt.toml"
    said = toml.read_text() + "samples = 2\n"
    toml.write_text(said + "\n[budget]\nmax_usd = 0.001\n")
    assert project.doit("run", env=ENABLED).code != 0
    assert len(handler.hits) == 1
    row = project.json("report.json")["runs"][0]
    assert row["outcome"] == "error"
    assert row["outcome_reason"].startswith("the judge did not run: budget exhausted")
    assert row["judge"]["cost_usd"] == pytest.approx(0.0011)
    assert len(row["judge"]["samples"]) == 1
    toml.write_text(said + "\n[budget]\nmax_usd = 1\n")
    again = project.doit("run", env=ENABLED)
    assert again.code == 0 and len(handler.hits) == 2, again.out
    judge = project.json("s/oracle/r1/judge.json")
    assert judge["passed"] is True and len(judge["samples"]) == 2
    assert judge["cost_usd"] == pytest.approx(0.0022)


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


def test_the_guidance_shown_to_the_judge_is_redacted_and_cut_saying_so() -> None:
    redact = Redactor({"DEPLOY_TOKEN": "s3cret-value-123456"})
    files = [("AGENTS.md", "Use the token s3cret-value-123456.\n"), ("NOTES.md", "x" * 500)]
    shown = guidance_section(files, 200, redact)
    assert shown.startswith("### AGENTS.md\nUse the token ")
    assert "s3cret-value-123456" not in shown and "### NOTES.md\nxxx" in shown
    assert shown.endswith("characters cut by llmtt ...]") and len(shown) < 260


def test_a_judge_that_keeps_failing_gives_up_and_never_hides_the_agents_fail(
    project: Project, provider: tuple[str, type[FakeProvider]], capsys: pytest.CaptureFixture[str]
) -> None:
    """[judge] attempts = 2, when = "always", a judge that answers garbage: s (gate passed) is
    an error, asked again once, then the judge gives up (nothing asked, `doit run` exits 0 and
    the layer is done); f (gate failed) fails on its gate with the judge error beside it and
    is never asked again. `doit forget` asks again, every failed attempt's money kept; raising
    `attempts` settles again without the paid switch (no sample is missing); a run settled as
    the agent's fail before (judge.json format 1 with an error) is settled again once."""
    url, handler = provider
    handler.queue = [(200, chat_answer("no idea"))]
    judged_project(project, url)
    failing = (project.root / "scenarios/s.yaml").read_text().replace(".git/HEAD", "missing")
    project.write("scenarios/f.yaml", failing)
    toml = project.root / "llmtt.toml"
    said = toml.read_text() + 'when = "always"\nattempts = 2\n'
    toml.write_text(said)
    first = project.doit("run", env=ENABLED)
    assert first.code != 0 and len(handler.hits) == 4, first.out + first.err
    metrics = project.json("f/oracle/r1/metrics.json")
    assert metrics["outcome"] == "fail", metrics["outcome_reason"]
    assert metrics["outcome_reason"].startswith(
        "gate 1 (file_exists): missing does not exist; judge error: malformed answer twice"
    )
    second = project.doit("run", env=ENABLED)  # s alone: f's fail stands
    assert second.code != 0 and len(handler.hits) == 6
    assert "f/oracle/r1:judge" not in second.executed()
    reason = project.json("s/oracle/r1/metrics.json")["outcome_reason"]
    assert "; the judge is not asked again: it failed 2 attempts at this question" in reason
    third = project.doit("run", env=ENABLED)  # gives up: asks nothing, fails nothing
    assert third.code == 0 and len(handler.hits) == 6, third.out + third.err
    metrics = project.json("s/oracle/r1/metrics.json")
    assert metrics["outcome"] == "error"
    assert metrics["outcome_reason"].startswith(
        "judge error: the judge gave up after 2 attempts (the last: judge error: malformed"
    )
    assert "or after `doit forget s/oracle/r1:judge`" in metrics["outcome_reason"]
    assert "llmtt: the judge gave up on 1 run(s)" in third.out
    assert project.json("report.json")["summary"]["errors"] == 1
    assert project.doit("run", env=ENABLED).executed() == []
    assert _estimate(project, capsys)[-1].startswith("0 pending of 2 runs")  # it gave up
    assert project.doit("forget", "s/oracle/r1:judge").code == 0
    # Forgotten, its failed attempts no longer count: `llmtt estimate` prices the judge again.
    (line, total) = _estimate(project, capsys)
    assert line.endswith("s/oracle/r1  (the judge, at most)"), line
    assert float(line.split()[0].lstrip("$")) > 0 and total.startswith("1 pending of 2 runs")
    handler.queue = [(200, chat_answer(good()))]
    again = project.doit("run", env=ENABLED)
    assert again.code == 0 and len(handler.hits) == 7, again.out + again.err
    judge = project.json("s/oracle/r1/judge.json")
    assert judge["passed"] is True and len(judge["earlier_attempts"]) == 2
    assert judge["attempts"] == 5 and judge["cost_usd"] == pytest.approx(5 * 15 / 1e6)
    toml.write_text(said.replace("attempts = 2", "attempts = 4"))
    free = project.doit("run")  # no LLMTT_ENABLED: nothing to ask, settled all the same
    assert free.code == 0 and len(handler.hits) == 7, free.out + free.err
    assert "s/oracle/r1:judge" in free.executed()
    # As llmtt wrote it before a judge error was the judge's: the agent's fail, the layer done.
    old = {"format": 1, "model": "judge-m", "attempts": 2, "cost_usd": 3e-5, "error": "judge x"}
    (project.results() / "s/oracle/r1/judge.json").write_text(json.dumps(old))
    depfile = sqlite3.connect(project.results() / ".doit.sqlite3")
    with depfile:
        (data,) = depfile.execute(
            "SELECT CAST(task_data AS TEXT) FROM doit WHERE task_id = 's/oracle/r1:judge'"
        ).fetchone()
        data = json.loads(data)
        del data["_values_:"]["rules"]
        depfile.execute(
            "UPDATE doit SET task_data = ? WHERE task_id = 's/oracle/r1:judge'",
            (json.dumps(data),),
        )
    depfile.close()
    settled = project.doit("run", env=ENABLED)
    assert settled.code == 0 and len(handler.hits) == 8, settled.out + settled.err
    judge = project.json("s/oracle/r1/judge.json")
    assert judge["passed"] is True and judge["cost_usd"] == pytest.approx(3e-5 + 15 / 1e6)
    assert project.doit("run", env=ENABLED).executed() == []


def test_every_paid_attempt_is_carried_to_the_next_question_and_branch() -> None:
    """A changed question keeps the old samples as earlier attempts (marked with their
    question, so they count toward no give-up of the new one); a record written before the
    samples (format 1) is one attempt; a judge not asked now keeps them all, cost counted."""
    from llmtt.evaluation.judge_layer import _carried, _paid_before

    scored = {"weighted_score": 0.8, "error": None, "cost_usd": 1.0, "question": "q1"}
    failed = {"weighted_score": None, "error": "judge error: x", "cost_usd": 2.0}
    before = {"question": "q1", "samples": [scored], "earlier_attempts": [failed]}
    kept, earlier = _paid_before(before, "q1")
    assert kept == [scored] and earlier == [failed | {"question": "q1"}]
    kept, earlier = _paid_before(before, "q2")
    assert kept == [] and [a["question"] for a in earlier] == ["q1", "q1"]
    assert _carried(before)["cost_usd"] == 3.0 and len(_carried(before)["earlier_attempts"]) == 2
    legacy = {"format": 1, "attempts": 2, "cost_usd": 0.5, "error": "judge error: y"}
    kept, earlier = _paid_before(legacy, "q2")
    assert kept == [] and earlier == [
        {"attempts": 2, "cost_usd": 0.5, "error": "judge error: y", "question": None}
    ]
    assert _carried({"format": 2, "skipped": "run could not be carried out"}) == {}


def _estimate(project: Project, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """`llmtt estimate`'s lines."""
    from llmtt.commands.main import main

    capsys.readouterr()
    assert main(["estimate", str(project.root)]) == 0
    return capsys.readouterr().out.splitlines()
