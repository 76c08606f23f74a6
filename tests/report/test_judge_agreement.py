"""The reports' judge agreement from hand-written rows: the 2x2 table, kappa per agent and
model, alpha across judge samples, the warning beside the judge's pass rate, and why agreement
cannot be measured under [judge] when = "gates_pass"."""

from __future__ import annotations

from typing import Any

from conftest import Project

from llmtt.report.aggregate import _html, _Joined, report_data
from llmtt.report.judge_agreement import MIN_GROUP_RUNS, judge_agreement
from llmtt.report.render import render
from llmtt.results.trends import history
from llmtt.spec.project import load_project


def row(
    k: int,
    gates: bool,
    judge: bool | None,
    *,
    agent: str = "claude-code",
    samples: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A carried-out run whose gates passed or not and whose judge said `judge` (None: not
    asked)."""
    verdict = gates and judge is not False
    r: dict[str, Any] = {
        "run_id": f"s/{agent}-m/r{k}",
        "scenario": "s",
        "agent": agent,
        "model": "m",
        "variant": None,
        "repeat": k,
        "tags": [],
        "outcome": "pass" if verdict else "fail",
        "outcome_reason": "",
        "gates_passed": 2 if gates else 1,
        "gates_total": 2,
        "metrics": {},
        "cost_usd": None,
        "duration_secs": 1.0,
        "judge": None
        if judge is None
        else {
            "model": "j",
            "weighted_score": 0.9 if judge else 0.2,
            "passed": judge,
            "error": None,
        },
        "isolation": "bwrap",
    }
    if samples is not None:
        r["judge"]["samples"] = samples
    return r


def test_kappa_table_per_group_and_the_low_agreement_warning(project: Project) -> None:
    # claude-code: the judge agrees with the gates on 10 of 12 runs; codex: 12 runs where the
    # judge passes everything, whatever the gates say.
    rows = [row(k, k < 6, k < 5 or k == 7) for k in range(12)]
    rows += [row(k, k % 2 == 0, True, agent="codex") for k in range(12)]
    rows.append(row(99, True, None))  # not asked: no judge verdict
    error = row(98, False, False)
    error["judge"]["error"] = "malformed answer twice"
    rows.append(error)
    found = judge_agreement(rows, "always")
    assert found is not None
    overall = found["overall"]
    assert (overall["runs"], found["judged"], found["judge_passed"]) == (24, 24, 18)
    assert (overall["both_pass"], overall["gates_pass_judge_fail"]) == (11, 1)
    assert (overall["gates_fail_judge_pass"], overall["both_fail"]) == (7, 5)
    # observed 16/24; margins gates 12/24, judge 18/24: expected 0.5, kappa 1/3
    assert overall["observed"] == round(16 / 24, 4) and overall["kappa"] == round(1 / 3, 4)
    by_agent = {g["agent"]: g for g in found["groups"]}
    # claude-code: 10/12 observed, margins 6/12 and 6/12: kappa (10/12 - 1/2) / (1/2) = 2/3.
    assert by_agent["claude-code"]["kappa"] == round(2 / 3, 4)
    assert by_agent["codex"]["kappa"] == 0  # a judge that always passes tells nothing
    assert len(found["warnings"]) == 2 and "codex / m" in found["warnings"][1]
    assert found["alpha"] is None  # one sample per run

    project.write("llmtt.toml", '[target]\nbinary = "mytool"\n')
    loaded = load_project(project.root)
    data = report_data(rows, "", "2026-01-01T00:00:00+00:00")
    data["judge_agreement"] = found
    text = render(loaded, "report.md.j2", **data)
    assert "The judge passed 18 of the 24 runs it gave a verdict on (pass rate 0.75). " in text
    assert "**Warning: low agreement** (overall: judge–gate kappa 0.33 is below 0.4; " in text
    assert "| all | all | 24 | 11 | 1 | 7 | 5 | 0.667 | 0.333 |" in text
    assert "| claude-code | m | 12 | 5 | 1 | 1 | 5 | 0.833 | 0.667 |" in text
    trend = {**history(project.root / "none.db", None), "chart": ""}
    html = _html(
        loaded, data, {}, _Joined([], lambda r, d: ""), trend, {"chunk_runs": 100, "chunks": []}
    )
    assert 'id="judge-agreement"' in html and "Warning: low agreement" in html


def test_small_groups_are_left_out_and_samples_give_alpha() -> None:
    rows = []
    for k in range(MIN_GROUP_RUNS - 1):
        passed = k % 3 != 0
        samples = [
            {"model": "j", "weighted_score": 0.8 if passed else 0.3, "passed": passed},
            {"model": "j", "weighted_score": 0.7 if passed else 0.4, "passed": passed},
            # a second judge model that always passes
            {"model": "k", "weighted_score": 0.9, "passed": True},
        ]
        rows.append(row(k, passed, passed, samples=samples))
    found = judge_agreement(rows, "always")
    assert found is not None and found["groups"] == []
    assert found["overall"]["kappa"] == 1.0
    alpha = found["alpha"]
    assert (alpha["runs"], alpha["raters"]) == (MIN_GROUP_RUNS - 1, 3)
    assert alpha["nominal"]["alpha"] is not None and alpha["nominal"]["alpha"] < 0.667
    assert any("nominal alpha" in w for w in found["warnings"])


def test_one_gate_verdict_gives_no_kappa_and_few_runs_no_warning() -> None:
    """Every run's gates passed (or failed) under when = "always": kappa is 0 by construction,
    so none is given, with why, and no warning; a low kappa over fewer than MIN_GROUP_RUNS
    runs warns of nothing."""
    for gates in (True, False):
        rows = [row(k, gates, k != 0) for k in range(12)]
        found = judge_agreement(rows, "always")
        assert found is not None and found["warnings"] == []
        for entry in [found["overall"], *found["groups"]]:
            assert entry["kappa"] is None and entry["runs"] == 12
            said = "passed" if gates else "failed"
            assert entry["kappa_note"].startswith(f"every run's gates {said}, so kappa would")
    few = [row(k, k % 2 == 0, True) for k in range(MIN_GROUP_RUNS - 1)]
    found = judge_agreement(few, "always")
    assert found is not None and found["overall"]["kappa"] == 0 and found["warnings"] == []


def test_gates_pass_says_how_to_measure_agreement(project: Project) -> None:
    """Under the default the judge sees only runs whose gates passed: kappa would be 0 or
    undefined by construction, and the report says what to change instead of showing it."""
    rows = [row(k, True, k != 0) for k in range(5)] + [row(9, False, None)]
    found = judge_agreement(rows, "gates_pass")
    assert found is not None
    assert found["overall"]["kappa"] is None
    assert 'set [judge] when = "always" to measure agreement' in found["overall"]["kappa_note"]
    assert found["warnings"] == []
    assert judge_agreement(rows, None) is None  # no run has a judge: no section
    none = judge_agreement([row(9, False, None)], "gates_pass")
    assert none is not None and none["overall"]["runs"] == 0
    project.write("llmtt.toml", '[target]\nbinary = "mytool"\n')
    data = report_data([row(9, False, None)], "", "2026-01-01T00:00:00+00:00")
    data["judge_agreement"] = none
    text = render(load_project(project.root), "report.md.j2", **data)
    assert "Agreement with the gates cannot be measured: the judge is asked only" in text
