"""`llmtt init [--target BINARY]`: a first project in a folder, ready for `doit run`.

It writes llmtt.toml (the target, its `command_pattern` and `version_command`), dodo.py, the
.gitignore lines, a first scenario with a fixture and a reference solution the oracle plays, a
rubric for the judge, and llmtt's own skill (SKILL_PLACES), which teaches the user's coding
agent to write and run llmtt scenarios. The target's `--help` picks the subcommand the first
scenario asks about, so the oracle's solution runs a real command of the user's tool. Nothing
that exists is overwritten without `force`.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from llmtt.errors import LlmttError
from llmtt.lint.helptext import listed_subcommands

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
GITIGNORE = ("llm-tool-test-results/", ".llmtt/", "node_modules/", ".venv/")


@dataclass(frozen=True)
class Scaffold:
    """What `init` wrote, and the subcommand the first scenario uses (None: `--help` only)."""

    written: list[Path]
    subcommand: str | None


# Where the user's own coding agent finds llmtt's skill: claude-code's folder, and the one codex
# and opencode share.
SKILL_PLACES = (".claude/skills", ".agents/skills")


def own_skill() -> str:
    """llmtt's skill (llmtt/skills/llmtt/SKILL.md, shipped with the package)."""
    return (Path(__file__).parents[1] / "skills" / "llmtt" / "SKILL.md").read_text(encoding="utf-8")


def init_project(root: Path, target: str, *, force: bool = False) -> Scaffold:
    """Write the first project into `root` for the CLI `target` (a name on PATH or a path)."""
    name = Path(target).name
    if not _NAME.match(name):
        raise LlmttError(f"--target {target!r}: give the name of the tool's executable")
    found = shutil.which(target)
    if found is None:
        raise LlmttError(
            f"--target {target!r} is not an executable on PATH; install it, or give its path"
        )
    subcommand = pick_subcommand(_help_text(found))
    files = {
        "llmtt.toml": _toml(target, name),
        "dodo.py": "from llmtt.tasks import *  # noqa: F403\n",
        "scenarios/first.yaml": _scenario(target, subcommand),
        "scenarios/fixtures/first/README.md": _readme(name),
        "rubrics/tool-use.yaml": RUBRIC,
        **{f"{place}/llmtt/SKILL.md": own_skill() for place in SKILL_PLACES},
    }
    existing = [rel for rel in files if (root / rel).exists()]
    if existing and not force:
        raise LlmttError(
            f"{root} already has {', '.join(existing)}; nothing was written (use --force to "
            "replace them)"
        )
    written = []
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    written.append(_gitignore(root / ".gitignore"))
    return Scaffold(written, subcommand)


def _help_text(executable: str) -> str:
    """The tool's `--help` (stdout and stderr), or "" when it gives none within 10 s."""
    try:
        done = subprocess.run(
            [executable, "--help"],
            capture_output=True,
            text=True,
            timeout=10,
            stdin=subprocess.DEVNULL,
            errors="replace",
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout + done.stderr


def pick_subcommand(help_text: str) -> str | None:
    """The first subcommand a `--help` lists under a "Commands:" heading (click, cobra and
    clap style), skipping `help`, `completion` and `version`; None when it lists none. (The
    layouts are `llmtt lint`'s, which reads every subcommand.)"""
    listed = listed_subcommands(help_text)
    return listed[0] if listed else None


def _toml(target: str, name: str) -> str:
    pattern = rf"(?<![\w./-]){re.escape(name)}(?![\w./-])(?:\s+([a-z][\w-]*))?"
    return f"""\
# llmtt's project settings; every field: docs/reference.md in llmtt's repository.
[target]
binary = {_quote(target)}
# A target command: the tool's name in command position, then its subcommand (captured).
command_pattern = '{pattern}'
version_command = {_quote(f"{shlex.quote(target)} --version")}

[matrix]
agents = ["oracle"]     # the reference solutions; add claude-code, opencode, codex or litellm
# models = ["scripted"] # the free scripted model plays each solution through a real agent CLI

# [budget]
# max_usd = 5.0         # what one `doit run` may spend on paid models (LLMTT_ENABLED=1 too)
"""


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _scenario(target: str, subcommand: str | None) -> str:
    name = Path(target).name
    if subcommand:
        command = f"{shlex.quote(target)} {subcommand} --help"
        prompt = f"save the help text of its `{subcommand}` command"
        about = f"the `{subcommand}` command of {name}"
    else:
        command, prompt, about = f"{shlex.quote(target)} --help", "save its help text", name
    return f"""\
# A first scenario: the task an agent is given, the workspace it starts from (the fixture),
# the reference solution the oracle plays, and the gates that decide pass or fail.
description: The agent finds how to use {about} from its help.
tags: [first]
task:
  prompt: Using the {name} command-line tool, {prompt} into the file help.txt here.
fixture: fixtures/first
solution:
  - {command} > help.txt
evaluation:
  gates:
    - {{type: file_exists, path: help.txt, description: the help was saved}}
    - {{type: command_succeeds, command: test -s help.txt, description: and it is not empty}}
    - {{type: no_transcript_errors}}
  judge: {{enabled: false, rubric: rubrics/tool-use.yaml, pass_threshold: 0.7}}
run: {{timeout_secs: 300, max_turns: 10}}
"""


def _readme(name: str) -> str:
    return f"""\
# A workspace

The agent starts here. Put what your task needs in this folder (input files, an AGENTS.md
describing how to use `{name}`), and the guidance you want to test.
"""


def _gitignore(path: Path) -> Path:
    """Add llmtt's lines to .gitignore, once."""
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    missing = [line for line in GITIGNORE if line not in lines]
    if missing:
        text = "\n".join([*lines, *missing]) + "\n"
        path.write_text(text, encoding="utf-8")
    return path


RUBRIC = """\
# Criteria for the LLM judge (layer 3); weights sum to 1. Enable the judge in a scenario
# (evaluation.judge.enabled) and name a judge model ([judge] model, or LLMTT_JUDGE).
name: tool-use
criteria:
  - id: command_correctness
    weight: 0.4
    description: Uses valid commands with correct syntax; few invocations fail.
  - id: task_completion
    weight: 0.4
    description: Completes every part of the task as asked.
  - id: documentation_use
    weight: 0.2
    description: Reads the documentation instead of discovering the interface by trial and error.
"""
