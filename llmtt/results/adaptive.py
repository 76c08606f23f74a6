"""repeats=auto: the comparisons' repeats in rounds, each scenario stopped once its verdicts are
decided.

A scenario that compares (two variants or more, the control included) runs `round_repeats`
repeats a round, up to `max_repeats`: K = ceil(max_repeats / round_repeats) planned looks.
After each round every unit of the scenario (treatment against baseline, per agent and model)
is judged at the level `interval_level(family, K)`: Bonferroni over the report's family and a
union bound over the K looks, so the chance of any false `better` or `worse`, however many looks
are taken and wherever a scenario stops, is at most ALPHA. A scenario stops when every one of
its units is decided (better, worse or no_difference) or at max_repeats (undecided).

The state is read from the results, never kept elsewhere: each round of a `doit run repeats=auto`
(and each later invocation) finds, per scenario, the first look whose runs are not all finished
(that round is under way) or that decides it, exactly as the looks were taken. Runs already
done are reused by their content keys; editing one variant's guidance re-runs that side only.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Literal

from llmtt.plan.runs import Plan, Run
from llmtt.results.comparison import compare_runs, designs, family_size, planned_units
from llmtt.results.inference import interval_level, pairs_to_decide, planned_pairs
from llmtt.spec.config import CompareSpec
from llmtt.util.atomic import read_json

Status = Literal["running", "decided", "bound"]


@dataclass(frozen=True)
class Round:
    """Where one scenario's comparison stands: the repeats it needs now, and why."""

    scenario: str
    repeats: int
    status: Status  # running: this round's runs are not all finished; decided; bound: at max
    look: int  # which of the planned looks


def looks_of(spec: CompareSpec) -> int:
    """The looks an adaptive comparison plans: one after each round."""
    return math.ceil(spec.max_repeats / spec.round_repeats)


def plan_rounds(plan: Plan) -> dict[str, Round]:
    """Per scenario that compares, its round. `plan`: every repeat the comparisons may take
    (a repeats=auto selection without rounds)."""
    found, _ = designs(plan)
    spec = plan.project.config.compare
    looks = looks_of(spec)
    family = family_size(found, looks=looks)
    runs: dict[str, list[Run]] = defaultdict(list)
    for run in plan.runs:
        if run.scenario.name in found:
            runs[run.scenario.name].append(run)
    out = {}
    for scenario, design in found.items():
        records = [(run, _finished(run)) for run in runs[scenario]]
        for look in range(1, looks + 1):
            repeats = min(look * spec.round_repeats, spec.max_repeats)
            members = [record for run, record in records if run.repeat <= repeats]
            finished = [record for record in members if record is not None]
            if len(finished) < len(members):
                out[scenario] = Round(scenario, repeats, "running", look)
                break
            judged = compare_runs(finished, {scenario: design}, looks, family=family)
            units = (judged or {}).get("units") or []
            decided = all(u["verdict"] != "cant_tell" for u in units)
            if decided and len(units) == planned_units({scenario: design}):
                out[scenario] = Round(scenario, repeats, "decided", look)
                break
            if repeats >= spec.max_repeats:
                out[scenario] = Round(scenario, repeats, "bound", look)
                break
    return out


def _finished(run: Run) -> dict[str, Any] | None:
    """A run's result record when it finished (pass or fail) for its current agent key."""
    path = run.dir / "result.json"
    if not path.is_file():
        return None
    try:
        record: dict[str, Any] = read_json(path)
    except (OSError, ValueError):
        return None
    if record.get("key") != run.agent_key or record.get("outcome") not in ("pass", "fail"):
        return None
    return record


def decision_estimates(
    plan: Plan, looks: int, assume: tuple[float, float] | None = None
) -> list[dict[str, Any]]:
    """Per comparison unit of the plan: about how many pairs in all would decide it at its
    min_effect (with 80% chance, at the level of the report's family and `looks`), from the
    pass rates its finished pairs show, else from the `assume`d (baseline, treatment) rates;
    with the pairs done. `pairs` is None when nothing is known and nothing assumed."""
    found, _ = designs(plan)
    if not found:
        return []
    family = family_size(found, looks=looks)
    level = interval_level(max(1, family), looks)
    records = [r for r in (_finished(run) for run in plan.runs) if r is not None]
    judged = compare_runs(records, found, looks, family=family) or {}
    done = {
        (u["scenario"], u["agent"], u["model"], u["baseline"], u["treatment"]): u
        for u in judged.get("units", [])
    }
    out = []
    for scenario, design in sorted(found.items()):
        for agent, model in design.axes:
            pairs_of = [(design.baseline, t) for t in design.treatments]
            if design.control is not None:
                pairs_of += [(design.control, v) for v in (design.baseline, *design.treatments)]
            for baseline, treatment in pairs_of:
                unit = done.get((scenario, agent, model, baseline, treatment))
                entry: dict[str, Any] = {
                    "scenario": scenario,
                    "agent": agent,
                    "model": model,
                    "baseline": baseline,
                    "treatment": treatment,
                    "min_effect": design.min_effect,
                    "done": 0 if unit is None else unit["pairs"],
                    "verdict": None if unit is None else unit["verdict"],
                    "from": "assumed" if unit is None else "seen",
                    "pairs": None,
                }
                if unit is not None and unit["verdict"] != "cant_tell":
                    entry["pairs"] = unit["pairs"]
                elif unit is not None:
                    entry["pairs"] = pairs_to_decide(
                        unit["gains"], unit["losses"], unit["pairs"], design.min_effect, level
                    )
                elif assume is not None:
                    entry["pairs"] = planned_pairs(*assume, design.min_effect, level)
                out.append(entry)
    return out
