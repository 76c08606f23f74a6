"""The report's data model beyond counts: repeats (mean and standard error, pass@k, pass^k,
flaky), and paired comparisons of models (Tango's 95% interval of each on its own)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from llmtt.results.inference import rate_difference
from llmtt.results.stats import mean_se, pass_at_k, pass_hat_k

# The exit rates are over the known exits: `unknown_exit_count` goes beside them.
METRICS = (
    "error_rate",
    "first_try_success_rate",
    "unknown_exit_count",
    "total_commands",
    "help_invocations",
    "turns",
)

Row = dict[str, Any]


def _group_key(row: Row) -> tuple[str, str | None, str | None]:
    """Agent, model, variant; no model or no variant is None (the templates word it)."""
    return (row["agent"], row.get("model") or None, row.get("variant") or None)


def _order(key: tuple[Any, ...]) -> tuple[str, ...]:
    return tuple("" if part is None else str(part) for part in key)


def repeats(rows: list[Row]) -> list[Row]:
    """One entry per scenario x agent x model x variant, over its repeats."""
    grouped: dict[tuple[str, str, str | None, str | None], list[Row]] = defaultdict(list)
    for row in rows:
        if row["outcome"] in ("pass", "fail"):
            grouped[(row["scenario"], *_group_key(row))].append(row)
    out = []
    for (scenario, agent, model, variant), members in sorted(
        grouped.items(), key=lambda item: _order(item[0])
    ):
        n = len(members)
        c = sum(1 for m in members if m["outcome"] == "pass")
        entry: Row = {
            "scenario": scenario,
            "agent": agent,
            "model": model,
            "variant": variant,
            "repeats": n,
            "passed": c,
            "pass_rate": round(c / n, 4),
            "pass_at_k": {str(k): _round(pass_at_k(n, c, k)) for k in sorted({1, n})},
            "pass_hat_k": {str(k): _round(pass_hat_k(n, c, k)) for k in sorted({1, n})},
            "flaky": 0 < c < n,
        }
        for name in METRICS + ("cost_usd", "duration_secs"):
            values = [v for v in (_metric(m, name) for m in members) if v is not None]
            mean, se = mean_se(values)
            entry[name] = {"mean": _round(mean), "se": _round(se)}
        out.append(entry)
    return out


def comparisons(rows: list[Row]) -> list[Row]:
    """Paired comparisons of models: each against the first in name order, paired by scenario
    and repeat (the other axes held equal). `a` is the first, `b` the other. (Variants are
    compared with the baseline the user names: `llmtt.results.comparison`.)"""
    out: list[Row] = []
    for axis, others in (("model", ("agent", "variant")),):
        levels = sorted({row.get(axis) or None for row in rows}, key=lambda v: _order((v,)))
        if len(levels) < 2:
            continue
        base = levels[0]
        for level in levels[1:]:
            found = paired_comparison(rows, axis, base, level, others)
            if found is not None:
                out.append(found)
    return out


def paired_comparison(
    rows: list[Row], axis: str, a: str | None, b: str | None, others: tuple[str, ...]
) -> Row | None:
    """Side `a` (rows whose `axis` is a) against side `b`, run by run: a pair is one scenario
    and repeat (and the same `others`) finished on both sides. None when nothing pairs."""

    def key(row: Row) -> tuple[Any, ...]:
        return (row["scenario"], row["repeat"], *(row.get(o) or None for o in others))

    done = [r for r in rows if r["outcome"] in ("pass", "fail")]
    side_a = {key(r): r for r in done if (r.get(axis) or None) == a}
    side_b = {key(r): r for r in done if (r.get(axis) or None) == b}
    common = sorted(set(side_a) & set(side_b), key=_order)
    result = rate_difference(
        [(side_a[k]["outcome"] == "pass", side_b[k]["outcome"] == "pass") for k in common]
    )
    if result is None:
        return None
    deltas = {}
    for name in METRICS:
        pairs = [(_metric(side_a[k], name), _metric(side_b[k], name)) for k in common]
        both = [(x, y) for x, y in pairs if x is not None and y is not None]
        mean_a, _ = mean_se([x for x, _ in both])
        mean_b, _ = mean_se([y for _, y in both])
        deltas[name] = {
            "a": _round(mean_a),
            "b": _round(mean_b),
            "delta": _round(None if mean_a is None or mean_b is None else mean_b - mean_a),
        }
    return {
        "axis": axis,
        "a": a,
        "b": b,
        "pairs": result.pairs,
        "pass_rate_a": _round(result.rate_a),
        "pass_rate_b": _round(result.rate_b),
        "difference": _round(result.difference),
        "ci_low": _round(result.low),
        "ci_high": _round(result.high),
        "a_only": result.losses,
        "b_only": result.gains,
        "p_value": _round(result.p_value),
        "metrics": deltas,
    }


def _metric(row: Row, name: str) -> float | None:
    if name in ("cost_usd", "duration_secs"):
        value = row.get(name)
    else:
        value = (row.get("metrics") or {}).get(name)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)
