"""The outcome rule (gates and judge decide, and a timed-out agent fails), the composite, and
the result record of an evaluated run (its results.jsonl line)."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Sequence
from typing import Any

from llmtt.plan.runs import Run
from llmtt.spec.evaluation import CompositeSpec

# The reason of a run whose judge failed `[judge] attempts` times at the same question: an
# error still, but no longer one that fails each `doit run` (it is not asked again).
JUDGE_GAVE_UP = "judge error: the judge gave up"


def doomed(gates: Sequence[dict[str, Any]], info: dict[str, Any]) -> bool:
    """Whether the run fails whatever the judge says: a gate failed, or the agent timed out."""
    return any(g["passed"] is False for g in gates) or bool(info.get("timed_out"))


def decide(
    gates: Sequence[dict[str, Any]],
    judge: dict[str, Any] | None,
    *,
    timed_out_after: float | None = None,
) -> tuple[str, str]:
    """`("pass" | "fail", reason)`: pass iff no gate failed and the judge (if any) passed.

    A gate that cannot tell (`passed` null: a `check` whose answer the agent's record does not
    hold) is neither a pass nor a fail: it decides nothing, and the reason names it.

    An agent stopped at its time limit (`timed_out_after` seconds) fails whatever the gates and
    the judge found: it did not finish the task. The timeout is the one interaction fact that
    decides an outcome, a deliberate departure from the seed's rule (see the README).
    """
    failed = [g for g in gates if g["passed"] is False]
    reasons = [f"gate {g['index']} ({g['type']}): {g['message']}" for g in failed]
    if judge is not None and not judge.get("passed"):
        reasons.append(judge.get("reason") or "judge did not pass")
    untold = [
        f"gate {g['index']} ({g['type']}) cannot tell: {g['message']}"
        for g in gates
        if g["passed"] is None
    ]
    if timed_out_after is not None:
        stopped = f"agent timed out after {timed_out_after:g} s"
        return "fail", "; ".join([stopped, *(reasons or [_passed(gates, judge)]), *untold])
    if reasons:
        return "fail", "; ".join([*reasons, *untold])
    return "pass", "; ".join([_passed(gates, judge), *untold])


def _passed(gates: Sequence[dict[str, Any]], judge: dict[str, Any] | None) -> str:
    if not gates and judge is None:
        return "no gates defined (nothing was checked)"
    told = [g for g in gates if g["passed"] is not None]
    parts: list[str] = []
    if told and len(told) == len(gates):
        parts.append("the gate passed" if len(gates) == 1 else f"all {len(gates)} gates passed")
    elif told:
        parts.append(f"the {len(told)} gate(s) that could tell passed")
    elif gates:
        parts.append("no gate could tell")
    if judge is not None:
        parts.append(f"judge passed ({judge.get('weighted_score')})")
    return " and ".join(parts)


def composite_score(
    spec: CompositeSpec | None,
    gates: Sequence[dict[str, Any]],
    judge_score: float | None,
    first_try_success_rate: float | None,
) -> float | None:
    """The weighted composite, only when the scenario defines one.

    Components: share of gates passed (of those that could tell), the judge's weighted score,
    and the first-try success rate as the interaction component. A component that is absent
    (no gates that could tell, judge disabled, no target commands) is left out and the
    remaining weights are scaled back to 1.
    """
    if spec is None:
        return None
    parts: list[tuple[float, float]] = []
    told = [g for g in gates if g["passed"] is not None]
    if told:
        parts.append((spec.gate_weight, sum(bool(g["passed"]) for g in told) / len(told)))
    if judge_score is not None:
        parts.append((spec.judge_weight, judge_score))
    if first_try_success_rate is not None:
        parts.append((spec.interaction_weight, first_try_success_rate))
    weight = sum(w for w, _ in parts)
    if weight <= 0:
        return None
    return round(sum(w * v for w, v in parts) / weight, 6)


def as_expected(row: dict[str, Any]) -> bool:
    """Whether a report row's outcome is the one its scenario expects (`expect`, default pass).

    The recorded outcome stays what happened; only `llmtt check` and the reports read it
    against the expectation, so that editing `expect` re-runs nothing.
    """
    return bool(row["outcome"] == row.get("expect", "pass"))


def verdict(row: dict[str, Any]) -> str:
    """A report row's outcome as the reports word it: `fail (as expected)` for a negative
    control that failed, `pass (unexpected)` for one that passed, else the outcome."""
    if row.get("expect", "pass") != "fail" or row["outcome"] not in ("pass", "fail"):
        return str(row["outcome"])
    return "fail (as expected)" if row["outcome"] == "fail" else "pass (unexpected)"


RESULT_FORMAT = 1


def judge_fields(judge: dict[str, Any]) -> dict[str, Any]:
    """A report row's `judge`: the verdict, its cost (every paid attempt), its samples (one
    element when the judge was asked once) and their spread."""
    fields = {k: judge.get(k) for k in ("model", "weighted_score", "passed", "cost_usd", "error")}
    fields["samples"] = [
        {k: s.get(k) for k in ("model", "weighted_score", "passed")}
        for s in judge.get("samples") or []
    ]
    fields["spread"] = judge.get("spread")
    return fields


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
        if k
        not in (
            "format",
            "run_id",
            "outcome",
            "outcome_reason",
            "gates_passed",
            "gates_total",
            "gates_unknown",
            "gates_score",
            "gates_max",
            "evaluators",
            "triage",
        )
    }
    evaluated = metrics.get("evaluators")
    return {
        "format": RESULT_FORMAT,
        **run.identity(),
        "tags": list(run.tags),
        "tier": run.scenario.spec.tier,
        "key": run.agent_key,
        # How the agent was confined: "bwrap", or "none" (unconfined on purpose, or a run
        # recorded before llmtt confined runs).
        "isolation": (info.get("isolation") or {}).get("mode", "none"),
        "outcome": metrics["outcome"],
        "outcome_reason": metrics["outcome_reason"],
        "gates_passed": metrics["gates_passed"],
        "gates_total": metrics["gates_total"],
        # gates that could not tell, counted in neither of the two above
        "gates_unknown": metrics.get("gates_unknown", 0),
        "gates_score": metrics.get("gates_score"),
        "gates_max": metrics.get("gates_max"),
        "gates": [{k: g[k] for k in ("index", "type", "passed")} for g in gates or []],
        "metrics": interaction,
        "cost_usd": metrics.get("cost_usd"),
        # Why a failed run failed (llmtt.evaluation.triage); absent for the others.
        **({"triage": metrics["triage"]} if metrics.get("triage") else {}),
        "judge": None if judge is None else judge_fields(judge),
        # In brief: the full results, reasoning and response are in evaluations.jsonl.
        "evaluators": None
        if evaluated is None
        else {
            "overall_score": evaluated["overall_score"],
            "scores": {
                r["criterion"]: r["score"] for r in evaluated["results"] if not r.get("error")
            },
            "errors": len(evaluated["errors"]),
        },
        "tokens": {
            "input": metrics.get("input_tokens", 0),
            "output": metrics.get("output_tokens", 0),
        },
        "duration_secs": info.get("duration_secs"),
        "status": info["status"],
        "versions": info["versions"],
        "timestamp": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        # The `doit run` that evaluated it (when it began, or the user's LLMTT_LABEL
        # label): report.html's history has a point per invocation.
        "invocation": os.environ.get("LLMTT_LABEL") or None,
    }
