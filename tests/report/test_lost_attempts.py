"""What a run's attempts that could not be carried out spent, in the report's totals."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

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
