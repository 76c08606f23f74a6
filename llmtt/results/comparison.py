"""The comparison the user means: each variant against the baseline they named (and, when the
no-guidance control runs, each variant against it), with a verdict per scenario.

A *unit* is one treatment against its baseline in one scenario x agent x model; its runs pair by
repeat where both sides finished (pass or fail: a run that errored is no evidence either way, so
it is left out with its pair). Each unit gets the paired pass-rate difference B - A with Tango's
score interval, and a verdict read from that interval and the scenario's `min_effect`
(`llmtt.results.inference`). Every unit of a report, and each treatment's pooled row, is one
comparison of the family: the intervals are at the Bonferroni level over all of them and over
the looks an adaptive session planned, so the chance of any false `better` or `worse` in the
report stays at or below `ALPHA`.

The interaction metrics (error rate, help, first-try success, commands, turns, tokens, cost,
duration) are compared per unit and pooled, each as a paired mean difference with a 95% t
interval, below `MIN_METRIC_PAIRS` pairs with none: they inform, they decide no verdict.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llmtt.plan.runs import Plan
from llmtt.results.inference import (
    ALPHA,
    MeanDifference,
    RateDifference,
    interval_level,
    mean_difference,
    pairs_to_decide,
    rate_difference,
    verdict,
)
from llmtt.spec.config import CONTROL_VARIANT

Row = dict[str, Any]
COMPARISON_FORMAT = 1

# The per-run figures compared (metrics.json names; cost and duration from the record).
METRICS = (
    "error_rate",
    "first_try_success_rate",
    "unknown_exit_count",  # beside the rates, which are over the known exits
    "help_invocations",
    "total_commands",
    "retries_after_failure",
    "turns",
    "prompt_tokens",
    "output_tokens",
    "cost_usd",
    "duration_secs",
)
_PROMPT_TOKENS = ("input_tokens", "cache_read_tokens", "cache_write_tokens")
VERDICTS = ("better", "worse", "no_difference", "cant_tell")


@dataclass(frozen=True)
class ScenarioDesign:
    """How one scenario's variants are compared: its baseline (and where that was named), the
    treatments, the smallest effect that matters."""

    baseline: str
    named_by: str  # "[compare] baseline", "the scenario's compare.baseline", ...
    treatments: tuple[str, ...]
    min_effect: float
    control: str | None = None  # the no-guidance control's variant name, when it runs
    # The agents and models it runs with, as planned (empty: those the rows have); a planned
    # unit with no finished pair is still one comparison of the family, said not compared.
    axes: tuple[tuple[str, str | None], ...] = ()


@dataclass(frozen=True)
class _Unit:
    scenario: str
    agent: str
    model: str | None
    baseline: str
    treatment: str
    against_control: bool


def variant_label(row: Row) -> str:
    """A run's variant as the comparison names it: "none" for no variant files."""
    return str(row.get("variant") or "none")


def designs(plan: Plan) -> tuple[dict[str, ScenarioDesign], list[Row]]:
    """Each scenario's design, from the variants its runs have (in the order its matrix lists
    them) and [compare]; and the scenarios with variants that cannot be compared, each with
    why. A scenario with one variant and no control is no comparison, and no note."""
    config = plan.project.config.compare
    variants: dict[str, dict[str, None]] = defaultdict(dict)
    axes: dict[str, dict[tuple[str, str | None], None]] = defaultdict(dict)
    specs = {}
    for run in plan.runs:
        variants[run.scenario.name][run.variant or "none"] = None
        axes[run.scenario.name][(run.agent, run.model)] = None
        specs[run.scenario.name] = run.scenario.spec
    out: dict[str, ScenarioDesign] = {}
    notes: list[Row] = []
    for name, found in variants.items():
        labels = [v for v in found if v != CONTROL_VARIANT]
        control = CONTROL_VARIANT if CONTROL_VARIANT in found else None
        if len(labels) + (control is not None) < 2:
            continue
        own = specs[name].compare
        if own is not None and own.baseline is not None:
            baseline, named_by = own.baseline, "the scenario's compare.baseline"
        elif config.baseline is not None:
            baseline, named_by = config.baseline, "[compare] baseline"
        else:
            baseline = labels[0]
            named_by = "first of its variants (name one with [compare] baseline)"
        if baseline not in labels:
            notes.append(
                {
                    "scenario": name,
                    "reason": f"its baseline {baseline!r} ({named_by}) is not among its "
                    f"variants ({', '.join(labels)})",
                }
            )
            continue
        effect = own.min_effect if own is not None and own.min_effect is not None else None
        out[name] = ScenarioDesign(
            baseline=baseline,
            named_by=named_by,
            treatments=tuple(v for v in labels if v != baseline),
            min_effect=effect if effect is not None else config.min_effect,
            control=control,
            axes=tuple(axes[name]),
        )
    return out, notes


def compare_runs(
    rows: Sequence[Row],
    designs: Mapping[str, ScenarioDesign],
    looks: int = 1,
    notes: Sequence[Row] = (),
    family: int | None = None,
) -> Row | None:
    """The comparison section of report.json over `rows` (report rows: result records), or None
    when no scenario has a design (no variants). `looks`: how many times an adaptive session
    planned to look at the data (1 for a fixed number of repeats). `family`: the comparisons
    the intervals pay for, when `designs` is part of a larger family (default: its own)."""
    if not designs and not notes:
        return None
    finished = [r for r in rows if r.get("outcome") in ("pass", "fail")]
    by_side: dict[tuple[str, str, str | None, str], dict[int, Row]] = defaultdict(dict)
    for row in finished:
        key = (row["scenario"], row["agent"], row.get("model") or None, variant_label(row))
        by_side[key][int(row["repeat"])] = row
    units = list(_units(designs, by_side))
    treatments = sorted({(u.treatment, u.baseline, u.against_control) for u in units})
    pools = _pooling(units, looks)
    if family is None:
        family = family_size(designs, by_side, looks)
    level = interval_level(max(family, 1), looks)
    compared: list[Row] = []
    not_compared: list[Row] = list(notes)
    pooled_pairs: dict[tuple[str, str, bool], list[tuple[Row, Row]]] = defaultdict(list)
    for unit in units:
        side_a = by_side.get((unit.scenario, unit.agent, unit.model, unit.baseline), {})
        side_b = by_side.get((unit.scenario, unit.agent, unit.model, unit.treatment), {})
        pairs = [(side_a[k], side_b[k]) for k in sorted(set(side_a) & set(side_b))]
        if not pairs:
            not_compared.append(
                {**_unit_fields(unit), "reason": "no repeat finished on both sides"}
            )
            continue
        pooled_pairs[(unit.treatment, unit.baseline, unit.against_control)] += pairs
        min_effect = designs[unit.scenario].min_effect
        compared.append({**_unit_fields(unit), **_judged(pairs, level, min_effect)})
    pooled = []
    for treatment, baseline, against_control in treatments:
        pairs = pooled_pairs.get((treatment, baseline, against_control), [])
        mine = [
            u
            for u in compared
            if (u["treatment"], u["baseline"], u["against_control"])
            == (treatment, baseline, against_control)
        ]
        effects = [designs[u["scenario"]].min_effect for u in mine]
        min_effect = min(effects) if effects else _default_effect(designs)
        entry: Row = {
            "treatment": treatment,
            "baseline": baseline,
            "against_control": against_control,
            "scenarios": len({u["scenario"] for u in mine}),
            "verdicts": {v: sum(u["verdict"] == v for u in mine) for v in VERDICTS},
        }
        if pairs:
            entry.update(_judged(pairs, level, min_effect))
            if (treatment, baseline, against_control) not in pools:
                # One unit (its numbers, not another comparison) or, under repeats=auto,
                # scenarios that stopped at different looks: no verdict of its own.
                entry["verdict"] = None
                entry["more_pairs"] = None
            entry["guidance_cost"] = _guidance_cost(entry)
            entry["subcommands"] = subcommand_changes(pairs)
        pooled.append(entry)
    return {
        "format": COMPARISON_FORMAT,
        "alpha": ALPHA,
        "family": family,
        "looks": looks,
        "level": round(level, 6),
        "baselines": {
            name: {"baseline": d.baseline, "named_by": d.named_by, "min_effect": d.min_effect}
            for name, d in sorted(designs.items())
        },
        "treatments": pooled,
        "units": compared,
        "not_compared": not_compared,
        "adaptive": None,  # repeats=auto: its design and each scenario's round (the reports')
    }


def _default_effect(designs: Mapping[str, ScenarioDesign]) -> float:
    return min(d.min_effect for d in designs.values())


def planned_units(designs: Mapping[str, ScenarioDesign]) -> int:
    """The units the designs plan (their axes as planned)."""
    return sum(1 for _ in _units(designs, {}))


def family_size(
    designs: Mapping[str, ScenarioDesign],
    by_side: Mapping[tuple[str, str, str | None, str], Any] | None = None,
    looks: int = 1,
) -> int:
    """The comparisons of a family: each unit, and each pooled row that is a comparison of its
    own (see `_pooling`)."""
    units = list(_units(designs, by_side or {}))
    return len(units) + len(_pooling(units, looks))


def _pooling(units: Sequence[_Unit], looks: int) -> set[tuple[str, str, bool]]:
    """The treatments whose pooled row is a comparison of its own, with a verdict: those that
    pool two units or more. One unit's pooled row is that unit again; and under repeats=auto
    (`looks` > 1) scenarios stop at looks their own data chose, so a row pooling them is no
    look the design planned: it is shown, with no verdict."""
    if looks > 1:
        return set()
    count: dict[tuple[str, str, bool], int] = defaultdict(int)
    for u in units:
        count[(u.treatment, u.baseline, u.against_control)] += 1
    return {key for key, n in count.items() if n >= 2}


def _units(
    designs: Mapping[str, ScenarioDesign],
    by_side: Mapping[tuple[str, str, str | None, str], Any],
) -> Iterable[_Unit]:
    found: dict[str, set[tuple[str, str | None]]] = defaultdict(set)
    for scenario, agent, model, _ in by_side:
        found[scenario].add((agent, model))
    for scenario, design in sorted(designs.items()):
        axes = design.axes or sorted(found.get(scenario, ()), key=lambda a: (a[0], a[1] or ""))
        for agent, model in axes:
            for treatment in design.treatments:
                yield _Unit(scenario, agent, model, design.baseline, treatment, False)
            if design.control is not None:
                for variant in (design.baseline, *design.treatments):
                    yield _Unit(scenario, agent, model, design.control, variant, True)


def _unit_fields(unit: _Unit) -> Row:
    return {
        "scenario": unit.scenario,
        "agent": unit.agent,
        "model": unit.model,
        "baseline": unit.baseline,
        "treatment": unit.treatment,
        "against_control": unit.against_control,
    }


def _judged(pairs: Sequence[tuple[Row, Row]], level: float, min_effect: float) -> Row:
    """The pass-rate difference of the pairs (baseline, treatment), its verdict, and the
    metrics' paired differences."""
    found = rate_difference(
        [(a["outcome"] == "pass", b["outcome"] == "pass") for a, b in pairs], level
    )
    assert found is not None  # pairs is not empty
    said = verdict(found.low, found.high, min_effect)
    out = {
        **_rate_fields(found),
        "min_effect": min_effect,
        "verdict": said,
        "more_pairs": None,
        "metrics": {name: _metric_fields(pairs, name) for name in METRICS},
    }
    if said == "cant_tell":
        total = pairs_to_decide(found.gains, found.losses, found.pairs, min_effect, level)
        out["more_pairs"] = None if total is None else max(1, total - found.pairs)
    return out


def _rate_fields(found: RateDifference) -> Row:
    return {
        "pairs": found.pairs,
        "gains": found.gains,
        "losses": found.losses,
        "rate_a": _round(found.rate_a),
        "rate_b": _round(found.rate_b),
        "difference": _round(found.difference),
        # The ends as found: rounded, an end just past 0 or min_effect would read as on it.
        "low": found.low,
        "high": found.high,
        "p_value": found.p_value,  # unadjusted: the verdict is read from the interval
    }


def _metric_fields(pairs: Sequence[tuple[Row, Row]], name: str) -> Row | None:
    values = [(metric(a, name), metric(b, name)) for a, b in pairs]
    both = [(x, y) for x, y in values if x is not None and y is not None]
    found: MeanDifference | None = mean_difference(both)
    if found is None:
        return None
    return {
        "pairs": found.pairs,
        "a": _round(found.mean_a),
        "b": _round(found.mean_b),
        "difference": _round(found.difference),
        "low": _round(found.low),
        "high": _round(found.high),
    }


def metric(row: Row, name: str) -> float | None:
    """One run's figure by its compared name (None when unknown)."""
    metrics = row.get("metrics") or {}
    if name in ("cost_usd", "duration_secs"):
        value = row.get(name)
    elif name == "prompt_tokens":  # what guidance adds to: every input token, cached or not
        parts = [metrics.get(k) for k in _PROMPT_TOKENS]
        known = [p for p in parts if isinstance(p, int | float) and not isinstance(p, bool)]
        value = sum(known) if known else None
    else:
        value = metrics.get(name)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _guidance_cost(entry: Row) -> Row:
    """What the treatment costs over the baseline per run, and what its lift costs."""
    metrics = entry["metrics"]
    tokens = metrics.get("prompt_tokens")
    cost = metrics.get("cost_usd")
    extra_usd = None if cost is None else cost["difference"]
    lift = entry["difference"]
    # Pass-rate gained per dollar more a run: only when the treatment surely costs more (the
    # cost difference's interval above 0; else noise in a small difference makes a huge
    # ratio) and its cost is known for every pair the lift is from.
    surely = cost is not None and cost["low"] is not None and cost["low"] > 0
    every = cost is not None and cost["pairs"] == entry["pairs"]
    return {
        "extra_prompt_tokens_per_run": None if tokens is None else tokens["difference"],
        "extra_usd_per_run": extra_usd,
        "lift_per_usd": _round(lift / extra_usd) if surely and every and extra_usd else None,
    }


_COUNTS = ("count", "errors", "retries", "help")


def subcommand_changes(pairs: Sequence[tuple[Row, Row]]) -> list[Row]:
    """Per target subcommand, over the paired runs: calls, errors, retries after a failure and
    help per run on each side, and whether it got easier (fewer errors and retries a run) or
    harder; the most used first. Runs evaluated before per-subcommand retries were kept count
    none."""
    sums: dict[str, dict[str, list[float]]] = defaultdict(lambda: {"a": [0.0] * 4, "b": [0.0] * 4})
    for a, b in pairs:
        for side, row in (("a", a), ("b", b)):
            subs = (row.get("metrics") or {}).get("by_subcommand") or {}
            for name, counts in subs.items():
                total = sums[name][side]
                for i, field in enumerate(_COUNTS):
                    total[i] += float(counts.get(field) or 0)
    n = len(pairs)
    out: list[Row] = []
    for name, sides in sums.items():
        per_run = {
            side: {
                ("calls" if field == "count" else field): value / n
                for field, value in zip(_COUNTS, totals, strict=True)
            }
            for side, totals in sides.items()
        }
        friction = {side: f["errors"] + f["retries"] for side, f in per_run.items()}
        change = "same"
        if friction["b"] < friction["a"]:
            change = "easier"
        elif friction["b"] > friction["a"]:
            change = "harder"
        out.append(
            {
                "subcommand": name,
                **{side: {k: _round(v) for k, v in f.items()} for side, f in per_run.items()},
                "change": change,
            }
        )
    out.sort(key=lambda s: (-(s["a"]["calls"] + s["b"]["calls"]), s["subcommand"]))
    return out


def shown_end(value: float | None, min_effect: float) -> str:
    """An interval's end as the reports write it: with the fewest decimals (3 to 8) that keep
    it on the same side of 0 and of +-min_effect as it is, so that a verdict read from the end
    never contradicts the number shown."""
    if value is None:
        return "n/a"
    marks = (0.0, min_effect, -min_effect)
    shown = value
    for digits in range(3, 9):
        shown = round(value, digits)
        if all((value > m) == (shown > m) and (value < m) == (shown < m) for m in marks):
            break
    text = f"{shown:+.8f}".rstrip("0").rstrip(".")
    return "0" if text in ("+0", "-0") else text


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)
