"""The reports' roll-up of why runs failed: each failed run's triage (its rule-based fields,
llmtt.evaluation.triage) counted per target subcommand where runs first went wrong and per
scenario by reason; and each failed run's one line (a paid triage model's, when it answered)."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from llmtt.evaluation.interaction import NO_SUBCOMMAND

Row = dict[str, Any]


def why_line(triage: Row) -> str:
    """What a report says of a failed run: the triage model's line, else the rule's."""
    return str(triage.get("model_line") or triage.get("line") or "")


def reason_of(triage: Row) -> str:
    """A failed run's reason, worded alike for every run that failed the same way (so they
    can be counted): the first failing target command's subcommand and exit code, else the
    first failed gate, else that neither failed."""
    first = triage.get("first_failure")
    if first:
        return f"`{_named(triage, first)}` exited {first['exit_code']}"
    gate = triage.get("gate")
    if gate:
        return f"gate {gate['index']} ({gate['type']}) failed, no target command did"
    return "no target command or gate failed"


def failure_rollup(rows: list[Row]) -> Row | None:
    """Per target subcommand, the failed runs whose first failing target command was on it
    (the most first); per scenario, its failed runs' reasons with their counts; each failed
    run's line. None when no run failed with a triage."""
    failed = [r for r in rows if r.get("outcome") == "fail" and r.get("triage")]
    if not failed:
        return None
    first_here: Counter[tuple[str, str]] = Counter()
    by_scenario: dict[str, Counter[str]] = defaultdict(Counter)
    for row in failed:
        triage = row["triage"]
        first = triage.get("first_failure")
        if first:
            first_here[(triage.get("target") or "", first.get("subcommand") or NO_SUBCOMMAND)] += 1
        by_scenario[row["scenario"]][reason_of(triage)] += 1
    return {
        "subcommands": [
            {"target": target, "subcommand": sub, "runs": count}
            for (target, sub), count in sorted(
                first_here.items(), key=lambda i: (-i[1], i[0][0], i[0][1])
            )
        ],
        "scenarios": [
            {
                "scenario": name,
                "failed": sum(reasons.values()),
                "reasons": [
                    {"reason": reason, "runs": count}
                    for reason, count in sorted(reasons.items(), key=lambda i: (-i[1], i[0]))
                ],
            }
            for name, reasons in sorted(by_scenario.items())
        ],
        "runs": [
            {
                "run_id": r["run_id"],
                "line": why_line(r["triage"]),
                "by": r["triage"].get("model") if r["triage"].get("model_line") else "rules",
            }
            for r in failed
        ],
    }


def _named(triage: Row, first: Row) -> str:
    sub = first.get("subcommand")
    return " ".join(p for p in (triage.get("target"), sub) if p) or str(first.get("command"))
