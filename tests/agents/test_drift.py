"""A CLI other than the pinned one is said, in the run and every report: its events and metrics
are not what the contract tests proved. A wrapper reports another version and runs the pinned
claude-code against the scripted model."""

from __future__ import annotations

from pathlib import Path

from llmtt.agents.registry import agent_class
from llmtt.spec.config import AgentSettings
from tests.conftest import _CLI_BIN, GIT_TOML, Project


def test_only_a_version_other_than_the_pinned_one_is_drift(tmp_path: Path) -> None:
    agent = agent_class("claude-code")(AgentSettings(), tmp_path)
    pinned = agent.package.rpartition("@")[2]
    assert agent.drift(f"{pinned} (Claude Code)") is None
    assert agent.drift("not installed") is None  # nothing known to compare
    said = agent.drift("2.0.0 (Claude Code)")
    assert said is not None and "2.0.0 (Claude Code) is not the version llmtt pins" in said
    assert "llmtt agents install claude-code" in said


def test_a_run_with_another_cli_version_says_so_in_its_reason_and_the_reports(
    tmp_path: Path,
) -> None:
    wrapper = tmp_path / "claude-2.0.0"
    wrapper.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = --version ]; then echo "2.0.0 (Claude Code)"; exit 0; fi\n'
        f'exec "{_CLI_BIN / "claude"}" "$@"\n'
    )
    wrapper.chmod(0o755)
    project = Project(tmp_path / "p")
    # Unconfined: the sandbox would show the wrapper's folder, not the CLI it starts.
    project.write(
        "llmtt.toml",
        GIT_TOML
        + f'\n[agents.claude-code]\nexecutable = "{wrapper}"\n\n[isolation]\nmode = "none"\n',
    )
    project.write(
        "scenarios/s.yaml",
        "task: {prompt: Make a repository.}\nsolution: ['git init -q .']\n"
        "evaluation: {gates: [{type: file_exists, path: .git/HEAD}]}\n",
    )
    result = project.doit("run", "agent=claude-code", "model=scripted")
    assert result.code == 0, result.out + result.err
    record = project.json("s/claude-code-scripted/r1/result.json")
    assert record["outcome"] == "pass"
    assert (
        "warning: claude-code 2.0.0 (Claude Code) is not the version llmtt pins"
        in (record["outcome_reason"])
    )
    for name in ("report.md", "report.html"):
        assert "is not the version llmtt pins" in (project.results() / name).read_text(), name
