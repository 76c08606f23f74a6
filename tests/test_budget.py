"""The session budget under parallel runs (`doit run -n 4`), through a locked ledger: paid runs
whose costs are known, the overshoot bound, skipped runs staying pending."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import GIT_TOML, Project

from llmtt.budget import BudgetExhausted, Ledger, budget_limit
from llmtt.errors import LlmttError
from llmtt.scripted import ScriptedServer

RUN_COST = 0.012 + 0.013 + 0.013  # three turns at 10 $/Mtok in, 100 $/Mtok out (see below)


def test_budget_under_parallel_runs_is_never_overshot_by_more_than_one_run(
    project: Project,
) -> None:
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
        result = project.doit(
            "run", "-n", "4", "agent=litellm", "model=priced", "repeats=8", env=env
        )
    assert result.code != 0  # some runs could not be carried out: they wait for more budget
    text = result.out + result.err
    assert "budget exhausted: spent $" in text and "of $0.1000" in text
    done = sorted(project.results().glob("s/litellm-priced/r*/result.json"))
    costs = [json.loads(p.read_text())["cost_usd"] for p in done]
    assert 1 <= len(costs) < 8
    assert all(c == pytest.approx(RUN_COST) for c in costs)
    assert sum(costs) <= 0.1 + 0.05  # the bound: budget + one run's cost.max_usd
    ledger = json.loads((project.results() / ".llmtt-cache/budget.json").read_text())
    assert ledger["spent"] == pytest.approx(sum(costs)) and ledger["reserved"] == {}
    status = project.doit("list", "--status", "agent=litellm", "model=priced", "repeats=8")
    pending = [line for line in status.out.splitlines() if line.startswith("R s/")]
    assert len(pending) == 8 - len(costs)  # the skipped runs stay pending


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
    from llmtt.cli import main

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
