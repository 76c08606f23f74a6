"""The reports' judge agreement: whether the LLM judge says what the gates say on the runs both
decided (Cohen's kappa and the 2x2 table, overall and per agent and model), and whether its
samples or models agree with each other (Krippendorff's alpha); a low one is a warning beside
the judge's pass rate (docs/metrics.md, "Judge agreement")."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from llmtt.results.agreement import (
    ALPHA_TENTATIVE,
    KAPPA_LOW,
    Kappa,
    cohen_kappa,
    krippendorff_alpha,
)

Row = dict[str, Any]

# A group's kappa is shown, and any kappa warns, from this many runs with both verdicts: over
# fewer, one run moves it by more than the scale's bands are wide.
MIN_GROUP_RUNS = 10

GATES_PASS_NOTE = (
    'the judge is asked only about runs whose gates passed ([judge] when = "gates_pass", the '
    "default), so no run has a gate failure for the judge to agree or disagree with: set "
    '[judge] when = "always" to measure agreement'
)

ONE_GATE_VERDICT = (
    "every run's gates {}, so kappa would be 0 or undefined whatever the judge said: the "
    "observed agreement is how often the judge said the same"
)


def judge_verdict(row: Row) -> bool | None:
    """The judge's pass/fail on a carried-out run, or None when it gave none (not asked, or
    it could not answer)."""
    judge = row.get("judge") or {}
    if row.get("outcome") not in ("pass", "fail") or judge.get("error") is not None:
        return None
    passed = judge.get("passed")
    return passed if isinstance(passed, bool) else None


def gate_verdict(row: Row) -> bool | None:
    """Whether every gate that could tell passed, or None when none could tell."""
    told = row.get("gates_total") or 0
    if row.get("outcome") not in ("pass", "fail") or told == 0:
        return None
    return bool(row.get("gates_passed") == told)


def judge_agreement(rows: list[Row], when: str | None) -> Row | None:
    """The section's data, or None when no run of the plan has a judge. `when`: [judge] when,
    which decides whether gates and judge can disagree at all."""
    if when is None:
        return None
    verdicts = [(r, judge_verdict(r)) for r in rows]
    judged = [(r, v) for r, v in verdicts if v is not None]
    pairs: list[tuple[bool, bool]] = []
    by_group: dict[tuple[str, str | None], list[tuple[bool, bool]]] = defaultdict(list)
    for r, j in judged:
        g = gate_verdict(r)
        if g is not None:
            pairs.append((g, j))
            by_group[(r["agent"], r.get("model") or None)].append((g, j))
    overall = _kappa_entry(None, None, pairs, when)
    groups = [
        _kappa_entry(agent, model, found, when)
        for (agent, model), found in sorted(
            by_group.items(), key=lambda i: (i[0][0], i[0][1] or "")
        )
        if len(found) >= MIN_GROUP_RUNS
    ]
    passed = sum(1 for _, v in judged if v)
    alpha = _alpha([r for r, _ in judged])
    warnings = [
        f"{where}: judge–gate kappa {entry['kappa']:.2f} is below {KAPPA_LOW}"
        for entry in [overall, *groups]
        # from as many runs as a group's kappa is shown from: over fewer, one run moves it
        if entry["kappa"] is not None
        and entry["kappa"] < KAPPA_LOW
        and entry["runs"] >= MIN_GROUP_RUNS
        for where in [_where(entry)]
    ]
    if alpha is not None:
        for level in ("nominal", "interval"):
            value = alpha[level]["alpha"]
            if value is not None and value < ALPHA_TENTATIVE:
                warnings.append(
                    f"the judge's samples agree little with each other ({level} alpha "
                    f"{value:.2f}, below Krippendorff's {ALPHA_TENTATIVE})"
                )
    return {
        "when": when,
        "judged": len(judged),
        "judge_passed": passed,
        "judge_pass_rate": round(passed / len(judged), 4) if judged else None,
        "overall": overall,
        "groups": groups,
        "min_group_runs": MIN_GROUP_RUNS,
        "alpha": alpha,
        "warnings": warnings,
    }


def _where(entry: Row) -> str:
    if entry["agent"] is None:
        return "overall"
    return f"{entry['agent']} / {entry['model'] or 'no model'}"


def _kappa_entry(
    agent: str | None, model: str | None, pairs: list[tuple[bool, bool]], when: str
) -> Row:
    """One table: (gates passed, judge passed) per run, its kappa, or why there is none."""
    count = {
        "both_pass": sum(1 for g, j in pairs if g and j),
        "gates_pass_judge_fail": sum(1 for g, j in pairs if g and not j),
        "gates_fail_judge_pass": sum(1 for g, j in pairs if not g and j),
        "both_fail": sum(1 for g, j in pairs if not g and not j),
    }
    kappa: Kappa = cohen_kappa(
        count["both_pass"],
        count["gates_pass_judge_fail"],
        count["gates_fail_judge_pass"],
        count["both_fail"],
    )
    value, why = kappa.value, kappa.why
    gates = {g for g, _ in pairs}
    if when == "gates_pass" and False not in gates:
        # Kappa would be 0 or undefined by construction, which says nothing of the judge.
        value, why = None, GATES_PASS_NOTE
    elif len(gates) == 1:
        # So too when every run's gates passed (or every one's failed), whatever was asked.
        value, why = None, ONE_GATE_VERDICT.format("passed" if True in gates else "failed")
    elif not pairs:
        why = "no run has both a gate verdict and a judge verdict"
    return {
        "agent": agent,
        "model": model,
        "runs": kappa.n,
        **count,
        "observed": _round(kappa.observed),
        "expected": _round(kappa.expected),
        "kappa": _round(value),
        "kappa_note": why,
    }


def _alpha(rows: list[Row]) -> Row | None:
    """Krippendorff's alpha across the judge's samples (each judge model's k-th sample one
    rater), nominal on pass/fail and interval on the weighted score; None when no run was
    scored more than once."""
    units: list[dict[tuple[str, int], dict[str, Any]]] = []
    for row in rows:
        judge = row["judge"]
        samples = judge.get("samples") or [
            {k: judge.get(k) for k in ("model", "weighted_score", "passed")}
        ]
        seen: dict[str, int] = defaultdict(int)
        unit: dict[tuple[str, int], dict[str, Any]] = {}
        for sample in samples:
            model = str(sample.get("model") or "")
            unit[(model, seen[model])] = sample
            seen[model] += 1
        units.append(unit)
    if not any(len(unit) >= 2 for unit in units):
        return None
    raters = sorted({rater for unit in units for rater in unit})
    out: Row = {"runs": sum(1 for unit in units if len(unit) >= 2), "raters": len(raters)}
    for level, field in (("nominal", "passed"), ("interval", "weighted_score")):
        data = [
            [_value((unit.get(rater) or {}).get(field), level) for unit in units]
            for rater in raters
        ]
        found = krippendorff_alpha(data, "nominal" if level == "nominal" else "interval")
        out[level] = {"alpha": _round(found.value), "note": found.why}
    return out


def _value(value: Any, level: str) -> Any:
    """A sample's rating, or None when it gave none that level can read."""
    if level == "nominal":
        return value if isinstance(value, bool) else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
