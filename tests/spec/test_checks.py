"""bashkit-eval's check strings: parsed with clear errors, judged as bashkit-eval judges them
(the last call's exit code, any call's output, every call's stderr, the workspace as the VFS
root, a line of a file, at least / at most N calls), and "cannot tell" (None) where the run's
record does not hold the answer."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import GIT_TOML, Project

from llmtt.spec.checks import Call, Check, parse_check, run_check


def _search(pattern: str, text: str) -> bool | str:
    import re

    return re.search(pattern, text, re.MULTILINE) is not None


def _read(workspace: Path, rel: str) -> tuple[Path | None, str]:
    path = workspace / rel
    return (path, "") if path.is_file() else (None, f"{rel} does not exist")


def _contains(path: Path, text: str) -> bool:
    return text in path.read_text()


def judge(check: str, calls: list[Call], workspace: Path) -> tuple[bool, str]:
    return run_check(parse_check(check), calls, workspace, _search, _read, _contains)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("exit_code:0", Check("exit_code", number=0)),
        ("exit_code:-1", Check("exit_code", number=-1)),
        ("stdout_contains:a:b c", Check("stdout_contains", text="a:b c")),
        ("stderr_empty", Check("stderr_empty")),
        ("file_exists:/out/a.txt", Check("file_exists", path="out/a.txt")),
        ("dir_exists:/data/", Check("dir_exists", path="data")),
        ("file_contains:/r.csv:x,y:z", Check("file_contains", path="r.csv", text="x,y:z")),
        (
            "file_line_regex:/data/e.csv:^(?:a|b),c:d$",
            Check("file_line_regex", path="data/e.csv", text="^(?:a|b),c:d$"),
        ),
        ("tool_calls_max:3", Check("tool_calls_max", number=3)),
        ("llm_judge:Is it tidy?", Check("llm_judge", text="Is it tidy?")),
    ],
)
def test_checks_parse(text: str, expected: Check) -> None:
    assert parse_check(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("stdout_has:x", "unknown check kind 'stdout_has' (known: exit_code, stdout_contains"),
        ("exit_code", "exit_code needs an argument: exit_code:N"),
        ("exit_code:zero", "exit_code takes a whole number, not 'zero'"),
        ("tool_calls_min:-2", "tool_calls_min takes a number >= 0, not -2"),
        ("file_contains:/a.txt", "file_contains needs a path and a text"),
        ("file_line_regex:/a.csv", "file_line_regex needs a path and a pattern"),
        ("file_line_regex:/a.csv:(", "file_line_regex pattern '(' does not compile"),
        ("file_line_regex:/etc/../..:x", "must name something inside the workspace"),
        ("file_exists:/../etc/passwd", "must name something inside the workspace"),
        ("file_exists:/", "must name something inside the workspace"),
        ("stdout_regex:(", "stdout_regex pattern '(' does not compile"),
        ("stderr_empty:x", "stderr_empty takes no argument"),
    ],
)
def test_bad_checks_say_what_is_expected(text: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_check(text)
    assert message in str(caught.value)


CALLS = [
    Call("hello\n", 0, ""),
    Call("cat: x: No such file\n", 1, "cat: x: No such file\n"),
    Call("total 3\n", 0, ""),
]


@pytest.mark.parametrize(
    ("check", "calls", "passed", "detail"),
    [
        ("exit_code:0", CALLS, True, "the last tool call exited 0"),
        ("exit_code:1", CALLS, False, "the last tool call exited 0"),
        ("exit_code:1", CALLS[:2], True, "the last tool call exited 1"),
        ("exit_code:0", [], False, "no tool call was made"),
        ("exit_code:0", [Call("x", None)], None, "the last tool call's exit code is unknown"),
        ("stdout_contains:hello", CALLS, True, "1 of 3 tool call outputs contain 'hello'"),
        ("stdout_contains:bye", CALLS, False, "0 of 3 tool call outputs contain 'bye'"),
        ("stdout_regex:^total \\d+$", CALLS, True, "tool call 3's output matches /^total \\d+$/"),
        ("stderr_empty", CALLS, False, "1 of 3 tool calls wrote to stderr"),
        ("stderr_empty", [CALLS[0], CALLS[2]], True, "0 of 2 tool calls wrote to stderr"),
        (
            "stderr_empty",
            [Call("x", 0), Call("y", 0, "")],
            None,
            "1 of 2 tool call(s) without a separate stderr (the agent reports stdout and "
            "stderr as one output)",
        ),
        # A call known to have written to stderr settles it, whatever the others kept.
        ("stderr_empty", [Call("x", 0), CALLS[1]], False, "1 of 2 tool calls wrote to stderr"),
        ("tool_calls_min:3", CALLS, True, "3 tool call(s); at least 3 expected"),
        ("tool_calls_max:2", CALLS, False, "3 tool call(s); at most 2 expected"),
    ],
)
def test_trace_checks(
    tmp_path: Path, check: str, calls: list[Call], passed: bool, detail: str
) -> None:
    assert judge(check, calls, tmp_path) == (passed, detail)


def test_file_checks_read_the_workspace_as_the_root(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "a.txt").write_text("alpha beta\n")
    outside = tmp_path.parent / "outside-dir"
    outside.mkdir(exist_ok=True)
    (tmp_path / "escape").symlink_to(outside)
    assert judge("file_exists:/out/a.txt", [], tmp_path) == (
        True,
        "/out/a.txt exists in the workspace",
    )
    assert judge("file_exists:/out", [], tmp_path)[0] is True  # bashkit stats: a folder exists
    assert judge("dir_exists:/out", [], tmp_path) == (True, "/out is a folder in the workspace")
    assert judge("dir_exists:/out/a.txt", [], tmp_path)[0] is False
    assert judge("dir_exists:/escape", [], tmp_path)[0] is False  # leads out of the workspace
    assert judge("file_contains:/out/a.txt:beta", [], tmp_path) == (
        True,
        "/out/a.txt contains 'beta'",
    )
    assert judge("file_contains:/out/a.txt:gamma", [], tmp_path) == (
        False,
        "/out/a.txt lacks 'gamma'",
    )
    assert judge("file_contains:/none.txt:x", [], tmp_path) == (False, "none.txt does not exist")


@pytest.mark.parametrize(
    ("check", "message"),
    [
        ("exit_code:zero", "exit_code takes a whole number, not 'zero'"),
        ("llm_judge:Is it good?", "an llm_judge check is an llm_judge evaluator and an evaluator"),
    ],
)
def test_a_bad_check_gate_is_a_located_load_error(
    project: Project, check: str, message: str
) -> None:
    project.write("llmtt.toml", GIT_TOML)
    project.write(
        "scenarios/s.yaml",
        "task: {prompt: p}\nsolution: [echo]\nevaluation:\n  gates:\n"
        f"    - {{type: file_exists, path: a}}\n    - {{type: check, check: '{check}'}}\n",
    )
    result = project.doit("list")
    text = result.out + result.err
    assert result.code != 0 and "Traceback" not in text
    assert "s.yaml:6: evaluation.gates[1].check" in text, text
    assert message in text


def test_file_line_regex_matches_one_line_of_the_file(tmp_path: Path) -> None:
    """bashkit-eval's `file_line_regex`: some line of the file matches (lines split at `\n`, a
    line's final `\r` dropped); values spread over lines do not make a row."""
    (tmp_path / "data").mkdir()
    row = 'file_line_regex:/data/e.csv:^(?:"Ada Park"|Ada Park),(?:"Eng"|Eng),(?:"120"|120)$'
    csv = tmp_path / "data" / "e.csv"
    csv.write_bytes(b'name,team,salary\r\n"Ada Park","Eng",120\r\nBo Li,Ops,95\r\n')
    assert judge(row, [], tmp_path) == (
        True,
        f"line 2 of /data/e.csv matches /{row.split(':', 2)[2]}/",
    )
    csv.write_text("name,team,salary\nAda Park,Eng,120\n")  # unquoted
    assert judge(row, [], tmp_path)[0] is True
    csv.write_text("name,team,salary\nAda Park\nEng\n120\n")  # one value a line
    assert judge(row, [], tmp_path) == (
        False,
        f"no line of /data/e.csv matches /{row.split(':', 2)[2]}/",
    )
    csv.write_text('"Ada Park,Eng,120\nBo Li",Ops,95\n')  # unbalanced quotes
    assert judge(row, [], tmp_path)[0] is False
    assert judge("file_line_regex:/data/e.csv:^$", [], tmp_path)[0] is False  # no empty line
    csv.write_text("a\n\nb")
    assert judge("file_line_regex:/data/e.csv:^$", [], tmp_path)[0] is True
    assert judge("file_line_regex:/data/e.csv:^b$", [], tmp_path)[0] is True  # no final newline
    assert judge("file_line_regex:/data:x", [], tmp_path)[0] is False  # a folder
    assert judge("file_line_regex:/none.csv:x", [], tmp_path) == (False, "none.csv does not exist")
