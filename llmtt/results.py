"""Result records: one per evaluated run, in the run folder and appended to results.jsonl."""

from __future__ import annotations

import datetime as dt
import fcntl
import json
from pathlib import Path
from typing import Any

from llmtt.plan import Run
from llmtt.redaction import Redactor

RESULT_FORMAT = 1


def result_record(
    run: Run,
    info: dict[str, Any],
    metrics: dict[str, Any],
    judge: dict[str, Any] | None = None,
    gates: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The record of one evaluated run (the results.jsonl line)."""
    interaction = {
        k: v
        for k, v in metrics.items()
        if k not in ("format", "run_id", "outcome", "outcome_reason", "gates_passed", "gates_total")
    }
    return {
        "format": RESULT_FORMAT,
        **run.identity(),
        "tags": list(run.tags),
        "tier": run.scenario.spec.tier,
        "key": run.agent_key,
        "outcome": metrics["outcome"],
        "outcome_reason": metrics["outcome_reason"],
        "gates_passed": metrics["gates_passed"],
        "gates_total": metrics["gates_total"],
        "gates": [{k: g[k] for k in ("index", "type", "passed")} for g in gates or []],
        "metrics": interaction,
        "cost_usd": metrics.get("cost_usd"),
        "judge": None
        if judge is None
        else {k: judge.get(k) for k in ("model", "weighted_score", "passed", "cost_usd", "error")},
        "tokens": {
            "input": metrics.get("input_tokens", 0),
            "output": metrics.get("output_tokens", 0),
        },
        "duration_secs": info.get("duration_secs"),
        "status": info["status"],
        "versions": info["versions"],
        "timestamp": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }


def append_result(path: Path, record: dict[str, Any], redact: Redactor) -> None:
    """Append one record, redacted, to results.jsonl and results.db beside it, under an
    exclusive lock (parallel doit workers share both)."""
    record = redact.value(record)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
    with open(path, "a", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            handle.write(line)
            handle.flush()
            _insert(path.with_suffix(".db"), record)
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# results.db: one row per evaluated run, history kept across invocations. `record` holds the
# whole JSON record (metrics included) for queries the columns do not cover.
SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    timestamp TEXT NOT NULL,          -- ISO 8601, UTC
    run_id TEXT NOT NULL,             -- <scenario>/<agent>[-<model>][-<variant>]/r<k>
    scenario TEXT NOT NULL,
    agent TEXT NOT NULL,
    model TEXT,
    variant TEXT,
    repeat INTEGER NOT NULL,
    outcome TEXT NOT NULL,            -- pass | fail
    outcome_reason TEXT,
    gates_passed INTEGER,
    gates_total INTEGER,
    judge_score REAL,
    cost_usd REAL,                    -- agent cost; null when unknown
    input_tokens INTEGER,
    output_tokens INTEGER,
    duration_secs REAL,
    agent_version TEXT,
    target_version TEXT,
    record TEXT NOT NULL              -- the full JSON record
);
CREATE INDEX IF NOT EXISTS results_run ON results (run_id, timestamp);
CREATE INDEX IF NOT EXISTS results_group ON results (scenario, agent, model, variant);
"""


def _insert(db: Path, record: dict[str, Any]) -> None:
    import sqlite3

    judge = record.get("judge") or {}
    row = (
        record["timestamp"],
        record["run_id"],
        record["scenario"],
        record["agent"],
        record["model"],
        record["variant"],
        record["repeat"],
        record["outcome"],
        record["outcome_reason"],
        record["gates_passed"],
        record["gates_total"],
        judge.get("weighted_score"),
        record.get("cost_usd"),
        record["tokens"]["input"],
        record["tokens"]["output"],
        record.get("duration_secs"),
        record["versions"].get("agent"),
        record["versions"].get("target"),
        json.dumps(record, default=str),
    )
    with sqlite3.connect(db, timeout=30) as conn:
        conn.executescript(SCHEMA)
        conn.execute(
            "INSERT INTO results (timestamp, run_id, scenario, agent, model, variant, repeat, "
            "outcome, outcome_reason, gates_passed, gates_total, judge_score, cost_usd, "
            "input_tokens, output_tokens, duration_secs, agent_version, target_version, record) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            row,
        )
    conn.close()
