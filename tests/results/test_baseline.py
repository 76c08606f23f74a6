"""Baselines, regressions beyond noise, `llmtt check` exit codes and `llmtt compare`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import GIT_TOML, Project

from llmtt.commands.main import main
from llmtt.results.baseline import check_summary, regressions, snapshot
from llmtt.spec.config import RegressionSpec

RULES = RegressionSpec()


def run(
    repeat: int, passed: bool, gates: list[bool], cost: float | None = 0.1, scenario: str = "s"
) -> dict[str, Any]:
    return {
        "run_id": f"{scenario}/a-m/r{repeat}",
        "scenario": scenario,
        "agent": "a",
        "model": "m",
        "variant": None,
        "repeat": repeat,
        "outcome": "pass" if passed else "fail",
        "outcome_reason": "r",
        "cost_usd": cost,
        "gates": [
            {"index": i + 1, "type": "file_exists", "passed": g} for i, g in enumerate(gates)
        ],
    }


def test_no_regression_against_itself() -> None:
    rows = [run(k, True, [True, True]) for k in range(1, 4)]
    assert regressions(rows, snapshot(rows), RULES) == []


def test_score_drop_is_flagged_only_beyond_noise() -> None:
    before = snapshot([run(k, True, [True]) for k in range(1, 6)])
    clear_drop = [run(k, k == 1, [k == 1]) for k in range(1, 6)]  # 1.0 -> 0.2
    kinds = [r["kind"] for r in regressions(clear_drop, before, RULES)]
    assert "score_drop" in kinds
    noisy_before = snapshot([run(k, k <= 3, [True]) for k in range(1, 5)])  # 0.75 over 4 repeats
    noisy_now = [run(k, k <= 2, [True]) for k in range(1, 5)]  # 0.5: within the noise
    assert [
        r for r in regressions(noisy_now, noisy_before, RULES) if r["kind"] == "score_drop"
    ] == []


def test_gate_that_always_passed_and_now_always_fails() -> None:
    before = snapshot([run(k, True, [True, True]) for k in (1, 2)])
    now = [run(k, False, [True, False]) for k in (1, 2)]
    found = [r for r in regressions(now, before, RULES) if r["kind"] == "gate"]
    assert len(found) == 1 and found[0]["message"].startswith(
        "gate 2 (file_exists) passed in every baseline run"
    )
    sometimes = [run(1, False, [True, False]), run(2, True, [True, True])]
    assert [r for r in regressions(sometimes, before, RULES) if r["kind"] == "gate"] == []


def test_cost_increase_over_threshold_and_noise() -> None:
    before = snapshot([run(k, True, [True], cost=0.10) for k in (1, 2, 3)])
    dearer = [run(k, True, [True], cost=0.20) for k in (1, 2, 3)]
    assert [r["kind"] for r in regressions(dearer, before, RULES)] == ["cost"]
    slightly = [run(k, True, [True], cost=0.14) for k in (1, 2, 3)]
    assert regressions(slightly, before, RULES) == []
    loose = RegressionSpec(cost_increase=2.0)
    assert regressions(dearer, before, loose) == []


def test_check_markdown_and_ok() -> None:
    report = {
        "summary": {"runs": 1, "passed": 1, "failed": 0, "errors": 0, "pass_rate": 1.0},
        "runs": [run(1, True, [True])],
        "regressions": [],
    }
    ok, text = check_summary(report)
    assert ok and "Every run passed and nothing regressed." in text
    report["regressions"] = [{"group": "s/a/m/-", "kind": "cost", "message": "mean cost up"}]
    ok, text = check_summary(report)
    assert not ok and "- s / a / m / no variant: mean cost up" in text
    # No baseline group compared: nothing can be said to have regressed (or not).
    report["regressions"] = []
    report["baseline_compared"] = {"compared": 0, "groups": 2, "missing": ["x/a/m/-", "y/a/m/-"]}
    ok, text = check_summary(report)
    assert "Every run passed; none of the baseline's groups was compared." in text
    assert "regressed" not in text


def test_bless_check_and_compare_on_a_real_project(
    project: Project,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    project.write("llmtt.toml", GIT_TOML)
    scenario = "task: {prompt: x}\nsolution: [git init -q .]\nevaluation:\n  gates:\n    - {type: file_exists, path: .git/HEAD}\n"
    project.write("scenarios/s.yaml", scenario)
    assert project.doit("run").code == 0
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert main(["check", str(project.root)]) == 0
    assert "Every run passed" in summary.read_text()
    assert main(["bless", str(project.root)]) == 0
    assert json.loads((project.root / "llmtt-baseline.json").read_text())["groups"]
    # break the scenario: the gate that always passed now fails -> check fails CI
    project.write(
        "scenarios/s.yaml", scenario.replace("solution: [git init -q .]", "solution: ['true']")
    )
    assert project.doit("run").code == 0  # a Fail is a result
    capsys.readouterr()
    assert main(["check", str(project.root)]) == 1
    out = capsys.readouterr().out
    assert "| s/oracle/r1 | fail |" in out and "### Regressions against the baseline" in out
    assert "gate 1 (file_exists) passed in every baseline run" in out
    report_md = (project.results() / "report.md").read_text()
    assert "## Against the baseline (llmtt-baseline.json)" in report_md
    # compare two result sets
    first = tmp_path / "first.json"
    first.write_text(json.dumps({"runs": [run(k, True, [True]) for k in (1, 2)]}))
    second = tmp_path / "second.json"
    second.write_text(json.dumps({"runs": [run(k, False, [False]) for k in (1, 2)]}))
    assert main(["compare", str(first), str(second)]) == 0
    assert "2 pairs, pass rate A 1 -> B 0 (B - A -1" in capsys.readouterr().out
    assert main(["compare", "v1", "v2", "--project", str(project.root)]) == 2


def test_the_baseline_section_says_how_many_groups_it_compared_and_never_no_regression_of_none(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run of other scenarios than the baseline's compares nothing: the reports said "No
    regression beyond noise" all the same (while `llmtt check` failed)."""
    project.write("llmtt.toml", GIT_TOML)
    scenario = "task: {prompt: x}\nsolution: [git init -q .]\nevaluation:\n  gates:\n    - {type: file_exists, path: .git/HEAD}\n"
    for name in ("a", "b"):
        project.write(f"scenarios/{name}.yaml", scenario)
    assert project.doit("run").code == 0
    assert main(["bless", str(project.root)]) == 0
    project.write("scenarios/c.yaml", scenario)

    def said() -> tuple[str, str]:
        md = (project.results() / "report.md").read_text().split("## Against the baseline")[1]
        html = (project.results() / "report.html").read_text()
        return md.split("\n## ")[0], html.split("<h2>Against the baseline</h2>")[1].split("<h2>")[0]

    assert project.doit("run", "scenario=c").code == 0
    missing = ["a/oracle/-/-", "b/oracle/-/-"]
    assert project.json("report.json")["baseline_compared"] == {
        "compared": 0,
        "groups": 2,
        "missing": missing,
    }
    for text in said():
        assert "Compared 0 of 2 baseline groups" in text
        assert "Not compared, for want of a finished run in these results (2): " in text
        assert "a / oracle / no model / no variant, b / oracle / no model / no variant." in text
        assert "Nothing was compared, so whether anything regressed is not known." in text
        assert "No regression" not in text
    capsys.readouterr()
    assert main(["check", str(project.root)]) == 1
    out = capsys.readouterr().out
    assert "Every run passed; none of the baseline's groups was compared." in out
    assert "nothing regressed" not in out

    assert project.doit("run", "scenario=a").code == 0
    assert project.json("report.json")["baseline_compared"]["compared"] == 1
    for text in said():
        assert (
            "Compared 1 of 2 baseline groups. Not compared, for want of a finished run in " in text
        )
        assert "these results (1): b / oracle / no model / no variant." in text
        assert "No regression beyond noise in the groups compared." in text

    assert project.doit("run").code == 0
    assert project.json("report.json")["baseline_compared"] == {
        "compared": 2,
        "groups": 2,
        "missing": [],
    }
    for text in said():
        assert "Compared 2 of 2 baseline groups." in text and "Not compared" not in text
        assert "No regression beyond noise." in text
