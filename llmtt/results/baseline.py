"""Baselines and regressions: `llmtt bless` records where a project stands; every aggregate
compares against it; `llmtt check` fails CI on a failed outcome or a regression beyond noise."""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from llmtt.errors import LlmttError
from llmtt.evaluation.outcome import as_expected, verdict
from llmtt.redaction import Redactor
from llmtt.spec.config import RegressionSpec
from llmtt.util.atomic import read_json, write_json

BASELINE_FORMAT = 1
Row = dict[str, Any]


def group_key(scenario: str, agent: str, model: str | None, variant: str | None) -> str:
    """The stored key of a baseline group: `-` for no model / no variant (group_label words
    it)."""
    return "/".join([scenario, agent, model or "-", variant or "-"])


def _group(row: Row) -> str:
    return group_key(row["scenario"], row["agent"], row.get("model"), row.get("variant"))


def group_label(name: str) -> str:
    """A baseline group key (`scenario/agent/model/variant`, `-` for none) as the reports word
    it: `scenario / agent / no model / no variant`."""
    parts = name.split("/")
    if len(parts) != 4:
        return name
    words = (parts[0], parts[1], parts[2] if parts[2] != "-" else "no model")
    return " / ".join((*words, parts[3] if parts[3] != "-" else "no variant"))


def snapshot(rows: list[Row]) -> dict[str, Any]:
    """Per scenario x agent x model x variant: runs, pass rate, mean cost, gates that passed."""
    grouped: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        if row["outcome"] in ("pass", "fail"):
            grouped[_group(row)].append(row)
    groups = {}
    for name, members in sorted(grouped.items()):
        costs = [m["cost_usd"] for m in members if m.get("cost_usd") is not None]
        gates: dict[str, list[bool]] = defaultdict(list)
        for m in members:
            for gate in m.get("gates") or []:
                if gate["passed"] is not None:  # a gate that cannot tell: neither way
                    gates[str(gate["index"])].append(bool(gate["passed"]))
        groups[name] = {
            "runs": len(members),
            "pass_rate": sum(m["outcome"] == "pass" for m in members) / len(members),
            "costs": costs,
            "gates": {k: all(v) for k, v in gates.items()},  # passed in every run
            "gates_any": {k: any(v) for k, v in gates.items()},  # passed in some run
            "gate_names": {
                str(g["index"]): g["type"] for m in members for g in m.get("gates") or []
            },
        }
    return {"format": BASELINE_FORMAT, "groups": groups}


def bless(report: Path, baseline: Path) -> dict[str, Any]:
    """Write the current report's snapshot as the baseline file (to be committed); a report
    with no finished run is refused, so a baseline never blesses nothing."""
    data = snapshot(read_json(report)["runs"])
    if not data["groups"]:
        raise LlmttError(
            f"{report} holds no finished run (pass or fail): nothing to bless; "
            f"{baseline.name} is left as it was (run `doit run` first)"
        )
    write_json(baseline, data)
    return data


def missing_groups(rows: list[Row], baseline: dict[str, Any]) -> list[str]:
    """Baseline groups with no finished run in `rows` (not selected, or every run errored)."""
    now = snapshot(rows)["groups"]
    return sorted(name for name in baseline.get("groups", {}) if name not in now)


def compared(rows: list[Row], baseline: dict[str, Any]) -> dict[str, Any]:
    """How many of the baseline's groups `rows` are compared with (those with a finished run),
    of how many, and the groups left out (report.json's `baseline_compared`)."""
    missing = missing_groups(rows, baseline)
    total = len(baseline.get("groups", {}))
    return {"compared": total - len(missing), "groups": total, "missing": missing}


def regressions(rows: list[Row], baseline: dict[str, Any], rules: RegressionSpec) -> list[Row]:
    """What got worse than the baseline, each flagged only when beyond the noise repeats show."""
    now = snapshot(rows)["groups"]
    found: list[Row] = []
    for name, before in baseline.get("groups", {}).items():
        after = now.get(name)
        if after is None:
            continue
        drop = before["pass_rate"] - after["pass_rate"]
        noise = 2 * math.sqrt(_binomial_var(before) + _binomial_var(after))
        if drop > rules.score_drop and drop > noise:
            found.append(
                {
                    "group": name,
                    "kind": "score_drop",
                    "message": f"pass rate {before['pass_rate']:.2f} -> {after['pass_rate']:.2f} "
                    f"(drop {drop:.2f} > {rules.score_drop:g}, noise {noise:.2f})",
                }
            )
        for index, passed in before["gates"].items():
            if passed and not after["gates_any"].get(index, True):
                found.append(
                    {
                        "group": name,
                        "kind": "gate",
                        "message": f"gate {index} ({before['gate_names'].get(index, '?')}) "
                        f"passed in every baseline run and fails in every run now",
                    }
                )
        found.extend(_cost(name, before, after, rules))
    return found


def _binomial_var(group: dict[str, Any]) -> float:
    p, n = group["pass_rate"], group["runs"]
    return p * (1 - p) / n if n else 0.0


def _cost(
    name: str, before: dict[str, Any], after: dict[str, Any], rules: RegressionSpec
) -> list[Row]:
    if not before["costs"] or not after["costs"]:
        return []
    mean_b = sum(before["costs"]) / len(before["costs"])
    mean_a = sum(after["costs"]) / len(after["costs"])
    if mean_b <= 0 or mean_a <= mean_b * (1 + rules.cost_increase):
        return []
    noise = 2 * math.sqrt(
        _var(before["costs"]) / len(before["costs"]) + _var(after["costs"]) / len(after["costs"])
    )
    if mean_a - mean_b <= noise:
        return []
    return [
        {
            "group": name,
            "kind": "cost",
            "message": f"mean cost ${mean_b:.4f} -> ${mean_a:.4f} "
            f"(+{(mean_a / mean_b - 1) * 100:.0f}%)",
        }
    ]


def _var(values: list[float]) -> float:
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return sum((v - mean) ** 2 for v in values) / (len(values) - 1)


def check_summary(report: dict[str, Any]) -> tuple[bool, str]:
    """(ok, Markdown) for CI: not ok on any outcome other than the scenario expects (`expect`,
    default pass: a negative control's fail is accepted, its pass is not), any run not carried
    out, or any regression."""
    runs = report["runs"]
    bad = [r for r in runs if not as_expected(r)]
    found = report.get("regressions") or []
    summary = report["summary"]
    lines = [
        "## llmtt",
        "",
        f"{summary['runs']} runs: **{summary['passed']} passed, {summary['failed']} failed**"
        + _expectations(summary)
        + (f", {summary['errors']} not carried out" if summary.get("errors") else "")
        + f"; pass rate {'n/a' if summary['pass_rate'] is None else summary['pass_rate']}.",
        "",
    ]
    if bad:
        lines += ["| run | outcome | reason |", "| --- | --- | --- |"]
        lines += [f"| {r['run_id']} | {verdict(r)} | {_reason(r).replace('|', '/')} |" for r in bad]
        lines.append("")
    if found:
        lines += ["### Regressions against the baseline", ""]
        lines += [f"- {group_label(r['group'])}: {r['message']}" for r in found]
        lines.append("")
    if not bad and not found:
        said = (
            "Every run had the outcome its scenario expects"
            if summary.get("failed_as_expected")
            else "Every run passed"
        )
        # With no baseline group compared, nothing can be said to have regressed or not.
        coverage = report.get("baseline_compared") or {}
        if coverage.get("groups") and not coverage.get("compared"):
            lines.append(f"{said}; none of the baseline's groups was compared.")
        else:
            lines.append(f"{said} and nothing regressed.")
    # From report.json, redacted when written; masked again for a report an older llmtt wrote.
    return not bad and not found, Redactor()("\n".join(lines) + "\n")


def _expectations(summary: dict[str, Any]) -> str:
    """The negative controls' part of the summary line (nothing when there are none)."""
    said = ""
    if summary.get("failed_as_expected"):
        said += f" ({summary['failed_as_expected']} failed as expected)"
    if summary.get("passed_unexpectedly"):
        said += f", **{summary['passed_unexpectedly']} passed unexpectedly**"
    return said


def _reason(row: Row) -> str:
    reason = str(row["outcome_reason"])
    if row["outcome"] == "pass" and row.get("expect") == "fail":
        return f"the scenario expects fail (expect: fail), but {reason}"
    return reason
