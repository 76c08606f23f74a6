"""The history's tables in results.db (points, each run's last record in a point, the sums per
point and group), kept as records come and made once for a results.db older than them, give
what the plain query over every record gives: each run's last evaluation in a point counted
once, an `error` taking a run out of its point."""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from llmtt.results.store import sync_results_db
from llmtt.results.trends import POINTS, _rows

# What the report read before the history was kept: every record, grouped at each report.
PLAIN = """
SELECT coalesce(json_extract(record, '$.invocation'), substr(timestamp, 1, 10)) AS point,
       max(id), scenario, agent, coalesce(model, ''), coalesce(variant, ''), count(*),
       sum(outcome = 'pass'), round(coalesce(sum(cost_usd), 0), 9), count(cost_usd)
FROM results
WHERE id IN (SELECT max(id) FROM results GROUP BY
             coalesce(json_extract(record, '$.invocation'), substr(timestamp, 1, 10)), run_id)
  AND outcome IN ('pass', 'fail')
GROUP BY point, scenario, agent, model, variant
"""


def _records(seed: int, count: int) -> list[dict[str, Any]]:
    """Runs evaluated, re-evaluated and re-run over invocations, some without an invocation
    (their day), some not carried out, some without a price."""
    rng = random.Random(seed)
    records = []
    for index in range(count):
        point = index // 15
        record = {
            "run_id": f"s{rng.randrange(3)}/a{rng.randrange(2)}/r{rng.randrange(3)}",
            "agent": "",
            "model": rng.choice(["m", None]),
            "variant": rng.choice(["v", None]),
            "outcome": rng.choice(["pass", "pass", "fail", "error"]),
            "cost_usd": rng.choice([0.25, 0.5, None]),
            "timestamp": f"2026-11-{1 + point % 28:02d}T00:00:00+00:00",
        }
        record["scenario"], record["agent"] = record["run_id"].split("/")[:2]
        if point % 4:
            record["invocation"] = f"run-{point:03d}"
        records.append(record)
    return records


def _kept(db: Path) -> list[tuple[Any, ...]]:
    """The kept rows as the plain query gives them: (point, last id, group, sums)."""
    return sorted(
        (p, last, s, a, m, v, runs, passed, round(cost, 9), priced)
        for p, _, last, s, a, m, v, runs, passed, cost, priced in _rows(db)
    )


def _plain(db: Path, points: set[str]) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return sorted(r for r in conn.execute(PLAIN) if r[0] in points)


@pytest.mark.parametrize("seed", range(6))
def test_the_kept_history_is_the_plain_querys(tmp_path: Path, seed: int) -> None:
    records = _records(seed, 400)
    jsonl = tmp_path / "results.jsonl"
    with jsonl.open("w") as out:  # in four writes: the tables grow as llmtt grows them
        for start in range(0, len(records), 100):
            out.writelines(json.dumps(r) + "\n" for r in records[start : start + 100])
            out.flush()
            sync_results_db(jsonl)
    db = tmp_path / "results.db"
    kept = _kept(db)
    shown = {row[0] for row in kept}
    assert len(shown) == POINTS  # 27 points written: the last 20 by their first record
    assert kept == _plain(db, shown)
    assert any(row[6] > 1 for row in kept)  # groups of several runs, re-evaluated ones among them


def test_a_results_db_older_than_the_history_gets_it_once(tmp_path: Path) -> None:
    """A results.db made before the history's tables: its records' points are read once from
    their JSON, and the history is as if it had been kept all along."""
    records = _records(7, 300)
    old = tmp_path / "old"
    old.mkdir()
    (old / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    sync_results_db(old / "results.jsonl")
    with sqlite3.connect(old / "results.db") as conn:  # as results.db was before the history
        for table in ("points", "point_runs", "point_groups"):
            conn.execute(f"DROP TABLE {table}")
        conn.execute("ALTER TABLE results DROP COLUMN point")
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    sync_results_db(fresh / "results.jsonl")
    migrated = _kept(old / "results.db")
    assert migrated and migrated == _kept(fresh / "results.db")
    assert migrated == _plain(old / "results.db", {row[0] for row in migrated})
