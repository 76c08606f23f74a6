"""The issue's 'done when': a bare folder (llmtt.toml, two-line dodo.py, one git scenario) whose
oracle solution includes a failing command and a --help gives metrics.json figures equal to the
DESIGN.md definitions, and a second `doit run` executes nothing."""

from __future__ import annotations

from conftest import GIT_TOML, Project


def test_git_oracle_metrics_are_exact(project: Project) -> None:
    project.root.mkdir(parents=True, exist_ok=True)
    (project.root / "dodo.py").write_text(
        "# llmtt's tasks\nfrom llmtt.tasks import *  # noqa: F403\n"
    )
    project.write("llmtt.toml", GIT_TOML)
    project.write(
        "scenarios/git-basics.yaml",
        """\
        task:
          prompt: Make this a repository with one commit of a.txt.
        setup:
          commands: ["echo a > a.txt"]
        solution:
          - git --help
          - git init -q .
          - git comit -m one
          - git add a.txt
          - git commit -q -m one
          - git  add a.txt
          - git status --short
          - git commit -q -m two
          - echo done
        evaluation:
          gates:
            - {type: command_succeeds, command: git rev-parse --verify HEAD}
            - {type: no_transcript_errors}
        """,
    )
    first = project.doit("run")
    assert first.code == 0, first.out + first.err
    m = project.json("git-basics/oracle/r1/metrics.json")
    # 8 target commands (echo is not one). Failures: `comit` (git: not a git command, exit 1)
    # and the second commit (nothing to commit, exit 1).
    expected = {
        "total_commands": 8,
        "unique_commands": 7,  # `git  add a.txt` normalises to the earlier `git add a.txt`
        "error_count": 2,
        "unknown_exit_count": 0,
        "retry_count": 1,
        "retry_rate": 0.125,
        # the 2nd `commit` follows a successful commit: not a retry after failure; nor is the
        # first commit (its subcommand `commit` never failed before; `comit` is another one)
        "retries_after_failure": 0,
        "help_invocations": 1,
        "first_try_success_rate": 0.75,  # 6 successes, none after a failure, of 8
        "iteration_ratio": 0.875,
        "error_rate": 0.25,
        "completed": True,
        "turns": 0,
        "tool_calls": 9,
        "tool_calls_ok": 7,
        "tool_calls_error": 2,
        "input_tokens": 0,
        "output_tokens": 0,
        "cost_usd": 0.0,
        "natural_stop": True,
        "by_subcommand": {
            "(none)": {"count": 1, "errors": 0, "help": 1, "retries": 0},
            "add": {"count": 2, "errors": 0, "help": 0, "retries": 0},
            "comit": {"count": 1, "errors": 1, "help": 0, "retries": 0},
            "commit": {"count": 2, "errors": 1, "help": 0, "retries": 0},
            "init": {"count": 1, "errors": 0, "help": 0, "retries": 0},
            "status": {"count": 1, "errors": 0, "help": 0, "retries": 0},
        },
        "outcome": "fail",
    }
    assert {k: m[k] for k in expected} == expected
    assert m["outcome_reason"].startswith(
        "gate 2 (no_transcript_errors): 2 target command(s) failed"
    )
    assert m["gates_passed"] == 1 and m["gates_total"] == 2
    assert m["duration_secs"] > 0
    events = (project.results() / "git-basics/oracle/r1/events.jsonl").read_text()
    assert '"exit_code": 1' in events
    assert project.doit("run").executed() == []
