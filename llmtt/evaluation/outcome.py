"""The outcome rule (gates and judge decide, and a timed-out agent fails) and the composite."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llmtt.spec.evaluation import CompositeSpec


def decide(
    gates: Sequence[dict[str, Any]],
    judge: dict[str, Any] | None,
    *,
    timed_out_after: float | None = None,
) -> tuple[str, str]:
    """`("pass" | "fail", reason)`: pass iff every gate passed and the judge (if any) passed.

    An agent stopped at its time limit (`timed_out_after` seconds) fails whatever the gates and
    the judge found: it did not finish the task. The timeout is the one interaction fact that
    decides an outcome, a deliberate departure from the seed's rule (see the README).
    """
    failed = [g for g in gates if not g["passed"]]
    reasons = [f"gate {g['index']} ({g['type']}): {g['message']}" for g in failed]
    if judge is not None and not judge.get("passed"):
        reasons.append(judge.get("reason") or "judge did not pass")
    if timed_out_after is not None:
        stopped = f"agent timed out after {timed_out_after:g} s"
        return "fail", "; ".join([stopped, *(reasons or [_passed(gates, judge)])])
    if reasons:
        return "fail", "; ".join(reasons)
    return "pass", _passed(gates, judge)


def _passed(gates: Sequence[dict[str, Any]], judge: dict[str, Any] | None) -> str:
    if not gates and judge is None:
        return "no gates defined (nothing was checked)"
    parts = (
        [("the gate passed" if len(gates) == 1 else f"all {len(gates)} gates passed")]
        if gates
        else []
    )
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

    Components: share of gates passed, the judge's weighted score, and the first-try success
    rate as the interaction component. A component that is absent (no gates, judge disabled,
    no target commands) is left out and the remaining weights are scaled back to 1.
    """
    if spec is None:
        return None
    parts: list[tuple[float, float]] = []
    if gates:
        parts.append((spec.gate_weight, sum(g["passed"] for g in gates) / len(gates)))
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
