"""Result records: one per evaluated run, in the run folder and appended to results.jsonl."""

from __future__ import annotations

import datetime as dt
import fcntl
import json
from pathlib import Path
from typing import Any

from llmtt.plan import Run

RESULT_FORMAT = 1


def result_record(
    run: Run, info: dict[str, Any], metrics: dict[str, Any], judge: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The record of one evaluated run (the results.jsonl line)."""
    interaction = {
        k: v
        for k, v in metrics.items()
        if k not in ("format", "run_id", "outcome", "outcome_reason", "gates_passed", "gates_total")
    }
    return {
        "format": RESULT_FORMAT,
        "run_id": run.run_id,
        "scenario": run.scenario.name,
        "agent": run.agent,
        "model": run.model,
        "variant": run.variant,
        "repeat": run.repeat,
        "tags": list(run.tags),
        "tier": run.scenario.spec.tier,
        "key": run.agent_key,
        "outcome": metrics["outcome"],
        "outcome_reason": metrics["outcome_reason"],
        "gates_passed": metrics["gates_passed"],
        "gates_total": metrics["gates_total"],
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


def append_result(path: Path, record: dict[str, Any]) -> None:
    """Append one record under an exclusive lock (parallel doit workers share the file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
    with open(path, "a", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            handle.write(line)
            handle.flush()
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
