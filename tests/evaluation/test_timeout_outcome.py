"""A run whose agent was stopped at `run.timeout_secs` fails, even when every gate and the judge
pass; its gates still run and are shown."""

from __future__ import annotations

import json

from conftest import GIT_TOML, FakeProvider, Project, chat_answer

from llmtt.evaluation.outcome import decide

# The solution finishes its work, then outstays its one-second limit (a sleep no other test uses).
SLOW_SCENARIO = """\
task: {prompt: Write done.txt.}
solution: ["echo done > done.txt", "sleep 41.7"]
run: {timeout_secs: 1}
evaluation:
  gates:
    - {type: file_exists, path: done.txt}
    - {type: file_contains, path: done.txt, substring: done}
"""


def test_an_agent_stopped_at_its_limit_fails_though_every_gate_passes(project: Project) -> None:
    project.write("llmtt.toml", GIT_TOML)
    project.write("scenarios/slow.yaml", SLOW_SCENARIO)
    result = project.doit("run")
    assert result.code == 0, result.out + result.err  # a timeout is a result, not an error
    info = project.json("slow/oracle/r1/run.json")
    assert info["timed_out"] is True and info["status"] == "timeout"
    gates = project.json("slow/oracle/r1/gates.json")["gates"]
    assert [g["passed"] for g in gates] == [True, True]
    metrics = project.json("slow/oracle/r1/metrics.json")
    assert metrics["outcome"] == "fail"
    assert metrics["outcome_reason"] == "agent timed out after 1 s; all 2 gates passed"
    assert metrics["gates_passed"] == 2
    line = json.loads((project.results() / "results.jsonl").read_text().splitlines()[-1])
    assert line["outcome"] == "fail" and line["outcome_reason"].startswith("agent timed out")
    evaluation = (project.results() / "slow/oracle/r1/evaluation.md").read_text()
    assert "agent timed out after 1 s" in evaluation
    assert "done.txt exists" in evaluation  # the gates are shown all the same
    assert "FAIL" in result.out and "agent timed out after 1 s" in result.out


def test_a_timed_out_run_fails_though_the_judge_passes(
    project: Project, provider: tuple[str, type[FakeProvider]]
) -> None:
    url, handler = provider
    answer = {"scores": {"done": 1.0}, "weighted_score": 1.0, "confidence": 1.0}
    handler.queue = [(200, chat_answer(json.dumps({**answer, "issues": [], "highlights": []})))]
    project.write(
        "llmtt.toml",
        GIT_TOML + f'\n[models.judge-m]\nlitellm = "openai/judge-m"\napi_base = "{url}"\n'
        'api_key_env = "JUDGE_KEY"\ninput_usd_per_mtok = 1.0\noutput_usd_per_mtok = 1.0\n'
        '\n[judge]\nmodel = "judge-m"\n',
    )
    project.write("rubrics/r.yaml", "criteria:\n  - {id: done, weight: 1, description: Done.}\n")
    project.write(
        "scenarios/slow.yaml",
        SLOW_SCENARIO + "  judge: {enabled: true, rubric: rubrics/r.yaml}\n",
    )
    result = project.doit("run", env={"LLMTT_ENABLED": "1", "JUDGE_KEY": "k"})
    assert result.code == 0, result.out + result.err
    assert project.json("slow/oracle/r1/judge.json")["passed"] is True
    metrics = project.json("slow/oracle/r1/metrics.json")
    assert metrics["outcome"] == "fail"
    assert metrics["outcome_reason"] == (
        "agent timed out after 1 s; all 2 gates passed and judge passed (1.0)"
    )


def test_the_reason_names_the_limit_first_then_what_else_failed() -> None:
    passed = {"index": 1, "type": "file_exists", "passed": True, "message": "ok"}
    failed = {"index": 2, "type": "file_exists", "passed": False, "message": "x does not exist"}
    assert decide([passed], None, timed_out_after=2.5) == (
        "fail",
        "agent timed out after 2.5 s; the gate passed",
    )
    assert decide([passed, failed], None, timed_out_after=600) == (
        "fail",
        "agent timed out after 600 s; gate 2 (file_exists): x does not exist",
    )
    assert decide([], None, timed_out_after=1) == (
        "fail",
        "agent timed out after 1 s; no gates defined (nothing was checked)",
    )
    assert decide([passed], None) == ("pass", "the gate passed")
