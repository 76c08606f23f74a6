"""Environment variables a project is written with: the seed's `LLM_TOOL_TEST_*` names for
llmtt's own, `${...}` in a target's env, and what a target names (its own tool, or none)."""

from __future__ import annotations

import pytest
from conftest import GIT_TOML, Project

from llmtt.errors import ConfigError, LlmttError
from llmtt.plan.runs import build_plan
from llmtt.spec.config import TargetSpec
from llmtt.spec.project import load_project
from llmtt.spec.selection import Selection
from llmtt.spec.variables import apply_seed_names, expand_env, reference_problem


def test_the_seeds_names_stand_for_llmtts_own_which_win_when_both_differ() -> None:
    environ = {
        "LLM_TOOL_TEST_ENABLED": "1",
        "LLM_TOOL_TEST_BUDGET_USD": "5.00",
        "LLM_TOOL_TEST_TOOL": "opencode",
        "LLM_TOOL_TEST_JUDGE": "gpt-4o-mini",
        "LLMTT_JUDGE": "haiku",
        "LLMTT_BUDGET_USD": "5.00",
    }
    warnings = apply_seed_names(environ)
    assert environ["LLMTT_ENABLED"] == "1" and environ["LLMTT_AGENTS"] == "opencode"
    assert environ["LLMTT_JUDGE"] == "haiku" and environ["LLMTT_BUDGET_USD"] == "5.00"
    assert warnings == [
        "LLM_TOOL_TEST_JUDGE='gpt-4o-mini' and LLMTT_JUDGE='haiku' differ: llmtt's own "
        "LLMTT_JUDGE is used"
    ]
    assert apply_seed_names(environ) == warnings  # said again, changed nothing
    assert apply_seed_names({}) == []


def test_references_in_a_target_env() -> None:
    env = {
        "STORE": "${AX_EVAL_FIXTURE_DIR}/.qipu",
        "ROOT": "${LLMTT_WORKSPACE}",
        "SEED": "${LLM_TOOL_TEST_FIXTURE_DIR}",
        "OUT": "${AX_EVAL_RESULTS_DIR}/x.json",
        "TOKEN": "${MYTOOL_AUTH_TOKEN}",
        "NAMED": "${env:MYTOOL_AUTH_TOKEN}",
        "PLAIN": "$HOME and $${KEPT} as written",
    }
    got = expand_env(env, workspace="/w", run_dir="/r", environ={"MYTOOL_AUTH_TOKEN": "t0k"})
    assert got == {
        "STORE": "/w/.qipu",
        "ROOT": "/w",
        "SEED": "/w",
        "OUT": "/r/x.json",
        "TOKEN": "t0k",
        "NAMED": "t0k",
        "PLAIN": "$HOME and ${KEPT} as written",
    }
    with pytest.raises(LlmttError, match=r"target.env TOKEN: '\$\{MYTOOL_AUTH_TOKEN\}' names the"):
        expand_env(env, workspace="/w", run_dir="/r", environ={})
    kept = expand_env({"T": "${NOPE}"}, workspace="", run_dir="", environ={}, strict=False)
    assert kept == {"T": "${NOPE}"}
    assert reference_problem("${two words}") is not None
    assert reference_problem("x ${open") is not None
    assert reference_problem("$${open") is None


def test_a_malformed_reference_is_a_located_load_error(project: Project) -> None:
    project.write("llmtt.toml", GIT_TOML)
    project.write("scenarios/s.yaml", "task: {prompt: x}\ntarget:\n  env: {A: '${a b}'}\n")
    with pytest.raises(ConfigError) as caught:
        load_project(project.root)
    assert "s.yaml:3: target.env: A: `${a b}` is not a variable reference" in str(caught.value)


def test_an_unset_variable_is_a_warning_of_validate(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LLMTT_TEST_NOT_SET", raising=False)
    project.write("llmtt.toml", GIT_TOML)
    project.write(
        "scenarios/s.yaml", "task: {prompt: x}\ntarget:\n  env:\n    T: ${LLMTT_TEST_NOT_SET}\n"
    )
    warnings = [str(w) for w in load_project(project.root).warnings]
    assert any(
        "s.yaml:4: target.env.T: names the variable LLMTT_TEST_NOT_SET, which is not set" in w
        for w in warnings
    ), warnings


@pytest.mark.parametrize(
    ("toml", "scenario", "why"),
    [
        ("", "", "this scenario has no target and llmtt.toml's [target] names no binary"),
        ("[targets.x]\nenv = {A = 'b'}\n", "target: x\n", "[targets.x] in llmtt.toml names no"),
        ("", "target: {env: {A: b}}\n", "neither this scenario's target nor llmtt.toml's"),
    ],
)
def test_a_project_with_no_target_tool_is_refused(
    project: Project, toml: str, scenario: str, why: str
) -> None:
    project.write("llmtt.toml", toml)
    project.write("scenarios/s.yaml", "task: {prompt: x}\n" + scenario)
    with pytest.raises(ConfigError) as caught:
        load_project(project.root)
    said = str(caught.value)
    assert f"target: no target tool: {why}" in said and "none of the agent's commands" in said


def test_a_scenarios_own_tool_takes_nothing_of_the_projects() -> None:
    git = TargetSpec(
        binary="git",
        command_pattern="git (x)",
        version_command="git --version",
        health_check="git --version",
        env={"A": "1"},
    )
    other = git.merged(TargetSpec(binary="taskmgr", env={"B": "2"}))
    assert other.binary == "taskmgr" and other.env == {"A": "1", "B": "2"}
    assert other.version_command is None and other.command_pattern is None
    assert other.health_check is None
    same = git.merged(TargetSpec(binary="/usr/bin/git"))
    assert same.version_command == "git --version" and same.command_pattern == "git (x)"
    bare = TargetSpec(version_command="v").merged(TargetSpec(binary="t"))
    assert bare.version_command == "v"  # a target without a binary describes no tool


def test_a_scenario_with_its_own_target_is_keyed_on_its_own_version(project: Project) -> None:
    project.write("llmtt.toml", GIT_TOML)
    project.write("scenarios/g.yaml", "task: {prompt: x}\n")
    project.write("scenarios/t.yaml", "task: {prompt: x}\ntarget: {binary: taskmgr}\n")
    project.write(
        "scenarios/v.yaml",
        "task: {prompt: x}\ntarget: {binary: python3, version_command: python3 --version}\n",
    )
    runs = {r.scenario.name: r for r in build_plan(load_project(project.root), Selection()).runs}
    assert runs["g"].target_version.startswith("git version")
    assert runs["t"].target_version == "unversioned"
    assert runs["v"].target_version.startswith("Python 3")
    assert runs["t"].agent_key["target"] != runs["g"].agent_key["target"]
