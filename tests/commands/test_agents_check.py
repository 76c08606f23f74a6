"""`llmtt agents check`: one scripted session (free, offline) through each agent CLI the project
names, its metrics compared with what the pinned versions give. The pinned CLIs keep the
contract; a CLI that prints nothing of what it did does not, and the command says where."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.conftest import BIN, GIT_TOML, Project, cli_project


def _check(project_root: Path, *names: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "llmtt"), "agents", "--project", str(project_root), "check", *names],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_pinned_clis_keep_the_contract(tmp_path: Path) -> None:
    project = cli_project(tmp_path / "p")
    done = _check(project.root)
    assert done.returncode == 0, done.stdout + done.stderr
    for name in ("claude-code", "opencode", "codex"):
        assert f"{name} " in done.stdout and "keeps llmtt's event and metrics contract" in (
            done.stdout
        ), done.stdout


def test_a_cli_that_differs_is_named_with_what_differs(tmp_path: Path) -> None:
    mute = tmp_path / "codex"
    mute.write_text('#!/bin/sh\n[ "$1" = --version ] && echo "codex-cli 9.9.9"\nexit 0\n')
    mute.chmod(0o755)
    project = Project(tmp_path / "p")
    project.write("llmtt.toml", GIT_TOML + f'\n[agents.codex]\nexecutable = "{mute}"\n')
    done = _check(project.root, "codex")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "codex codex-cli 9.9.9: differs from llmtt's contract: outcome fail" in done.stdout
    assert "`llmtt agents install` installs the pinned versions" in done.stdout
