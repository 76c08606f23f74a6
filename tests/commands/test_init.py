"""`llmtt init`: from an empty folder to a passing first scenario for the user's own tool, with
`--version`, the subcommand picked from the tool's `--help`, and nothing overwritten."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from conftest import BIN, DOIT

from llmtt import __version__
from llmtt.commands.init import SKILL_PLACES, own_skill, pick_subcommand
from llmtt.spec.skills import read_skill

CLICK = """\
Usage: tool [OPTIONS] COMMAND [ARGS]...

Options:
  --help  Show this message and exit.

Commands:
  query*      Run a query
  add-column  Add a column
"""
COBRA = """\
Usage:
  tool [command]

Available Commands:
  completion  Generate the autocompletion script
  help        Help about any command
  serve       Serve the site
"""
CLAP = """\
Usage: tool <COMMAND>

Commands:
  help   Print this message
  build  Build the project

Options:
  -h, --help  Print help
"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [(CLICK, "query"), (COBRA, "serve"), (CLAP, "build"), ("usage: tool [-h] FILE\n", None)],
)
def test_the_first_real_subcommand_is_picked_from_help(text: str, expected: str | None) -> None:
    assert pick_subcommand(text) == expected


def _llmtt(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "llmtt"), *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_an_empty_folder_gets_a_passing_first_scenario_for_the_users_tool(tmp_path: Path) -> None:
    assert _llmtt("--version", cwd=tmp_path).stdout.strip() == f"llmtt {__version__}"
    tool = str(BIN / "sqlite-utils")  # a real third-party CLI (click), as a user's own tool
    made = _llmtt("init", "--target", tool, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert "asks an agent about its `query` command" in made.stdout
    assert "doit run agent=claude-code model=scripted" in made.stdout
    scenario = (tmp_path / "scenarios/first.yaml").read_text()
    assert f"  - {tool} query --help > help.txt" in scenario
    assert (tmp_path / ".gitignore").read_text().splitlines() == [
        "llm-tool-test-results/",
        ".llmtt/",
        "node_modules/",
        ".venv/",
    ]
    assert _llmtt("validate", cwd=tmp_path).returncode == 0
    run = subprocess.run([DOIT, "run"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "llmtt: 1 runs: 1 passed, 0 failed" in run.stdout
    again = _llmtt("init", "--target", tool, cwd=tmp_path)
    assert again.returncode == 2
    assert "already has llmtt.toml, dodo.py" in again.stderr
    assert "nothing was written" in again.stderr


def test_a_target_that_is_not_installed_is_one_clear_line(tmp_path: Path) -> None:
    done = _llmtt("init", "--target", "no-such-tool-8813", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "llmtt: --target 'no-such-tool-8813' is not an executable on PATH; install it, or give "
        "its path"
    )
    assert list(tmp_path.iterdir()) == []


def test_init_installs_llmtts_skill_whose_examples_validate(tmp_path: Path) -> None:
    """llmtt's own skill goes where the user's coding agent finds it, is a valid skill, and
    what it shows (llmtt.toml, a scenario, variants) is accepted by `llmtt validate`."""
    made = _llmtt("init", "--target", "git", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    copies = [tmp_path / place / "llmtt" for place in SKILL_PLACES]
    skill, problems = read_skill(copies[0])
    assert skill is not None and skill.name == "llmtt", problems
    assert {(c / "SKILL.md").read_text() for c in copies} == {own_skill()}
    blocks = re.findall(r"```(yaml|toml)\n(.*?)```", own_skill(), re.DOTALL)
    (scenario,) = [text for kind, text in blocks if kind == "yaml"]
    tomls = [text for kind, text in blocks if kind == "toml"]
    assert len(tomls) == 2
    project = tmp_path / "shown"
    project.mkdir()
    (project / "llmtt.toml").write_text(tomls[0] + tomls[1])
    for folder in ("scenarios/fixtures/repo", "guides", "skills/mytool"):
        (project / folder).mkdir(parents=True)
    for name in ("v1", "v2"):
        (project / f"guides/AGENTS.{name}.md").write_text("Use mytool.\n")
    (project / "skills/mytool/SKILL.md").write_text(
        "---\nname: mytool\ndescription: Use mytool for its tasks.\n---\nRun mytool.\n"
    )
    (project / "scenarios/branch.yaml").write_text(
        "skill_triggers: {should_trigger: [mytool]}\n" + scenario
    )
    checked = _llmtt("validate", cwd=project)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_agents_install_skill_installs_and_updates_llmtts_skill_only(tmp_path: Path) -> None:
    """`llmtt agents install --skill` writes llmtt's skill where coding agents find it, brings
    an older copy up to date, and installs no CLI (nor takes a CLI's name)."""
    stale = tmp_path / ".agents/skills/llmtt/SKILL.md"
    stale.parent.mkdir(parents=True)
    stale.write_text("an older llmtt's skill\n")
    done = _llmtt("agents", "install", "--skill", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        ".claude/skills/llmtt/SKILL.md: installed",
        ".agents/skills/llmtt/SKILL.md: updated",
    ]
    assert {(tmp_path / p / "llmtt/SKILL.md").read_text() for p in SKILL_PLACES} == {own_skill()}
    again = _llmtt("agents", "install", "--skill", cwd=tmp_path)
    assert again.stdout.count(": up to date") == 2, again.stdout
    refused = _llmtt("agents", "install", "--skill", "codex", cwd=tmp_path)
    assert refused.returncode == 2 and "leave out codex" in refused.stderr, refused.stderr
    assert not (tmp_path / ".llmtt").exists()
