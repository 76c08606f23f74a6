"""`llmtt lint`'s readings without a process: the help layouts, the options a help names, the
examples and usage lines, the guidance's blocks and mentions, and leakage on hand-made
scenarios."""

from __future__ import annotations

import pytest
from conftest import GIT_TOML, Project

from llmtt.errors import ConfigError
from llmtt.evaluation.shell.target_commands import TargetMatcher
from llmtt.lint import guidance, helptext
from llmtt.lint.leakage import leaks
from llmtt.spec.config import TargetSpec
from llmtt.spec.project import load_project

GIT = """\
usage: git [-v | --version] [-h | --help] [-C <path>] [-c <name>=<value>]
           <command> [<args>]

These are common Git commands used in various situations:

start a working area (see also: git help tutorial)
   clone     Clone a repository into a new directory
   init      Create an empty Git repository or reinitialize an existing one

examine the history and state (see also: git help revisions)
   log       Show commit logs
   status    Show the working tree status
"""
ARGPARSE = """\
usage: tool [-h] {init,run,help} ...

positional arguments:
  {init,run,help}
    init          make one
    run           run it
"""
POSITIONAL = """\
usage: tool [-h] project

positional arguments:
  project     (default: .)
"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (GIT, ["clone", "init", "log", "status"]),
        (ARGPARSE, ["init", "run"]),
        (POSITIONAL, []),
        ("Commands:\n  query*  Run\n  help  Help\n  insert  Add rows\n", ["query", "insert"]),
    ],
)
def test_the_subcommands_of_each_help_layout(text: str, expected: list[str]) -> None:
    assert helptext.subcommands(text) == expected


def test_options_examples_machine_output_and_required_arguments() -> None:
    text = "usage: git commit [-a] [--[no-]status] [-m <msg>]\n    --porcelain   machine\n"
    assert {"-a", "--status", "--no-status", "-m", "--porcelain"} <= helptext.options(text)
    assert helptext.has_machine_output(text)
    assert not helptext.has_machine_output("Options:\n  --loud  louder\n")
    assert helptext.has_example("Examples:\n  tool x\n")
    assert helptext.has_example("  $ tool run --fast\n")
    assert not helptext.has_example("Usage: tool run [OPTIONS]\n")
    assert helptext.requires_argument("Usage: tool add [OPTIONS] PATH\n", ["tool", "add"])
    assert helptext.requires_argument(
        "usage: git add [<options>] [--] <pathspec>...", ["git", "add"]
    )
    assert not helptext.requires_argument("Usage: tool ls [OPTIONS] [PATH]\n", ["tool", "ls"])
    # a usage line of another command says nothing about this one
    assert not helptext.requires_argument("Usage: tool rm PATH\n", ["tool", "add"])
    assert helptext.approximate_tokens("x" * 400) == 100


AGENTS = """\
# Guide

Use `git status --porcelain`, never `git frobnicate`.

```console
$ git log --oneline --bogus
abc123 first
```

```bash skip
git push --everything
```

```python
git = "not a command here"
```
"""


def test_blocks_console_prompts_skips_and_mentions() -> None:
    found = guidance.blocks(AGENTS)
    assert [(b.language, b.runs, b.start) for b in found] == [
        ("console", True, 5),
        ("bash", False, 10),
        ("python", False, 14),
    ]
    assert found[0].lines == ((6, "git log --oneline --bogus"),)  # the output line is not run
    matcher = TargetMatcher.of(TargetSpec(binary="git"))
    assert matcher is not None
    helps = {None: {"--version"}, "status": {"--porcelain"}, "log": {"--oneline"}, "push": set()}
    mentions = guidance.mention_findings(
        AGENTS,
        "AGENTS.md",
        matcher,
        lambda sub: sub in helps,
        lambda sub: helps.get(sub, set()),
        True,
    )
    assert sorted((f.check, f.line, f.message.split(",")[0]) for f in mentions) == [
        ("unknown-command", 3, "names `git frobnicate`"),
        ("unknown-flag", 6, "uses --bogus"),
        ("unknown-flag", 11, "uses --everything"),  # read, though not run
    ]


def _scenario(project: Project, name: str, body: str) -> None:
    project.write(f"scenarios/{name}.yaml", body)


def test_leakage_on_hand_made_scenarios(project: Project) -> None:
    project.write("llmtt.toml", GIT_TOML)
    _scenario(
        project,
        "leaky",
        """\
        task: {prompt: "Commit so that `git log` shows 'initial import of data'; write out.txt"}
        solution: [git commit -qm 'initial import of data']
        evaluation:
          gates:
            - {type: command_output_contains, command: git log, substring: initial import of data}
            - {type: file_exists, path: out.txt}
            - {type: check, check: "stdout_contains:SECRET-ANSWER"}
            - {type: command_output_contains, command: echo 1, substring: "1"}
        """,
    )
    _scenario(
        project,
        "clean",
        """\
        task: {prompt: Make a first commit of the files here.}
        solution: [git add -A && git commit -qm first]
        evaluation:
          gates:
            - {type: command_succeeds, command: git rev-parse HEAD}
            - {type: file_contains, path: notes/a.txt, substring: hello there}
        """,
    )
    loaded = load_project(project.root)
    leaky, clean = loaded.scenario("leaky"), loaded.scenario("clean")
    found = leaks(leaky, {"AGENTS.md": "the answer is SECRET-ANSWER"}, project.root)
    assert sorted((f.check, f.line, f.message) for f in found) == [
        (
            "leak-path",
            6,
            "gate 2 (file_exists) looks for path 'out.txt', which the prompt holds verbatim",
        ),
        (
            "leak-text",
            5,
            "gate 1 (command_output_contains) looks for text 'initial import of data', which "
            "the prompt holds verbatim",
        ),
        (
            "leak-text",
            7,
            "gate 3 (check) looks for text 'SECRET-ANSWER', which guidance AGENTS.md holds "
            "verbatim",
        ),
    ]
    assert all(f.file == "scenarios/leaky.yaml" for f in found)
    assert leaks(clean, {"AGENTS.md": "Commit with git."}, project.root) == []
    # the solution itself, word for word in the guidance
    said = leaks(clean, {"AGENTS.md": "run: git add -A && git commit -qm first"}, project.root)
    assert [(f.check, f.line) for f in said] == [("leak-solution", 2)]


def test_split_is_tune_or_holdout_and_a_wrong_one_is_located(project: Project) -> None:
    project.write("llmtt.toml", GIT_TOML)
    _scenario(project, "a", "task: {prompt: x}\nsplit: holdout\n")
    _scenario(project, "b", "task: {prompt: x}\n")
    loaded = load_project(project.root)
    assert [(s.name, s.spec.split) for s in loaded.scenarios] == [("a", "holdout"), ("b", "tune")]
    _scenario(project, "b", "task: {prompt: x}\n\nsplit: test\n")
    with pytest.raises(ConfigError) as caught:
        load_project(project.root)
    message = str(caught.value)
    assert "b.yaml" in message and ":3" in message and "split" in message
    assert "'tune' or 'holdout'" in message


def test_no_target_is_an_error_naming_the_field(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    from llmtt.commands.main import main

    project.write("llmtt.toml", "")
    _scenario(project, "a", "task: {prompt: x}\n")
    assert main(["lint", str(project.root)]) == 2
    assert "set [target] binary" in capsys.readouterr().err


def test_a_target_that_is_not_installed_is_an_error_naming_it(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    from llmtt.commands.main import main

    project.write("llmtt.toml", '[target]\nbinary = "no-such-tool-here"\n')
    assert main(["lint", str(project.root)]) == 2
    err = capsys.readouterr().err
    assert "'no-such-tool-here' is not an executable on PATH" in err and "[target] binary" in err
