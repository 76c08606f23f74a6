"""Target commands inside shell lines (docs/metrics.md, "Target commands"), case by case."""

from __future__ import annotations

import dataclasses
import textwrap
import time
from pathlib import Path

import pytest

from llmtt.errors import ConfigError
from llmtt.evaluation.shell.lexer import ShellSyntaxError
from llmtt.evaluation.shell.parser import parse
from llmtt.evaluation.shell.target_commands import TargetMatcher, matcher_for, target_commands
from llmtt.spec.project import load_project

GIT = TargetMatcher("git")
# tests/conftest.py's pattern: the user's override, applied to each segment in command position
USER = TargetMatcher("git", r"(?<![\w./-])git(?![\w./-])(?:\s+([a-z][\w-]*))?")


def segments(line: str, matcher: TargetMatcher = GIT) -> list[tuple[str, str | None]]:
    return [(c.normalised, c.subcommand) for c in target_commands(line, 0, matcher)]


def exits(line: str, code: int | None) -> list[int | None]:
    return [c.exit_code for c in target_commands(line, code, GIT)]


def helps(line: str, matcher: TargetMatcher = GIT) -> list[bool]:
    return [c.help for c in target_commands(line, 0, matcher)]


SEGMENTS = [
    # DESIGN.md's examples
    ("git status && git log", [("git status", "status"), ("git log", "log")]),
    ('echo "git is great"', []),
    ("cat .git/HEAD", []),
    ("grep git file", []),
    ("ls mygit", []),
    # every operator
    ("git a || git b", [("git a", "a"), ("git b", "b")]),
    ("git a; git b", [("git a", "a"), ("git b", "b")]),
    ("git a;git b&&git c", [("git a", "a"), ("git b", "b"), ("git c", "c")]),
    ("git a | git b", [("git a", "a"), ("git b", "b")]),
    ("git a |& git b", [("git a", "a"), ("git b", "b")]),
    ("git a & git b", [("git a", "a"), ("git b", "b")]),
    ("git a\ngit b\n", [("git a", "a"), ("git b", "b")]),
    ("git a &&\n  git b", [("git a", "a"), ("git b", "b")]),
    # quotes and escapes hold operators and the binary's name as text
    ('git commit -m "a && git b; c | d"', [('git commit -m "a && git b; c | d"', "commit")]),
    ("git commit -m 'x || git y' && echo ok", [("git commit -m 'x || git y'", "commit")]),
    (
        "git log --format=$'%h;\\t%s' ; git status",
        [("git log --format=$'%h;\\t%s'", "log"), ("git status", "status")],
    ),
    ('echo "it\'s" \\&\\& git push', []),
    ("echo a \\; git push", []),
    ('echo "$(echo ")")"; git tag', [("git tag", "tag")]),
    # comments
    ("git status # && git log", [("git status", "status")]),
    ("echo '#' && git log  # git push", [("git log", "log")]),
    ("echo a#b; git gc", [("git gc", "gc")]),
    # subshells and groups, nested
    ("(cd repo && (git status; (git log)))", [("git status", "status"), ("git log", "log")]),
    (
        "{ git add .; git commit -m x; } > log.txt",
        [("git add .", "add"), ("git commit -m x", "commit")],
    ),
    # command and process substitution
    ('echo "$(git rev-parse HEAD)"', [("git rev-parse HEAD", "rev-parse")]),
    ("echo `git describe --tags`", [("git describe --tags", "describe")]),
    ("sha=$(git log -1 --format=%H)", [("git log -1 --format=%H", "log")]),
    ("echo $(echo $(git status -s))", [("git status -s", "status")]),
    ("diff <(git show a:f) <(git show b:f)", [("git show a:f", "show"), ("git show b:f", "show")]),
    (
        'git commit -m "$(git log -1 --format=%s)"',
        [
            ('git commit -m "$(git log -1 --format=%s)"', "commit"),
            ("git log -1 --format=%s", "log"),
        ],
    ),
    ("echo $((1 + 2)); git gc", [("git gc", "gc")]),
    ("arr=(a $(git x) 'c d'); git y", [("git x", "x"), ("git y", "y")]),
    # heredoc bodies are not commands
    (
        "cat > notes.md <<'EOF'\ngit status && git log\nEOF\ngit add notes.md",
        [("git add notes.md", "add")],
    ),
    ("cat <<-EOF\n\tgit x\n\tEOF\ngit y", [("git y", "y")]),
    ('cat <<A <<"B"\ngit a\nA\ngit b\nB\ngit c', [("git c", "c")]),
    ("x=$(cat <<EOF\ngit x\nEOF\n); git y", [("git y", "y")]),
    (
        "git hash-object --stdin <<< 'git log'",
        [("git hash-object --stdin <<< 'git log'", "hash-object")],
    ),
    # assignments and wrappers in command position
    ("GIT_PAGER=cat git log", [("GIT_PAGER=cat git log", "log")]),
    ("A=1 B='x y' git status", [("A=1 B='x y' git status", "status")]),
    ("env GIT_DIR=.git -u HOME git status", [("env GIT_DIR=.git -u HOME git status", "status")]),
    ("time git status", [("git status", "status")]),
    ("command git status", [("command git status", "status")]),
    ("nohup git gc &", [("nohup git gc", "gc")]),
    ("sudo -u bob -E git status", [("sudo -u bob -E git status", "status")]),
    ("timeout -s KILL 10 git fetch", [("timeout -s KILL 10 git fetch", "fetch")]),
    ("nice -n 5 git gc", [("nice -n 5 git gc", "gc")]),
    (
        "git ls-files | xargs -n 1 git add",
        [("git ls-files", "ls-files"), ("xargs -n 1 git add", "add")],
    ),
    ("exec git status", [("exec git status", "status")]),
    ("command -v git", []),
    ("env", []),
    ("timeout 5", []),
    ("echo git; printf git", []),
    # paths to the binary, and lookalikes
    ("./bin/git status", [("./bin/git status", "status")]),
    ("/usr/bin/git log && ../git x", [("/usr/bin/git log", "log"), ("../git x", "x")]),
    ("mygit status; git.sh status; gitk", []),
    ("'git' status", [("'git' status", "status")]),
    ("$GIT status", []),
    # the default subcommand: first word that is not an option or a git option's value
    ("git -C dir status", [("git -C dir status", "status")]),
    ("git -c user.name=x commit -m y", [("git -c user.name=x commit -m y", "commit")]),
    ("git --git-dir .git --no-pager log", [("git --git-dir .git --no-pager log", "log")]),
    ("git --version", [("git --version", None)]),
    ("git", [("git", None)]),
    ("git ./path", [("git ./path", None)]),
    # reserved words: conditions and bodies are commands too
    (
        "if git diff --quiet; then echo same; else git status; fi",
        [("git diff --quiet", "diff"), ("git status", "status")],
    ),
    ("while ! git fetch; do sleep 1; done", [("git fetch", "fetch")]),
    ('for f in *.md; do git add "$f"; done', [('git add "$f"', "add")]),
    ("for f in $(git ls-files); do echo $f; done", [("git ls-files", "ls-files")]),
    ("for ((i = 0; i < 2; i++)); do git gc; done", [("git gc", "gc")]),
    (
        "case $1 in s|st) git status;; (l) git log;; esac",
        [("git status", "status"), ("git log", "log")],
    ),
    ("f() { git status; }; f", [("git status", "status")]),
    ("function g { git log; }", [("git log", "log")]),
    ("[[ -d .git && -f x ]] && git status", [("git status", "status")]),
    ("(( n > 1 )) && git log", [("git log", "log")]),
    # a shell's -c string is a line of its own
    ("bash -lc 'git init && git add .'", [("git init", "init"), ("git add .", "add")]),
    ('sh -c "git status"', [("git status", "status")]),
    ("bash script.sh git", []),
    # line continuation
    ("git commit \\\n  -m x", [("git commit -m x", "commit")]),
]


@pytest.mark.parametrize(("line", "expected"), SEGMENTS, ids=[c[0][:40] for c in SEGMENTS])
def test_target_commands_in_command_position(
    line: str, expected: list[tuple[str, str | None]]
) -> None:
    assert segments(line) == expected


EXITS = [
    ("git a", 0, [0]),
    ("git a", 137, [137]),  # a death by signal 9 is just an exit code here
    ("git a", None, [None]),
    ("git a && git b", 0, [0, 0]),  # an && chain that exited 0 ran every link, each with 0
    ("git a && git b", 1, [None, None]),  # either may have failed
    ("git a && git b && git c", 0, [0, 0, 0]),
    ("git a; git b", 0, [None, 0]),
    ("git a; git b", 1, [None, 1]),
    ("git a || git b", 1, [None, 1]),  # both ran and failed; the last with this code
    ("git a || git b", 0, [None, None]),  # either succeeded
    ("git a && git b || git c", 0, [None, None, None]),
    ("git a | git b", 1, [None, 1]),
    ("git frobnicate | head", 0, [None]),  # the issue: not a success
    ("git a &", 0, [None]),
    ("git a & git b", 2, [None, 2]),
    ("git a\ngit b", 3, [None, 3]),
    ("(git a && git b)", 0, [0, 0]),
    ("{ git a; git b; }", 5, [None, 5]),
    ("cd x && git a", 0, [0]),
    ("cd x && git a", 128, [None]),
    ("! git diff --quiet", 1, [0]),
    ("! git diff --quiet", 0, [None]),
    ("set -o pipefail; git a | git b", 0, [0, 0]),
    ("set -o pipefail; git a | git b", 1, [None, None]),
    ("set -euo pipefail\ngit a\ngit b", 1, [None, None]),  # errexit: any of them may have ended it
    ("set -e; git a; git b", 0, [None, 0]),
    ("git a; exit 3", 3, [None]),
    ("true || exit 0\ngit a", 0, [None]),
    ("source venv/bin/activate && git a", 0, [None]),
    ("f() { :; }; git a", 0, [None]),
    ("exec git a", 0, [None]),
    ("git a > out.txt", 1, [None]),  # the file may be what failed
    ("git a > out.txt", 2, [2]),
    ("git a > /dev/null 2>&1", 1, [1]),
    ("echo $(git a)", 0, [None]),
    ("git a $(git b)", 0, [0, None]),
    ("timeout 5 git a", 124, [None]),
    ("timeout 5 git a", 3, [3]),
    ("sudo git a", 1, [None]),
    ("sudo git a", 0, [0]),
    ("env X=1 git a", 125, [None]),
    ("env X=1 git a", 1, [1]),
    ("time git a", 2, [2]),
    ("printf 'a\\n' | xargs git add", 0, [None]),
    ("bash -c 'git a && git b'", 0, [0, 0]),
    ("bash -c 'git a; git b'", 1, [None, 1]),
    ("bash -ec 'git a; git b'", 1, [None, None]),
    ("if git a; then git b; fi", 0, [None, None]),
    ("for x in 1; do git a; done", 0, [None]),
    ('git a "unbalanced', 0, [None]),
]


@pytest.mark.parametrize(
    ("line", "code", "expected"), EXITS, ids=[f"{c[0][:30]}={c[1]}" for c in EXITS]
)
def test_exit_codes_are_attributed_only_where_certain(
    line: str, code: int | None, expected: list[int | None]
) -> None:
    assert exits(line, code) == expected


HELP = [
    ("git status && git commit -h", [False, True]),
    ("git help commit", [True]),
    ("git commit --help", [True]),
    ("git --help", [True]),
    ("git -C repo help log", [True]),
    ("git status && ls -h", [False]),
    ("git commit -m x | grep -h y", [False]),
    ("git log -- -h", [False]),
    ("echo --help; git status", [False]),
]


@pytest.mark.parametrize(("line", "expected"), HELP, ids=[c[0] for c in HELP])
def test_help_is_detected_per_segment(line: str, expected: list[bool]) -> None:
    assert helps(line) == expected


USER_PATTERN = [
    (USER, "git status && git log", [("git status", "status"), ("git log", "log")]),
    (USER, 'echo "git is great" && cat .git/HEAD', []),
    (USER, "./bin/git status", [("./bin/git status", "status")]),  # from the last component
    (USER, "git -C dir status", [("git -C dir status", None)]),  # group 1 did not take part
    (USER, "GIT_PAGER=cat git log", [("GIT_PAGER=cat git log", "log")]),
    # the pattern replaces the binary, segment by segment
    (
        TargetMatcher("mytool", r"python3? -m mytool\s+(\w+)"),
        "python -m mytool build && mytool test && python -m other x",
        [("python -m mytool build", "build")],
    ),
    (TargetMatcher(None, r"mytool\b"), "mytool  build; echo mytool", [("mytool build", None)]),
    (TargetMatcher(None, r"sudo mytool (\w+)"), "sudo mytool up", [("sudo mytool up", "up")]),
]


@pytest.mark.parametrize(
    ("matcher", "line", "expected"), USER_PATTERN, ids=[c[1] for c in USER_PATTERN]
)
def test_command_pattern_is_matched_per_segment_at_the_command_word(
    matcher: TargetMatcher, line: str, expected: list[tuple[str, str | None]]
) -> None:
    assert segments(line, matcher) == expected


def test_help_subcommand_from_the_users_capture_group() -> None:
    assert helps("git help && git status", USER) == [True, False]


UNPARSEABLE = [
    ('git commit -m "fix && git log', [('git commit -m "fix', "commit"), ("git log", "log")]),
    ("echo 'it''s && git push", [("git push", "push")]),
    ("git status )", [("git status )", "status")]),
    ("git log $(", [("git log $(", "log")]),
    ("git status;; git log", [("git status", "status"), ("git log", "log")]),
    ("( " * 200 + "git status" + " )" * 200, [("( " * 200 + "git status" + " )" * 200, "status")]),
    ("echo " + "$(" * 60 + "git status" + ")" * 60, []),
]


@pytest.mark.parametrize(("line", "expected"), UNPARSEABLE, ids=[c[0][:30] for c in UNPARSEABLE])
def test_an_unparseable_line_falls_back_to_a_rough_split_with_unknown_exits(
    line: str, expected: list[tuple[str, str | None]]
) -> None:
    with pytest.raises(ShellSyntaxError):
        parse(line)
    found = target_commands(line, 0, GIT)
    assert [(c.normalised, c.subcommand) for c in found] == expected
    assert all(c.exit_code is None for c in found)


def test_target_commands_keep_the_whole_line() -> None:
    line = "cd repo && git status"
    (found,) = target_commands(line, 0, GIT)
    assert (found.command, found.line) == ("git status", line)


def test_a_catastrophic_command_pattern_is_stopped_and_located(tmp_path: Path) -> None:
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "llmtt.toml").write_text(
        textwrap.dedent(
            """\
            [target]
            binary = "a"
            command_pattern = '(a|aa)+$'
            """
        )
    )
    (tmp_path / "scenarios" / "s.yaml").write_text("task:\n  prompt: p\n")
    project = load_project(tmp_path)
    matcher = matcher_for(project, project.scenarios[0])
    assert matcher is not None
    matcher = dataclasses.replace(matcher, timeout_secs=0.2)
    began = time.monotonic()
    with pytest.raises(ConfigError) as caught:
        target_commands("ls && " + "a" * 40 + "!", 0, matcher)
    assert time.monotonic() - began < 5
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / 'llmtt.toml'}:3: target.command_pattern: ")
    assert "took longer than 0.2 s" in message and "rewrite it" in message


def test_a_scenarios_own_pattern_is_located_in_the_scenario(tmp_path: Path) -> None:
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "llmtt.toml").write_text('[target]\nbinary = "git"\n')
    scenario = tmp_path / "scenarios" / "s.yaml"
    scenario.write_text("task:\n  prompt: p\ntarget:\n  command_pattern: 'x(y)'\n")
    project = load_project(tmp_path)
    matcher = matcher_for(project, project.scenarios[0])
    assert matcher is not None
    assert (matcher.pattern, matcher.origin, matcher.origin_line) == ("x(y)", scenario, 4)
    assert matcher.binary == "git"
