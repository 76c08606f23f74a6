"""A target's env as its processes get it: `${LLMTT_WORKSPACE}` (and the seed's and ax-eval's
names for it) is the workspace of the process it is set for, the setup's and the agent's and each
gate's own copy; `${NAME}` is llmtt's environment's, and one not set stops the run, saying which.
And a project with no target tool at all is refused when it runs, not run measuring nothing."""

from __future__ import annotations

from conftest import GIT_TOML, Project

SCENARIO = """\
task: {prompt: Save the token.}
target:
  binary: mytool
  env:
    STORE: "${AX_EVAL_FIXTURE_DIR}/store"
    HERE: "${LLMTT_WORKSPACE}"
    CALLER_TOKEN: "${LLMTT_TEST_CALLER_TOKEN}"
setup:
  commands: ['test "$STORE" = "$PWD/store" && test "$HERE" = "$PWD"']
solution:
  - test "$STORE" = "$PWD/store" && mkdir -p "$STORE" && echo "$CALLER_TOKEN" > "$STORE/t"
evaluation:
  gates:
    - {type: file_contains, path: store/t, substring: tok-9f3a2c}
    - {type: command_succeeds, command: 'test "$STORE" = "$PWD/store" && test -s "$STORE/t"'}
"""


def test_a_target_env_names_the_workspace_and_the_callers_variables(project: Project) -> None:
    project.write("llmtt.toml", GIT_TOML)
    project.write("scenarios/s.yaml", SCENARIO)
    # The same with git, whose version command ([target]'s) needs the variable too.
    project.write("scenarios/g.yaml", SCENARIO.replace("binary: mytool", "binary: git"))
    unset = project.doit("run")
    assert unset.code != 0
    missing = (
        "target.env CALLER_TOKEN: '${LLMTT_TEST_CALLER_TOKEN}' names the variable "
        "LLMTT_TEST_CALLER_TOKEN, which is not set; set LLMTT_TEST_CALLER_TOKEN where llmtt runs"
    )
    said = project.json("s/oracle/r1/result.json")["outcome_reason"]
    assert said.startswith("run could not be carried out: " + missing), said
    said = project.json("g/oracle/r1/result.json")["outcome_reason"]
    assert said.startswith("run could not be carried out: target version probe cannot run: ")
    assert missing in said
    done = project.doit("run", env={"LLMTT_TEST_CALLER_TOKEN": "tok-9f3a2c"})
    assert done.code == 0, done.out + done.err
    for name in ("s", "g"):
        metrics = project.json(f"{name}/oracle/r1/metrics.json")
        assert metrics["outcome"] == "pass", metrics["outcome_reason"]


def test_a_project_with_no_target_tool_is_refused_when_it_runs(project: Project) -> None:
    project.write("llmtt.toml", "[matrix]\nagents = ['oracle']\n")
    project.write("scenarios/s.yaml", "task: {prompt: x}\nsolution: ['true']\n")
    result = project.doit("run")
    assert result.code == 2
    assert "s.yaml:1: target: no target tool: this scenario has no target" in result.err
    assert not (project.results() / "s").exists()
