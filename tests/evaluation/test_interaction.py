"""Layer 1 metrics against hand-computed figures for DESIGN.md's definitions."""

from __future__ import annotations

from typing import Any

import pytest

from llmtt.evaluation.interaction import find_target_commands, interaction_metrics
from llmtt.evaluation.shell.target_commands import TargetMatcher
from llmtt.evaluation.transcript import render, transcript_events
from llmtt.events import Complete, Event, ToolCall, ToolResult, Usage

GIT = TargetMatcher("git")
GIT_PATTERN = TargetMatcher("git", r"(?<![\w./-])git(?![\w./-])(?:\s+([a-z][\w-]*))?")


def session(
    *calls: tuple[str, int | None], complete: int | None = 0, timed_out: bool = False
) -> list[Event]:
    events: list[Event] = []
    for i, (command, code) in enumerate(calls):
        events.append(ToolCall(ts=i, event="tool_call", id=f"c{i}", command=command))
        events.append(ToolResult(ts=i, event="tool_result", id=f"c{i}", output="", exit_code=code))
    events.append(
        Complete(
            ts=99,
            event="complete",
            exit_code=complete,
            duration_secs=1.5,
            timed_out=timed_out,
            natural_stop=not timed_out,
        )
    )
    return events


def metrics(
    events: list[Event], matcher: TargetMatcher | None = GIT, free: bool = True
) -> dict[str, Any]:
    return interaction_metrics(events, matcher, free=free)


@pytest.mark.parametrize("matcher", [GIT, GIT_PATTERN], ids=["binary", "command_pattern"])
def test_mixed_session_matches_hand_computed_figures(matcher: TargetMatcher) -> None:
    events = session(
        ("git --help", 0),
        ("git init -q .", 0),
        ("git comit -m x", 1),
        ("git  add   notes.md", 0),  # white space collapses when normalised
        ("ls -la", 0),  # not a target command
        ("git commit -m x", 1),
        ("git commit -m x", 0),  # retry after failure, also a repeat
        ("git add notes.md", 0),  # repeat of the add, previous add succeeded
    )
    m = metrics(events, matcher)
    assert m["total_commands"] == 7
    assert m["unique_commands"] == 5
    assert m["error_count"] == 2
    assert m["unknown_exit_count"] == 0
    assert m["retry_count"] == 2
    assert m["retry_rate"] == pytest.approx(2 / 7, abs=1e-6)
    assert m["retries_after_failure"] == 1
    assert m["help_invocations"] == 1
    # successes: --help, init, add, commit(2nd: retry after failure -> excluded), add => 4
    assert m["first_try_success_rate"] == pytest.approx(4 / 7, abs=1e-6)
    assert m["iteration_ratio"] == pytest.approx(5 / 7, abs=1e-6)
    assert m["error_rate"] == pytest.approx(2 / 7, abs=1e-6)
    assert m["completed"] is True
    assert m["tool_calls"] == 8
    assert m["tool_calls_ok"] == 6
    assert m["tool_calls_error"] == 2
    assert sorted(m["by_subcommand"]) == ["(none)", "add", "comit", "commit", "init"]
    assert m["by_subcommand"]["commit"] == {"count": 2, "errors": 1, "help": 0, "retries": 1}
    assert m["by_subcommand"]["comit"] == {"count": 1, "errors": 1, "help": 0, "retries": 0}
    assert m["by_subcommand"]["add"] == {"count": 2, "errors": 0, "help": 0, "retries": 0}
    assert m["by_subcommand"]["(none)"] == {"count": 1, "errors": 0, "help": 1, "retries": 0}
    assert m["duration_secs"] == 1.5
    assert m["natural_stop"] is True


def test_rates_over_zero_commands_are_null_not_zero() -> None:
    m = metrics(session(("ls", 0)))
    assert m["total_commands"] == 0
    for name in ("retry_rate", "first_try_success_rate", "iteration_ratio", "error_rate"):
        assert m[name] is None


def test_unknown_exit_codes_are_neither_errors_nor_successes() -> None:
    m = metrics(session(("git status", None), ("git status", 0)))
    assert m["error_count"] == 0
    assert m["unknown_exit_count"] == 1
    # The exit rates are over the known exits (docs/metrics.md): the unknown one is in neither.
    assert m["first_try_success_rate"] == 1.0
    assert m["error_rate"] == 0.0
    assert m["tool_calls_ok"] == 1
    assert m["tool_calls_error"] == 0


def test_both_exit_rates_leave_unknown_exits_out_alike() -> None:
    """git failed twice where its exit cannot be known (behind a pipe, in an `&&` chain that
    failed): neither rate counts those two, one way or the other, and unknown_exit_count says
    how many there are. Before, error_rate counted them as non-errors (0 of 4) and
    first_try_success_rate as non-successes (2 of 4)."""
    m = metrics(
        session(
            ("git frobnicate | head", 0),
            ("git frobnicate && echo done", 1),
            ("git init -q .", 0),
            ("git comit -m x", 1),
        )
    )
    assert (m["total_commands"], m["unknown_exit_count"], m["error_count"]) == (4, 2, 1)
    assert m["error_rate"] == 0.5  # 1 of the 2 known
    assert m["first_try_success_rate"] == 0.5  # 1 of the 2 known
    assert m["error_rate"] + m["first_try_success_rate"] == 1.0  # no retry: they add up


def test_retry_after_failure_without_capture_group_uses_normalised_command() -> None:
    events = session(("mytool  build", 2), ("mytool build", 0), ("mytool test", 0))
    m = metrics(events, TargetMatcher("mytool", r"\bmytool\b"))
    assert m["retries_after_failure"] == 1
    assert m["by_subcommand"] == {"(none)": {"count": 3, "errors": 1, "help": 0, "retries": 1}}


def test_help_forms_and_segment_boundaries() -> None:
    events = session(
        ("git help commit", 0),
        ("git commit -h", 129),
        ("git status && ls -h", 0),  # -h belongs to ls, not to git
        ("git status && git commit -h", 129),  # the second segment is a help invocation
    )
    m = metrics(events)
    assert m["help_invocations"] == 3
    assert m["by_subcommand"]["commit"] == {
        "count": 2,
        "errors": 1,
        "help": 2,
        "retries": 1,
    }  # the second `commit -h` follows a failed one
    assert m["by_subcommand"]["status"] == {"count": 2, "errors": 0, "help": 0, "retries": 0}


def test_each_target_command_of_a_chain_counts_with_its_certain_exit() -> None:
    events = session(
        ("git add a && git commit -m x", 0),  # an && chain that exited 0: both succeeded
        ("git frobnicate | head", 0),  # git's exit is unknown, not a success
        ('echo "git is great"; cat .git/HEAD', 0),  # no target command
        ("git tag v1; git push", 128),  # the last one failed, the first is unknown
    )
    m = metrics(events)
    assert m["total_commands"] == 5
    assert m["error_count"] == 1
    assert m["unknown_exit_count"] == 2
    assert m["first_try_success_rate"] == 0.666667  # add and commit, of the 3 known
    assert m["error_rate"] == 0.333333  # push, of the 3 known
    assert m["tool_calls"] == 4


def test_timeout_is_not_completed_and_tokens_cost_sum() -> None:
    events: list[Event] = [
        Usage(ts=1, event="usage", input_tokens=100, output_tokens=10, cost_usd=0.01),
        Usage(ts=2, event="usage", input_tokens=50, output_tokens=5, cost_usd=0.02),
        *session(("git status", 0), complete=None, timed_out=True),
    ]
    m = metrics(events, free=False)
    assert m["completed"] is False
    assert m["natural_stop"] is False
    assert m["turns"] == 2
    assert (m["input_tokens"], m["output_tokens"]) == (150, 15)
    assert m["cost_usd"] == pytest.approx(0.03)


def test_cost_unknown_is_null_for_paid_agents_and_zero_for_free_ones() -> None:
    assert metrics(session(), free=False)["cost_usd"] is None
    assert metrics(session(), free=True)["cost_usd"] == 0.0
    partial = [Usage(ts=1, event="usage", input_tokens=1, cost_usd=None), *session()]
    assert metrics(partial, free=False)["cost_usd"] is None


def test_results_without_ids_pair_with_the_oldest_open_call() -> None:
    events: list[Event] = [
        ToolCall(ts=1, event="tool_call", command="git init"),
        ToolResult(ts=2, event="tool_result", exit_code=0),
        ToolCall(ts=3, event="tool_call", command="git bogus"),
        ToolResult(ts=4, event="tool_result", exit_code=1),
    ]
    assert [c.exit_code for c in find_target_commands(events, GIT)] == [0, 1]


def test_no_target_means_no_target_commands() -> None:
    assert find_target_commands(session(("git status", 0)), None) == []
    assert metrics(session(("git status", 0)), None)["total_commands"] == 0


def test_rates_over_only_unknown_exits_are_null() -> None:
    m = metrics(session(("git status", None), ("git status", None), ("git log | head", 0)))
    assert (m["total_commands"], m["unknown_exit_count"]) == (3, 3)
    assert m["error_rate"] is None
    assert m["first_try_success_rate"] is None
    # the rates that do not depend on exit codes stay
    assert m["iteration_ratio"] == pytest.approx(2 / 3, abs=1e-6)
    assert m["retry_rate"] == pytest.approx(1 / 3, abs=1e-6)


def test_nonzero_agent_exit_is_not_completed() -> None:
    assert metrics(session(complete=1))["completed"] is False


def test_transcript_fallback_finds_commands_with_unknown_exit_codes() -> None:
    text = "\x1b[32m$ git init\x1b[0m\r\nInitialized\r\n$ git  status\nnothing\n$ ls\n"
    events = transcript_events(text)
    m = metrics(events)
    assert m["total_commands"] == 2
    assert m["unknown_exit_count"] == 2
    assert m["error_count"] == 0
    assert m["error_rate"] is None and m["first_try_success_rate"] is None
    assert sorted(m["by_subcommand"]) == ["init", "status"]


# A transcript of five target commands run, with what the old fallback also counted (16):
# narrative, hints, echoed prompts, examples, and terminal titles naming commands.
TRANSCRIPT = "\n".join(
    [
        "\x1b]0;agent: git repository for notes\x07> Make this a git repository, then commit",
        "> notes.md with git; run git status when done.",
        "User prompt: use git init, git add and git commit",
        "I'll run git init first, then git add and git commit.",
        "\x1b[1;32m$\x1b[0m git init -q .",
        "Initialized empty Git repository in /tmp/w/.git/",
        '$ git add notes.md && git commit -q -m "notes"',
        "\x1b]2;git commit\x1b\\[main (root-commit) 1a2b3c4] notes",
        'hint: Use "git push" to publish your local commits',
        "hint: run `git status` to see what changed",
        "To look at the history yourself:",
        "```console",
        "$ git log --oneline",
        "```",
        "    $ git diff HEAD~1",
        "Progress 10%\rProgress 100%",
        "$ ls -la",
        '$ echo "git is great"',
        "working...\r$ git status --short",
        "$ git push\r\x1b[2KCancelled.",
        "$ git log -1 --format=%s \x1b]8;;https://example.com\x1b\\link\x1b]8;;\x1b\\",
        "Done: git init, git add, git commit, git status and git log ran.",
    ]
)


def test_transcript_fallback_counts_only_commands_shown_run() -> None:
    events = transcript_events(TRANSCRIPT)
    assert [e.command for e in events if isinstance(e, ToolCall)] == [
        "git init -q .",
        'git add notes.md && git commit -q -m "notes"',
        "ls -la",
        'echo "git is great"',
        "git status --short",
        "git log -1 --format=%s link",
    ]
    m = metrics(events, free=True)
    assert m["total_commands"] == 5
    assert m["unknown_exit_count"] == 5
    assert (m["error_count"], m["error_rate"], m["first_try_success_rate"]) == (0, None, None)
    assert sorted(m["by_subcommand"]) == ["add", "commit", "init", "log", "status"]
    assert m["tool_calls"] == 6


def test_transcript_fallback_takes_the_agents_own_marker() -> None:
    text = "agent> git status\n$ git log\nagent>git gc\n"
    commands = [e.command for e in transcript_events(text, "agent> ") if isinstance(e, ToolCall)]
    assert commands == ["git status"]


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b]0;title\x07$ a", "$ a"),  # OSC ended by BEL
        ("\x1b]2;title\x1b\\$ a", "$ a"),  # OSC ended by ESC \
        ("\x1b]8;;http://x\x1b\\a\x1b]8;;\x1b\\", "a"),  # hyperlink
        ("\x1b[1;31ma\x1b[0m b\x1b[K", "a b"),  # CSI
        ("\x1b(Ba\x1b=b\x1b7", "ab"),  # lone escape sequences
        ("\x9b1mab", "ab"),  # 8-bit CSI
        ("\x1bPq#0;2\x1b\\a", "a"),  # DCS string
        ("abcdef\rXY", "XYcdef"),  # carriage return overwrites
        ("abcdef\r\x1b[2KXY", "XY"),  # ... after erasing the line
        ("abc\x08\x08Z", "aZc"),  # backspace
        ("abc\x1b[1Kd", "d"),  # erase to the cursor
        ("a\x07b\x00c", "abc"),  # stray control characters
        ("plain line", "plain line"),
    ],
)
def test_render_strips_control_sequences_and_applies_overwrites(raw: str, shown: str) -> None:
    assert render(raw).strip() == shown
