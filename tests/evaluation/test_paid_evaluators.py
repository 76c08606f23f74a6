"""Evaluators that call a model (`llm_judge`, `nlp_accuracy`) keep the money rules of the judge:
nothing is asked without LLMTT_ENABLED=1 or with the budget spent (the run stays pending and
is evaluated, not re-run, once allowed), what they spend is recorded, a malformed grade is
repaired once; the embeddings come from a real OpenAI-format endpoint on 127.0.0.1."""

from __future__ import annotations

import math

import pytest
from conftest import GIT_TOML, Embeddings, FakeProvider, Project, chat_answer, letters

JUDGED = """\
task: {prompt: Make a git repository.}
solution: [git init -q .]
evaluation:
  ground_truth: an empty repository
  evaluators:
    - type: llm_judge
      criteria: [{name: helpful, description: Did it help?, scale: likert5}]
      config: {criterion: helpful, model: grader}
"""


def _judged(project: Project, url: str) -> None:
    project.write(
        "llmtt.toml",
        GIT_TOML
        + f'\n[models.grader]\nlitellm = "openai/grader"\napi_base = "{url}"\n'
        + 'api_key_env = "GRADER_KEY"\ninput_usd_per_mtok = 1.0\noutput_usd_per_mtok = 2.0\n',
    )
    project.write("scenarios/s.yaml", JUDGED)


def test_llm_judge_grades_after_one_repair_and_records_its_cost(
    project: Project, provider: tuple[str, type[FakeProvider]]
) -> None:
    url, handler = provider
    handler.queue[:] = [
        (200, chat_answer("I think it is fine.", 100, 20)),
        (200, chat_answer('{"score": 4, "reasoning": "Clear and complete."}', 150, 10)),
    ]
    _judged(project, url)
    result = project.doit("run", env={"LLMTT_ENABLED": "1", "GRADER_KEY": "k"})
    assert result.code == 0, result.out + result.err
    evaluated = project.json("s/oracle/r1/metrics.json")["evaluators"]
    [found] = evaluated["results"]
    assert found["score"] == 4
    assert found["reasoning"] == "Clear and complete."
    assert found["metadata"] == {"raw_llm_score": 4, "model": "grader"}
    assert evaluated["overall_score"] == 0.75
    # (100 + 150) input tokens at $1/M and (20 + 10) output tokens at $2/M.
    assert evaluated["cost_usd"] == pytest.approx((250 * 1.0 + 30 * 2.0) / 1e6)
    assert len(handler.bodies) == 2
    asked = handler.bodies[0]["messages"][1]["content"]
    assert "Task given: Make a git repository." in asked
    assert "Response: N/A" in asked  # the oracle gives no final answer
    assert "Reference answer: an empty repository" in asked
    assert "Criterion: helpful - Did it help?" in asked
    assert handler.bodies[0]["max_tokens"] == 800
    assert "not valid" in handler.bodies[1]["messages"][-1]["content"]


def test_llm_judge_repairs_an_answer_without_a_message(
    project: Project, provider: tuple[str, type[FakeProvider]]
) -> None:
    """A 200 whose `choices` is empty is a malformed grade (it used to fail the evaluation
    with an IndexError), repaired once like any other."""
    url, handler = provider
    handler.queue[:] = [
        (200, {**chat_answer("", 100, 20), "choices": []}),
        (200, chat_answer('{"score": 4, "reasoning": "Clear."}', 150, 10)),
    ]
    _judged(project, url)
    result = project.doit("run", env={"LLMTT_ENABLED": "1", "GRADER_KEY": "k"})
    assert result.code == 0, result.out + result.err
    evaluated = project.json("s/oracle/r1/metrics.json")["evaluators"]
    assert [r["score"] for r in evaluated["results"]] == [4]
    assert evaluated["cost_usd"] == pytest.approx((250 * 1.0 + 30 * 2.0) / 1e6)
    assert "not valid" in handler.bodies[1]["messages"][-1]["content"]


def test_llm_judge_spends_nothing_without_the_switch_and_the_run_waits_for_it(
    project: Project, provider: tuple[str, type[FakeProvider]]
) -> None:
    url, handler = provider
    handler.queue[:] = [(200, chat_answer('{"score": 5, "reasoning": "Good."}'))]
    _judged(project, url)
    first = project.doit("run", env={"GRADER_KEY": "k"})
    assert handler.hits == []
    metrics = project.json("s/oracle/r1/metrics.json")
    assert metrics["outcome"] == "error"
    assert metrics["outcome_reason"] == (
        "an evaluator did not run: evaluator llm_judge (grader) can spend money; "
        "set LLMTT_ENABLED=1"
    )
    assert not (project.results() / "results.jsonl").exists()
    assert "an evaluator did not run" in (project.results() / "report.md").read_text()
    assert first.code != 0  # the run is listed as not carried out
    # Allowed now: evaluated (and graded) without running the agent again.
    second = project.doit("run", env={"LLMTT_ENABLED": "1", "GRADER_KEY": "k"})
    assert second.code == 0, second.out + second.err
    assert "s/oracle/r1:agent" not in second.executed()
    assert "s/oracle/r1:evaluate" in second.executed()
    assert len(handler.hits) == 1
    assert project.json("s/oracle/r1/metrics.json")["outcome"] == "pass"
    lines = (project.results() / "results.jsonl").read_text().split("\n")
    assert len([line for line in lines if line]) == 1
    assert project.doit("run", env={"LLMTT_ENABLED": "1", "GRADER_KEY": "k"}).executed() == []


def test_llm_judge_spends_nothing_once_the_budget_is_spent(
    project: Project, provider: tuple[str, type[FakeProvider]]
) -> None:
    url, handler = provider
    handler.queue[:] = [(200, chat_answer('{"score": 5, "reasoning": "Good."}'))]
    _judged(project, url)
    project.doit("run", "budget=0", env={"LLMTT_ENABLED": "1", "GRADER_KEY": "k"})
    assert handler.hits == []
    reason = project.json("s/oracle/r1/metrics.json")["outcome_reason"]
    assert reason.startswith("an evaluator did not run: evaluator llm_judge: budget exhausted")


def test_llm_judge_without_its_key_says_which_variable(
    project: Project, provider: tuple[str, type[FakeProvider]]
) -> None:
    url, handler = provider
    handler.queue[:] = [(200, chat_answer('{"score": 5, "reasoning": "Good."}'))]
    _judged(project, url)
    project.doit("run", env={"LLMTT_ENABLED": "1"})
    assert handler.hits == []
    assert project.json("s/oracle/r1/metrics.json")["outcome_reason"] == (
        "an evaluator did not run: evaluator llm_judge (grader) cannot run: no API key: set "
        "GRADER_KEY ([models.grader] api_key_env)"
    )


EMBEDDED = """\
task: {prompt: Make a git repository here.}
solution: [git init -q .]
evaluation:
  ground_truth: Create a new git repository in this folder.
  evaluators:
    - type: nlp_accuracy
      criteria: [{name: close, scale: numeric}]
      config: {criterion: close, model: embedder, source: prompt}
    - type: nlp_accuracy
      criteria: [{name: close_enough, scale: binary}]
      config: {criterion: close_enough, model: embedder, source: prompt, similarity_threshold: 0.99}
"""


def test_nlp_accuracy_is_the_cosine_of_the_endpoints_embeddings(
    project: Project, embeddings: tuple[str, type[Embeddings]]
) -> None:
    url, handler = embeddings
    project.write(
        "llmtt.toml",
        GIT_TOML
        + f'\n[models.embedder]\nlitellm = "openai/letters"\napi_base = "{url}"\n'
        + 'api_key_env = "EMBED_KEY"\ninput_usd_per_mtok = 0.5\noutput_usd_per_mtok = 0\n',
    )
    project.write("scenarios/s.yaml", EMBEDDED)
    result = project.doit("run", env={"LLMTT_ENABLED": "1", "EMBED_KEY": "k"})
    assert result.code == 0, result.out + result.err
    a = letters("Make a git repository here.")
    b = letters("Create a new git repository in this folder.")
    expected = sum(x * y for x, y in zip(a, b, strict=True)) / (math.hypot(*a) * math.hypot(*b))
    evaluated = project.json("s/oracle/r1/metrics.json")["evaluators"]
    close, enough = evaluated["results"]
    assert close["score"] == pytest.approx(expected)
    assert close["reasoning"] == f"Cosine similarity: {expected:.4f}."
    assert enough["score"] is False  # below 0.99
    assert enough["reasoning"] == f"Cosine similarity: {expected:.4f}. < threshold 0.99."
    assert [a["path"] for a in handler.asked] == ["/v1/embeddings", "/v1/embeddings"]
    assert handler.asked[0]["input"] == [
        "Make a git repository here.",
        "Create a new git repository in this folder.",
    ]
    assert evaluated["cost_usd"] == pytest.approx(2 * 40 * 0.5 / 1e6)
    assert evaluated["overall_score"] == pytest.approx(expected / 2)


def test_evaluating_again_reuses_a_paid_answer_to_the_same_question(
    project: Project, provider: tuple[str, type[FakeProvider]]
) -> None:
    url, handler = provider
    handler.queue[:] = [(200, chat_answer('{"score": 4, "reasoning": "Fine."}'))]
    _judged(project, url)
    env = {"LLMTT_ENABLED": "1", "GRADER_KEY": "k"}
    project.doit("run", env=env)
    assert len(handler.hits) == 1
    # A gate added: the run is evaluated again, the judge's answer is the same question's.
    scenario = project.root / "scenarios/s.yaml"
    scenario.write_text(
        scenario.read_text() + "  gates:\n    - {type: file_exists, path: .git/HEAD}\n"
    )
    second = project.doit("run", env=env)
    assert "s/oracle/r1:evaluate" in second.executed(), second.out
    assert len(handler.hits) == 1
    evaluated = project.json("s/oracle/r1/metrics.json")["evaluators"]
    assert evaluated["reused"] == ["llm_judge"]
    assert evaluated["results"][0]["score"] == 4
    assert evaluated["cost_usd"] == 0
    # Its own config edited: a new question, asked (and paid for) again.
    scenario.write_text(
        scenario.read_text().replace("model: grader}", "model: grader, timeout_secs: 30}")
    )
    project.doit("run", env=env)
    assert len(handler.hits) == 2
    assert project.json("s/oracle/r1/metrics.json")["evaluators"]["reused"] == []


def test_estimate_says_which_evaluators_may_spend_and_counts_the_free_ones_as_nothing(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    from llmtt.commands.main import main

    _judged(project, "http://127.0.0.1:9/v1")  # never asked: only estimated
    project.write(
        "scenarios/free.yaml",
        JUDGED.replace("llm_judge", "keyword_coverage").replace(
            "config: {criterion: helpful, model: grader}",
            "config: {criterion: helpful, keywords: [git]}",
        ),
    )
    capsys.readouterr()
    assert main(["estimate", str(project.root)]) == 0
    lines = capsys.readouterr().out.splitlines()
    by_run = {line.split()[1]: line for line in lines[:-1]}
    # The oracle's agent is free; llm_judge asks the priced grader, keyword_coverage no model.
    assert by_run["s/oracle/r1"].endswith("(the agent, its evaluators llm_judge: not estimated)")
    assert by_run["free/oracle/r1"].endswith("(the agent)"), by_run
    assert by_run["free/oracle/r1"].split()[0] == "$0.0000", by_run
    assert by_run["s/oracle/r1"].split()[0] == "unknown", by_run
