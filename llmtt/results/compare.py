"""`llmtt compare`: the comparison with the baseline, as text or as data (`--json`).

Without arguments: the comparison of the current results (report.json's `comparison`, made by
the last aggregate from [compare]). With two arguments A and B, A is the baseline and B the
treatment: two variants of the current results (per scenario, agent and model), or two result
sets (report.json files or folders holding one: each agent / model / variant group of A against
the same group of B; when the two share no variant and each has exactly one, that one of A
against that one of B). Runs pair by scenario and repeat; a run finished on one side only is
left out. The statistics and verdicts are those of `llmtt.results.comparison`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmtt.errors import LlmttError
from llmtt.results.comparison import ScenarioDesign, compare_runs, shown_end, variant_label
from llmtt.util.atomic import read_json

Row = dict[str, Any]
Group = tuple[str, str | None, str | None]

# The fields of each comparison in `llmtt compare --json` (README documents them).
SCHEMA = 1


@dataclass(frozen=True)
class Pairing:
    """A group of side A against a group of side B (agent, model, variant each)."""

    a: Group
    b: Group


def compare(project: Path, a: str | None = None, b: str | None = None) -> Row:
    """The comparison as data: `{schema, a, b, comparison}`, where `a` and `b` say what each
    side is. Raises LlmttError naming what was expected when A and B are not both result sets
    or both variants, or when nothing pairs."""
    if a is None or b is None:
        report = _current_report(project)
        data = _read_report(report)
        found = data.get("comparison")
        if not found:
            raise LlmttError(
                f"{report} holds no comparison: no scenario ran two variants (or a variant and "
                "the no-guidance control). Set [matrix] variants, or name two variants or two "
                "result sets: llmtt compare A B"
            )
        return {"schema": SCHEMA, "a": "baseline", "b": "treatments", "comparison": found}
    left, right = _result_set(a), _result_set(b)
    min_effect, looks = _min_effect(project), 1
    if left is not None and right is not None:
        rows, designs, notes = _between_sets(left[1], right[1], min_effect)
        said = (f"{a} ({_about(left)})", f"{b} ({_about(right)})")
    elif left is None and right is None:
        report = _current_report(project)
        rows = _variant_rows(a, b, report)
        looks = (_read_report(report).get("comparison") or {}).get("looks", 1)
        notes = []
        designs = {
            scenario: ScenarioDesign(a, "the command line (A)", (b,), min_effect)
            for scenario in _scenarios_with(rows, a, b)
        }
        said = (f"{a} (variant of {report})", f"{b} (variant of {report})")
    else:
        named = a if left is None else b
        raise LlmttError(
            f"compare takes two result sets or two variants; {named!r} is neither a report.json "
            "nor a folder holding one, while the other is a result set: name two report.json "
            "files (or results folders), or two variants of the current results"
        )
    found = compare_runs(rows, designs, looks, notes)
    if found is None or not found["units"]:
        raise LlmttError(
            "nothing to compare: no run of A has a partner in B (same scenario, agent, model and "
            "repeat, and the same variant unless each side has one variant)"
        )
    return {"schema": SCHEMA, "a": said[0], "b": said[1], "comparison": found}


def as_json(found: Row) -> str:
    return json.dumps(found, indent=2, ensure_ascii=False) + "\n"


def _min_effect(project: Path) -> float:
    """[compare] min_effect of the project (the default without one)."""
    from llmtt.spec.config import CompareSpec, load_config

    if not (project / "llmtt.toml").is_file():
        return CompareSpec().min_effect
    return load_config(project)[0].compare.min_effect


def _result_set(source: str) -> tuple[Path, list[Row]] | None:
    """A report.json (or a folder holding one) and its runs; None when `source` is neither."""
    path = Path(source)
    if path.is_dir():
        path = path / "report.json"
        if not path.is_file():
            raise LlmttError(f"{path.parent} holds no report.json: run `doit run` there first")
    if not path.is_file():
        return None
    return path, _read_report(path)["runs"]


def _read_report(path: Path) -> Row:
    if not path.is_file():
        raise LlmttError(f"{path} does not exist: run `doit run` first")
    data = read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("runs"), list):
        raise LlmttError(f"{path}: expected an llmtt report.json (a mapping with a `runs` list)")
    return data


def _about(found: tuple[Path, list[Row]]) -> str:
    path, runs = found
    return f"{len(runs)} runs in {path}"


def _current_report(project: Path) -> Path:
    from llmtt.spec.config import load_config

    config, _ = load_config(project)
    return project / config.paths.results / "report.json"


def _variant_rows(a: str, b: str, report: Path) -> list[Row]:
    if not report.is_file():
        raise LlmttError(
            f"{a!r} and {b!r} are not report.json files or results folders, and {report} does "
            "not exist to find them in as variants: run `doit run` first, or name two result "
            "sets"
        )
    rows: list[Row] = _read_report(report)["runs"]
    known = sorted({variant_label(r) for r in rows})
    for name in (a, b):
        if name not in known:
            raise LlmttError(
                f"{name!r} is not a report.json, a results folder, or a variant of the current "
                f"results ({report}); their variants: {', '.join(known)}"
            )
    if a == b:
        raise LlmttError(f"compare needs two different variants; both are {a!r}")
    return rows


def _scenarios_with(rows: list[Row], a: str, b: str) -> list[str]:
    have: dict[str, set[str]] = {}
    for row in rows:
        have.setdefault(row["scenario"], set()).add(variant_label(row))
    return sorted(s for s, found in have.items() if {a, b} <= found)


def _group(row: Row) -> Group:
    return (str(row["agent"]), row.get("model") or None, row.get("variant") or None)


def _order(group: Group) -> tuple[str, ...]:
    return tuple(part or "" for part in group)


def _label(group: Group) -> str:
    agent, model, variant = group
    return f"{agent} / {model or 'no model'} / {variant or 'no variant'}"


def _between_sets(
    rows_a: list[Row], rows_b: list[Row], min_effect: float
) -> tuple[list[Row], dict[str, ScenarioDesign], list[Row]]:
    """The two sets' runs as one set whose variants are "A" and "B", each pairing of groups its
    own agent (named by both groups); a design per scenario that both sides ran; and a note
    for each group of one side only."""
    rows: list[Row] = []
    pairings = list(_by_group(rows_a, rows_b))
    notes = [
        {"scenario": _label(group), "reason": f"only in {letter}"}
        for letter, source, pick in (("A", rows_a, 0), ("B", rows_b, 1))
        for group in sorted(
            {_group(r) for r in source} - {(p.a, p.b)[pick] for p in pairings}, key=_order
        )
    ]
    for pairing in pairings:
        name = (
            _label(pairing.a)
            if pairing.a == pairing.b
            else (f"{_label(pairing.a)} vs {_label(pairing.b)}")
        )
        for side, source, group in (("A", rows_a, pairing.a), ("B", rows_b, pairing.b)):
            rows += [
                {**r, "agent": name, "model": None, "variant": side}
                for r in source
                if _group(r) == group
            ]
    designs = {
        scenario: ScenarioDesign("A", "the command line (A)", ("B",), min_effect)
        for scenario in _scenarios_with(rows, "A", "B")
    }
    return rows, designs, notes


def _by_group(rows_a: list[Row], rows_b: list[Row]) -> Iterator[Pairing]:
    groups_a, groups_b = {_group(r) for r in rows_a}, {_group(r) for r in rows_b}
    variants_a = {g[2] for g in groups_a}
    variants_b = {g[2] for g in groups_b}
    if not variants_a & variants_b and len(variants_a) == len(variants_b) == 1:
        # One variant each, not the same one: the point of the comparison is the variant.
        for group in sorted(groups_a, key=_order):
            other = (group[0], group[1], next(iter(variants_b)))
            if other in groups_b:
                yield Pairing(group, other)
        return
    for group in sorted(groups_a & groups_b, key=_order):
        yield Pairing(group, group)


def as_text(found: Row) -> str:
    """The comparison as `llmtt compare` prints it: which side is which, then per treatment
    its verdicts and pass-rate difference, per comparison its verdict, and what was left out."""
    c = found["comparison"]
    lines = [f"A = {found['a']}", f"B = {found['b']}"]
    looks = f" and {c['looks']} planned looks" if c["looks"] > 1 else ""
    lines.append(
        f"verdicts hold together at {(1 - c['alpha']) * 100:g}% over {c['family']} "
        f"comparisons{looks} (each interval at {c['level'] * 100:.4g}%)"
    )
    for t in c["treatments"]:
        head = f"{t['treatment']} vs {t['baseline']}" + (
            " (the no-guidance control)" if t["against_control"] else ""
        )
        v = t["verdicts"]
        said = (
            f"better {v['better']}, worse {v['worse']}, no difference {v['no_difference']}, "
            f"can't tell {v['cant_tell']}"
        )
        if "pairs" in t:
            said += (
                f"; {t['pairs']} pairs, pass rate A {t['rate_a']:g} -> B {t['rate_b']:g} "
                f"(B - A {t['difference']:+g}, interval {_ends(t)})"
            )
            if t["verdict"] is not None:
                said += f"; pooled: {_verdict(t['verdict'])}"
        lines.append(f"{head}: {said}")
    lines.append("")
    for u in c["units"]:
        more = f" (about {u['more_pairs']} more pairs)" if u.get("more_pairs") else ""
        where = " / ".join(part for part in (u["scenario"], u["agent"], u["model"]) if part)
        lines.append(
            f"{where}: "
            f"{u['treatment']} vs {u['baseline']}: {_verdict(u['verdict'])}{more}; "
            f"{u['pairs']} pairs, pass rate A {u['rate_a']:g} -> B {u['rate_b']:g} "
            f"(B - A {u['difference']:+g}, interval {_ends(u)}; "
            f"unadjusted p = {u['p_value']:.4g})"
        )
        for name, m in u["metrics"].items():
            if m is None:
                continue
            interval = (
                "too few pairs for an interval"
                if m["low"] is None
                else f"95% interval {m['low']:+g} to {m['high']:+g}"
            )
            lines.append(
                f"  {name}: A {m['a']:g} -> B {m['b']:g} ({m['difference']:+g}, {interval})"
            )
    for n in c["not_compared"]:
        where = " / ".join(part for part in (n["scenario"], n.get("agent"), n.get("model")) if part)
        if "treatment" in n:
            where += f": {n['treatment']} vs {n['baseline']}"
        lines.append(f"{where}: not compared: {n['reason']}")
    return "\n".join(lines) + "\n"


def _ends(found: Row) -> str:
    return f"{shown_end(found['low'], found['min_effect'])} to " + shown_end(
        found["high"], found["min_effect"]
    )


def _verdict(name: str) -> str:
    return {"no_difference": "no difference", "cant_tell": "can't tell"}.get(name, name)
