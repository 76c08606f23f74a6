"""Repeats, comparisons, junit.xml and results.db: constructed histories and a real doit run."""

from __future__ import annotations

import json
import sqlite3
from typing import Any
from xml.etree import ElementTree as ET

import pytest
from conftest import GIT_TOML, Project

from llmtt.report.junit import junit
from llmtt.results.summary import comparisons, repeats


def row(
    scenario: str, repeat: int, outcome: str, variant: str | None = None, **metrics: Any
) -> dict[str, Any]:
    return {
        "run_id": f"{scenario}/oracle/r{repeat}",
        "scenario": scenario,
        "agent": "oracle",
        "model": None,
        "variant": variant,
        "repeat": repeat,
        "outcome": outcome,
        "outcome_reason": f"why {repeat}",
        "metrics": metrics,
        "cost_usd": 0.0,
        "duration_secs": 1.0,
    }


def test_repeats_give_pass_at_k_pass_hat_k_flaky_and_standard_errors() -> None:
    rows = [
        row("a", 1, "pass", error_rate=0.0),
        row("a", 2, "fail", error_rate=0.5),
        row("a", 3, "pass", error_rate=0.25),
        row("b", 1, "pass"),
        row("b", 2, "pass"),
        row("b", 3, "pass"),
    ]
    a, b = repeats(rows)
    assert (a["passed"], a["repeats"], a["flaky"], b["flaky"]) == (2, 3, True, False)
    assert a["pass_at_k"] == {"1": pytest.approx(2 / 3, abs=1e-4), "3": 1.0}
    assert a["pass_hat_k"] == {"1": pytest.approx(2 / 3, abs=1e-4), "3": 0.0}
    assert a["error_rate"]["mean"] == 0.25 and a["error_rate"]["se"] == pytest.approx(
        0.1443, abs=1e-4
    )
    assert b["pass_hat_k"]["3"] == 1.0


def test_models_are_compared_pair_by_pair() -> None:
    rows = [{**row("a", k, "fail", error_rate=0.5), "model": "m1"} for k in (1, 2, 3)]
    rows += [{**row("a", k, "pass", error_rate=0.1), "model": "m2"} for k in (1, 2, 3)]
    rows += [{**row("a", 4, "pass"), "model": "m2"}]  # no m1 partner: not paired
    (c,) = comparisons(rows)
    assert (c["axis"], c["a"], c["b"], c["pairs"]) == ("model", "m1", "m2", 3)
    assert (c["pass_rate_a"], c["pass_rate_b"], c["difference"]) == (0.0, 1.0, 1.0)
    assert (c["a_only"], c["b_only"]) == (0, 3)
    # three pairs do not make a certainty: the interval keeps its width and reaches below 0
    assert c["ci_low"] < 0 < c["ci_high"] < 1 or c["ci_low"] < 0 < c["ci_high"] == 1
    assert c["p_value"] > 0.05
    assert c["metrics"]["error_rate"] == {"a": 0.5, "b": 0.1, "delta": -0.4}


def test_junit_has_a_case_per_run_with_failures_and_errors() -> None:
    rows = [row("a", 1, "pass"), row("a", 2, "fail"), row("a", 3, "error")]
    suite = ET.fromstring(junit(rows).split("?>", 1)[1])
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "1", "1")
    cases = suite.findall("testcase")
    assert cases[1].find("failure").get("message") == "why 2"  # type: ignore[union-attr]
    assert cases[2].find("error") is not None and cases[0].find("failure") is None


def test_variants_and_repeats_through_doit(project: Project) -> None:
    project.write("guides/v1.md", "version one\n")
    project.write("guides/v2.md", "version two\n")
    project.write(
        "llmtt.toml",
        GIT_TOML + '\n[variants.v1]\nfiles = { "AGENTS.md" = "guides/v1.md" }\n'
        '\n[variants.v2]\nfiles = { "AGENTS.md" = "guides/v2.md" }\n'
        '\n[matrix]\nvariants = ["v1", "v2"]\nrepeats = 3\n',
    )
    project.write(
        "scenarios/s.yaml",
        "task: {prompt: Read AGENTS.md.}\nsolution: [cat AGENTS.md]\n"
        "evaluation:\n  gates:\n    - {type: file_contains, path: AGENTS.md, substring: two}\n",
    )
    result = project.doit("run", "-n", "2")
    assert result.code == 0, result.out + result.err
    report = project.json("report.json")
    assert len(report["runs"]) == 6
    summary = report["summary"]
    assert (summary["gate_rate"], summary["tool_calls_ok"], summary["tool_call_success_rate"]) == (
        0.5,
        6,
        1.0,
    )
    assert [(c["tag"], c["runs"], c["passed"]) for c in report["categories"]] == [
        ("(untagged)", 6, 3)
    ]
    assert report["comparisons"] == []  # one model: nothing to compare across models
    comparison = report["comparison"]
    assert comparison["baselines"] == {
        "s": {
            "baseline": "v1",
            "named_by": "first of its variants (name one with [compare] baseline)",
            "min_effect": 0.1,
        }
    }
    (unit,) = comparison["units"]
    assert (unit["baseline"], unit["treatment"], unit["pairs"], unit["gains"]) == ("v1", "v2", 3, 3)
    assert (unit["rate_a"], unit["rate_b"], unit["difference"]) == (0.0, 1.0, 1.0)
    assert unit["verdict"] == "cant_tell" and unit["more_pairs"] >= 1  # 3 pairs decide nothing
    text = (project.results() / "report.md").read_text()
    assert text.index("## Compared with the baseline") < text.index("## By category")
    assert "Baseline: **v1** (first of its variants (name one with [compare] baseline))" in text
    assert "| s | oracle / no model | v2 vs v1 | 3 | 0 -> 1 | +1 (" in text
    assert "## Over repeats" in text
    suite = ET.parse(project.results() / "junit.xml").getroot()
    assert suite.get("tests") == "6" and suite.get("failures") == "3"
    lines = (project.results() / "results.jsonl").read_text().splitlines()
    with sqlite3.connect(project.results() / "results.db") as db:
        count, variants = db.execute(
            "SELECT count(*), count(DISTINCT variant) FROM results"
        ).fetchone()
        recorded = db.execute("SELECT record FROM results ORDER BY id LIMIT 1").fetchone()[0]
    assert count == len(lines) == 6 and variants == 2
    assert json.loads(recorded)["run_id"] == json.loads(lines[0])["run_id"]
    assert project.doit("run").executed() == []
