"""Inline SVG charts for report.html: no scripts, no network, readable without a legend hunt."""

from __future__ import annotations

from html import escape
from typing import Any

from llmtt.results.stats import wilson

WIDTH = 640


def pass_rate_bars(groups: list[dict[str, Any]]) -> str:
    """Horizontal bars of pass rate per group, with 95% Wilson intervals as whiskers."""
    rows = [g for g in groups if (g["passed"] + g["failed"]) > 0]
    if not rows:
        return ""
    label_w, bar_w, row_h = 220, WIDTH - 220 - 60, 26
    height = row_h * len(rows) + 30
    parts = [
        f'<svg class="chart" role="img" aria-label="pass rate by group" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}">'
    ]
    for tick in (0, 0.25, 0.5, 0.75, 1):
        x = label_w + tick * bar_w
        parts.append(f'<line x1="{x:.1f}" y1="0" x2="{x:.1f}" y2="{height - 20}" class="grid"/>')
        parts.append(f'<text x="{x:.1f}" y="{height - 5}" class="tick">{tick:g}</text>')
    for i, g in enumerate(rows):
        y = i * row_h + 4
        n = g["passed"] + g["failed"]
        rate = g["passed"] / n
        label = _label(g)
        parts.append(
            f'<text x="{label_w - 8}" y="{y + 15}" class="label">{escape(_fit(label, 30))}'
            f"<title>{escape(label)}</title></text>"
        )
        parts.append(
            f'<rect x="{label_w}" y="{y}" width="{rate * bar_w:.1f}" height="{row_h - 8}" class="bar"><title>{escape(label)}: {g["passed"]}/{n} passed</title></rect>'
        )
        interval = wilson(g["passed"], n)
        if interval:
            x1, x2 = label_w + interval[0] * bar_w, label_w + interval[1] * bar_w
            mid = y + (row_h - 8) / 2
            parts.append(
                f'<line x1="{x1:.1f}" y1="{mid:.1f}" x2="{x2:.1f}" y2="{mid:.1f}" class="whisker"/>'
            )
        right = max(rate, interval[1] if interval else rate)  # the label clears the whisker
        parts.append(
            f'<text x="{label_w + right * bar_w + 6:.1f}" y="{y + 15}" class="value">{rate:.0%}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def cost_vs_pass(groups: list[dict[str, Any]]) -> str:
    """Each group as a point: mean cost per run (x) against pass rate (y)."""
    points = []
    for g in groups:
        n = g["passed"] + g["failed"]
        if n and g.get("cost_usd") is not None:
            points.append((g["cost_usd"] / max(1, g["runs"]), g["passed"] / n, g))
    if not any(cost > 0 for cost, _, _ in points):
        return ""  # nothing cost anything: a chart would say nothing
    height, left, bottom = 260, 60, 30
    top_cost = max(p[0] for p in points) or 1.0
    plot_w, plot_h = WIDTH - left - 20, height - bottom - 10
    parts = [
        f'<svg class="chart" role="img" aria-label="cost against pass rate" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}">',
        f'<line x1="{left}" y1="{10 + plot_h}" x2="{left + plot_w}" y2="{10 + plot_h}" class="axis"/>',
        f'<line x1="{left}" y1="10" x2="{left}" y2="{10 + plot_h}" class="axis"/>',
        f'<text x="{left + plot_w / 2:.0f}" y="{height - 4}" class="tick">mean cost per run (USD, max {top_cost:.4g})</text>',
        f'<text x="12" y="{10 + plot_h / 2:.0f}" class="tick" transform="rotate(-90 12 {10 + plot_h / 2:.0f})">pass rate</text>',
    ]
    for cost, rate, g in points:
        x = left + (cost / top_cost) * plot_w if top_cost else left
        y = 10 + (1 - rate) * plot_h
        label = _label(g)
        parts.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="6" class="point"><title>{escape(label)}: ${cost:.4f}, {rate:.0%}</title></circle>'
        )
        parts.append(
            f'<text x="{x + 9:.1f}" y="{y + 4:.1f}" class="value">{escape(_fit(label, 40))}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _label(group: dict[str, Any]) -> str:
    """A group's name on a chart: agent / model / variant, leaving out an axis it has not."""
    return " / ".join(p for p in (group["agent"], group["model"], group["variant"]) if p)


def _fit(label: str, chars: int) -> str:
    """The label cut to `chars` characters from its end (where variants differ), marked with
    an ellipsis; the full label is the element's tooltip."""
    return label if len(label) <= chars else "…" + label[-(chars - 1) :]


def trend_line(overall: list[dict[str, Any]], baseline: float | None) -> str:
    """The project's pass rate per invocation as a line, the baseline's as a dashed line."""
    points = [p for p in overall if p["pass_rate"] is not None]
    if len(points) < 2:
        return ""
    height, left, right, top, bottom = 220, 50, 20, 12, 34
    plot_w, plot_h = WIDTH - left - right, height - top - bottom
    step = plot_w / (len(points) - 1)

    def y(rate: float) -> float:
        return top + (1 - rate) * plot_h

    parts = [
        f'<svg class="chart" role="img" aria-label="pass rate per invocation" '
        f'viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}">'
    ]
    for tick in (0, 0.5, 1):
        parts.append(
            f'<line x1="{left}" y1="{y(tick):.1f}" x2="{left + plot_w}" y2="{y(tick):.1f}" '
            f'class="grid"/><text x="{left - 6}" y="{y(tick) + 4:.1f}" class="label">'
            f"{tick:.0%}</text>"
        )
    if baseline is not None:
        parts.append(
            f'<line x1="{left}" y1="{y(baseline):.1f}" x2="{left + plot_w}" '
            f'y2="{y(baseline):.1f}" class="baseline"><title>baseline: {baseline:.0%}</title>'
            f'</line><text x="{left + plot_w}" y="{y(baseline) - 4:.1f}" class="label">'
            f"baseline {baseline:.0%}</text>"
        )
    xy = [(left + i * step, y(p["pass_rate"])) for i, p in enumerate(points)]
    parts.append(
        '<polyline class="trend" points="' + " ".join(f"{a:.1f},{b:.1f}" for a, b in xy) + '"/>'
    )
    for (a, b), p in zip(xy, points, strict=True):
        parts.append(
            f'<circle cx="{a:.1f}" cy="{b:.1f}" r="4" class="point"><title>'
            f"{escape(p['point'])}: {p['passed']}/{p['runs']} passed</title></circle>"
        )
    first, last = escape(points[0]["point"]), escape(points[-1]["point"])
    parts.append(f'<text x="{left}" y="{height - 8}" class="tick">{first}</text>')
    parts.append(
        f'<text x="{left + plot_w}" y="{height - 8}" class="tick" text-anchor="end">{last}</text>'
    )
    parts.append("</svg>")
    return "".join(parts)
