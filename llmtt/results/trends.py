"""Trends for report.html: pass rate and cost per scenario group over the invocations recorded in
results.db, with the committed baseline marked.

A point is one invocation of `doit run` (records carry its `invocation`: when it began, or the
label in `LLMTT_LABEL`; older records, without one, fall back to their day). A group's
point holds the runs of that group evaluated in that invocation, each run's last evaluation in
it counted once; a group not evaluated in an invocation has no point there. The figures are
summed in SQL, so a results.db of many thousands of rows costs one query, and only the last
`POINTS` invocations are shown.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from pathlib import Path
from typing import Any

from llmtt.results.baseline import group_key

POINTS = 20  # invocations shown
GROUPS = 200  # groups listed, the most recently evaluated first
COLUMNS = 6  # a group's latest points in the table

_POINT = "coalesce(json_extract(record, '$.invocation'), substr(timestamp, 1, 10))"
_QUERY = f"""
SELECT {_POINT} AS point, min(id), max(id), scenario, agent,
       coalesce(model, ''), coalesce(variant, ''), count(*),
       sum(outcome = 'pass'), sum(cost_usd), count(cost_usd)
FROM results
WHERE id IN (SELECT max(id) FROM results GROUP BY {_POINT}, run_id)
  AND outcome IN ('pass', 'fail')
GROUP BY point, scenario, agent, model, variant
"""


def history(db: Path, baseline: dict[str, Any] | None) -> dict[str, Any]:
    """The data of the history section: points (oldest first), groups with their latest points
    and baseline figures, and the whole project's pass rate per point."""
    rows = _rows(db)
    first: dict[str, int] = {}  # a point's first record: the invocations in their order
    for row in rows:
        first[row[0]] = min(first.get(row[0], row[1]), row[1])
    points = sorted(first, key=first.__getitem__)[-POINTS:]
    shown = set(points)
    groups: dict[str, dict[str, Any]] = {}
    totals: dict[str, list[float]] = defaultdict(lambda: [0, 0, 0.0, 0])
    for point, _, last, scenario, agent, model, variant, runs, passed, cost, priced in rows:
        if point not in shown:
            continue
        key = group_key(scenario, agent, model, variant)
        group = groups.setdefault(
            key,
            {
                "key": key,
                "scenario": scenario,
                "agent": agent,
                "model": model or None,
                "variant": variant or None,
                "points": {},
                "last": last,
            },
        )
        group["last"] = max(group["last"], last)
        group["points"][point] = {
            "runs": runs,
            "passed": passed,
            "pass_rate": passed / runs,
            "cost_usd": cost if priced == runs else None,
        }
        total = totals[point]
        total[0] += runs
        total[1] += passed
        total[2] += cost or 0.0
        total[3] += priced
    base = (baseline or {}).get("groups", {})
    listed = sorted(groups.values(), key=lambda g: g["last"], reverse=True)[:GROUPS]
    for group in listed:
        mine = [p for p in points if p in group["points"]][-COLUMNS:]
        group["latest"] = [{"point": p, **group["points"][p]} for p in mine]
        before = base.get(group["key"])
        group["baseline"] = None if before is None else before.get("pass_rate")
    overall = [
        {
            "point": p,
            "runs": int(totals[p][0]),
            "passed": int(totals[p][1]),
            "pass_rate": totals[p][1] / totals[p][0] if totals[p][0] else None,
            "cost_usd": totals[p][2] if totals[p][3] == totals[p][0] else None,
        }
        for p in points
    ]
    rate = _baseline_rate(base)
    return {
        "points": points,
        "overall": overall,
        "groups": sorted(listed, key=lambda g: g["key"]),
        "more_groups": max(0, len(groups) - len(listed)),
        "baseline": rate,
    }


def _rows(db: Path) -> list[tuple[Any, ...]]:
    if not db.exists():
        return []
    conn = sqlite3.connect(db, timeout=30)  # a path, not a URI: any file name is taken as is
    try:
        return list(conn.execute(_QUERY))
    except sqlite3.Error:
        return []  # an old or damaged results.db: no history, the report still renders
    finally:
        conn.close()


def _baseline_rate(groups: dict[str, Any]) -> float | None:
    """The baseline's pass rate over all its runs."""
    runs = sum(int(g.get("runs", 0)) for g in groups.values())
    if not runs:
        return None
    passed = sum(float(g.get("pass_rate", 0)) * int(g.get("runs", 0)) for g in groups.values())
    return passed / runs
