"""One scripted session, four agents, one event contract (docs/metrics.md): claude-code,
opencode, codex and the litellm loop play the same sessions against the scripted model with
`doit run -n 2 scenario=X`, and their event logs are compared: the usage of each request (its
uncached input, output, cache reads and writes), the turns, the tool calls in the order the
model issued them, their exit codes, the limits and why a run stopped.

Where an agent cannot meet the contract, the test asserts what it gives and says why:
- cache writes: only the Anthropic wire (claude-code) has a field for them; the OpenAI wires
  (opencode and litellm on Chat Completions, codex on Responses) carry none, so they are 0.
- agent totals: claude-code (`result`) and codex (`turn.completed`) report their own; opencode
  and the litellm loop do not.
- signal deaths: a command whose own process dies of a signal is reported as 128+N by codex
  and the litellm loop. claude-code reports "Exit code 144" for its shell killed by SIGTERM
  (and 1 for other signals): the signal is not in its stream. opencode 1.18 does not notice the
  death at all: its bash tool waits for its own timeout and gives no exit code (unknown). The
  module shortens that timeout (OPENCODE_EXPERIMENTAL_BASH_DEFAULT_TIMEOUT_MS) from 120 s.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import CLI_AGENTS, Project, cli_project

AGENTS = CLI_AGENTS
ANTHROPIC_WIRE = ("claude-code",)  # the agents whose wire carries cache writes
OWN_TOTALS = ("claude-code", "codex")

PARALLEL = """\
task: {prompt: Write three files.}
run: {timeout_secs: 60}
scripted:
  turns:
    - say: Three at once.
      run: ["sleep 1.2; echo a > a.txt", "sleep 0.6; echo b > b.txt", "echo c > c.txt"]
    - say: Done.
"""
PARALLEL_CALLS = ["sleep 1.2; echo a > a.txt", "sleep 0.6; echo b > b.txt", "echo c > c.txt"]

USAGE = """\
task: {prompt: Make a git repository.}
run: {timeout_secs: 60}
scripted:
  turns:
    - run: ["git init -q ."]
      usage: {input: 400, output: 25, cache_read: 1500, cache_write: 200}
    - run: ["git status --short"]
      usage: {input: 60, output: 15, cache_read: 1800}
    - say: Usage noted.
      usage: {input: 80, output: 12, cache_read: 1900, cache_write: 40}
"""
# (input, output, cache_read, cache_write) of each turn; input is the uncached input.
USAGE_TURNS = [(400, 25, 1500, 200), (60, 15, 1800, 0), (80, 12, 1900, 40)]

ENDLESS = """\
task: {prompt: Check the repository forever.}
run: {timeout_secs: 60, max_turns: 3}
scripted:
  endless: true
  turns:
    - run: ["git --version"]
    - run: ["git --version"]
    - run: ["git --version"]
    # A request past the limit is answered as slowly as a real model's: an agent the harness
    # stops is stopped before the answer (the scripted model's instant answers let a fast
    # client run one more command first, a race no real model gives it).
    - run: ["git --version"]
      hang: {secs: 20}
"""

SIGNALS = """\
task: {prompt: Crash twice.}
run: {timeout_secs: 60}
scripted:
  turns:
    - run: ["sh -c 'kill -SEGV $$'"]
    - run: ["kill -TERM $$"]
    - say: Done.
"""
SIGNAL_EXITS = {
    "litellm": [139, 143],
    "codex": [139, 143],
    "claude-code": [139, 144],  # its own shell's death: the signal is lost
    "opencode": [None, None],  # not noticed: its bash tool's timeout, no exit code
}

HANG = """\
task: {prompt: Make a git repository.}
run: {timeout_secs: 15}
scripted:
  turns:
    - run: ["git init -q ."]
      usage: {input: 400, output: 25, cache_read: 1500, cache_write: 200}
    - run: ["git status"]
      hang: {secs: 300}
    - say: Done.
"""
SESSIONS = {
    "parallel": PARALLEL,
    "usage": USAGE,
    "endless": ENDLESS,
    "signals": SIGNALS,
    "hang": HANG,
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Project:
    project = cli_project(
        tmp_path_factory.mktemp("contract") / "proj",
        '\n[agents.opencode.env]\nOPENCODE_EXPERIMENTAL_BASH_DEFAULT_TIMEOUT_MS = "4000"\n',
    )
    for name, text in SESSIONS.items():
        project.write(f"scenarios/{name}.yaml", text)
    # One invocation: the hanging session's runs, which only wait for their time limit, first,
    # so that the other sessions' runs go on meanwhile.
    order = ["hang", *(name for name in SESSIONS if name != "hang")]
    tasks = [f"{name}/{a}-scripted/r1:agent" for name in order for a in AGENTS]
    result = project.doit(
        "run", "-n", str(len(AGENTS)), f"agent={','.join(AGENTS)}", "model=scripted", *tasks
    )
    assert result.code == 0, result.out + result.err
    assert sorted(result.executed()) == sorted(tasks)
    return project


class Log:
    """One run's event log and record."""

    def __init__(self, runs: Project, session: str, agent: str) -> None:
        folder = runs.results() / f"{session}/{agent}-scripted/r1"
        self.events = [json.loads(line) for line in (folder / "events.jsonl").open()]
        self.record = json.loads((folder / "run.json").read_text())
        self.agent = agent

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["event"] == kind]

    @property
    def requests(self) -> list[tuple[int, int, int, int]]:
        """Figures of the per-request usage events of the loop: one a turn."""
        return [
            (u["input_tokens"], u["output_tokens"], u["cache_read_tokens"], u["cache_write_tokens"])
            for u in self.of("usage")
            if not u.get("side") and not u.get("total")
        ]

    @property
    def totals(self) -> list[tuple[int, int, int, int]]:
        return [
            (u["input_tokens"], u["output_tokens"], u["cache_read_tokens"], u["cache_write_tokens"])
            for u in self.of("usage")
            if u.get("total")
        ]

    @property
    def calls(self) -> list[str]:
        return [c["command"] for c in self.of("tool_call")]

    @property
    def exits(self) -> list[int | None]:
        results = {r["id"]: r["exit_code"] for r in self.of("tool_result")}
        return [results.get(c["id"]) for c in self.of("tool_call")]

    @property
    def complete(self) -> dict[str, Any]:
        assert self.events[-1]["event"] == "complete"
        return self.events[-1]


def wire(agent: str, turns: list[tuple[int, int, int, int]]) -> list[tuple[int, int, int, int]]:
    """The figures as the agent's wire can carry them: cache writes only on Anthropic's."""
    return turns if agent in ANTHROPIC_WIRE else [(i, o, r, 0) for i, o, r, _ in turns]


@pytest.mark.parametrize("agent", AGENTS)
def test_a_parallel_turn_in_the_models_order(runs: Project, agent: str) -> None:
    log = Log(runs, "parallel", agent)
    assert log.calls == PARALLEL_CALLS  # the order the model issued them in, not completion
    assert log.exits == [0, 0, 0]
    position = {(e["event"], e.get("id")): n for n, e in enumerate(log.events)}
    for call in log.of("tool_call"):
        assert position["tool_call", call["id"]] < position["tool_result", call["id"]]
    assert len(log.requests) == 2  # two model requests: the calls, then the answer
    assert log.complete["natural_stop"] is True and log.record["stop_reason"] is None


@pytest.mark.parametrize("agent", AGENTS)
def test_chosen_usage_per_turn(runs: Project, agent: str) -> None:
    log = Log(runs, "usage", agent)
    assert log.requests == wire(agent, USAGE_TURNS)
    sums = tuple(map(sum, zip(*wire(agent, USAGE_TURNS), strict=True)))
    assert log.totals == ([sums] if agent in OWN_TOTALS else [])
    assert all(u["cost_usd"] == 0.0 for u in log.of("usage"))
    assert log.calls == ["git init -q .", "git status --short"] and log.exits == [0, 0]


def test_usage_sums_are_equal_across_agents(runs: Project) -> None:
    # Uncached input, output and cache reads: the same for every agent, as the session says.
    sums = {
        agent: tuple(sum(turn[k] for turn in Log(runs, "usage", agent).requests) for k in range(3))
        for agent in AGENTS
    }
    assert set(sums.values()) == {(540, 52, 5200)}


@pytest.mark.parametrize("agent", AGENTS)
def test_an_endless_session_stops_at_the_turn_limit(runs: Project, agent: str) -> None:
    log = Log(runs, "endless", agent)
    assert len(log.requests) == 3
    assert log.calls == ["git --version"] * 3 and log.exits == [0, 0, 0]
    complete = log.complete
    assert complete["natural_stop"] is False and complete["timed_out"] is False
    assert complete["reason"] == "turn limit reached (3 turns)"
    assert log.record["stop_reason"] == "turn limit reached (3 turns)"
    assert log.record["natural_stop"] is False and log.record["status"] == "completed"


@pytest.mark.parametrize("agent", AGENTS)
def test_a_command_killed_by_a_signal(runs: Project, agent: str) -> None:
    log = Log(runs, "signals", agent)
    assert log.calls == ["sh -c 'kill -SEGV $$'", "kill -TERM $$"]
    assert log.exits == SIGNAL_EXITS[agent]
    assert len(log.requests) == 3 and log.complete["natural_stop"] is True


@pytest.mark.parametrize("agent", AGENTS)
def test_a_run_killed_at_its_timeout_keeps_turn_one(runs: Project, agent: str) -> None:
    log = Log(runs, "hang", agent)
    assert log.requests == wire(agent, USAGE_TURNS[:1])
    assert log.totals == []  # the agent never got to report its own
    assert log.calls == ["git init -q ."] and log.exits == [0]
    complete = log.complete
    assert complete["timed_out"] is True and complete["natural_stop"] is False
    assert complete["reason"].startswith("timed out after 15s")
    assert log.record["status"] == "timeout"
    assert log.record["stop_reason"] == complete["reason"]


# Layer 1 over these event logs (metrics.json): the same figures for every agent, as the
# sessions say. Fields an agent cannot give are left out (cache writes on the OpenAI wires).
SAME_METRICS = {
    "parallel": {"turns": 2, "tool_calls": 3, "tool_calls_ok": 3, "natural_stop": True},
    "usage": {
        "turns": 3,
        "tool_calls": 2,
        "total_commands": 2,
        "unique_commands": 2,
        "error_count": 0,
        "input_tokens": 540,
        "output_tokens": 52,
        "cache_read_tokens": 5200,
        "cost_usd": 0.0,
        "cost_source": "scripted",
        "usage_source": "wire",
        "client_turns": 3,
        "client_input_tokens": 540,
        "client_output_tokens": 52,
    },
    "endless": {
        "turns": 3,
        "tool_calls": 3,
        "total_commands": 3,
        "unique_commands": 1,
        "help_invocations": 0,
        "natural_stop": False,
        "stop_reason": "turn limit reached (3 turns)",
    },
    "hang": {"turns": 1, "input_tokens": 400, "output_tokens": 25, "cache_read_tokens": 1500},
}


@pytest.fixture(scope="module")
def metrics(runs: Project) -> dict[tuple[str, str], dict[str, Any]]:
    """Every run evaluated: no agent runs again, only layers 1 and 2 and the reports."""
    result = runs.doit("run", "-n", "2", f"agent={','.join(AGENTS)}", "model=scripted")
    assert not [t for t in result.executed() if t.endswith(":agent")], result.out
    return {
        (session, agent): runs.json(f"{session}/{agent}-scripted/r1/metrics.json")
        for session in SAME_METRICS
        for agent in AGENTS
    }


@pytest.mark.parametrize("session", SAME_METRICS)
def test_every_agent_gives_the_same_metrics_for_one_session(
    metrics: dict[tuple[str, str], dict[str, Any]], session: str
) -> None:
    expected = SAME_METRICS[session]
    for agent in AGENTS:
        got = {k: metrics[session, agent].get(k) for k in expected}
        assert got == expected, agent
    writes = {a: metrics[session, a]["cache_write_tokens"] for a in AGENTS}
    if session == "usage":
        assert writes == {"claude-code": 240, "opencode": 0, "codex": 0, "litellm": 0}
    if session == "usage":
        # From the wire, opencode's title request too, which its own output never shows: a
        # side request (it offers no tools), with the scripted model's figures for one.
        sides = {a: metrics[session, a]["side_requests"] for a in AGENTS}
        assert sides == {"claude-code": 0, "opencode": 1, "codex": 0, "litellm": 0}
        assert metrics[session, "opencode"]["client_side_requests"] == 0
        assert metrics[session, "opencode"]["side_input_tokens"] == 1000
        # The agents' own figures agree with the wire's: no run warns of a difference.
        for agent in AGENTS:
            assert "warnings" not in metrics[session, agent], agent
