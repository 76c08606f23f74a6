"""`llmtt scenarios`, `show`, `clean` and every command's --help, through the real executable."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from conftest import GIT_TOML, Project

from llmtt.spec.selection import VARIABLES

LLMTT = str(Path(sys.executable).parent / "llmtt")
ROOT = Path(__file__).resolve().parents[2]
SCENARIO = """\
description: {about}
tags: [{tags}]
tier: {tier}
task: {{prompt: x}}
solution: [git init -q .]
evaluation:
  gates:
    - {{type: file_exists, path: .git/HEAD}}
"""


def llmtt(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [LLMTT, *args], capture_output=True, text=True, timeout=60, cwd=cwd or ROOT
    )


def two_scenarios(project: Project) -> None:
    project.write("llmtt.toml", GIT_TOML)
    project.write("scenarios/a.yaml", SCENARIO.format(about="first one", tags="smoke", tier=1))
    project.write("scenarios/b.yaml", SCENARIO.format(about="second one", tags="slow", tier=2))


def test_every_help_shows_an_example_and_the_doit_variables_are_listed() -> None:
    top = llmtt("--help")
    assert top.returncode == 0
    commands = ("validate", "scenarios", "show", "clean", "schema", "scripted-server")
    commands += ("estimate", "bless", "check", "compare", "import")
    for name in commands:
        assert name in top.stdout
        done = llmtt(name, "--help")
        assert done.returncode == 0 and "Example: llmtt " + name in done.stdout, done.stdout
    readme = (ROOT / "README.md").read_text()
    for variable in VARIABLES:
        assert f"\n  {variable + '=':<10} " in top.stdout, variable
        assert f"| `{variable}=" in readme, variable


def test_scenarios_lists_and_filters(project: Project) -> None:
    two_scenarios(project)
    done = llmtt("scenarios", str(project.root))
    assert done.returncode == 0, done.stderr
    assert "a  tier 1  expect pass  tags smoke  scenarios/a.yaml\n    first one" in done.stdout
    assert "2 of 2 scenarios" in done.stdout
    only = llmtt("scenarios", str(project.root), "--tags", "slow")
    assert "b  tier 2" in only.stdout and "a  tier 1" not in only.stdout
    # --tier N is the seed's: tiers 0 to N; --tier A-B is tiers A to B.
    assert "1 of 2" in llmtt("scenarios", str(project.root), "--tier", "1").stdout
    assert "2 of 2" in llmtt("scenarios", str(project.root), "--tier", "2").stdout
    assert "b  tier 2" in llmtt("scenarios", str(project.root), "--tier", "2-2").stdout
    assert "1 of 2" in llmtt("scenarios", str(project.root), "--tier", "2-2").stdout
    typo = llmtt("scenarios", str(project.root), "--tag", "smok")
    assert typo.returncode == 2 and "did you mean 'smoke'?" in typo.stderr
    assert len(typo.stderr.splitlines()) == 1, typo.stderr


def test_show_a_scenario_and_a_run(project: Project) -> None:
    two_scenarios(project)
    scenario = llmtt("show", "a", "--project", str(project.root))
    assert scenario.returncode == 0, scenario.stderr
    assert "tags: smoke; tier 1; expect pass" in scenario.stdout
    assert "a/oracle/r1  (agent oracle" in scenario.stdout
    assert "1. file_exists: path=.git/HEAD" in scenario.stdout
    assert "limits: 600 s, 10 turns, cost no limit" in scenario.stdout, scenario.stdout
    pending = llmtt("show", "a/oracle/r1", "--project", str(project.root))
    assert pending.returncode == 0 and "run a/oracle/r1: not run yet" in pending.stdout
    assert project.doit("run").code == 0
    run = llmtt("show", "a/oracle/r1", "--project", str(project.root))
    assert run.returncode == 0, run.stderr
    assert "run a/oracle/r1: pass" in run.stdout and "1. pass file_exists" in run.stdout
    assert "metrics: turns" in run.stdout and "files: " in run.stdout
    unknown = llmtt("show", "a/oracle/r2", "--project", str(project.root))
    assert unknown.returncode == 2 and len(unknown.stderr.splitlines()) == 1
    assert "did you mean 'a/oracle/r1'?" in unknown.stderr
    assert "Traceback" not in unknown.stderr


def test_clean_lists_then_removes_old_runs_and_deleted_scenarios_only(
    project: Project, tmp_path: Path
) -> None:
    two_scenarios(project)
    assert project.doit("run").code == 0
    results = project.results()
    week_ago = time.time() - 8 * 86400
    for path in (results / "a").rglob("*"):
        os.utime(path, (week_ago, week_ago), follow_symlinks=False)
    (project.root / "scenarios/b.yaml").unlink()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    (results / "linked").symlink_to(outside)  # a link out of the results folder is never followed
    dry = llmtt("clean", str(project.root), "--older-than", "7d")
    assert dry.returncode == 0, dry.stderr
    assert "would remove" in dry.stdout and "pass --yes to remove" in dry.stdout
    assert (
        "its scenario no longer exists" in dry.stdout and "last written 8.0 days ago" in dry.stdout
    )
    assert (results / "a/oracle/r1/result.json").exists() and (results / "b").exists()
    done = llmtt("clean", str(project.root), "--older-than", "7d", "--yes")
    assert done.returncode == 0, done.stderr
    assert "freed " in done.stdout and "in 2 folders" in done.stdout
    assert not (results / "a").exists() and not (results / "b").exists()
    assert (outside / "keep.txt").read_text() == "mine" and (results / "linked").is_symlink()
    assert (results / "report.json").exists() and (results / "results.jsonl").exists()
    assert (results / "report-runs/0000.js").exists()  # report.html's, not a scenario's
    assert "nothing to remove" in llmtt("clean", str(project.root), "--yes").stdout
    # a fresh run is kept
    assert project.doit("run").code == 0
    kept = llmtt("clean", str(project.root), "--older-than", "7d", "--yes")
    assert "nothing to remove" in kept.stdout and (results / "a/oracle/r1/result.json").exists()
    bad = llmtt("clean", str(project.root), "--older-than", "7x")
    assert bad.returncode == 2 and "write a whole number" in bad.stderr
