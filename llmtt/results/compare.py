"""`llmtt compare A B`: two result sets, or two variants of the current results, compared run by
run, with which side is A and which is B said before any number.

Pairing. Two result sets (report.json files or folders holding one): each agent / model /
variant group of A against the same group of B; when the two share no variant and each has
exactly one, that one of A against that one of B (guidance-v1 results against guidance-v2
results). Two variants: A against B within each agent / model of the current results. Within a
pair of groups, runs pair by scenario and repeat; a run finished on one side only is left out.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmtt.errors import LlmttError
from llmtt.results.summary import paired_comparison
from llmtt.util.atomic import read_json

Row = dict[str, Any]


@dataclass(frozen=True)
class Side:
    """One side of a comparison: its letter, what the user named, and its runs."""

    letter: str
    label: str
    rows: list[Row]


@dataclass(frozen=True)
class Pairing:
    """A group of side A against a group of side B (agent, model, variant each)."""

    a: tuple[str, str | None, str | None]
    b: tuple[str, str | None, str | None]


def compare(a: str, b: str, project: Path) -> str:
    """The comparison as text. Variants are looked up in the report.json of the project at
    `project`. Raises LlmttError naming what was expected when A and B are not both result
    sets or both variants, or when nothing pairs."""
    left, right = _result_set(a), _result_set(b)
    if left is not None and right is not None:
        sides = (
            Side("A", f"{a} ({_about(left)})", left[1]),
            Side("B", f"{b} ({_about(right)})", right[1]),
        )
        pairings = list(_by_group(sides[0].rows, sides[1].rows))
    elif left is None and right is None:
        report = _current_report(project)
        rows = _variant_rows(a, b, report)
        where = f"variant of {report}"
        sides = (
            Side("A", f"{a} ({where})", [r for r in rows if r.get("variant") == a]),
            Side("B", f"{b} ({where})", [r for r in rows if r.get("variant") == b]),
        )
        pairings = list(_by_variant(sides[0].rows, sides[1].rows, a, b))
    else:
        named = a if left is None else b
        raise LlmttError(
            f"compare takes two result sets or two variants; {named!r} is neither a report.json "
            "nor a folder holding one, while the other is a result set: name two report.json "
            "files (or results folders), or two variants of the current results"
        )
    return _text(sides, pairings)


def _result_set(source: str) -> tuple[Path, list[Row]] | None:
    """A report.json (or a folder holding one) and its runs; None when `source` is neither."""
    path = Path(source)
    if path.is_dir():
        path = path / "report.json"
        if not path.is_file():
            raise LlmttError(f"{path.parent} holds no report.json: run `doit run` there first")
    if not path.is_file():
        return None
    data = read_json(path)
    runs = data.get("runs") if isinstance(data, dict) else None
    if not isinstance(runs, list):
        raise LlmttError(f"{path}: expected an llmtt report.json (a mapping with a `runs` list)")
    return path, runs


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
    rows: list[Row] = read_json(report)["runs"]
    known = sorted({str(r["variant"]) for r in rows if r.get("variant")})
    for name in (a, b):
        if name not in known:
            listed = ", ".join(known) if known else "none (the runs have no variant)"
            raise LlmttError(
                f"{name!r} is not a report.json, a results folder, or a variant of the current "
                f"results ({report}); their variants: {listed}"
            )
    if a == b:
        raise LlmttError(f"compare needs two different variants; both are {a!r}")
    return rows


def _group(row: Row) -> tuple[str, str | None, str | None]:
    return (str(row["agent"]), row.get("model") or None, row.get("variant") or None)


def _order(group: tuple[str, str | None, str | None]) -> tuple[str, ...]:
    return tuple(part or "" for part in group)


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


def _by_variant(rows_a: list[Row], rows_b: list[Row], a: str, b: str) -> Iterator[Pairing]:
    axes_a = {_group(r)[:2] for r in rows_a}
    axes_b = {_group(r)[:2] for r in rows_b}
    for agent, model in sorted(axes_a & axes_b, key=lambda g: (g[0], g[1] or "")):
        yield Pairing((agent, model, a), (agent, model, b))


def _label(group: tuple[str, str | None, str | None]) -> str:
    agent, model, variant = group
    return f"{agent} / {model or 'no model'} / {variant or 'no variant'}"


def _text(sides: tuple[Side, Side], pairings: list[Pairing]) -> str:
    side_a, side_b = sides
    lines = [f"A = {side_a.label}", f"B = {side_b.label}", ""]
    compared = 0
    for pairing in pairings:
        rows = [{**r, "side": "A"} for r in side_a.rows if _group(r) == pairing.a]
        rows += [{**r, "side": "B"} for r in side_b.rows if _group(r) == pairing.b]
        found = paired_comparison(rows, "side", "A", "B", ())
        head = (
            _label(pairing.a)
            if pairing.a == pairing.b
            else f"A {_label(pairing.a)} vs B {_label(pairing.b)}"
        )
        if found is None:
            lines.append(f"{head}: no run finished on both sides (same scenario and repeat)")
            continue
        compared += 1
        lines += _lines(head, found)
    for letter, side, pick in (("A", side_a, 0), ("B", side_b, 1)):
        paired = {(p.a, p.b)[pick] for p in pairings}
        alone = sorted({_group(r) for r in side.rows} - paired, key=_order)
        lines += [f"{_label(g)}: only in {letter}, not compared" for g in alone]
    if not compared:
        raise LlmttError(
            "nothing to compare: no run of A has a partner in B (same agent, model, scenario and "
            "repeat, and the same variant unless each side has one variant)\n" + "\n".join(lines)
        )
    return "\n".join(lines) + "\n"


def _lines(head: str, c: Row) -> list[str]:
    out = [
        f"{head}: {c['pairs']} pairs; pass rate A {c['pass_rate_a']:g} -> B {c['pass_rate_b']:g} "
        f"(B - A {c['difference']:+g}, 95% CI {c['ci_low']:+g} to {c['ci_high']:+g}; "
        f"McNemar p = {c['p_value']:g}; passed in A only {c['a_only']}, in B only "
        f"{c['b_only']})"
    ]
    for name, m in c["metrics"].items():
        delta = "n/a" if m["delta"] is None else f"{m['delta']:+g}"
        out.append(f"  {name}: A {_value(m['a'])} -> B {_value(m['b'])} ({delta})")
    return out


def _value(value: float | None) -> str:
    return "n/a" if value is None else f"{value:g}"
