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


# The lines' colours (Tableau 10, its pale yellow and grey left out: too faint on white).
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#59a14f", "#b07aa1", "#76b7b2", "#9c755f", "#d37295")


def history_chart(points: list[str], lines: list[dict[str, Any]]) -> str:
    """Pass rate (y, 0 to 1) per invocation (x, oldest first): a line per agent / model /
    variant through the invocations that evaluated runs of it, its baseline pass rate as a
    dashed line of its colour, and a legend naming each."""
    if len(points) < 2 or not lines:
        return ""
    left, right, top, plot_h = 58, 16, 12, 180
    plot_w = WIDTH - left - right
    legend_top = top + plot_h + 52
    height = legend_top + 18 * len(lines) + 4
    step = plot_w / (len(points) - 1)
    where = {p: i for i, p in enumerate(points)}

    def y(rate: float) -> float:
        return top + (1 - rate) * plot_h

    parts = [
        f'<svg class="chart" role="img" aria-label="pass rate per invocation, a line per agent '
        f'/ model / variant" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}">'
    ]
    for tick in (0, 0.25, 0.5, 0.75, 1):
        parts.append(
            f'<line x1="{left}" y1="{y(tick):.1f}" x2="{left + plot_w}" y2="{y(tick):.1f}" '
            f'class="grid"/><text x="{left - 6}" y="{y(tick) + 4:.1f}" class="label">'
            f"{tick:g}</text>"
        )
    parts += _invocation_axis(points, left, step, top + plot_h)
    parts.append(
        f'<text x="14" y="{top + plot_h / 2:.0f}" class="tick" text-anchor="middle" '
        f'transform="rotate(-90 14 {top + plot_h / 2:.0f})">pass rate</text>'
    )
    for n, line in enumerate(lines):
        colour, label = PALETTE[n % len(PALETTE)], _series_label(line)
        if line["baseline"] is not None:
            at = y(line["baseline"])
            parts.append(
                f'<line x1="{left}" y1="{at:.1f}" x2="{left + plot_w}" y2="{at:.1f}" '
                f'class="baseline" style="stroke: {colour}"><title>{escape(label)}: baseline '
                f"{_rate(line['baseline'])}</title></line>"
            )
        xy = [(left + where[p["point"]] * step, y(p["pass_rate"]), p) for p in line["points"]]
        parts.append(
            f'<polyline class="trend" style="stroke: {colour}" points="'
            + " ".join(f"{a:.1f},{b:.1f}" for a, b, _ in xy)
            + '"/>'
        )
        for a, b, p in xy:
            cost = "" if p["cost_usd"] is None else f", ${p['cost_usd']:.4f}"
            parts.append(
                f'<circle cx="{a:.1f}" cy="{b:.1f}" r="4" class="point" style="fill: {colour}">'
                f"<title>{escape(label)} at {escape(p['point'])}: {p['passed']}/{p['runs']} "
                f"passed ({p['scenarios']} scenario{'s' * (p['scenarios'] != 1)}{cost})</title>"
                "</circle>"
            )
        parts += _legend_row(line, label, colour, left, legend_top + 18 * n)
    parts.append("</svg>")
    return "".join(parts)


def _invocation_axis(points: list[str], left: int, step: float, bottom: float) -> list[str]:
    """The x axis: a mark per invocation, the first and last invocations' names and as many
    others as fit between them, and the axis's title."""
    names = [_fit(p, 22) for p in points]
    last = len(points) - 1
    width = [7 * len(n) for n in names]  # about 7 px a character at 12 px
    ends = left + last * step - width[last]  # where the last name begins
    reached: float = left + width[0]  # where the names placed so far end
    named = {0, last}
    for i in range(1, last):
        x = left + i * step
        if x - width[i] / 2 >= reached + 12 and x + width[i] / 2 <= ends - 12:
            named.add(i)
            reached = x + width[i] / 2
    parts = []
    for i, name in enumerate(names):
        x = left + i * step
        parts.append(
            f'<line x1="{x:.1f}" y1="{bottom}" x2="{x:.1f}" y2="{bottom + 4}" class="axis"/>'
        )
        if i in named:
            anchor = "start" if i == 0 else "end" if i == last else "middle"
            parts.append(
                f'<text x="{x:.1f}" y="{bottom + 17}" class="tick" text-anchor="{anchor}">'
                f"{escape(name)}<title>{escape(points[i])}</title></text>"
            )
    parts.append(
        f'<text x="{left + last * step / 2:.0f}" y="{bottom + 36}" class="tick" '
        'text-anchor="middle">invocation of doit run (oldest to newest)</text>'
    )
    return parts


def _legend_row(line: dict[str, Any], label: str, colour: str, left: int, top: int) -> list[str]:
    """A legend row: the line's colour, its name and its baseline pass rate."""
    said = "no baseline" if line["baseline"] is None else f"baseline {_rate(line['baseline'])}"
    return [
        f'<line x1="{left}" y1="{top + 8}" x2="{left + 22}" y2="{top + 8}" class="trend" '
        f'style="stroke: {colour}"/>',
        f'<circle cx="{left + 11}" cy="{top + 8}" r="4" class="point" style="fill: {colour}"/>',
        f'<text x="{left + 30}" y="{top + 12}" class="legend">{escape(_fit(label, 70))} '
        f"({said})<title>{escape(label)}</title></text>",
    ]


def _series_label(line: dict[str, Any]) -> str:
    """A line's name as the reports word it: agent / model / variant, `no model` and `no
    variant` for an axis left out."""
    return " / ".join((line["agent"], line["model"] or "no model", line["variant"] or "no variant"))


def _rate(rate: float) -> str:
    """A pass rate as the reports' tables show it (to 3 decimals)."""
    return f"{round(rate, 3):g}"
