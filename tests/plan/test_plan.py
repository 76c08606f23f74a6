"""Plan expansion and per-layer keys: each key moves with exactly what its layer depends on."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import GIT_TOML, Project

from llmtt.errors import LlmttError
from llmtt.plan.runs import Plan, build_plan
from llmtt.spec.project import load_project
from llmtt.spec.selection import Selection

SCENARIO = """\
name: demo
tags: [a, b]
tier: 2
description: first description
task: {prompt: Do it.}
fixture: fixtures/f
solution: [git init -q .]
evaluation:
  gates:
    - {type: file_exists, path: .git/HEAD}
"""


def plan(project: Project, **selection: object) -> Plan:
    return build_plan(load_project(project.root), Selection(**selection))  # type: ignore[arg-type]


@pytest.fixture
def demo(project: Project) -> Project:
    project.write("llmtt.toml", GIT_TOML)
    project.write("scenarios/fixtures/f/file.txt", "one\n")
    project.write("scenarios/demo.yaml", SCENARIO)
    return project


def edit(path: Path, old: str, new: str) -> None:
    path.write_text(path.read_text().replace(old, new))


def test_run_ids_and_axes(demo: Project) -> None:
    runs = plan(demo, repeats=2).runs
    assert [r.run_id for r in runs] == ["demo/oracle/r1", "demo/oracle/r2"]
    assert runs[0].model is None  # the oracle ignores the models axis
    assert runs[0].agent_key["repeat"] != runs[1].agent_key["repeat"]


def test_run_ids_are_valid_doit_task_names(demo: Project) -> None:
    # doit refuses task names holding "="; a model name may hold one.
    (run,) = plan(demo, agents=("litellm",), models=("acme/m=1 big",)).runs
    assert run.run_id == "demo/litellm-acme_m_1_big/r1"


@pytest.mark.parametrize(
    ("rel", "old", "new", "agent_part", "eval_changes"),
    [
        ("scenarios/demo.yaml", "Do it.", "Do it now.", "prompt", False),
        ("scenarios/demo.yaml", "git init -q .", "git init .", "solution", False),
        ("scenarios/fixtures/f/file.txt", "one", "two", "fixture", False),
        ("scenarios/demo.yaml", "path: .git/HEAD", "path: .git/config", None, True),
        ("scenarios/demo.yaml", "first description", "second", None, False),
        ("scenarios/demo.yaml", "tier: 2", "tier: 3", None, False),
    ],
)
def test_each_key_moves_with_its_inputs_only(
    demo: Project, rel: str, old: str, new: str, agent_part: str | None, eval_changes: bool
) -> None:
    before = plan(demo).runs[0]
    edit(demo.root / rel, old, new)
    after = plan(demo).runs[0]
    changed = {k for k in before.agent_key if before.agent_key[k] != after.agent_key[k]}
    assert changed == ({agent_part} if agent_part else set())
    assert (before.eval_key != after.eval_key) is eval_changes
    assert before.report_key == after.report_key


def test_template_override_changes_only_the_report_key(demo: Project) -> None:
    before = plan(demo).runs[0]
    demo.write("templates/evaluation.md.j2", "x\n")
    after = plan(demo).runs[0]
    assert before.agent_key == after.agent_key and before.eval_key == after.eval_key
    assert before.report_key != after.report_key


def test_target_version_is_part_of_the_agent_key(demo: Project) -> None:
    before = plan(demo).runs[0]
    edit(
        demo.root / "llmtt.toml",
        'version_command = "git --version"',
        'version_command = "echo 9.9"',
    )
    after = plan(demo).runs[0]
    assert after.target_version == "9.9"
    assert {k for k in before.agent_key if before.agent_key[k] != after.agent_key[k]} == {"target"}


def test_a_target_rebuilt_at_the_same_path_is_probed_again(
    demo: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Versions are cached per binary (path, size, modification time): an upgrade installed
    over the old file is a new version, not the cached one."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    git = bin_dir / "git"
    git.write_text("#!/bin/sh\necho 'git version 98.0'\n")
    git.chmod(0o755)
    assert plan(demo).runs[0].target_version == "git version 98.0"
    assert "git version 98.0" in (demo.results() / ".llmtt-cache/versions.json").read_text()
    git.write_text("#!/bin/sh\necho 'git version 99.10'\n")
    assert plan(demo).runs[0].target_version == "git version 99.10"


def test_failed_version_probe_is_recorded_not_raised(demo: Project) -> None:
    edit(
        demo.root / "llmtt.toml",
        'version_command = "git --version"',
        'version_command = "no-such-tool-xyz --version"',
    )
    run = plan(demo).runs[0]
    assert run.target_version.startswith("error:") and "no-such-tool-xyz" in run.target_version


def test_selection_filters(demo: Project) -> None:
    assert len(plan(demo, tags=("b",)).runs) == 1
    assert len(plan(demo, scenarios=("demo",)).runs) == 1
    # A value that selects nothing is an error naming what there is, never an empty plan.
    with pytest.raises(LlmttError, match=r"tag=zzz: no scenario has this tag \(tags: a, b\)"):
        plan(demo, tags=("zzz",))
    # tier=N is the seed's --tier N: tiers 0 to N; tier=A-B is tiers A to B.
    with pytest.raises(LlmttError, match=r"tier=1: no scenario is of tier 1 or below \(tiers: 2\)"):
        plan(demo, tiers=((0, 1),))
    with pytest.raises(LlmttError, match=r"tier=3-4: no scenario is of a tier from 3 to 4"):
        plan(demo, tiers=((3, 4),))
    assert len(plan(demo, tiers=((0, 2),)).runs) == len(plan(demo).runs)
    assert len(plan(demo, tiers=((2, 2),)).runs) == len(plan(demo).runs)
    with pytest.raises(LlmttError, match="scenario=dmeo: no such scenario; did you mean 'demo'"):
        plan(demo, scenarios=("dmeo",))


def test_unknown_agent_and_agent_without_model_are_clear_errors(demo: Project) -> None:
    with pytest.raises(LlmttError, match="agent=nobody: unknown agent 'nobody' .*oracle"):
        plan(demo, agents=("nobody",))
    with pytest.raises(LlmttError, match="agent=opencod: .*did you mean 'opencode'"):
        plan(demo, agents=("opencod",))


def test_variant_files_change_the_agent_key(demo: Project) -> None:
    demo.write("guides/v1.md", "use git\n")
    edit(
        demo.root / "llmtt.toml",
        "[target]",
        '[variants.v1]\nfiles = { "AGENTS.md" = "guides/v1.md" }\n\n[target]',
    )
    first = plan(demo, variants=("v1",)).runs[0]
    assert first.run_id == "demo/oracle-v1/r1"
    demo.write("guides/v1.md", "use git carefully\n")
    second = plan(demo, variants=("v1",)).runs[0]
    assert first.agent_key["variant"] != second.agent_key["variant"]
    with pytest.raises(LlmttError, match="variant=v2: no \\[variants.v2\\] .*declared: v1, none"):
        plan(demo, variants=("v2",))


def test_settings_only_the_evaluation_reads_move_the_evaluate_key_not_the_agents(
    demo: Project,
) -> None:
    """Editing a `command` agent's transcript marker re-evaluates without paying for the
    agent again; so does upgrading to an llmtt that adds such a setting."""
    table = '\n[agents.oracle]\nargs = ["-x"]\n'
    demo.write("llmtt.toml", GIT_TOML + table)
    before = plan(demo).runs[0]
    demo.write("llmtt.toml", GIT_TOML + table + 'command_marker = "> "\n')
    after = plan(demo).runs[0]
    assert before.agent_key == after.agent_key
    assert before.eval_key["agent_settings"] != after.eval_key["agent_settings"]
    demo.write("llmtt.toml", GIT_TOML + table.replace("-x", "-y"))
    assert plan(demo).runs[0].agent_key["agent"] != before.agent_key["agent"]


OWN_EVALUATOR = """\
from llmtt.evaluation.evaluators.base import EvaluationResult, Evaluator
from plan_helper import WORD


class Own(Evaluator):
    type = "own"

    def evaluate(self, input, criteria):
        return [EvaluationResult(c.name, True, self.type, reasoning=WORD) for c in criteria]
"""


def test_a_project_evaluators_code_moves_the_evaluate_key_of_its_runs_only(
    demo: Project,
) -> None:
    demo.write("llmtt.toml", GIT_TOML + '\n[evaluators]\nown = "plan_own_evaluators:Own"\n')
    demo.write("plan_own_evaluators.py", OWN_EVALUATOR)
    demo.write("plan_helper.py", 'WORD = "one"\n')
    demo.write("unrelated.py", "")
    scored = SCENARIO.replace("name: demo", "name: scored") + (
        "  evaluators:\n    - type: own\n      criteria: [{name: mine, scale: binary}]\n"
    )
    demo.write("scenarios/scored.yaml", scored)
    before = {r.run_id: r for r in plan(demo).runs}
    assert "evaluator_code" in before["scored/oracle/r1"].eval_key
    assert "evaluator_code" not in before["demo/oracle/r1"].eval_key
    demo.write("unrelated.py", "X = 1\n")
    assert {r.run_id: r.eval_key for r in plan(demo).runs} == {
        rid: r.eval_key for rid, r in before.items()
    }
    demo.write("plan_helper.py", 'WORD = "two"\n')
    after = {r.run_id: r for r in plan(demo).runs}
    for rid, run in after.items():
        assert run.agent_key == before[rid].agent_key
    assert after["demo/oracle/r1"].eval_key == before["demo/oracle/r1"].eval_key
    old, new = before["scored/oracle/r1"].eval_key, after["scored/oracle/r1"].eval_key
    assert {k for k in old if old[k] != new[k]} == {"evaluator_code"}
