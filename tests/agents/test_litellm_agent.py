"""llmtt's litellm loop over real HTTP on loopback: turn limit, truncation, prices, cost limit,
retries and quota errors, a command environment without a terminal, a failing or hanging
provider within the run's time, cache tokens, and the reason its exit gives for each way it
stops (a paid provider is stood in for at the wire, nowhere else)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import GIT_TOML, FakeProvider, Project, chat_answer, chat_call, serving

from llmtt.agents.base import AgentExit, RunContext
from llmtt.agents.litellm_agent import LitellmAgent, truncate
from llmtt.events import EventWriter
from llmtt.scripted.server import ScriptedServer
from llmtt.spec.config import AgentSettings, ModelSpec
from llmtt.spec.scenario import Scenario

ENABLED = {"LLMTT_ENABLED": "1", "REMOTE_KEY": "test-key"}


def scenario(project: Project, solution: list[str], extra: str = "", toml: str = "") -> None:
    project.write("llmtt.toml", GIT_TOML + toml)
    steps = "".join(f"\n  - {json.dumps(c)}" for c in solution)
    project.write("scenarios/s.yaml", f"task: {{prompt: Do it.}}\nsolution:{steps}\n{extra}")


def events(project: Project, run: str) -> list[dict[str, Any]]:
    # One record a "\n": JSON leaves U+2028 or \x85 of a binary output unescaped, and
    # str.splitlines() would cut a record there.
    with open(project.results() / run / "events.jsonl", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def test_turn_limit_stops_the_loop_without_natural_stop(project: Project) -> None:
    scenario(project, ["echo 1", "echo 2", "echo 3", "echo 4", "echo 5"], "run: {max_turns: 3}\n")
    result = project.doit("run", "agent=litellm", "model=scripted")
    assert result.code == 0, result.out + result.err
    m = project.json("s/litellm-scripted/r1/metrics.json")
    assert (m["turns"], m["tool_calls"], m["natural_stop"], m["completed"]) == (3, 3, False, True)


def test_long_output_is_cut_with_a_visible_marker(project: Project) -> None:
    scenario(
        project,
        ["head -c 5000 /dev/zero | tr '\\0' x"],
        toml="\n[agents.litellm]\nmax_output_chars = 100\n",
    )
    assert project.doit("run", "agent=litellm", "model=scripted").code == 0
    result = next(
        e for e in events(project, "s/litellm-scripted/r1") if e["event"] == "tool_result"
    )
    assert "[... 4900 characters cut by llmtt ...]" in result["output"]
    assert result["exit_code"] == 0


def test_truncate_keeps_head_and_tail() -> None:
    assert truncate("abc", 10) == "abc"
    cut = truncate("a" * 50 + "b" * 50, 20)
    assert cut.startswith("a" * 10) and cut.endswith("b" * 10) and "80 characters cut" in cut


def test_declared_prices_give_exact_cost_and_the_cost_limit_stops_the_run(project: Project) -> None:
    with ScriptedServer(["echo 1", "echo 2", "echo 3", "echo 4"]) as provider:
        toml = (
            f'\n[models.priced]\nlitellm = "openai/priced"\napi_base = "{provider.url}/v1"\n'
            'api_key_env = "REMOTE_KEY"\n'
            "input_usd_per_mtok = 10.0\noutput_usd_per_mtok = 100.0\n"
        )
        # turn costs: (1000*10 + 20*100)/1e6 = 0.012, then 0.013, ...: the limit falls in turn 2
        scenario(project, ["unused"], "cost: {max_usd: 0.02}\n", toml)
        result = project.doit("run", "agent=litellm", "model=priced", env=ENABLED)
    assert result.code == 0, result.out + result.err
    m = project.json("s/litellm-priced/r1/metrics.json")
    assert m["turns"] == 2 and m["tool_calls"] == 2
    assert m["cost_usd"] == pytest.approx(0.012 + 0.013)
    assert m["natural_stop"] is False
    texts = [e["text"] for e in events(project, "s/litellm-priced/r1") if e["event"] == "output"]
    assert any("cost limit reached: spent $0.0250 of $0.02" in t for t in texts)


ANSWER = chat_answer("All done.")


def provider_toml(url: str) -> str:
    return (
        f'\n[models.remote]\nlitellm = "openai/remote"\napi_base = "{url}"\n'
        'api_key_env = "REMOTE_KEY"\n'
        "input_usd_per_mtok = 1.0\noutput_usd_per_mtok = 1.0\n"
        "\n[agents.litellm]\nmax_retries = 3\nretry_backoff_secs = 0.01\n"
    )


def test_transient_provider_errors_are_retried(
    project: Project, provider: tuple[str, type[FakeProvider]]
) -> None:
    url, handler = provider
    handler.queue = [
        (500, {"error": {"message": "overloaded"}}),
        (503, {"error": {"message": "busy"}}),
        (200, ANSWER),
    ]
    scenario(project, ["unused"], toml=provider_toml(url))
    result = project.doit("run", "agent=litellm", "model=remote", env=ENABLED)
    assert result.code == 0, result.out + result.err
    assert len(handler.hits) == 3
    m = project.json("s/litellm-remote/r1/metrics.json")
    assert (m["turns"], m["natural_stop"], m["input_tokens"], m["output_tokens"]) == (
        1,
        True,
        10,
        5,
    )
    assert m["cost_usd"] == pytest.approx(15 / 1e6)


def test_quota_error_stops_at_once_and_the_run_stays_pending(
    project: Project, provider: tuple[str, type[FakeProvider]]
) -> None:
    url, handler = provider
    quota = {
        "error": {
            "message": "You exceeded your current quota",
            "type": "insufficient_quota",
            "code": "insufficient_quota",
        }
    }
    handler.queue = [(429, quota)]
    scenario(project, ["unused"], toml=provider_toml(url))
    result = project.doit("run", "agent=litellm", "model=remote", env=ENABLED)
    assert result.code != 0
    assert len(handler.hits) == 1  # no retry of a quota error
    run = project.json("s/litellm-remote/r1/run.json")
    assert run["status"] == "error" and "quota" in run["error"].lower()


# -- the command environment -----------------------------------------------------------------


def tool_results(project: Project, run: str) -> list[dict[str, Any]]:
    return [e for e in events(project, run) if e["event"] == "tool_result"]


def test_commands_have_no_terminal_and_pagers_and_editors_return_at_once(
    project: Project,
) -> None:
    scenario(
        project,
        [
            "git show --stat HEAD",
            "git help checkout",
            "git log",
            "touch b && git add b && git commit",
            'tty; echo "[$PAGER|$GIT_PAGER|$MANPAGER|$TERM|$NO_COLOR|$GIT_TERMINAL_PROMPT]"',
        ],
        "setup: {commands: ['git init -q', 'git commit -q --allow-empty -m first-commit']}\n",
        toml="\n[agents.litellm]\ntool_timeout_secs = 30\n",
    )
    result = project.doit("run", "agent=litellm", "model=scripted")
    assert result.code == 0, result.out + result.err
    show, manual, log, commit, tty = tool_results(project, "s/litellm-scripted/r1")
    # Under a terminal each of these waited for a pager or an editor until its time ran out.
    assert show["exit_code"] == 0 and "first-commit" in show["output"]
    assert manual["exit_code"] == 0 and "git-checkout - Switch branches" in manual["output"]
    assert log["exit_code"] == 0 and "first-commit" in log["output"]
    assert commit["exit_code"] == 1 and "Aborting commit" in commit["output"]
    assert tty["output"] == "not a tty\n[cat|cat|cat|dumb|1|0]\n"


def test_colour_codes_never_reach_the_model(
    project: Project, provider: tuple[str, type[FakeProvider]]
) -> None:
    url, handler = provider
    painted = r"printf '\033[1;31mred\033[0m \033]0;a title\007\033[2Kplain\n'"
    handler.queue = [(200, chat_call(painted)), (200, ANSWER)]
    scenario(project, ["unused"], toml=provider_toml(url))
    result = project.doit("run", "agent=litellm", "model=remote", env=ENABLED)
    assert result.code == 0, result.out + result.err
    (tool,) = tool_results(project, "s/litellm-remote/r1")
    assert tool["output"] == "red plain\n"
    seen = handler.bodies[1]["messages"][-1]
    assert seen["role"] == "tool" and seen["content"] == "red plain\n\n[exit code 0]"
    raw = (project.results() / "s/litellm-remote/r1/transcript.raw.txt").read_bytes()
    assert b"\x1b[1;31mred" in raw  # the raw transcript keeps what the command printed


def test_binary_output_is_decoded_and_a_signal_death_is_128_plus_n(project: Project) -> None:
    scenario(
        project,
        [
            r"printf 'a\377\376b\000c\n'; head -c 3000 /dev/urandom",
            "kill -KILL $$",
            "sh -c 'kill -TERM $$'; echo after $?",
        ],
    )
    result = project.doit("run", "agent=litellm", "model=scripted")
    assert result.code == 0, result.out + result.err
    binary, killed, child = tool_results(project, "s/litellm-scripted/r1")
    assert binary["exit_code"] == 0 and binary["output"].startswith("a\ufffd\ufffdb\x00c\n")
    assert killed["exit_code"] == 137  # the command itself died of SIGKILL
    assert child["exit_code"] == 0 and child["output"] == "Terminated\nafter 143\n"  # as bash says
    m = project.json("s/litellm-scripted/r1/metrics.json")
    assert (m["tool_calls"], m["natural_stop"], m["completed"]) == (3, True, True)


# The first answer waits for litellm's import in doit's worker: 3 s here, 12 s with the machine
# loaded. A run's time limit leaves room for it.
LIMIT = 12


def test_output_past_the_capture_keeps_its_head_and_tail(project: Project) -> None:
    scenario(
        project,
        ["echo FIRST; head -c 3000000 /dev/zero | tr '\\0' x; echo; echo LAST; exit 3"],
    )
    assert project.doit("run", "agent=litellm", "model=scripted").code == 0
    (result,) = tool_results(project, "s/litellm-scripted/r1")
    assert result["output"].startswith("FIRST\nxxx") and result["output"].endswith("xxx\nLAST\n")
    assert "characters cut by llmtt" in result["output"] and result["exit_code"] == 3


# -- the provider: errors, hangs, usage --------------------------------------------------------


def test_a_provider_failing_every_retry_is_an_error_not_the_agents_failure(
    project: Project, provider: tuple[str, type[FakeProvider]]
) -> None:
    """The provider's fault, not the agent's: outcome `error` with the provider's words, no
    line in results.jsonl, left pending; what the attempt cost is kept in attempts.jsonl."""
    url, handler = provider
    handler.queue = [(200, chat_call("git --version")), (500, {"error": {"message": "overloaded"}})]
    scenario(project, ["unused"], toml=provider_toml(url))
    result = project.doit("run", "agent=litellm", "model=remote", env=ENABLED)
    assert result.code != 0  # it could not be carried out: it stays pending
    assert len(handler.hits) == 1 + 4  # one answer, then the first try and 3 retries
    run = project.json("s/litellm-remote/r1/run.json")
    assert run["status"] == "error" and run["natural_stop"] is False
    assert run["error"] == (
        "the model provider failed, not the agent: request 5 (/v1/chat/completions): "
        "server error (500): overloaded"
    )
    (complete,) = [e for e in events(project, "s/litellm-remote/r1") if e["event"] == "complete"]
    assert complete["reason"].startswith("provider error: gave up after 4 attempts")
    record = project.json("s/litellm-remote/r1/result.json")
    assert record["outcome"] == "error" and "server error (500)" in record["outcome_reason"]
    assert not (project.results() / "results.jsonl").exists()
    assert "s/litellm-remote/r1: run could not be carried out: the model provider" in result.out
    (attempt,) = [
        json.loads(line)
        for line in (project.results() / "s/litellm-remote/r1/attempts.jsonl").open()
    ]
    assert attempt["provider_failed"] is True and attempt["requests"] == 5
    assert attempt["cost_usd"] == pytest.approx(15 / 1e6)  # the one answer: 10 in, 1 out


def test_an_answer_without_a_message_ends_the_run_as_a_result_keeping_its_usage(
    project: Project, provider: tuple[str, type[FakeProvider]]
) -> None:
    """A 200 whose `choices` is empty (a gateway's): paid for, nothing to read. The run used
    to fail on it with an IndexError and stay pending, to be paid for again."""
    url, handler = provider
    handler.queue = [(200, chat_call("git --version")), (200, {**ANSWER, "choices": []})]
    scenario(project, ["unused"], toml=provider_toml(url))
    result = project.doit("run", "agent=litellm", "model=remote", env=ENABLED)
    assert result.code == 0, result.out + result.err
    run = project.json("s/litellm-remote/r1/run.json")
    assert (run["status"], run["error"], run["natural_stop"]) == ("completed", None, False)
    (complete,) = [e for e in events(project, "s/litellm-remote/r1") if e["event"] == "complete"]
    assert complete["reason"] == "provider error: an answer without a message"
    m = project.json("s/litellm-remote/r1/metrics.json")
    assert (m["turns"], m["total_commands"], m["input_tokens"]) == (2, 1, 20)
    assert m["cost_usd"] == pytest.approx(30 / 1e6)
    assert project.doit("run", "agent=litellm", "model=remote", env=ENABLED).code == 0
    assert len(handler.hits) == 2  # done: not asked again


def test_a_tool_call_without_a_name_or_a_text_command_is_answered_and_evaluated(
    project: Project, provider: tuple[str, type[FakeProvider]]
) -> None:
    """A call with no function name used to be logged with `tool: null`, which the evaluation
    refused as a malformed event (whose advice, removing the log, re-runs the paid agent); a
    `command` that is not a text used to be run as its Python form (`None`)."""
    url, handler = provider
    nameless = chat_call("git --version")
    nameless["choices"][0]["message"]["tool_calls"][0]["function"]["name"] = None
    untexted = chat_call("unused", call_id="call-2")
    untexted["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = (
        '{"command": null}'
    )
    handler.queue = [(200, nameless), (200, untexted), (200, ANSWER)]
    scenario(project, ["unused"], toml=provider_toml(url))
    result = project.doit("run", "agent=litellm", "model=remote", env=ENABLED)
    assert result.code == 0, result.out + result.err
    calls = [e for e in events(project, "s/litellm-remote/r1") if e["event"] == "tool_call"]
    assert [(c["tool"], c["agent_tool"], c["command"]) for c in calls] == [
        ("", "", "git --version"),
        ("shell", "bash", ""),
    ]
    told = [m["content"] for m in handler.bodies[2]["messages"] if m["role"] == "tool"]
    assert told == [
        "error: unknown tool '' or no command; use bash",
        "error: unknown tool 'bash' or no command; use bash",
    ]
    m = project.json("s/litellm-remote/r1/metrics.json")
    assert (m["turns"], m["natural_stop"], m["outcome"]) == (3, True, "pass")  # evaluated


def serve_slowly(handler: type[FakeProvider], answered: int, trickle: bool) -> None:
    """After `answered` answers from the queue, the provider hangs: it sends nothing, or
    (`trickle`) a header and then one byte of the body every half second."""
    answer = handler.do_POST

    def slow(self: FakeProvider) -> None:
        if len(self.hits) < answered:
            answer(self)
            return
        self.hits.append(1)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if trickle:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "1000")
            self.end_headers()
        for _ in range(120):
            time.sleep(0.5)
            if trickle:
                self.wfile.write(b" ")
                self.wfile.flush()

    handler.do_POST = slow  # type: ignore[method-assign]


@pytest.fixture(scope="module")
def time_limits(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Project, dict[str, Any]]]:
    """One doit invocation, three runs at once, each meeting its time limit: a command still
    running (the scripted model), a provider that hangs silent, one that trickles a byte every
    half second (each after one answer). Together they wait out one limit, not three."""
    project = Project(tmp_path_factory.mktemp("limits") / "proj")
    servers = contextlib.ExitStack()
    handlers, toml = {}, ""
    for name, trickle in (("silent", False), ("trickling", True)):
        handler = type(name, (FakeProvider,), {"queue": [], "hits": [], "bodies": []})
        handler.queue = [(200, chat_call("echo hi"))]
        serve_slowly(handler, answered=1, trickle=trickle)
        url = servers.enter_context(serving(handler))
        handlers[name] = handler
        toml += (
            f'\n[models.{name}]\nlitellm = "openai/{name}"\napi_base = "{url}"\n'
            'api_key_env = "REMOTE_KEY"\ninput_usd_per_mtok = 1.0\noutput_usd_per_mtok = 1.0\n'
        )
    project.write(
        "llmtt.toml",
        GIT_TOML + toml + "\n[agents.litellm]\nmax_retries = 3\nretry_backoff_secs = 0.01\n",
    )
    limit = f"run: {{timeout_secs: {LIMIT}}}\n"
    for name, model, steps in (
        ("command", "scripted", ["sleep 60 & echo started; sleep 70", "echo never"]),
        ("silent", "silent", ["unused"]),
        ("trickling", "trickling", ["unused"]),
    ):
        solution = "".join(f"\n  - {json.dumps(c)}" for c in steps)
        project.write(
            f"scenarios/{name}.yaml",
            f"task: {{prompt: Do it.}}\nmatrix: {{agents: [litellm], models: [{model}]}}\n"
            f"solution:{solution}\n{limit}",
        )
    result = project.doit("run", "-n", "3", env=ENABLED)
    assert result.code == 0, result.out + result.err
    with servers:
        yield project, handlers


def test_a_command_running_into_the_time_limit_ends_the_run_there(
    time_limits: tuple[Project, dict[str, Any]],
) -> None:
    project, _ = time_limits
    run = project.json("command/litellm-scripted/r1/run.json")
    assert (run["status"], run["timed_out"]) == ("timeout", True)
    assert LIMIT <= run["agent_duration_secs"] <= LIMIT + 10  # at its limit, not after sleep 70
    (stopped,) = tool_results(project, "command/litellm-scripted/r1")
    assert (stopped["output"], stopped["exit_code"]) == ("started\n", None)


@pytest.mark.parametrize("name", ["silent", "trickling"])
def test_a_hanging_provider_ends_the_run_at_its_time_limit_keeping_its_spend(
    time_limits: tuple[Project, dict[str, Any]], name: str
) -> None:
    project, handlers = time_limits
    where = f"{name}/litellm-{name}/r1"
    run = project.json(f"{where}/run.json")
    assert (run["status"], run["timed_out"], run["exit_code"]) == ("timeout", True, None)
    # A bound, not a speed target: before, each of 4 attempts waited the whole time left.
    assert LIMIT <= run["agent_duration_secs"] <= LIMIT + 10
    assert len(handlers[name].hits) == 2
    (complete,) = [e for e in events(project, where) if e["event"] == "complete"]
    assert complete["timed_out"] and complete["natural_stop"] is False
    assert complete["reason"].startswith(f"timed out after {LIMIT}s waiting for the model")
    m = project.json(f"{where}/metrics.json")
    assert (m["turns"], m["tool_calls"], m["input_tokens"], m["output_tokens"]) == (1, 1, 10, 5)


def cached_usage(answer: dict[str, Any]) -> dict[str, Any]:
    answer["usage"] = {
        "prompt_tokens": 1000,
        "completion_tokens": 5,
        "total_tokens": 1005,
        "prompt_tokens_details": {"cached_tokens": 800},
        "cache_creation_input_tokens": 150,
    }
    return answer


ANTHROPIC_ANSWER = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-test",
    "content": [{"type": "text", "text": "All done."}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 50,
        "output_tokens": 5,
        "cache_read_input_tokens": 800,
        "cache_creation_input_tokens": 150,
    },
}


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_cache_reads_and_writes_are_kept_apart_from_uncached_input(
    project: Project, provider: tuple[str, type[FakeProvider]], wire: str
) -> None:
    url, handler = provider
    if wire == "openai":
        handler.queue = [(200, cached_usage(chat_answer("All done.")))]
        toml = provider_toml(url)
    else:  # litellm's own Anthropic client posts to <api_base>/v1/messages
        handler.queue = [(200, ANTHROPIC_ANSWER)]
        toml = provider_toml(url.removesuffix("/v1")).replace(
            '"openai/remote"', '"anthropic/claude-test"'
        )
    scenario(project, ["unused"], toml=toml)
    result = project.doit("run", "agent=litellm", "model=remote", env=ENABLED)
    assert result.code == 0, result.out + result.err
    (usage,) = [e for e in events(project, "s/litellm-remote/r1") if e["event"] == "usage"]
    assert (
        usage["input_tokens"],
        usage["cache_read_tokens"],
        usage["cache_write_tokens"],
        usage["output_tokens"],
    ) == (50, 800, 150, 5)
    assert usage["cost_usd"] == pytest.approx(1005 / 1e6)  # cached input at the input price
    assert project.json("s/litellm-remote/r1/metrics.json")["input_tokens"] == 50


# -- how the loop ends: the same reason in its exit (run.json's stop_reason) and its events ----


def run_loop(
    tmp_path: Path,
    model: str,
    *,
    url: str | None = None,
    max_turns: int = 10,
    timeout_secs: float = 30,
    budget: Callable[[float], str | None] | None = None,
    out: io.StringIO | None = None,
) -> tuple[AgentExit, dict[str, Any]]:
    """Run the loop in this process; its exit and the `complete` event it ended its log with
    (the whole log in `out`, when given)."""
    out = io.StringIO() if out is None else out
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    remote = ModelSpec(
        litellm="openai/remote",
        api_base=url,
        api_key_env="REMOTE_KEY",
        input_usd_per_mtok=1.0,
        output_usd_per_mtok=1.0,
    )
    ctx = RunContext(
        run_id="r",
        scenario=Scenario.model_validate({"task": {"prompt": "Do it."}}),
        prompt="Do it.",
        workspace=workspace,
        home=tmp_path,
        env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)},
        model=model,
        timeout_secs=timeout_secs,
        max_turns=max_turns,
        transcript=io.BytesIO(),
        events=EventWriter(out),
        model_url=url,
        models={"remote": remote},
        session_budget=budget,
    )
    settings = AgentSettings(max_retries=1, retry_backoff_secs=0.01)
    ended = LitellmAgent(settings, tmp_path).run(ctx)
    *_, complete = [json.loads(line) for line in out.getvalue().split("\n") if line]
    assert complete["event"] == "complete"
    return ended, complete


def test_the_exit_says_why_the_loop_stopped_at_its_turn_limit(tmp_path: Path) -> None:
    with ScriptedServer(["echo 1", "echo 2", "echo 3"]) as server:
        ended, complete = run_loop(tmp_path, "scripted", url=server.url, max_turns=2)
    assert ended.reason == complete["reason"] == "turn limit reached (2 turns)"
    assert (ended.error, ended.natural_stop, ended.exit_code) == (None, False, 0)


def test_the_exit_says_why_the_loop_stopped_on_a_provider_error(
    tmp_path: Path, provider: tuple[str, type[FakeProvider]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, handler = provider
    handler.queue = [(200, chat_call("echo hi")), (500, {"error": {"message": "overloaded"}})]
    monkeypatch.setenv("REMOTE_KEY", "test-key")
    ended, complete = run_loop(tmp_path, "remote", url=url)
    assert ended.reason == complete["reason"]
    assert ended.reason is not None and ended.reason.startswith("provider error: gave up after 2")
    assert (ended.error, ended.natural_stop, ended.exit_code) == (None, False, 1)


def test_the_exit_says_why_the_loop_stopped_at_its_time_or_budget(tmp_path: Path) -> None:
    with ScriptedServer(["echo 1", "echo 2"]) as server:
        late, complete = run_loop(tmp_path, "scripted", url=server.url, timeout_secs=0)
        assert late.reason == complete["reason"] == "timed out after 0s"
        assert (late.timed_out, late.error, late.exit_code) == (True, None, None)
        spent = "budget exhausted: spent $0 of $0"
        broke, complete = run_loop(tmp_path, "scripted", url=server.url, budget=lambda _: spent)
        # The budget stops a run that is then not a result: its error is the reason too.
        assert broke.reason == broke.error == complete["reason"] == spent
        done, complete = run_loop(tmp_path, "scripted", url=server.url)
        assert done.reason is None and "reason" not in complete and done.natural_stop


def test_a_tool_call_with_a_nul_byte_is_answered_and_the_loop_goes_on(tmp_path: Path) -> None:
    """Python refuses to start such a command ("embedded null byte"): raised out of the loop,
    it ended the run with a traceback and no run.json, so every `doit run` paid for it again."""
    out = io.StringIO()
    with ScriptedServer(["echo a\0; touch cut", "echo after"]) as server:
        ended, complete = run_loop(tmp_path, "scripted", url=server.url, out=out)
    assert (ended.natural_stop, ended.error, complete["turns"]) == (True, None, 3)
    results = [json.loads(line) for line in out.getvalue().splitlines()]
    nul, after = [e for e in results if e["event"] == "tool_result"]
    assert nul["exit_code"] == 126 and "contains a NUL byte (character 7)" in nul["output"]
    assert after["exit_code"] == 0 and after["output"] == "after\n"
    assert not (tmp_path / "workspace" / "cut").exists()
