"""The repository's own example suite, run as the README says (`doit run`), in a copy."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from conftest import Project

ROOT = Path(__file__).resolve().parents[1]


def example_copy(tmp_path: Path) -> Path:
    """The example project's own files, copied as a user would have them."""
    copy = tmp_path / "example"
    copy.mkdir()
    for name in ("llmtt.toml", "dodo.py"):
        shutil.copy(ROOT / name, copy / name)
    for folder in ("scenarios", "guides", "skills"):
        shutil.copytree(ROOT / folder, copy / folder)
    return copy


def test_example_suite_passes_except_its_negative_control(tmp_path: Path) -> None:
    copy = example_copy(tmp_path)
    project = Project(copy)
    result = project.doit("run", "-n", "2")
    assert result.code == 0, result.out + result.err
    report = project.json("report.json")
    outcomes = {r["scenario"]: r["outcome"] for r in report["runs"]}
    assert outcomes.pop("negative-control-git-tag") == "fail"
    assert len(outcomes) >= 4 and set(outcomes.values()) == {"pass"}, outcomes
    negative = project.json("negative-control-git-tag/oracle/r1/metrics.json")
    assert "lacks 'v1.0'" in negative["outcome_reason"]
    # the negative control is `expect: fail`: the example suite passes `llmtt check` as it is
    check = subprocess.run(
        [str(Path(sys.executable).parent / "llmtt"), "check", str(copy)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert "(1 failed as expected)" in check.stdout
    # every gate type is used by the suite, against both real CLIs
    gate_types = set()
    targets = set()
    for run in report["runs"]:
        gates = project.json(f"{run['run_id']}/gates.json")["gates"]
        gate_types |= {g["type"] for g in gates}
        targets.add(run["versions"]["target"].split()[0])
    assert len(gate_types) == 10, gate_types
    assert targets == {"git", "sqlite-utils,", "llmtt"}, targets
    # llmtt's own skill: the oracle reaches its model by no gateway, so the trigger gate
    # cannot tell; the scenario its solution wrote validates (in the checks' sandbox)
    wrote = project.json("llmtt-writes-a-scenario/oracle/r1/gates.json")["gates"]
    assert [g["passed"] for g in wrote] == [True, True, True, None], wrote
    assert project.doit("run").executed() == []


def test_example_suite_rehearsed_with_each_real_agent(tmp_path: Path) -> None:
    copy = example_copy(tmp_path)
    (copy / "node_modules").symlink_to(ROOT / "node_modules")  # the pinned CLIs, as set up
    project = Project(copy)
    agents = ("claude-code", "opencode", "codex")
    result = project.doit("run", "-n", "3", f"agent={','.join(agents)}", "model=scripted")
    assert result.code == 0, result.out + result.err
    report = project.json("report.json")
    assert len(report["runs"]) == 3 * len(list((ROOT / "scenarios").glob("*.yaml")))
    for run in report["runs"]:
        expected = "fail" if run["scenario"] == "negative-control-git-tag" else "pass"
        assert run["outcome"] == expected, (run["run_id"], run["outcome_reason"])
        assert run["cost_usd"] == 0.0
    # every CLI was shown llmtt's skill and loaded it before running llmtt
    loaded = {
        (t["agent"], t["skill"]): (t["tp"], t["fn"], t["fp"]) for t in report["skill_triggers"]
    }
    assert loaded == {(a, "llmtt"): (1, 0, 0) for a in agents}, loaded
    for agent in agents:
        metrics = project.json(f"llmtt-writes-a-scenario/{agent}-scripted/r1/metrics.json")
        assert metrics["skill_before_target"] is True, (agent, metrics)


def test_example_with_repeats_and_two_variants_reads_at_a_glance(tmp_path: Path) -> None:
    copy = example_copy(tmp_path)
    project = Project(copy)
    result = project.doit("run", "-n", "2", "repeats=3", "variant=v1,v2")
    assert result.code == 0, result.out + result.err
    report = project.json("report.json")
    scenarios = len(list((ROOT / "scenarios").glob("*.yaml")))
    assert len(report["runs"]) == scenarios * 3 * 2
    (treatment,) = report["comparison"]["treatments"]
    assert (treatment["baseline"], treatment["treatment"]) == ("v1", "v2")
    assert treatment["pairs"] == sum(u["pairs"] for u in report["comparison"]["units"])
    assert treatment["pairs"] == scenarios * 3  # a pair per scenario and repeat, failed or not
    assert report["repeats"] and all(r["pass_at_k"]["3"] is not None for r in report["repeats"])
    html = (project.results() / "report.html").read_text()
    assert "Baseline: <b>v1</b> ([compare] baseline)." in html
    assert "pass@k" in html and 'class="bar"' in html
