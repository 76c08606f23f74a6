"""Snapshot of report.md rendered from a fixed data model: a change to the report's look shows
up here as a diff to review (refresh with LLMTT_UPDATE_SNAPSHOTS=1)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from conftest import Project

from llmtt.report.aggregate import report_data
from llmtt.report.render import render
from llmtt.results.comparison import ScenarioDesign, compare_runs
from llmtt.spec.project import load_project

SNAPSHOT = Path(__file__).resolve().parents[1] / "data" / "report.md.snapshot"


def row(
    scenario: str, variant: str, repeat: int, outcome: str, error_rate: float
) -> dict[str, Any]:
    return {
        "run_id": f"{scenario}/claude-code-m-{variant}/r{repeat}",
        "scenario": scenario,
        "agent": "claude-code",
        "model": "m",
        "variant": variant,
        "repeat": repeat,
        "tags": ["git"],
        "outcome": outcome,
        "outcome_reason": "all 2 gates passed"
        if outcome == "pass"
        else "gate 2 (file_exists): a.txt does not exist",
        "gates_passed": 2 if outcome == "pass" else 1,
        "gates_total": 2,
        "metrics": {
            "total_commands": 4,
            "error_count": 1,
            "help_invocations": 1,
            "error_rate": error_rate,
            "first_try_success_rate": 1 - error_rate,
            "unknown_exit_count": 1 if variant == "v1" else 0,
            "tool_calls_ok": 3,
            "tool_calls_error": 1,
            "turns": 5,
            "input_tokens": 1000,
            "output_tokens": 100,
        },
        "cost_usd": 0.01,
        "duration_secs": 2.5,
        "judge": None,
        "isolation": "bwrap",
    }


def test_report_md_matches_its_snapshot(project: Project) -> None:
    project.write("llmtt.toml", '[target]\nbinary = "mytool"\n')
    project.write("scenarios/s.yaml", "task: {prompt: x}\n")
    rows = [row("commit", "v1", k, "fail" if k == 2 else "pass", 0.25) for k in (1, 2, 3)]
    rows += [row("commit", "v2", k, "pass", 0.0) for k in (1, 2, 3)]
    design = ScenarioDesign("v1", "[compare] baseline", ("v2",), 0.1)
    comparison = compare_runs(rows, {"commit": design})
    data = report_data(rows, "repeats=3", "2026-01-01T00:00:00+00:00", comparison)
    text = render(load_project(project.root), "report.md.j2", **data)
    if os.environ.get("LLMTT_UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.write_text(text)
    assert text == SNAPSHOT.read_text()


def test_report_md_says_how_many_runs_ran_unconfined(project: Project) -> None:
    project.write("llmtt.toml", '[target]\nbinary = "mytool"\n')
    project.write("scenarios/s.yaml", "task: {prompt: x}\n")
    rows = [row("commit", "v1", k, "pass", 0.0) for k in (1, 2, 3)]
    rows[0]["isolation"] = "none"
    del rows[1]["isolation"]  # recorded before llmtt confined runs
    data = report_data(rows, "", "2026-01-01T00:00:00+00:00", None)
    text = render(load_project(project.root), "report.md.j2", **data)
    assert "**Unconfined: 2 of the evaluated runs ran without the sandbox**" in text
    assert data["summary"]["unconfined"] == 2


def test_report_md_words_absent_values_and_shows_composite_only_where_defined(
    project: Project,
) -> None:
    project.write("llmtt.toml", '[target]\nbinary = "mytool"\n')
    project.write("scenarios/s.yaml", "task: {prompt: x}\n")
    loaded = load_project(project.root)
    rows = [row("commit", "v1", k, "pass", 0.0) for k in (1, 2)]
    for r in rows:
        r.update(agent="oracle", model=None, variant=None, cost_usd=None)
    plain = render(loaded, "report.md.j2", **report_data(rows, "", "2026-01-01T00:00:00+00:00"))
    assert "| oracle | no model | no variant | 2 | 2 | 0 | 0 |" in plain
    assert "composite" not in plain  # no scenario defines one: no column
    # first-try success, unknown exits beside it, a cost with no known price
    assert "| 1 | 1 | unknown | 2.5 |" in plain
    assert "| - |" not in plain and " -> " not in plain
    rows[0]["metrics"]["composite_score"] = 0.75
    rows[1]["metrics"]["composite_score"] = None
    text = render(loaded, "report.md.j2", **report_data(rows, "", "2026-01-01T00:00:00+00:00"))
    assert "| run | outcome | gates | judge | composite | commands | failed commands |" in text
    assert "| 2/2 | n/a | 0.75 | 4 | 1 |" in text and "| 2/2 | n/a | n/a | 4 | 1 |" in text
