"""bashkit-eval's mock tools as commands (llmtt/importers/mock_tools.py): a tool answers as
bashkit's scripted tool answers it (flags read by the schema's types, checked against it, the
mock's response for a parameter's value, its default, or a failed callback), and `help` and
`discover` list and describe the tools as bashkit's builtins do."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from llmtt.importers.mock_tools import answer_for, parse_flags, usage

TOOLS: list[dict[str, Any]] = [
    {
        "name": "get_user",
        "description": "Fetch a user by id",
        "schema": {
            "type": "object",
            "properties": {"user_id": {"type": "integer"}, "verbose": {"type": "boolean"}},
            "required": ["user_id"],
        },
        "tags": ["read", "users"],
        "category": "users",
        "mock": {
            "param": "user_id",
            "responses": {"42": '{"name":"Jane"}'},
            "default": '{"error":"user not found"}',
        },
    },
    {
        "name": "get_rate",
        "description": "Exchange rate between two currencies",
        "schema": {
            "type": "object",
            "properties": {
                "pair": {"type": "string", "enum": ["USD/EUR", "USD/GBP"]},
                "amount": {"type": "number"},
            },
            "additionalProperties": False,
        },
        "tags": ["read"],
        "category": "finance",
        "mock": {"param": "amount", "responses": {"1.5": "1.38", "100.0": "92.5"}},
    },
    {
        "name": "ping",
        "description": "Say pong",
        "schema": {},
        "tags": [],
        "category": None,
        "mock": "pong",
    },
]


def ask(name: str, *args: str) -> tuple[str, str, int]:
    answer = answer_for(TOOLS, name, list(args))
    return answer.stdout, answer.stderr, answer.code


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--user_id", "42"], ('{"name":"Jane"}', "", 0)),  # 42 read as an integer: "42"
        (["--user_id=42", "--verbose"], ('{"name":"Jane"}', "", 0)),
        (["--user_id", "7"], ('{"error":"user not found"}', "", 0)),  # the default
        (["--user_id", "x"], ("", "get_user: schema error: input.user_id must be integer\n", 2)),
        ([], ("", "get_user: schema error: required property 'user_id' is missing\n", 2)),
        (["42"], ("", "expected --flag, got: 42", 2)),
    ],
)
def test_a_tool_answers_by_its_parameter(args: list[str], expected: tuple[str, str, int]) -> None:
    assert ask("get_user", *args) == expected


def test_values_are_read_by_the_schema_and_checked_against_it() -> None:
    assert ask("get_rate", "--amount", "1.5") == ("1.38", "", 0)
    assert ask("get_rate", "--amount", "100") == ("92.5", "", 0)  # 100.0 as JSON writes it
    # No response and no default: the callback fails, as bashkit says it (sanitised).
    assert ask("get_rate", "--amount", "3") == ("", "get_rate: callback failed\n", 1)
    assert ask("get_rate") == ("", "get_rate: callback failed\n", 1)  # the parameter missing
    assert ask("get_rate", "--pair", "EUR/JPY", "--amount", "1.5") == (
        "",
        "get_rate: schema error: input.pair is not an allowed value\n",
        2,
    )
    assert ask("get_rate", "--amount", "1.5", "--fee", "2")[1] == (
        "get_rate: schema error: unknown property 'fee'\n"
    )
    assert ask("ping", "--anything", "at all") == ("pong", "", 0)
    assert ask("nosuch") == ("", "nosuch: unknown tool\n", 127)
    assert parse_flags(["--a", "--b=1", "--c", "x"], {}) == {"a": True, "b": "1", "c": "x"}


def test_a_tool_says_its_usage_and_checks_a_dry_run() -> None:
    assert ask("get_user", "--help") == (
        "get_user - Fetch a user by id\nUsage: get_user --user_id <integer> --verbose <boolean>\n",
        "",
        0,
    )
    out, _, code = ask("get_user", "--dry-run", "--user_id", "42")
    assert code == 0
    assert json.loads(out) == {
        "dry_run": True,
        "valid": True,
        "tool": "get_user",
        "params": {"user_id": 42},
    }
    assert usage({}) is None


def test_help_lists_and_describes_the_tools() -> None:
    listed = (
        "get_user             Fetch a user by id\n"
        "get_rate             Exchange rate between two currencies\n"
        "ping                 Say pong\n"
    )
    assert ask("help") == (listed, "", 0)
    assert ask("help", "--list") == (listed, "", 0)
    out, _, code = ask("help", "get_user", "--json")
    assert code == 0
    assert json.loads(out) == {
        "name": "get_user",
        "description": "Fetch a user by id",
        "input_schema": TOOLS[0]["schema"],
    }
    assert ask("help", "get_rate")[0].startswith("get_rate - Exchange rate")
    assert ask("help", "nosuch") == ("", "help: unknown tool: nosuch", 1)
    assert ask("help", "--json") == ("", "usage: help [--list] [<tool>] [--json]", 1)


def test_discover_filters_by_category_tag_and_word() -> None:
    assert ask("discover", "--categories") == ("finance (1 tool)\nusers (1 tool)\n", "", 0)
    assert ask("discover", "--category", "finance")[0] == (
        "get_rate             Exchange rate between two currencies\n"
    )
    assert [t["name"] for t in json.loads(ask("discover", "--tag", "read", "--json")[0])] == [
        "get_user",
        "get_rate",
    ]
    assert ask("discover", "--search", "PONG")[0] == "ping                 Say pong\n"
    assert json.loads(ask("discover", "--categories", "--json")[0]) == [
        {"category": "finance", "count": 1},
        {"category": "users", "count": 1},
    ]
    assert ask("discover")[2] == 1


def test_the_dispatcher_runs_under_a_links_name(tmp_path: Path) -> None:
    """As the importer lays it out: tools.json beside mock.py, a link per command."""
    import shutil

    from llmtt.importers import mock_tools

    shutil.copyfile(mock_tools.__file__, tmp_path / "mock.py")
    (tmp_path / "mock.py").chmod(0o755)
    (tmp_path / "tools.json").write_text(json.dumps(TOOLS))
    (tmp_path / "bin").mkdir()
    for name in ("get_user", "help"):
        (tmp_path / "bin" / name).symlink_to("../mock.py")
    done = subprocess.run(
        [sys.executable, str(tmp_path / "bin" / "get_user"), "--user_id", "42"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (done.stdout, done.returncode) == ('{"name":"Jane"}', 0)
    done = subprocess.run(
        [str(tmp_path / "bin" / "help"), "ping"], capture_output=True, text=True, timeout=30
    )
    assert (done.stdout, done.returncode) == ("ping - Say pong\n", 0)
