"""report.html's inline SVG charts: what each draws and says, without a browser."""

from __future__ import annotations

import itertools
import re
from typing import Any

from llmtt.report.charts import PALETTE, history_chart


def point(name: str, passed: int, runs: int = 4) -> dict[str, Any]:
    rate = passed / runs
    return {"point": name, "runs": runs, "passed": passed, "pass_rate": rate, "cost_usd": None}


def line(agent: str, points: list[dict[str, Any]], baseline: float | None) -> dict[str, Any]:
    marked = [{**p, "scenarios": 2} for p in points]
    return {"agent": agent, "model": None, "variant": None, "points": marked, "baseline": baseline}


def test_history_chart_has_labelled_axes_a_legend_and_each_lines_baseline() -> None:
    names = [f"2026-11-{day:02d}T10:11:12Z" for day in range(1, 21)]
    lines = [
        line("a", [point(names[0], 4), point(names[5], 2), point(names[19], 3)], 0.75),
        line("b", [point(names[1], 0)], None),
    ]
    svg = history_chart(names, lines)
    assert svg.startswith("<svg") and "<script" not in svg
    assert ">pass rate</text>" in svg and ">invocation of doit run (oldest to newest)<" in svg
    assert [t for t in re.findall(r'class="label">([^<]*)<', svg)] == [
        "0",
        "0.25",
        "0.5",
        "0.75",
        "1",
    ]
    # A mark per invocation; the first and last named, and the names never overlap.
    assert svg.count('class="axis"') == 20
    named = re.findall(
        r'<text x="([\d.]+)" y="[\d.]+" class="tick" text-anchor="(\w+)">([^<]*)<title>', svg
    )
    assert named[0][1:] == ("start", names[0]) and named[-1][1:] == ("end", names[-1])
    assert len(named) > 2  # some between them fit
    spans = []
    for x, anchor, text in named:
        width, at = 7 * len(text), float(x)
        start = at if anchor == "start" else at - width if anchor == "end" else at - width / 2
        spans.append((start, start + width))
    assert all(a[1] < b[0] for a, b in itertools.pairwise(spans)), spans
    # Each line in its colour, through its own points only; its baseline dashed in its colour.
    assert re.findall(r'<polyline class="trend" style="stroke: (#\w+)" points="([^"]*)"', svg) == [
        (PALETTE[0], "58.0,12.0 206.9,102.0 624.0,57.0"),
        (PALETTE[1], "87.8,192.0"),
    ]
    assert (
        svg.count('class="baseline"') == 1
        and f'class="baseline" style="stroke: {PALETTE[0]}"' in svg
    )
    assert "a / no model / no variant (baseline 0.75)" in svg
    assert "b / no model / no variant (no baseline)" in svg
    assert f"a / no model / no variant at {names[5]}: 2/4 passed (2 scenarios)" in svg


def test_history_chart_needs_two_invocations_and_a_line() -> None:
    assert history_chart(["v1"], [line("a", [point("v1", 1)], None)]) == ""
    assert history_chart(["v1", "v2"], []) == ""
