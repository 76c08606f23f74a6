"""What a run's attempts that could not be carried out spent, in the report's totals."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from llmtt.agents.pricing import Pricing
from llmtt.execution.agent_layer import _lost_spend
from llmtt.providers import resolve_model
from llmtt.report.aggregate import _lost_attempts, _summary


def _run(tmp_path: Path, *attempts: dict[str, object] | str) -> SimpleNamespace:
    lines = [a if isinstance(a, str) else json.dumps(a) for a in attempts]
    (tmp_path / "attempts.jsonl").write_text("".join(line + "\n" for line in lines))
    return SimpleNamespace(dir=tmp_path, agent_key={"agent": "k"}, model="priced")


LOST = {"key": {"agent": "k"}, "status": "error", "requests": 2, "cost_usd": 0.025}


def test_only_lost_attempts_under_the_runs_key_count(tmp_path: Path) -> None:
    done = {**LOST, "status": "completed", "cost_usd": 0.038}  # in the run's own result
    older = {**LOST, "key": {"agent": "old"}, "cost_usd": 0.5}  # another plan's run
    refused = {**LOST, "requests": 0, "cost_usd": None}  # refused before a request
    found = _lost_attempts(_run(tmp_path, LOST, done, older, refused, LOST))
    assert found == {"attempts_cost_usd": 0.05, "attempts_cost_lower_bound": False}
    rows = [
        {"outcome": "pass", "duration_secs": 1, "cost_usd": 0.038},
        {"outcome": "error", "duration_secs": 1, "cost_usd": None, **found},
    ]
    assert _summary(rows)["cost_usd"] == 0.088  # what the ledger booked
    assert _summary(rows)["cost_lower_bound"] is False


def test_an_unknown_cost_or_a_damaged_line_makes_the_figure_a_lower_bound(tmp_path: Path) -> None:
    free = _run(tmp_path, {**LOST, "requests": None, "cost_usd": None})
    free.model = None  # the oracle's attempts (before they counted their requests) paid nothing
    assert _lost_attempts(free) == {}
    unpriced = {**LOST, "cost_usd": None}
    assert _lost_attempts(_run(tmp_path, LOST, unpriced))["attempts_cost_lower_bound"]
    cut = _lost_attempts(_run(tmp_path, LOST, '{"key": {"agent"'))
    assert cut == {"attempts_cost_usd": 0.025, "attempts_cost_lower_bound": True}
    # Paid, its cost unknown: nothing counted, but the total is said to be a lower bound.
    unknown = _lost_attempts(_run(tmp_path, unpriced))
    assert unknown == {"attempts_cost_usd": 0.0, "attempts_cost_lower_bound": True}
    # An agent outside the gateway whose requests are not known may have paid too.
    assert _lost_attempts(_run(tmp_path, {**unpriced, "requests": None}))[
        "attempts_cost_lower_bound"
    ]
    assert _summary([{"outcome": "error", "duration_secs": 0, "cost_usd": None, **cut}])[
        "cost_lower_bound"
    ]


def test_an_attempt_lost_with_its_worker_is_a_lower_bound_whatever_it_shows(
    tmp_path: Path,
) -> None:
    # Its gateway record showed no request, but one may have been under way when it was lost.
    nothing_seen = {**LOST, "lost": True, "requests": 0, "cost_usd": 0.0, "cost_lower_bound": True}
    assert _lost_attempts(_run(tmp_path, nothing_seen)) == {
        "attempts_cost_usd": 0.0,
        "attempts_cost_lower_bound": True,
    }
    seen = {**LOST, "lost": True, "cost_lower_bound": True}
    assert _lost_attempts(_run(tmp_path, seen, LOST)) == {
        "attempts_cost_usd": 0.05,
        "attempts_cost_lower_bound": True,
    }


PRICED = Pricing("llmtt", resolve_model("openai/gpt-4o", {}))


def test_what_a_lost_attempt_spent_is_read_from_this_attempts_records_alone(
    tmp_path: Path,
) -> None:
    run = SimpleNamespace(dir=tmp_path)
    # Its agent never started: nothing was asked.
    assert _lost_spend(run, PRICED, here=True) == (0, 0.0, False)  # type: ignore[arg-type]
    # The gateway's record, a line cut by the kill left out: at least what it shows.
    (tmp_path / "wire.jsonl").write_text('{"status": 200}\n{"status": 2')
    assert _lost_spend(run, PRICED, here=True) == (1, 0.0, True)  # type: ignore[arg-type]
    # run.json is written last, after the attempt's own line: it never started, or it had
    # recorded itself (the records beside it are that attempt's, counted already).
    (tmp_path / "run.json").write_text("{}")
    assert _lost_spend(run, PRICED, here=True) == (0, 0.0, False)  # type: ignore[arg-type]
    # A Ray node's records never come back; a free model costs nothing.
    assert _lost_spend(run, PRICED, here=False) == (None, None, True)  # type: ignore[arg-type]
    free = Pricing("user")
    assert _lost_spend(run, free, here=False) == (None, 0.0, False)  # type: ignore[arg-type]
