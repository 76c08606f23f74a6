"""Issue 12's whole picture in one scenario: every built-in evaluator, a third-party one found
through entry points (tests/data/evaluator_plugin), a post script, a JSON script gate, a script
evaluator and an evaluator gate, run by the oracle and by the litellm loop on the scripted model;
every result shows in metrics.json, evaluation.md, report.html and evaluations.jsonl.

The oracle gives no final answer: the evaluators that read the response say so (an error
result), the others score its run."""

from __future__ import annotations

import json

from conftest import GIT_TOML, Embeddings, FakeProvider, Project, chat_answer

from llmtt.scripted import FINAL_TEXT

SCENARIO = """\
task: {prompt: Make a git repository here.}
solution: [git init -q ., git status --short]
matrix: {agents: [oracle, litellm], models: [scripted]}
scripts:
  post:
    - command: git rev-parse --git-dir > .gitdir.txt
  evaluators:
    - name: files
      command: 'echo "{\\"score\\": 0.5, \\"summary\\": \\"half\\"}"'
evaluation:
  ground_truth: "Done: every step of the task has been carried out."
  evaluators:
    - type: rule_based
      criteria: [{name: short, scale: binary}, {name: says_done, scale: pass/fail}]
      config:
        rules:
          - {criterion: short, kind: length, max: 200}
          - {criterion: says_done, kind: regex, pattern: "^Done"}
    - type: tool_usage
      criteria: [{name: used_git_init, scale: binary}]
      config: {rules: [{criterion: used_git_init, target_subcommand: init, min_calls: 1}]}
    - type: lexical_similarity
      criteria: [{name: like_reference, scale: numeric}]
      config: {criterion: like_reference, algorithm: levenshtein}
    - type: keyword_coverage
      criteria: [{name: words, scale: numeric}]
      config: {criterion: words, keywords: [done, task, step]}
    - type: sentiment
      criteria: [{name: mood, scale: string}]
      config: {criterion: mood, output: category}
    - type: toxicity
      criteria: [{name: clean, scale: binary}]
      config: {criterion: clean, terms: [stupid, hate]}
    - type: llm_judge
      criteria: [{name: helpful, scale: likert5}]
      config: {criterion: helpful, model: grader}
    - type: nlp_accuracy
      criteria: [{name: close, scale: numeric}]
      config: {criterion: close, model: embedder}
    - type: word_count
      criteria: [{name: brief, scale: binary}]
      config: {criterion: brief, max_words: 20}
  gates:
    - {type: file_exists, path: .gitdir.txt, description: the post script ran}
    - type: script
      command: 'echo "{\\"passed\\": true, \\"message\\": \\"json verdict\\"}"; exit 3'
    - {type: evaluator, criterion: used_git_init, threshold: 1}
"""
CRITERIA = [
    "short",
    "says_done",
    "used_git_init",
    "like_reference",
    "words",
    "mood",
    "clean",
    "helpful",
    "close",
    "brief",
]
READS_RESPONSE = {
    "short",
    "says_done",
    "like_reference",
    "words",
    "mood",
    "clean",
    "close",
    "brief",
}


def test_every_evaluator_kind_in_one_scenario(
    project: Project,
    provider: tuple[str, type[FakeProvider]],
    embeddings: tuple[str, type[Embeddings]],
) -> None:
    chat_url, chat = provider
    chat.queue[:] = [(200, chat_answer('{"score": 4, "reasoning": "Did what was asked."}'))]
    embed_url, _ = embeddings
    project.write(
        "llmtt.toml",
        GIT_TOML
        + f'\n[models.grader]\nlitellm = "openai/grader"\napi_base = "{chat_url}"\n'
        + 'api_key_env = "KEYS"\ninput_usd_per_mtok = 1.0\noutput_usd_per_mtok = 1.0\n'
        + f'\n[models.embedder]\nlitellm = "openai/letters"\napi_base = "{embed_url}"\n'
        + 'api_key_env = "KEYS"\ninput_usd_per_mtok = 0.1\noutput_usd_per_mtok = 0\n',
    )
    project.write("scenarios/s.yaml", SCENARIO)
    result = project.doit("run", "-n", "2", env={"LLMTT_ENABLED": "1", "KEYS": "k"})
    assert result.code == 0, result.out + result.err

    for run, agent in (("s/litellm-scripted/r1", "litellm"), ("s/oracle/r1", "oracle")):
        metrics = project.json(f"{run}/metrics.json")
        assert metrics["outcome"] == "pass", (agent, metrics["outcome_reason"])
        evaluated = metrics["evaluators"]
        scored = {r["criterion"]: r for r in evaluated["results"]}
        assert sorted(scored) == sorted(CRITERIA), agent
        assert evaluated["errors"] == [], agent
        for name, found in scored.items():
            no_answer = agent == "oracle" and name in READS_RESPONSE
            assert bool(found.get("error")) == no_answer, (agent, name, found)
        assert metrics["script_evaluators"]["files"]["score"] == 0.5
        gates = project.json(f"{run}/gates.json")["gates"]
        assert [g["passed"] for g in gates] == [True, True, True], gates
        assert gates[1]["message"].startswith("json verdict")
        text = (project.results() / run / "evaluation.md").read_text()
        for name in CRITERIA:
            assert f"| {name} |" in text, (agent, name)

    answered = project.json("s/litellm-scripted/r1/metrics.json")["evaluators"]
    assert answered["response"] == FINAL_TEXT
    scored = {r["criterion"]: r for r in answered["results"]}
    assert scored["short"]["score"] is True
    assert scored["says_done"]["score"] is True
    assert scored["like_reference"]["score"] == 1.0  # the answer is the reference
    assert scored["words"]["score"] == 1.0
    assert scored["mood"]["score"] == "neutral"
    assert scored["clean"]["score"] is True
    assert scored["helpful"]["score"] == 4
    assert scored["close"]["score"] == 1.0
    assert scored["brief"]["score"] is True
    assert scored["used_git_init"]["score"] is True
    text = (project.results() / "s/litellm-scripted/r1/evaluation.md").read_text()
    assert "| like_reference | lexical_similarity | 1 |" in text  # a float, shortened
    assert "| helpful | llm_judge | 4 | Did what was asked. |" in text

    html = project.report_html()
    for name in CRITERIA:
        assert f"<td>{name}</td>" in html, name
    lines = (project.results() / "evaluations.jsonl").read_text().split("\n")
    records = [json.loads(line) for line in lines if line]
    assert sorted(r["run_id"] for r in records) == ["s/litellm-scripted/r1", "s/oracle/r1"]
    for record in records:
        assert [r["criterion"] for r in record["results"]] == CRITERIA
