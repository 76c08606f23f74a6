"""The session budget under parallel runs (`doit run -n 4`), through a locked ledger: paid runs
whose costs are known, the overshoot bound, skipped runs staying pending."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from conftest import DOIT, GIT_TOML, TOOL_TOML, FakeProvider, Project, chat_answer

from llmtt.errors import LlmttError
from llmtt.execution.budget import BudgetExhausted, Ledger, budget_limit
from llmtt.scripted.server import ScriptedServer

RUN_COST = 0.012 + 0.013 + 0.013  # three turns at 10 $/Mtok in, 100 $/Mtok out (see below)


@pytest.mark.parametrize("how", [("-n", "4"), ("jobs=auto", "-n", "4")])
def test_budget_under_parallel_runs_is_never_overshot_by_more_than_one_run(
    project: Project, how: tuple[str, ...]
) -> None:
    # Under jobs=auto too: the runs the budget refuses come back at once, no sample of the
    # agent's pace, and the invocation ends with them pending.
    with ScriptedServer(["echo 1", "echo 2"]) as provider:
        project.write(
            "llmtt.toml",
            GIT_TOML
            + f'\n[models.priced]\nlitellm = "openai/priced"\napi_base = "{provider.url}/v1"\n'
            'api_key_env = "PRICED_KEY"\ninput_usd_per_mtok = 10.0\noutput_usd_per_mtok = 100.0\n'
            "\n[budget]\nmax_usd = 0.1\n",
        )
        project.write("scenarios/s.yaml", "task: {prompt: Count.}\ncost: {max_usd: 0.05}\n")
        env = {"LLMTT_ENABLED": "1", "PRICED_KEY": "k"}
        result = project.doit("run", *how, "agent=litellm", "model=priced", "repeats=8", env=env)
    assert result.code != 0  # some runs could not be carried out: they wait for more budget
    text = result.out + result.err
    assert "budget exhausted: spent $" in text and "of $0.1000" in text
    results = [json.loads(p.read_text()) for p in project.results().glob("s/*/r*/result.json")]
    costs = [r["cost_usd"] for r in results if r["outcome"] != "error"]
    skipped = [r["run_id"] for r in results if r["outcome"] == "error"]
    assert 1 <= len(costs) < 8 and len(costs) + len(skipped) == 8
    # The reports are written all the same, and list the runs the budget left out.
    for name in ("report.md", "report.json", "report.html", "junit.xml"):
        text = (project.results() / name).read_text()
        assert all(run_id in text for run_id in skipped), name
        assert "budget exhausted" in text, name
    assert all(c == pytest.approx(RUN_COST) for c in costs)
    assert sum(costs) <= 0.1 + 0.05  # the bound: budget + one run's cost.max_usd
    ledger = json.loads((project.results() / ".llmtt-cache/budget.json").read_text())
    # What the ledger booked is what the report says the runs spent, a run stopped while
    # running included (one at a time, a run may start with $0.024 left and be stopped past it):
    # that attempt's cost is in no result, and counted apart.
    spent = json.loads((project.results() / "report.json").read_text())["summary"]["cost_usd"]
    assert ledger["spent"] == pytest.approx(spent) and ledger["reserved"] == {}
    assert sum(costs) <= spent <= 0.1 + 0.05
    status = project.doit("list", "--status", "agent=litellm", "model=priced", "repeats=8")
    pending = [line for line in status.out.splitlines() if line.startswith("R s/")]
    assert len(pending) == 8 - len(costs)  # the skipped runs stay pending


# 21 turns of 0.3 s: $0.046 a run at 1 $/Mtok in and 10 $/Mtok out (turn t: 1000 + 100 t
# tokens in, 20 out), so that four of them would spend $0.185.
LONG = [f"sleep 0.3; echo {i}" for i in range(20)]


def test_budget_holds_for_runs_without_a_cost_limit_whose_estimate_was_too_low(
    project: Project,
) -> None:
    """Four runs admitted at once on a stale estimate ($0.001 each) would spend $0.185 of a
    $0.10 budget; their running costs are checked as usage arrives and they are stopped."""
    with ScriptedServer(LONG) as provider:
        project.write(
            "llmtt.toml",
            GIT_TOML
            + f'\n[models.priced]\nlitellm = "openai/priced"\napi_base = "{provider.url}/v1"\n'
            'api_key_env = "PRICED_KEY"\ninput_usd_per_mtok = 1.0\noutput_usd_per_mtok = 10.0\n'
            "\n[budget]\nmax_usd = 0.1\n",
        )
        project.write("scenarios/s.yaml", "task: {prompt: Count.}\nrun: {max_turns: 30}\n")
        history = {"scenario": "s", "agent": "litellm", "model": "priced", "cost_usd": 0.001}
        project.write("llm-tool-test-results/results.jsonl", json.dumps(history) + "\n")
        env = {"LLMTT_ENABLED": "1", "PRICED_KEY": "k"}
        args = ("agent=litellm", "model=priced", "repeats=4")
        doit = subprocess.Popen(
            [DOIT, "run", "-n", "4", *args],
            cwd=project.root,
            env={**{k: v for k, v in os.environ.items() if not k.startswith("LLMTT_")}, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        ledger = project.results() / ".llmtt-cache/budget.json"
        deadline = time.monotonic() + 60
        while not _running(ledger):
            assert time.monotonic() < deadline and doit.poll() is None
            time.sleep(0.02)
        # Other invocations meanwhile neither reset the ledger nor run anything.
        assert project.doit("list", "--status", *args).code == 0
        assert project.doit("forget", *args).code == 2
        assert project.doit("run", *args, env=env).code == 2
        out, _ = doit.communicate(timeout=120)
    assert doit.returncode != 0, out  # the stopped runs stay pending
    spent = 0.0
    for events in project.results().glob("s/litellm-priced/r*/events.jsonl"):
        spent += sum(e["cost_usd"] for e in map(json.loads, events.open()) if e["event"] == "usage")
    most_per_turn = 0.0012 + 0.0001 * 20  # the dearest turn of these sessions
    assert 0.1 <= spent <= 0.1 + 4 * most_per_turn, spent
    assert json.loads(ledger.read_text())["spent"] == pytest.approx(spent)
    assert "budget exhausted while running" in out, out
    report = json.loads((project.results() / "report.json").read_text())
    stopped = [r for r in report["runs"] if "budget exhausted" in (r["outcome_reason"] or "")]
    assert stopped and all(r["outcome"] == "error" for r in stopped)


def _running(ledger: Path) -> bool:
    """Whether a paid run is under way (the ledger read without its lock)."""
    try:
        return bool(json.loads(ledger.read_text())["reserved"])
    except (OSError, ValueError):  # not there yet, or caught between truncate and write
        return False


def test_ledger_refuses_once_spent(tmp_path: Path) -> None:
    ledger = Ledger.create(tmp_path / "b.json", 1.0)
    ledger.reserve("a", 0.6)
    ledger.reserve("b", 0.6)  # 0.6 committed < 1.0: admitted
    with pytest.raises(BudgetExhausted, match=r"budget exhausted: spent \$0.0000 of \$1.0000"):
        ledger.reserve("c", 0.1)
    ledger.settle("a", 0.5, 0.6)
    ledger.settle("b", None, 0.6)  # unknown cost: its hold counts as spent
    assert ledger.spent() == pytest.approx(1.1)


def test_budget_sources_and_bad_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LLMTT_BUDGET_USD", raising=False)
    assert budget_limit(2.0, None) == 2.0
    monkeypatch.setenv("LLMTT_BUDGET_USD", "1.5")
    assert budget_limit(2.0, None) == 1.5
    assert budget_limit(2.0, "0.5") == 0.5
    with pytest.raises(LlmttError, match="budget must be a number"):
        budget_limit(None, "lots")


def test_estimate_uses_earlier_runs_then_tokens_then_says_unknown(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    from llmtt.commands.main import main

    project.write(
        "llmtt.toml",
        GIT_TOML + "\n[models.priced]\ninput_usd_per_mtok = 1.0\noutput_usd_per_mtok = 2.0\n",
    )
    project.write("scenarios/a.yaml", "task: {prompt: A.}\n")
    project.write("scenarios/b.yaml", "task: {prompt: B.}\n")
    history = [
        {"scenario": "a", "agent": "litellm", "model": "priced", "cost_usd": 0.2},
        {"scenario": "a", "agent": "litellm", "model": "priced", "cost_usd": 0.4},
    ]
    project.write(
        "llm-tool-test-results/results.jsonl", "".join(json.dumps(r) + "\n" for r in history)
    )
    assert (
        main(
            [
                "estimate",
                str(project.root),
                "--agent",
                "litellm",
                "--model",
                "priced",
                "--model",
                "mystery",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out.splitlines()
    lines = {line.split()[1]: line.split()[0] for line in out[:-1]}
    assert lines["a/litellm-priced/r1"] == "$0.3000"  # the mean of earlier runs
    # b: no history; 5 turns of (prompt + 2000) // 4... tokens in, 400 out, at declared prices
    assert lines["b/litellm-priced/r1"].startswith("$0.0")
    assert lines["a/litellm-mystery/r1"] == "unknown"
    assert (
        out[-1].startswith("4 pending of 4 runs; expected total $0.3")
        and "2 runs of unknown cost" in out[-1]
    )


JUDGE_ANSWER = json.dumps(
    {
        "scores": {"ok": 1.0},
        "weighted_score": 1.0,
        "confidence": 0.9,
        "issues": [],
        "highlights": [],
    }
)


def test_a_judge_refused_by_the_spent_budget_is_not_asked_the_reports_list_it_and_it_waits(
    project: Project, provider: tuple[str, type[FakeProvider]], capsys: pytest.CaptureFixture[str]
) -> None:
    url, handler = provider
    handler.queue.append((200, chat_answer(JUDGE_ANSWER, 1000, 100)))  # $0.02 a judgement
    models = (
        f'\n[models.judge]\nlitellm = "openai/judge"\napi_base = "{url}"\n'
        'api_key_env = "JUDGE_KEY"\ninput_usd_per_mtok = 10.0\noutput_usd_per_mtok = 100.0\n'
    )
    project.write("llmtt.toml", GIT_TOML + models + "\n[budget]\nmax_usd = 0.01\n")
    project.write("rubrics/r.yaml", "criteria:\n  - {id: ok, weight: 1, description: done}\n")
    project.write(
        "scenarios/s.yaml",
        "task: {prompt: Do it.}\nsolution: ['true']\n"
        "evaluation:\n  judge: {enabled: true, rubric: r.yaml, model: judge}\n",
    )
    env = {"LLMTT_ENABLED": "1", "JUDGE_KEY": "k"}
    # Before anything ran: each run's agent (the oracle's, free) then its judge, at most what
    # its longest question may cost (no earlier judgement to go by).
    first = _estimate(project, capsys)
    assert all(line.endswith("(the agent, the judge, at most)") for line in first[:2]), first
    assert first[2].startswith("2 pending of 2 runs; expected total $"), first
    assert float(first[0].split()[0].lstrip("$")) >= 0.02, first
    result = project.doit("run", "repeats=2", env=env)
    assert result.code != 0 and "Traceback" not in result.out + result.err
    assert len(handler.hits) == 1  # the first judgement spent the budget; the second waits
    records = {r: project.json(f"s/oracle/{r}/result.json") for r in ("r1", "r2")}
    refused = next(r for r, record in records.items() if record["outcome"] == "error")
    assert records[{"r1": "r2", "r2": "r1"}[refused]]["outcome"] == "pass"
    assert "budget exhausted" in project.json(f"s/oracle/{refused}/judge.json")["skipped"]
    reason = records[refused]["outcome_reason"]
    assert reason.startswith("the judge did not run: budget exhausted: spent $0.0200"), reason
    for name in ("report.md", "report.json", "report.html", "junit.xml"):
        assert f"s/oracle/{refused}" in (project.results() / name).read_text(), name
    lines = (project.results() / "results.jsonl").read_text().splitlines()
    assert len(lines) == 1  # the refused run is not an evaluation
    status = project.doit("list", "--status", "repeats=2", env=env)
    assert f"R s/oracle/{refused}" in status.out, status.out  # its judge stays pending
    # `llmtt estimate` counts what the next `doit run` pays: the judge again, each sample at
    # what it holds of the budget (at least the $0.02 one judgement cost), not the agent.
    # The other run's report, left when the invocation failed, costs nothing. What it lists is
    # what `doit list --status` says is pending.
    judge_again = {line.split()[1]: line for line in _estimate(project, capsys)[:-1]}
    assert judge_again[f"s/oracle/{refused}"].endswith("(the judge, at most)"), judge_again
    assert float(judge_again[f"s/oracle/{refused}"].split()[0].lstrip("$")) >= 0.02
    assert all(v.endswith("(its report)") for k, v in judge_again.items() if refused not in k)
    doit_says = re.findall(r"^R (\S+/r\d+)", status.out, re.M)
    assert sorted(judge_again) == sorted(doit_says), status.out

    # With more budget the next `doit run` asks the judge once, and runs nothing else.
    project.write("llmtt.toml", GIT_TOML + models + "\n[budget]\nmax_usd = 1.0\n")
    again = project.doit("run", "repeats=2", env=env)
    assert again.code == 0, again.out + again.err
    assert len(handler.hits) == 2
    assert [t for t in again.executed() if ":" in t] == [f"s/oracle/{refused}:judge"]
    assert project.json(f"s/oracle/{refused}/result.json")["outcome"] == "pass"
    assert project.doit("run", "repeats=2", env=env).executed() == []
    assert _estimate(project, capsys)[0].startswith("0 pending of 2 runs")
    # A new rubric is a new question about both runs: the judge is asked again about each, and
    # only the judge, as doit's own checks say.
    project.write("rubrics/r.yaml", "criteria:\n  - {id: ok, weight: 1, description: all done}\n")
    lines = _estimate(project, capsys)
    assert lines[-1].startswith("2 pending of 2 runs"), lines
    assert all(line.endswith("(the judge, at most)") for line in lines[:2]), lines
    assert all(float(line.split()[0].lstrip("$")) >= 0.02 for line in lines[:2]), lines
    # Its folder deleted by hand, a run is carried out again, as doit finds its files missing.
    shutil.rmtree(project.results() / "s/oracle/r1")
    lines = _estimate(project, capsys)
    assert "s/oracle/r1  (the agent, the judge, as before)" in lines[0], lines
    status = project.doit("list", "--status", "repeats=2", env=env).out
    assert "R s/oracle/r1" in status and "R s/oracle/r2" in status, status


def _estimate(project: Project, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """`llmtt estimate --repeats 2`'s lines."""
    from llmtt.commands.main import main

    capsys.readouterr()
    assert main(["estimate", str(project.root), "--repeats", "2"]) == 0
    return capsys.readouterr().out.splitlines()


def test_estimate_says_a_damaged_dependency_record_and_how_to_clear_it(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    import sqlite3

    from llmtt.commands.main import main

    project.write("llmtt.toml", TOOL_TOML)
    project.write("scenarios/s.yaml", "task: {prompt: Nothing.}\nsolution: ['true']\n")
    assert project.doit("run").code == 0
    capsys.readouterr()
    assert main(["estimate", str(project.root)]) == 0
    assert capsys.readouterr().out.startswith("0 pending of 1 runs")
    with sqlite3.connect(project.results() / ".doit.sqlite3") as db:
        db.execute("UPDATE doit SET task_data = 'not json' WHERE task_id = 's/oracle/r1:agent'")
    assert main(["estimate", str(project.root)]) != 0
    said = capsys.readouterr()
    assert "damaged; `doit forget s/oracle/r1:agent` clears it" in said.err, said
    assert "Traceback" not in said.out + said.err


def test_a_runs_running_spend_never_goes_down(tmp_path: Path) -> None:
    """Two counters report a run's spend (its own stream, the gateway): a lower figure from one
    after a higher from the other must not free budget for other runs."""
    ledger = Ledger.create(tmp_path / "budget.json", 1.0)
    guard = ledger.guard("r:agent")
    assert guard(0.6) is None
    assert guard(0.1) is None  # a client that lost count
    other = ledger.guard("s:agent")
    assert other(0.45) is not None  # 0.6 + 0.45 is past the budget, whatever the last report
