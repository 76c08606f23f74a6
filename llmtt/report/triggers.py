"""Skill trigger precision, recall and F1 over the suite, per agent, model and skill: from each
evaluated run's `skill_triggers` (a scenario's `should_trigger` / `should_not_trigger`, judged
by what the model was sent; docs/metrics.md)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any


def trigger_rates(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per agent, model and skill that some run judged: the four counts, precision
    (of the loads, those that should have been), recall (of the runs that should have loaded
    it, those that did) and F1; a rate with nothing to count is null."""
    counts: dict[tuple[str, str | None, str], dict[str, int]] = defaultdict(
        lambda: dict.fromkeys(("tp", "fn", "fp", "tn"), 0)
    )
    for row in rows:
        if row.get("outcome") not in ("pass", "fail"):
            continue  # a run not carried out says nothing of the agent
        verdicts = (row.get("metrics") or {}).get("skill_triggers") or {}
        for skill, verdict in verdicts.items():
            if verdict in ("tp", "fn", "fp", "tn"):
                counts[(row["agent"], row.get("model") or None, skill)][verdict] += 1
    out = []
    for (agent, model, skill), c in sorted(
        counts.items(), key=lambda i: tuple(p or "" for p in i[0])
    ):
        precision = _ratio(c["tp"], c["tp"] + c["fp"])
        recall = _ratio(c["tp"], c["tp"] + c["fn"])
        f1 = None
        if precision is not None and recall is not None:  # both wrong every time: 0, not none
            total = precision + recall
            f1 = round(2 * precision * recall / total, 4) if total else 0.0
        out.append(
            {
                "agent": agent,
                "model": model,
                "skill": skill,
                **c,
                "precision": precision,
                "recall": recall,
                "f1": f1,
            }
        )
    return out


def _ratio(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None
