"""Shared fixtures: real temporary llmtt projects driven by the real `doit`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

BIN = Path(sys.executable).parent
DOIT = str(BIN / "doit")

GIT_TOML = """\
[target]
binary = "git"
command_pattern = '(?<![\\w./-])git(?![\\w./-])(?:\\s+([a-z][\\w-]*))?'
version_command = "git --version"
env.GIT_AUTHOR_NAME = "t"
env.GIT_AUTHOR_EMAIL = "t@example.invalid"
env.GIT_COMMITTER_NAME = "t"
env.GIT_COMMITTER_EMAIL = "t@example.invalid"
"""


@dataclass
class DoitResult:
    """One `doit` invocation."""

    code: int
    out: str
    err: str

    def executed(self) -> list[str]:
        """Tasks doit executed (`.  name` lines)."""
        return [line[3:].strip() for line in self.out.splitlines() if line.startswith(".  ")]


class Project:
    """A temporary llmtt project on disk."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "scenarios").mkdir(parents=True, exist_ok=True)
        (root / "dodo.py").write_text("from llmtt.tasks import *  # noqa: F403\n")

    def write(self, rel: str, text: str) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
        return path

    def doit(
        self, *args: str, timeout: float = 300, env: dict[str, str] | None = None
    ) -> DoitResult:
        base = {k: v for k, v in os.environ.items() if not k.startswith("LLMTT_")}
        env = {**base, **(env or {})}
        proc = subprocess.run(
            [DOIT, *args], cwd=self.root, capture_output=True, text=True, timeout=timeout, env=env
        )
        return DoitResult(proc.returncode, proc.stdout, proc.stderr)

    def results(self) -> Path:
        return self.root / "llm-tool-test-results"

    def json(self, rel: str) -> Any:
        return json.loads((self.results() / rel).read_text())


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path / "proj")
