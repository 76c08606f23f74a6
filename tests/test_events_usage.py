"""Turns, tokens and cost from usage events (docs/metrics.md): per-request events, an agent's
totals replacing them, side requests apart, unknown costs never made up."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llmtt.events import Usage, run_usage, usage_metrics
from llmtt.execution.budget import events_cost


def u(inp: int, out: int, cost: float | None = 0.01, **extra: Any) -> Usage:
    return Usage(ts=0.0, event="usage", input_tokens=inp, output_tokens=out, cost_usd=cost, **extra)


def test_per_request_events_are_the_turns_and_sum() -> None:
    usages = [
        u(100, 10, cache_read_tokens=50, cost_source="llmtt"),
        u(200, 20, cache_write_tokens=7, cost_source="llmtt"),
        u(300, 30, cost_source="llmtt"),
    ]
    metrics = usage_metrics(usages, agent_turns=99, free=False)
    assert metrics == {
        "turns": 3,  # the agent's own count is not needed when every request is reported
        "input_tokens": 600,
        "output_tokens": 60,
        "cache_read_tokens": 50,
        "cache_write_tokens": 7,
        "cost_usd": 0.03,
        "cost_source": "llmtt",
        "client_cost_usd": None,
        "side_requests": 0,
        "side_input_tokens": 0,
        "side_output_tokens": 0,
        "side_cost_usd": 0.0,
    }


def test_a_total_replaces_the_requests_before_it_and_later_ones_are_added() -> None:
    usages = [
        u(100, 10, 0.01),
        u(200, 5, 0.01),  # provisional figures, corrected by the total
        u(300, 40, 0.05, total=True),
        u(1000, 1, 0.5),  # the run went on after the agent's total and was killed
    ]
    metrics = usage_metrics(usages, agent_turns=None, free=False)
    assert (metrics["turns"], metrics["input_tokens"], metrics["output_tokens"]) == (3, 1300, 41)
    assert metrics["cost_usd"] == 0.55
    assert run_usage(usages).requests == 3


def test_only_totals_take_the_agents_own_turn_count_or_none() -> None:
    usages = [u(300, 40, 0.05, total=True)]
    assert usage_metrics(usages, agent_turns=4, free=False)["turns"] == 4
    assert usage_metrics(usages, agent_turns=None, free=False)["turns"] is None


def test_side_requests_are_apart_from_the_loop_but_part_of_the_cost() -> None:
    usages = [u(50, 5, 0.001, side=True), u(100, 10, 0.01), u(60, 6, 0.002, side=True)]
    metrics = usage_metrics(usages, agent_turns=None, free=False)
    assert (metrics["turns"], metrics["input_tokens"], metrics["output_tokens"]) == (1, 100, 10)
    assert (metrics["side_requests"], metrics["side_input_tokens"]) == (2, 110)
    assert metrics["side_output_tokens"] == 11 and metrics["side_cost_usd"] == 0.003
    assert metrics["cost_usd"] == 0.013


@pytest.mark.parametrize("unknown", ["loop", "side"])
def test_one_unknown_cost_makes_the_cost_unknown_and_a_client_figure_stays_apart(
    unknown: str,
) -> None:
    usages = [
        u(100, 10, None if unknown == "loop" else 0.01, client_cost_usd=0.7, cost_source=None),
        u(50, 5, None if unknown == "side" else 0.01, side=True, client_cost_usd=0.2),
    ]
    metrics = usage_metrics(usages, agent_turns=None, free=False)
    assert metrics["cost_usd"] is None
    assert metrics["client_cost_usd"] == 0.9  # shown, never taken as the run's cost
    assert metrics["side_cost_usd"] == (None if unknown == "side" else 0.01)


def test_no_usage_costs_nothing_only_for_a_free_agent() -> None:
    free = usage_metrics([], agent_turns=None, free=True)
    assert (free["turns"], free["cost_usd"]) == (0, 0.0)
    paid = usage_metrics([], agent_turns=None, free=False)
    assert paid["cost_usd"] is None  # a paid agent that reported nothing: unknown, not $0


def test_cost_sources_are_named() -> None:
    usages = [u(1, 1, 0.0, cost_source="scripted"), u(1, 1, 0.0, cost_source="user", side=True)]
    assert usage_metrics(usages, agent_turns=None, free=False)["cost_source"] == "scripted,user"


def test_the_budget_counts_a_total_and_the_requests_it_replaces_once(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    lines = [
        {"ts": 0, "event": "usage", "input_tokens": 1, "cost_usd": 0.01},
        {"ts": 0, "event": "usage", "input_tokens": 1, "cost_usd": 0.02},
        {"ts": 0, "event": "usage", "input_tokens": 2, "cost_usd": 0.04, "total": True},
        {"ts": 0, "event": "usage", "input_tokens": 1, "cost_usd": 0.001, "side": True},
        {"ts": 0, "event": "tool_call", "command": "ls"},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert events_cost(path) == pytest.approx(0.041)
    lines.append({"ts": 0, "event": "usage", "input_tokens": 1, "cost_usd": None})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert events_cost(path) is None
