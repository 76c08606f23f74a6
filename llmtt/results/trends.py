"""Trends for report.html: pass rate and cost over the invocations recorded in results.db, per
agent / model / variant (the chart's lines) and per scenario group (the table), with the
committed baseline marked.

A point is one invocation of `doit run` (records carry its `invocation`: when it began, or the
label in `LLMTT_LABEL`; older records, without one, fall back to their day). A group's
point holds the runs of that group evaluated in that invocation, each run's last evaluation in
it counted once; a group not evaluated in an invocation has no point there. An invocation may
select other agents, models or scenarios than the one before, so the project's pass rate is
not drawn as one line: each agent / model / variant has its own. results.db keeps these sums
as records come (llmtt.results.store), so a report reads the groups of the last `POINTS`
invocations and nothing else: neither the re-runs before them nor the size of results.db add
to its time.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmtt.results.baseline import group_key
from llmtt.results.store import results_connection

POINTS = 20  # invocations shown
LINES = 8  # agent / model / variant lines drawn, the most recently evaluated
GROUPS = 200  # scenario groups listed, the most recently evaluated first
COLUMNS = 6  # a group's latest points in the table

# The groups of the last POINTS points, as results.db keeps them summed (llmtt.results.store):
# each run's last evaluation in a point, counted once.
_QUERY = f"""
SELECT g.point, p.first_id, g.last_id, g.scenario, g.agent, g.model, g.variant, g.runs,
       g.passed, g.cost, g.priced
FROM point_groups AS g
JOIN (SELECT point, first_id FROM points ORDER BY first_id DESC LIMIT {POINTS}) AS p
  ON p.point = g.point
WHERE g.runs > 0
"""


@dataclass
class _Sum:
    """The runs of one point summed: how many, passed, their cost, how many had a cost, and
    over how many scenarios."""

    runs: int = 0
    passed: int = 0
    cost: float = 0.0
    priced: int = 0
    scenarios: int = 0

    def add(self, runs: int, passed: int, cost: float | None, priced: int) -> None:
        self.runs += runs
        self.passed += passed
        self.cost += cost or 0.0
        self.priced += priced
        self.scenarios += 1

    def figures(self, point: str) -> dict[str, Any]:
        return {
            "point": point,
            "runs": self.runs,
            "passed": self.passed,
            "pass_rate": self.passed / self.runs if self.runs else None,
            "cost_usd": self.cost if self.priced == self.runs else None,
            "scenarios": self.scenarios,
        }


@dataclass
class _Series:
    """A group's points by invocation, and its newest record (which groups are shown)."""

    last: int = 0
    sums: dict[str, _Sum] = field(default_factory=lambda: defaultdict(_Sum))

    def add(self, point: str, last: int, figures: tuple[int, int, float | None, int]) -> None:
        self.last = max(self.last, last)
        self.sums[point].add(*figures)

    def figures(self, points: list[str]) -> list[dict[str, Any]]:
        """Its points in the invocations' order."""
        return [self.sums[p].figures(p) for p in points if p in self.sums]


def history(db: Path, baseline: dict[str, Any] | None) -> dict[str, Any]:
    """The data of the history section: points (oldest first), the whole project's figures per
    point, a line per agent / model / variant and a row per scenario group, each with its
    baseline pass rate."""
    rows = _rows(db)
    first: dict[str, int] = {}  # a point's first record: the invocations in their order
    for row in rows:
        first[row[0]] = min(first.get(row[0], row[1]), row[1])
    points = sorted(first, key=first.__getitem__)[-POINTS:]
    shown = set(points)
    groups: dict[tuple[str, str, str, str], _Series] = defaultdict(_Series)
    lines: dict[tuple[str, str, str], _Series] = defaultdict(_Series)
    totals: dict[str, _Sum] = defaultdict(_Sum)
    for point, _, last, scenario, agent, model, variant, runs, passed, cost, priced in rows:
        if point in shown:
            figures = (runs, passed, cost, priced)
            groups[(scenario, agent, model, variant)].add(point, last, figures)
            lines[(agent, model, variant)].add(point, last, figures)
            totals[point].add(*figures)
    base = (baseline or {}).get("groups", {})
    drawn = _newest(lines, LINES)
    listed = _newest(groups, GROUPS)
    return {
        "points": points,
        "overall": [totals[p].figures(p) for p in points],
        "lines": [_line(key, lines[key], points, base) for key in sorted(drawn)],
        "more_lines": len(lines) - len(drawn),
        "groups": [_group(key, groups[key], points, base) for key in sorted(listed)],
        "more_groups": len(groups) - len(listed),
        "blessed": bool(base),
    }


def _newest(series: dict[Any, _Series], count: int) -> list[Any]:
    """The keys of the `count` series evaluated most recently."""
    return sorted(series, key=lambda key: series[key].last, reverse=True)[:count]


def _line(
    key: tuple[str, str, str], series: _Series, points: list[str], base: dict[str, Any]
) -> dict[str, Any]:
    agent, model, variant = key
    return {
        "agent": agent,
        "model": model or None,
        "variant": variant or None,
        "points": series.figures(points),
        "baseline": _line_baseline(agent, model, variant, base),
    }


def _group(
    key: tuple[str, str, str, str], series: _Series, points: list[str], base: dict[str, Any]
) -> dict[str, Any]:
    scenario, agent, model, variant = key
    name = group_key(scenario, agent, model, variant)
    before = base.get(name)
    return {
        "key": name,
        "scenario": scenario,
        "agent": agent,
        "model": model or None,
        "variant": variant or None,
        "latest": series.figures(points)[-COLUMNS:],
        "baseline": None if before is None else before.get("pass_rate"),
    }


def _line_baseline(agent: str, model: str, variant: str, base: dict[str, Any]) -> float | None:
    """The baseline's pass rate over its runs of this agent / model / variant (over every
    scenario it holds of them), or None when it holds none."""
    # A baseline key is `scenario/agent/model/variant`; a scenario's name has no `/` (a
    # model's may), so what follows the first `/` names the agent / model / variant.
    mine = group_key("", agent, model, variant)[1:]
    runs = passed = 0.0
    for name, group in base.items():
        if name.partition("/")[2] == mine:
            runs += group.get("runs", 0)
            passed += group.get("pass_rate", 0) * group.get("runs", 0)
    return passed / runs if runs else None


def _rows(db: Path) -> list[tuple[Any, ...]]:
    if not db.exists():
        return []
    try:
        # The store's connection: it gives a results.db made before the history's points
        # their points, once.
        return list(results_connection(db).execute(_QUERY))
    except (sqlite3.Error, OSError):
        return []  # a damaged results.db: no history, the report still renders
