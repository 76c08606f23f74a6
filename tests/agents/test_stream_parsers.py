"""Each CLI's stream parser on output recorded from the pinned CLIs (tests/data), by the event
contract of docs/metrics.md.

The recordings: `<agent>.transcript.raw.txt`, the raw PTY bytes of `doit run agent=A
model=scripted` on the example's git-first-commit, recorded before claude-code was run with
`--include-partial-messages` and before codex's rollout was read (the fallbacks);
`<agent>-contract.*`, a scripted session of a turn of three parallel calls that finish in the
reverse order, chosen usage with cache figures, two commands killed by a signal and a final
answer; `<agent>-endless.*`, an endless session stopped at 3 turns; and
`<agent>-compaction.*`, a session whose first turn fills the context so that the agent compacts.
For codex, `codex-*.rollout.jsonl` is the session file it wrote beside its stream.
"""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from llmtt.agents.base import RunContext
from llmtt.agents.claude_code import ClaudeStream, exit_code_of
from llmtt.agents.cli_agent import Limits
from llmtt.agents.codex import CodexStream
from llmtt.agents.opencode import OpencodeStream
from llmtt.agents.pricing import SCRIPTED_PRICING, Pricing, pricing_of
from llmtt.agents.stream import KEPT_OF_LINE, MAX_LINE, LineBuffer, StreamParser, unwrap_shell
from llmtt.events import MAX_TEXT, EventWriter, Message, Usage, read_events, run_usage
from llmtt.process.pty import READ_SIZE
from llmtt.redaction import MASK, Redactor
from llmtt.spec.config import ModelSpec
from llmtt.spec.scenario import Scenario
from llmtt.util.text import strip_ansi

DATA = Path(__file__).resolve().parents[1] / "data"
KINDS = ("claude-code", "opencode", "codex")
COMMANDS = [
    "git --help",
    "git init -q .",
    'git comit -m "Add notes"',
    'git commit -q -m "Add notes"',
    "git add notes.md",
    'git commit -q -m "Add notes"',
    "git log --oneline",
]
EXITS = [0, 0, 1, 1, 0, 0, 0]

# The contract session: (input, output, cache_read, cache_write) a turn, as scripted.
CONTRACT_USAGE = [(400, 25, 1500, 200), (60, 15, 1800, 0), (70, 14, 1850, 30), (80, 12, 1900, 40)]
CONTRACT_COMMANDS = [
    "sleep 1.5; echo a",
    "sleep 0.8; echo b",
    "echo c",
    "sh -c 'kill -SEGV $$'",
    "kill -TERM $$",
]
# Signal deaths as each CLI reports them. A child killed by SIGSEGV is 139 (128+11) where the
# CLI reports it. claude-code's own shell killed by SIGTERM comes out as "Exit code 144" (and as
# 1 for other signals): the signal is lost in its stream. opencode 1.18 reports neither: its bash
# tool waits for its timeout (3 s in the recording) and gives no exit code.
CONTRACT_EXITS = {
    "claude-code": [0, 0, 0, 139, 144],
    "opencode": [0, 0, 0, None, None],
    "codex": [0, 0, 0, 139, 143],
}


def make_parser(
    kind: str, events: EventWriter, pricing: Pricing, home: Path | None
) -> StreamParser:
    if kind == "claude-code":
        return ClaudeStream(events, pricing)
    if kind == "opencode":
        return OpencodeStream(events, pricing)
    return CodexStream(events, pricing, home=home)


def codex_home(tmp_path: Path, name: str) -> Path:
    """A CODEX_HOME holding the recording's rollout where codex wrote it."""
    stream = (DATA / f"codex-{name}.transcript.raw.txt").read_text()
    thread = next(
        json.loads(line)["thread_id"] for line in stream.splitlines() if "thread.started" in line
    )
    folder = tmp_path / "codex-home" / "sessions" / "2026" / "11" / "23"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(DATA / f"codex-{name}.rollout.jsonl", folder / f"rollout-2026-x-{thread}.jsonl")
    return tmp_path / "codex-home"


def parse(
    recording: str,
    kind: str,
    *,
    chunk: int = 4096,
    pricing: Pricing = SCRIPTED_PRICING,
    home: Path | None = None,
    keep: Any = None,
    edit: Any = None,
) -> tuple[list[dict[str, Any]], StreamParser]:
    """Events from a recording fed as the PTY delivers it (in arbitrary pieces); `keep` filters
    its lines, `edit` changes its bytes."""
    out = io.StringIO()
    parser = make_parser(kind, EventWriter(out), pricing, home)
    raw = (DATA / recording).read_bytes()
    if edit is not None:
        raw = edit(raw)
    if keep is not None:
        raw = b"\n".join(line for line in raw.split(b"\n") if keep(line))
    lines = LineBuffer(parser)
    for start in range(0, len(raw), chunk):
        lines.feed(raw[start : start + chunk])
    lines.flush()
    parser.poll()
    parser.finish()
    return [json.loads(line) for line in out.getvalue().splitlines()], parser


def of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["event"] == kind]


def requests(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per-request usage events of the agent loop: the run's turns."""
    return [e for e in of(events, "usage") if not e.get("side") and not e.get("total")]


def figures(usage: dict[str, Any]) -> tuple[int, int, int, int]:
    return (
        usage["input_tokens"],
        usage["output_tokens"],
        usage["cache_read_tokens"],
        usage["cache_write_tokens"],
    )


def contract(kind: str, tmp_path: Path, **kw: Any) -> tuple[list[dict[str, Any]], StreamParser]:
    home = codex_home(tmp_path, "contract") if kind == "codex" else None
    return parse(f"{kind}-contract.transcript.raw.txt", kind, home=home, **kw)


def session_usage(kind: str) -> list[tuple[int, int, int, int]]:
    """The contract session's figures as the agent can get them: the OpenAI wires (opencode,
    codex) have no field for cache writes."""
    if kind == "claude-code":
        return CONTRACT_USAGE
    return [(i, o, r, 0) for i, o, r, _ in CONTRACT_USAGE]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("chunk", [7, 4096])
def test_git_recordings_give_commands_exit_codes_and_usage(kind: str, chunk: int) -> None:
    events, parser = parse(f"{kind}.transcript.raw.txt", kind, chunk=chunk)
    calls = of(events, "tool_call")
    results = {e["id"]: e["exit_code"] for e in of(events, "tool_result")}
    assert [c["command"] for c in calls] == COMMANDS
    assert [results[c["id"]] for c in calls] == EXITS
    loop = run_usage([Usage.model_validate(u) for u in of(events, "usage")]).loop
    assert (loop.input, loop.output, loop.cost) == (10800, 150, 0.0)
    assert parser.natural_stop is True
    assert [e["text"] for e in of(events, "message")][-1].startswith("Done:")
    if kind == "codex":
        # Recorded without its rollout: the turn's total only, the turns unknown, and said so.
        assert requests(events) == [] and parser.per_request is False
        assert "rollout was not found" in of(events, "output")[-1]["text"]
    else:
        assert parser.turns == len(requests(events)) == 8
        assert [u["input_tokens"] for u in requests(events)] == [1000 + 100 * t for t in range(8)]


def test_claude_without_partial_messages_counts_each_message_once(tmp_path: Path) -> None:
    # An assistant line a content block repeats its message's usage, with the provisional
    # output count of message_start: one request each, the result's total corrects it.
    events, parser = contract(
        "claude-code", tmp_path, keep=lambda line: b"stream_event" not in line
    )
    assert [figures(u) for u in requests(events)] == [(i, 1, r, w) for i, _, r, w in CONTRACT_USAGE]
    total = [u for u in of(events, "usage") if u.get("total")]
    assert [figures(u) for u in total] == [tuple(map(sum, zip(*CONTRACT_USAGE, strict=True)))]
    loop = run_usage([Usage.model_validate(u) for u in of(events, "usage")]).loop
    assert loop.output == sum(u[1] for u in CONTRACT_USAGE)
    assert parser.turns == 4


@pytest.mark.parametrize("kind", KINDS)
def test_usage_of_each_request_and_the_total(kind: str, tmp_path: Path) -> None:
    events, parser = contract(kind, tmp_path)
    assert [figures(u) for u in requests(events)] == session_usage(kind)
    assert parser.turns == 4 and parser.per_request
    totals = [figures(u) for u in of(events, "usage") if u.get("total")]
    sums = tuple(map(sum, zip(*session_usage(kind), strict=True)))
    # opencode prints no total of its own.
    assert totals == ([] if kind == "opencode" else [sums])
    usage = run_usage([Usage.model_validate(u) for u in of(events, "usage")])
    assert (usage.loop.input, usage.loop.output, usage.loop.cache_read) == sums[:3]
    assert usage.requests == 4 and usage.cost == 0.0
    assert {u["cost_source"] for u in of(events, "usage")} == {"scripted"}


@pytest.mark.parametrize("kind", KINDS)
def test_parallel_calls_in_the_model_order_each_before_its_result(
    kind: str, tmp_path: Path
) -> None:
    events, _ = contract(kind, tmp_path)
    calls = of(events, "tool_call")
    assert [c["command"] for c in calls] == CONTRACT_COMMANDS
    results = of(events, "tool_result")
    assert [next(r["exit_code"] for r in results if r["id"] == c["id"]) for c in calls] == (
        CONTRACT_EXITS[kind]
    )
    position = {(e["event"], e["id"]): n for n, e in enumerate(events) if "id" in e}
    assert all(position["tool_call", c["id"]] < position["tool_result", c["id"]] for c in calls)


def test_the_recordings_do_report_parallel_calls_in_the_order_they_finished() -> None:
    # What the reordering above is for: opencode prints tool parts as they finish, codex's
    # rollout records command ends as they come (claude-code issues its calls in order).
    opencode = (DATA / "opencode-contract.transcript.raw.txt").read_text()
    done = [
        json.loads(line)["part"]["callID"] for line in opencode.splitlines() if "tool_use" in line
    ]
    assert done[:3] == ["call_0003", "call_0002", "call_0001"]
    rollout = (DATA / "codex-contract.rollout.jsonl").read_text().splitlines()
    ends = [
        json.loads(line)["payload"]["item"]["id"]
        for line in rollout
        if '"CommandExecution"' in line and '"item_completed"' in line
    ]
    assert ends[:3] == ["call_0003", "call_0002", "call_0001"]


CUT = {  # the line that begins the second model request, in each recording
    "claude-code": b'"msg_scripted_0002"',
    "opencode": b'"step_start"',
}


@pytest.mark.parametrize("kind", KINDS)
def test_a_run_killed_in_its_second_request_keeps_the_first(kind: str, tmp_path: Path) -> None:
    home = codex_home(tmp_path, "contract") if kind == "codex" else None
    if kind == "codex":
        # Killed while waiting for the second response: the rollout ends after turn 1.
        rollout = next((home or tmp_path).rglob("rollout-*.jsonl"))
        lines = rollout.read_text().splitlines(keepends=True)
        records = [json.loads(line).get("type") for line in lines]
        second = [n for n, kind_ in enumerate(records) if kind_ == "token_usage_record"][1]
        rollout.write_text("".join(lines[: second - 1]))
        keep = lambda line: b"turn.completed" not in line  # noqa: E731
    else:
        seen = [0]

        def keep(line: bytes) -> bool:
            seen[0] += CUT[kind] in line
            limit = 1 if kind == "claude-code" else 2
            return seen[0] < limit

    events, parser = parse(f"{kind}-contract.transcript.raw.txt", kind, home=home, keep=keep)
    assert [figures(u) for u in of(events, "usage")] == session_usage(kind)[:1]
    assert [c["command"] for c in of(events, "tool_call")] == CONTRACT_COMMANDS[:3]
    assert parser.turns == 1


def test_codex_noise_is_output_and_counts_as_nothing(tmp_path: Path) -> None:
    events, parser = contract("codex", tmp_path)
    outputs = [e["text"] for e in of(events, "output")]
    assert any(t.startswith("WARNING: proceeding, even though we could not") for t in outputs)
    assert any(t.startswith("codex: Model metadata for `scripted` not found") for t in outputs)
    assert parser.turns == 4 and len(of(events, "tool_call")) == 5
    assert parser.reason is None and parser.natural_stop is True


def test_claude_stray_shift_in_is_dropped(tmp_path: Path) -> None:
    raw = (DATA / "claude-code-contract.transcript.raw.txt").read_bytes()
    assert b"\x0f" in raw  # the terminal reset it prints as it exits
    events, _ = contract("claude-code", tmp_path)
    assert of(events, "output") == []


PRICED = {"priced": ModelSpec(input_usd_per_mtok=1.0, output_usd_per_mtok=2.0)}


@pytest.mark.parametrize("kind", KINDS)
def test_cost_from_a_price_the_user_gave(kind: str, tmp_path: Path) -> None:
    events, parser = contract(kind, tmp_path, pricing=pricing_of("priced", PRICED))
    expected = [round(((i + r + w) * 1.0 + o * 2.0) / 1e6, 8) for i, o, r, w in session_usage(kind)]
    assert [u["cost_usd"] for u in requests(events)] == expected
    assert {u["cost_source"] for u in of(events, "usage")} == {"user"}
    assert parser.spent == pytest.approx(sum(expected))


@pytest.mark.parametrize("kind", KINDS)
def test_a_model_nobody_priced_has_an_unknown_cost(kind: str, tmp_path: Path) -> None:
    events, parser = contract(kind, tmp_path, pricing=pricing_of("nobody-priced-this", {}))
    usage = of(events, "usage")
    assert usage, "no usage event"
    assert all(u["cost_usd"] is None and "cost_source" not in u for u in usage)
    assert parser.spent is None
    # What the client computed itself is kept apart, never taken as the cost.
    client = [u["client_cost_usd"] for u in usage if "client_cost_usd" in u]
    assert client == pytest.approx(
        {"claude-code": [0.0099125], "opencode": [0.0] * 4, "codex": []}[kind]
    )


def test_prices_from_litellm_the_user_and_the_scripted_model() -> None:
    assert pricing_of("scripted", {}) == SCRIPTED_PRICING
    assert pricing_of("gpt-5", {}).source == "llmtt"
    assert pricing_of("priced", PRICED).source == "user"
    assert pricing_of("nobody-priced-this", {}).source is None
    assert pricing_of("nobody-priced-this", {}, free=True).source == "user"


def run_context(tmp_path: Path, *, max_turns: int, max_usd: float | None = None) -> RunContext:
    out = io.StringIO()
    return RunContext(
        run_id="r",
        scenario=Scenario.model_validate({"task": {"prompt": "p"}}),
        prompt="p",
        workspace=tmp_path,
        home=tmp_path,
        env={},
        model="m",
        timeout_secs=60,
        max_turns=max_turns,
        transcript=io.BytesIO(),
        events=EventWriter(out),
        max_usd=max_usd,
    )


def stops(recording: str, limits: Limits, marker: bytes) -> list[tuple[int, str | None]]:
    """(markers seen, why the run must stop or None) after each line of the recording."""
    buffer, seen, asked = LineBuffer(limits.parser), 0, []
    for line in (DATA / recording).read_bytes().split(b"\n"):
        buffer.feed(line + b"\n")
        seen += marker in line
        asked.append((seen, limits.reason if limits.reached() else None))
    return asked


@pytest.mark.parametrize(("kind", "marker"), [("opencode", b"step_finish"), ("codex", b"")])
def test_turn_limit_stops_once_the_last_turns_calls_have_results(
    kind: str, marker: bytes, tmp_path: Path
) -> None:
    ctx = run_context(tmp_path, max_turns=3)
    home = codex_home(tmp_path, "endless") if kind == "codex" else None
    parser = make_parser(kind, ctx.events, SCRIPTED_PRICING, home)
    limits = Limits(ctx, parser, own_turn_limit=False)
    asked = stops(f"{kind}-endless.transcript.raw.txt", limits, marker)
    first = next(n for n, (_, stop) in enumerate(asked) if stop)
    assert asked[first][1] == "turn limit reached (3 turns)"
    assert parser.turns == 3 and parser.settled
    if kind == "opencode":  # not one line sooner than the third step's end
        assert asked[first][0] == 3 and not asked[first - 1][1]


def test_codex_stream_tells_a_turns_commands_ended_before_the_rollout(tmp_path: Path) -> None:
    # codex prints a command's end a moment before its rollout records it, and asks for the
    # next response right after: the turn limit must not wait for the rollout. Here the
    # rollout holds the second response (one call) but not its end; the stream has it.
    home = codex_home(tmp_path, "contract")
    rollout = next(home.rglob("rollout-*.jsonl"))
    lines = rollout.read_text().splitlines(keepends=True)
    second = [n for n, line in enumerate(lines) if '"token_usage_record"' in line][1]
    rollout.write_text("".join(lines[: second + 1]))
    stream = (DATA / "codex-contract.transcript.raw.txt").read_bytes().split(b"\n")
    fifth = next(
        n for n, line in enumerate(stream) if b'"item.completed","item":{"id":"item_5"' in line
    )
    ctx = run_context(tmp_path, max_turns=2)
    parser = CodexStream(ctx.events, SCRIPTED_PRICING, home=home)
    limits = Limits(ctx, parser, own_turn_limit=False)
    lines_in = LineBuffer(parser)
    lines_in.feed(b"\n".join(stream[:fifth]) + b"\n")
    assert not limits.reached()  # the fourth command (the second response's) still runs
    lines_in.feed(stream[fifth] + b"\n")
    assert parser.open_calls == {"call_0004"}  # the rollout has not recorded its end
    assert limits.reached() and limits.reason == "turn limit reached (2 turns)"


def test_a_limit_of_four_turns_lets_three_turns_and_the_answer_be(tmp_path: Path) -> None:
    ctx = run_context(tmp_path, max_turns=4)
    parser = OpencodeStream(ctx.events, SCRIPTED_PRICING)
    limits = Limits(ctx, parser, own_turn_limit=False)
    asked = stops("opencode-contract.transcript.raw.txt", limits, b"")
    assert not any(stop for _, stop in asked)  # the 4th turn is the final answer


def test_claude_stops_itself_at_its_turn_limit(tmp_path: Path) -> None:
    ctx = run_context(tmp_path, max_turns=3)
    parser = ClaudeStream(ctx.events, SCRIPTED_PRICING)
    limits = Limits(ctx, parser, own_turn_limit=True)
    asked = stops("claude-code-endless.transcript.raw.txt", limits, b"")
    assert not any(stop for _, stop in asked)  # --max-turns: claude ends it, with its total
    assert parser.turn_limit_hit and parser.natural_stop is False and parser.turns == 3


def test_cost_limit_stops_at_the_request_that_passes_it(tmp_path: Path) -> None:
    # Turn 1 costs $0.00195 at $1/$2 a million tokens, turn 2 $0.00189 more.
    ctx = run_context(tmp_path, max_turns=10, max_usd=0.003)
    parser = OpencodeStream(ctx.events, pricing_of("priced", PRICED))
    limits = Limits(ctx, parser, own_turn_limit=False)
    asked = stops("opencode-contract.transcript.raw.txt", limits, b"step_finish")
    assert next((seen, stop) for seen, stop in asked if stop) == (
        2,
        "cost limit reached: spent $0.0038 of $0.003",
    )


def test_an_unknown_cost_cannot_stop_a_run_and_the_log_says_so(tmp_path: Path) -> None:
    out = io.StringIO()
    ctx = run_context(tmp_path, max_turns=10, max_usd=0.0)
    ctx = RunContext(**{**ctx.__dict__, "events": EventWriter(out)})
    parser = OpencodeStream(ctx.events, pricing_of("nobody-priced-this", {}))
    limits = Limits(ctx, parser, own_turn_limit=False)
    asked = stops("opencode-contract.transcript.raw.txt", limits, b"")
    assert not any(stop for _, stop in asked)
    said = [json.loads(line) for line in out.getvalue().splitlines()]
    notes = [e["text"] for e in said if e["event"] == "output"]
    assert len(notes) == 1 and "no price is known for model 'm'" in notes[0]


@pytest.mark.parametrize("kind", ["opencode", "codex"])
def test_a_compaction_is_a_side_request(kind: str, tmp_path: Path) -> None:
    # The session's first turn reports 190,000 (opencode) or 250,000 (codex) input tokens, near
    # the context limit: the agent compacts (a request without tools, answered with the
    # session's side_usage) and goes on; the recording ends at a turn limit of 2.
    home = codex_home(tmp_path, "compaction") if kind == "codex" else None
    events, parser = parse(f"{kind}-compaction.transcript.raw.txt", kind, home=home)
    side = [u for u in of(events, "usage") if u.get("side")]
    assert [figures(u) for u in side] == [(300, 40, 0, 0)]
    big = (190000, 20, 500, 0) if kind == "opencode" else (250000, 20, 0, 0)
    assert [figures(u) for u in requests(events)] == [big, big]
    assert parser.turns == 2 and parser.requests == 2
    assert len(of(events, "tool_call")) == len(of(events, "tool_result")) == 2
    # opencode's "Continue if you have next steps" after it is its own text, not the agent's.
    assert not any("Continue if you have" in e["text"] for e in of(events, "message"))


def test_codex_total_leaves_its_compactions_out(tmp_path: Path) -> None:
    # The recording was stopped before codex printed its turn's total; the total it would
    # print is the turn's usage in its last usage record, which counts the compaction too.
    home = codex_home(tmp_path, "compaction")
    rollout = (DATA / "codex-compaction.rollout.jsonl").read_text().splitlines()
    records = [json.loads(line)["payload"] for line in rollout if '"token_usage_record"' in line]
    usage = records[-1]["turn_token_usage"]
    assert (usage["input_tokens"], usage["output_tokens"]) == (2 * 250000 + 300, 80)
    out = io.StringIO()
    parser = CodexStream(EventWriter(out), pricing_of("priced", PRICED), home=home)
    lines = LineBuffer(parser)
    lines.feed((DATA / "codex-compaction.transcript.raw.txt").read_bytes())
    lines.feed(json.dumps({"type": "turn.completed", "usage": usage}).encode() + b"\n")
    lines.flush()
    parser.finish()
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    totals = [figures(u) for u in of(events, "usage") if u.get("total")]
    assert totals == [(2 * 250000, 2 * 20, 0, 0)]  # the loop's two requests, not the side one
    folded = run_usage([Usage.model_validate(u) for u in of(events, "usage")])
    assert (folded.loop.input, folded.side.input, folded.requests) == (500000, 300, 2)
    # What the cost limit watches: the total's cost and the side request's, at $1/$2 a Mtok.
    assert parser.spent == pytest.approx((500000 + 40 * 2 + 300 + 40 * 2) / 1e6)
    assert folded.cost == pytest.approx(parser.spent)


def test_claude_exit_codes_from_text() -> None:
    assert exit_code_of("Bash", False, "ok") == 0
    assert exit_code_of("Bash", True, "Exit code 3\nboom") == 3
    assert exit_code_of("Bash", True, "Error: Exit code 127\nnot found") == 127
    assert exit_code_of("Bash", True, "Permission to use Bash has been denied") is None
    assert exit_code_of("Read", False, "file") == 0
    assert exit_code_of("Read", True, "no such file") is None


@pytest.mark.parametrize(
    ("wrapped", "inner"),
    [
        ("/bin/bash -lc 'git init -q .'", "git init -q ."),
        ("bash -c 'echo \"a b\" > x'", 'echo "a b" > x'),
        ("git status", "git status"),
        ("/bin/bash -lc 'unterminated", "/bin/bash -lc 'unterminated"),
    ],
)
def test_codex_commands_are_unwrapped(wrapped: str, inner: str) -> None:
    assert unwrap_shell(wrapped) == inner


def test_non_json_lines_become_output_and_terminal_codes_are_stripped() -> None:
    out = io.StringIO()
    parser = OpencodeStream(EventWriter(out), SCRIPTED_PRICING)
    parser.line("\x1b[31mwarning: something\x1b[0m\r")
    parser.line("\x1b[?25h")
    parser.line("\x1b(B\x0f\x1b[>4m")
    parser.line('{"type":"text","part":{"text":"hello"}}')
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert events[0] == {**events[0], "event": "output", "text": "warning: something"}
    assert events[1]["event"] == "message" and events[1]["text"] == "hello"
    assert len(events) == 2
    assert strip_ansi("\x1b]0;title\x07plain") == "plain"


def test_only_a_line_that_is_one_json_object_whole_is_read_as_json() -> None:
    """A line decoded whole as it comes skips the cleaning; anything else is cleaned first and
    is JSON only if what is left is one object, else it is output."""
    out = io.StringIO()
    parser = OpencodeStream(EventWriter(out), SCRIPTED_PRICING)
    text = '{"type":"text","part":{"text":"%s"}}'
    parser.line(text % "trailing" + " and more")
    parser.line("  " + text % "spaced" + "\r")
    parser.line("\x1b[0m" + text % "coloured" + "\x1b[0m")
    parser.line(text % "raw\ttab")  # a raw control character inside a string: not JSON
    parser.line('{"type":"unknown"}')
    parser.line("[1, 2]")
    parser.line(text % "last")
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(e["event"], e["text"]) for e in events] == [
        ("output", text % "trailing" + " and more"),
        ("message", "spaced"),
        ("message", "coloured"),
        ("output", text % "raw\ttab"),
        ("output", "[1, 2]"),
        ("message", "last"),
    ]


def test_a_lone_half_of_a_utf16_pair_in_a_json_line_is_written_as_the_replacement_character(
    tmp_path: Path,
) -> None:
    """A client that cuts a text in the middle of an emoji escapes half of its UTF-16 pair:
    the event log stays UTF-8 (the run used to fail writing it), the rest of the text kept."""
    path = tmp_path / "events.jsonl"
    with open(path, "w", encoding="utf-8") as handle:
        parser = OpencodeStream(EventWriter(handle), SCRIPTED_PRICING)
        parser.line('{"type":"text","part":{"text":"cut \\ud83d here, whole \\ud83d\\ude00"}}')
        parser.line('{"type":"text","part":{"text":"after"}}')
    events = read_events(path)
    assert [e.text for e in events if isinstance(e, Message)] == [
        "cut \ufffd here, whole \U0001f600",
        "after",
    ]


# Lines at the edges of what the bytes' parser takes: each must mean what it meant when every
# line was decoded as text first.
EDGE_LINES = [
    b'{"type":"text","part":{"text":"plain"}}',
    b'  {"type":"text","part":{"text":"spaced"}}\r',
    b'\x0b{"type":"text","part":{"text":"vertical tab before"}}',
    b'\xef\xbb\xbf{"type":"text","part":{"text":"byte order mark"}}',
    b'{"type":"text","part":{"text":"bad \xff byte"}}',
    b'{"type":"text","part":{"text":"cut \\ud83d half"}}',
    b'{"type":"text","part":{"text":"del \x7f inside"}}',
    b'{"type":"text","part":{"text":"raw\ttab"}}',
    b'{"type":"text","part":{"text":"nul after"}}\x00',
    b'{"type":"text","part":{"text":"trailing"}} and more',
    b'\x1b[0m{"type":"text","part":{"text":"coloured"}}\x1b[0m',
    b'{"type":"text","part":{"text":"deep"},"x":' + b"[" * 300 + b"]" * 300 + b"}",
    b'{"type":"text","part":{"text":"big"},"n":' + b"9" * 5000 + b"}",
    b'{"type":"text","part":{"text":"not a number"},"n":NaN}',
    b'{"type":"text","part":{"text":"\\u00e9t\xc3\xa9 \\u2028 \\/"}}',
    b"[1, 2]",
    b"{}",
    b"",
    b"   ",
    b"{",
]


@pytest.mark.parametrize("kind", KINDS)
def test_a_line_taken_as_bytes_means_what_its_text_means(kind: str, tmp_path: Path) -> None:
    """`take` reads most lines straight from their bytes; the events must be those that
    decoding each line as text and reading it (`line`) gives, for the recordings and for lines
    at the edges of what either JSON parser accepts."""
    lines = (DATA / f"{kind}.transcript.raw.txt").read_bytes().split(b"\n") + EDGE_LINES
    outputs = []
    for way in ("take", "line"):
        out = io.StringIO()
        parser = make_parser(kind, EventWriter(out), SCRIPTED_PRICING, tmp_path / way)
        for line in lines:
            if way == "take":
                parser.take(line)
            else:
                parser.line(line.decode("utf-8", errors="replace"))
        parser.finish()
        written = out.getvalue().split("\n")[:-1]  # not splitlines: U+2028 is in a text
        outputs.append([{**json.loads(e), "ts": 0} for e in written])
    assert outputs[0] == outputs[1]
    assert len(outputs[0]) > 10


def test_a_line_nested_too_deep_for_json_is_output_not_a_failed_run(tmp_path: Path) -> None:
    """Python's json raises RecursionError, not ValueError, on a line nested a hundred
    thousand levels deep: such a line once ended the run with a traceback, losing what the
    agent had done. It is text the agent printed."""
    out = io.StringIO()
    parser = OpencodeStream(EventWriter(out), SCRIPTED_PRICING)
    deep = b'{"type":"text","x":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    lines = LineBuffer(parser)
    lines.feed(deep + b'\n{"type":"text","part":{"text":"after"}}\n')
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [e["event"] for e in events] == ["output", "message"]
    assert events[0]["text"] == deep.decode() and events[1]["text"] == "after"


@pytest.mark.parametrize("kind", KINDS)
def test_a_long_tool_result_line_keeps_its_head_and_tail_in_the_event_log(
    kind: str, tmp_path: Path
) -> None:
    """A 3 MB line, fed in the PTY runner's pieces, is one tool result whose output keeps its
    first and last MAX_TEXT // 2 characters around a marker; the other events are unchanged."""
    filler = 3_000_000
    marker = b"usage: git"
    events, _ = parse(
        f"{kind}.transcript.raw.txt",
        kind,
        chunk=READ_SIZE,
        home=tmp_path,
        edit=lambda raw: raw.replace(marker, marker + b"x" * filler, 1),
    )
    normal = parse(f"{kind}.transcript.raw.txt", kind)[0]
    assert [e["event"] for e in events] == [e["event"] for e in normal]
    index = next(i for i, e in enumerate(normal) if "usage: git" in e.get("output", ""))
    whole = normal[index]["output"].replace("usage: git", "usage: git" + "x" * filler, 1)
    half = MAX_TEXT // 2
    cut = len(whole) - 2 * half
    assert events[index]["output"] == (
        f"{whole[:half]}\n[... {cut} characters cut by llmtt ...]\n{whole[-half:]}"
    )


LONG_HEAD = (
    b'{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"'
)
LONG_TAIL = b'"}]}}'


def feed_long_line(filler: bytes, total: int, shift: int = 0) -> tuple[list[dict[str, Any]], int]:
    """A claude-code tool result of about `total` bytes, `filler` over and over, fed in the
    PTY runner's pieces: the events, and the most bytes the buffer held at once once past the
    longest line read whole."""
    out = io.StringIO()
    lines = LineBuffer(ClaudeStream(EventWriter(out), SCRIPTED_PRICING))
    body = (total - len(LONG_HEAD) - len(LONG_TAIL)) // len(filler)
    line = LONG_HEAD + b"x" * shift + filler * body + LONG_TAIL + b"\n"
    held = 0
    for start in range(0, len(line), READ_SIZE):
        lines.feed(line[start : start + READ_SIZE])
        if start > MAX_LINE + READ_SIZE:  # past the longest line read whole
            held = max(held, sum(map(len, lines._pending)) + len(lines._head or b""))
    return [json.loads(e) for e in out.getvalue().splitlines()], held


def test_a_line_past_the_longest_read_whole_keeps_its_head_and_tail() -> None:
    """A CLI printing 100 MB on one line: the buffer holds its first and last KEPT_OF_LINE
    bytes, not the line; what is kept is still the JSON of one tool result, with a marker
    saying how much is gone, and fits in the event whole."""
    total = len(LONG_HEAD) + 100_000_000 + len(LONG_TAIL)  # a whole number of fillers
    events, held = feed_long_line(b"0123456789", total)
    assert held <= 2 * KEPT_OF_LINE + READ_SIZE
    [result] = events
    output = result["output"]
    head, marker, tail = re.fullmatch(
        r"(\d+) \[\.\.\. (\d+) bytes of this line cut by llmtt \.\.\.\] (\d+)", output
    ).groups()
    assert len(LONG_HEAD) + len(head) == KEPT_OF_LINE == len(tail) + len(LONG_TAIL)
    assert len(LONG_HEAD) + len(head) + int(marker) + len(tail) + len(LONG_TAIL) == total
    assert len(output) < MAX_TEXT  # not cut again by the event's own limit


@pytest.mark.parametrize("shift", range(11))
def test_a_long_line_cut_inside_an_escape_is_still_read_as_json(shift: int) -> None:
    """The head kept of a long line can end inside a JSON escape (`\\u00e9`, `\\\\`):
    the escape goes too, and the line is still one tool result."""
    filler = b"ab\\u00e9\\\\c"  # a, b, an escaped e-acute, an escaped backslash, c
    events, _ = feed_long_line(filler, MAX_LINE + 1000, shift)
    assert [e["event"] for e in events] == ["tool_result"]
    assert "bytes of this line cut by llmtt" in events[0]["output"]


def feed_lines(*lines: bytes) -> list[dict[str, Any]]:
    """The events of claude-code lines fed in the PTY runner's pieces."""
    out = io.StringIO()
    buffer = LineBuffer(ClaudeStream(EventWriter(out), SCRIPTED_PRICING))
    raw = b"".join(line + b"\n" for line in lines)
    for start in range(0, len(raw), READ_SIZE):
        buffer.feed(raw[start : start + READ_SIZE])
    return [json.loads(e) for e in out.getvalue().splitlines()]


@pytest.mark.parametrize(
    ("before", "expected"),
    [
        (b"\\\\", ""),  # an escaped backslash: the `"` after it ends the text
        (b"\\", "] " + "b" * (KEPT_OF_LINE - 24)),  # an escaped quote: left out
    ],
)
def test_the_tail_of_a_long_line_starts_after_an_escape_not_inside_one(
    before: bytes, expected: str
) -> None:
    """Whether the tail's first byte is escaped depends on how many backslashes come before it,
    an even number (pairs, each one backslash) or an odd one (the last escapes the byte)."""
    after = b'"' + (b"b" * (KEPT_OF_LINE - 24) + b'"' if expected else b"") + b',"x":"'
    after += b"y" * (KEPT_OF_LINE - len(after) - len(LONG_TAIL)) + LONG_TAIL
    assert len(after) == KEPT_OF_LINE  # the tail starts at the first `"` of `after`
    body = b"a" * (MAX_LINE + 1000)
    [result] = feed_lines(LONG_HEAD + body + before + after)
    output = result["output"]
    assert output.startswith("a" * 1000) and output.endswith(expected)
    assert "bytes of this line cut by llmtt" in output


def test_a_long_line_whose_head_and_tail_are_not_one_object_is_noted() -> None:
    """claude-code carries a command's output twice on its line (the message, and
    `tool_use_result`): cut in the first and again in the second, what is kept is no JSON
    object. The log says the line was not read (the run then warns), after its head and
    tail as output."""
    half = b"a" * (MAX_LINE // 2 + 1000)
    line = LONG_HEAD + half + b'"}]},"tool_use_result":{"stdout":"' + half + b'"}}'
    events = feed_lines(line, b'{"type":"assistant","message":{"content":[]}}')
    assert [e["event"] for e in events] == ["output", "output"]
    assert "bytes of this line cut by llmtt" in events[0]["text"]
    assert "too long to hold whole, has a shape llmtt does not read" in events[1]["text"]


def test_a_line_up_to_the_longest_read_whole_is_read_whole() -> None:
    events, held = feed_long_line(b"x", MAX_LINE)  # and its "\\n"
    assert [e["event"] for e in events] == ["tool_result"]
    assert held == 0 and "cut by llmtt" in events[0]["output"]  # the event's own cut
    assert "bytes of this line" not in events[0]["output"]


def test_the_event_log_of_each_recording_with_planted_secrets_is_as_recorded() -> None:
    """The whole event log, byte for byte but for `ts`, of each git recording with a key planted
    in a tool result and a cut of it in a command: what the events of a run look like is a
    contract (docs/metrics.md), and a faster writer must not change one of them. The expected
    file was written by the writer that redacted every value of every event."""
    secret = "sk-ant-golden-0123456789abcdef"
    expected = json.loads((DATA / "git-recordings.redacted-events.json").read_text())
    for kind in KINDS:
        raw = (DATA / f"{kind}.transcript.raw.txt").read_bytes()
        raw = raw.replace(b"usage: git", b"usage: git " + secret.encode())
        raw = raw.replace(b"git init -q .", b"git init -q " + secret.encode()[:20])
        out = io.StringIO()
        writer = EventWriter(out, Redactor({"ANTHROPIC_API_KEY": secret}))
        parser = make_parser(kind, writer, SCRIPTED_PRICING, None)
        lines = LineBuffer(parser)
        for start in range(0, len(raw), 4096):
            lines.feed(raw[start : start + 4096])
        lines.flush()
        parser.poll()
        parser.finish()
        text = out.getvalue()
        assert secret[:12] not in text
        assert text.count(MASK) == 2, kind
        events = [json.loads(line) for line in text.splitlines()]
        assert all(isinstance(event.pop("ts"), float) for event in events)
        assert events == expected[kind], kind


def test_the_events_of_one_read_reach_the_file_together_when_the_read_is_parsed(
    tmp_path: Path,
) -> None:
    """One write per read of the agent's output, not one per event; and nothing of a read
    waits in a buffer for the next one (a watcher, or a kill, sees every parsed line)."""
    raw = (DATA / "claude-code.transcript.raw.txt").read_bytes()
    path = tmp_path / "events.jsonl"
    with open(path, "w", encoding="utf-8") as handle:
        flushes = 0
        flush = handle.flush

        def counted() -> None:
            nonlocal flushes
            flushes += 1
            flush()

        handle.flush = counted  # type: ignore[method-assign]
        lines = LineBuffer(ClaudeStream(EventWriter(handle), SCRIPTED_PRICING))
        lines.feed(raw[: raw.rindex(b"\n") + 1])  # whole lines: one read, as the PTY gives
        on_disk = path.read_text().splitlines()
        assert len(on_disk) >= 10 and flushes == 1
        assert [json.loads(line)["event"] for line in on_disk] == [
            e["event"] for e in parse("claude-code.transcript.raw.txt", "claude-code")[0]
        ][: len(on_disk)]
