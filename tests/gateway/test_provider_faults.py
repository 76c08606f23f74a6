"""Provider faults through the gateway, for claude-code, opencode, codex and the litellm loop,
against a paid endpoint on loopback (the scripted model, priced and keyed): one that answers 429
with a Retry-After to every request, and one that cuts every first answer after its first
streamed event. Neither is the agent's failure: each run's outcome is `error` with the
provider's cause in the console and every report, it has no line in results.jsonl, it stays
pending and the next `doit run` tries it again (at most `[run] provider_attempts` times in a
row), every attempt (what it cost, a lower bound where the provider cut its report) kept. The
budget and the cost limit hold at the wire whatever the agent does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llmtt.scripted.server import ScriptedServer
from llmtt.spec.scripted import Hang, HttpError, ScriptedSession, Turn, TurnUsage
from tests.conftest import CLI_AGENTS, Project, cli_project

KEY = "sk-paid-endpoint-5b1"
AGENTS = CLI_AGENTS
LIMITED = ScriptedSession(
    turns=[
        Turn(run=["echo a > out.txt"], error=HttpError(status=429, headers={"Retry-After": "1"}))
    ]
)
CUT = ScriptedSession(
    turns=[
        Turn(
            run=["echo a > out.txt"],
            usage=TurnUsage(input=700, output=30),
            hang=Hang(secs=0.05, at="stream", cut=True),
        )
    ]
)
PRICES = "input_usd_per_mtok = 3.0\noutput_usd_per_mtok = 15.0\n"


def _model(name: str, url: str) -> str:
    return (
        f'\n[models.{name}]\napi_base = "{url}/v1"\napi_key_env = "PAID_KEY"\n'
        f'litellm = "openai/{name}"\n{PRICES}'
    )


@pytest.fixture(scope="module")
def faults(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two invocations over the same 8 runs: the first meets the faults; before the second, both
    models are pointed at a provider that answers (an endpoint is not part of a run's key), and
    the second tries the runs again."""
    root = tmp_path_factory.mktemp("faults")
    logs = {name: root / f"{name}.log" for name in ("limited", "cut", "good")}
    with (
        ScriptedServer(LIMITED, logs["limited"], api_key=KEY) as limited,
        ScriptedServer(CUT, logs["cut"], api_key=KEY) as cut,
        ScriptedServer(["echo a > out.txt"], logs["good"], api_key=KEY) as good,
    ):
        project = cli_project(root / "p", _model("limited", limited.url) + _model("cut", cut.url))
        project.write(
            "scenarios/s.yaml",
            "task: {prompt: Write out.txt.}\nrun: {timeout_secs: 15}\n"
            "evaluation: {gates: [{type: file_exists, path: out.txt}]}\n",
        )
        # Each cut answer is held at its worst ($0.48 at claude's max_tokens) while it runs.
        args = ("-n", "8", f"agent={','.join(AGENTS)}", "model=limited,cut", "budget=1000")
        env = {"LLMTT_ENABLED": "1", "PAID_KEY": KEY}
        rounds, seen = [project.doit("run", *args, env=env)], [_seen(project)]
        toml = project.root / "llmtt.toml"
        toml.write_text(toml.read_text().replace(limited.url, good.url).replace(cut.url, good.url))
        # Four at once: the retry measures the gateway, not 8 agents starting on 2 cores
        # within a 15 s limit (on a busy machine opencode alone takes 5 s to start).
        again = ("-n", "4", *args[2:])
        rounds.append(project.doit("run", *again, env=env))
        seen.append(_seen(project))
    return {"project": project, "rounds": rounds, "seen": seen}


def _seen(project: Project) -> dict[str, Any]:
    """What one invocation left: each run's result and wire records, and the reports."""
    out: dict[str, Any] = {
        name: (project.results() / name).read_text()
        for name in ("report.md", "report.json", "report.html", "junit.xml")
    }
    results = project.results() / "results.jsonl"
    out["results"] = [json.loads(line) for line in results.open()] if results.exists() else []
    for agent, model in _runs():
        run = project.results() / f"s/{agent}-{model}/r1"
        wire = run / "wire.jsonl"
        out[f"{agent}-{model}"] = {
            "result": json.loads((run / "result.json").read_text()),
            "wire": [json.loads(line) for line in wire.open()] if wire.exists() else None,
        }
    return out


def _runs() -> list[tuple[str, str]]:
    return [(agent, model) for agent in AGENTS for model in ("limited", "cut")]


def _attempts(project: Project, run: str) -> list[dict[str, Any]]:
    path = project.results() / run / "attempts.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize(("agent", "model"), _runs())
def test_a_provider_fault_is_an_error_with_its_cause_never_a_failure(
    faults: dict[str, Any], agent: str, model: str
) -> None:
    first, seen = faults["rounds"][0], faults["seen"][0]
    run = f"s/{agent}-{model}/r1"
    record, wire = seen[f"{agent}-{model}"]["result"], seen[f"{agent}-{model}"]["wire"]
    cause = "rate limited (429), Retry-After 1 s" if model == "limited" else "answer cut short"
    assert record["outcome"] == "error", (agent, record["outcome_reason"], wire)
    assert record["outcome_reason"].startswith(
        "run could not be carried out: the model provider failed, not the agent: request "
    )
    assert cause in record["outcome_reason"]
    assert f"{run}: could not be carried out: the model provider failed" in first.out
    for name in ("report.md", "report.json", "report.html", "junit.xml"):
        assert run in seen[name] and cause in seen[name], name
    assert not [r for r in seen["results"] if r["run_id"] == run]  # in no pass rate
    turns = [r for r in wire if r["tools"]]  # opencode's title request is answered
    if model == "limited":
        assert turns and all(r["fault"] == "rate_limited" and r["message"] for r in turns)
        # Each attempt went upstream no sooner than the Retry-After before it allowed: the
        # gateway held back an agent that asked sooner.
        sent = [r["ts"] + r.get("waited_secs", 0) for r in turns]
        assert all(b - a >= 0.99 for a, b in zip(sent, sent[1:], strict=False)), sent
    else:
        assert any(r.get("fault") == "cut" for r in turns), wire


@pytest.mark.parametrize(("agent", "model"), _runs())
def test_each_attempt_is_kept_and_a_cut_report_is_a_lower_bound(
    faults: dict[str, Any], agent: str, model: str
) -> None:
    project: Project = faults["project"]
    attempts = _attempts(project, f"s/{agent}-{model}/r1")
    # Tried again by the second invocation, which the provider answered: it counts now.
    assert [a["provider_failed"] for a in attempts] == [True, False], attempts
    for attempt, seen in zip(attempts, faults["seen"], strict=True):
        wire = seen[f"{agent}-{model}"]["wire"]
        assert attempt["requests"] == len(wire)
        # Every answered request at the price, a cut one as far as the wire showed it (on
        # the Anthropic wire, message_start's 700 input tokens).
        priced = sum(
            (r["input_tokens"] * 3.0 + r["output_tokens"] * 15.0) / 1e6
            for r in wire
            if r["status"] < 400
        )
        assert attempt["cost_usd"] == pytest.approx(priced)
        cuts = [r for r in wire if r.get("fault") == "cut"]
        assert attempt["cost_lower_bound"] is bool(cuts)
    first = faults["seen"][0][f"{agent}-{model}"]["wire"]
    cuts = [r for r in first if r.get("fault") == "cut"]
    assert bool(cuts) is (model == "cut")
    if agent == "claude-code" and model == "cut":
        # A cut stream showed its input; claude then asks again unstreamed, also cut.
        assert all(r["input_tokens"] == 700 for r in cuts if r["stream"]), cuts


def test_the_retry_is_judged_and_counted_once(faults: dict[str, Any]) -> None:
    project: Project = faults["project"]
    assert faults["rounds"][0].code != 0  # runs that could not be carried out stay pending
    assert faults["rounds"][1].code == 0, faults["rounds"][1].out
    lines = (project.results() / "results.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["run_id"] for line in lines) == sorted(
        f"s/{agent}-{model}/r1" for agent, model in _runs()
    )
    summary = project.json("report.json")["summary"]
    assert (summary["passed"], summary["errors"]) == (8, 0)


def test_a_run_the_provider_failed_too_often_is_not_tried_again(tmp_path: Path) -> None:
    """[run] provider_attempts = 2, and the provider failed the run's last two attempts: the
    next `doit run` refuses it before its agent starts, saying how to try again; a changed run
    (a new key) starts a new count. (The oracle agent: the refusal comes before any agent.)"""
    project = cli_project(tmp_path / "p", "\n[run]\nprovider_attempts = 2\n")
    project.write(
        "scenarios/s.yaml", "task: {prompt: Write out.txt.}\nsolution: ['echo a > out.txt']\n"
    )
    args = ("agent=oracle",)
    assert project.doit("run", *args).code == 0
    run = project.results() / "s/oracle/r1"
    (attempt,) = _attempts(project, "s/oracle/r1")
    failed = {**attempt, "provider_failed": True, "error": "the model provider failed: 429"}
    # An attempt lost with its worker in between says nothing of the provider: still two.
    lost = {**attempt, "status": "error", "lost": True, "error": "the worker ... was killed"}
    attempts = (failed, lost, failed)
    (run / "attempts.jsonl").write_text("".join(json.dumps(a) + "\n" for a in attempts))
    assert project.doit("forget", *args).code == 0  # the agent layer pending again
    (run / "workspace" / "out.txt").unlink()
    refused = project.doit("run", *args)
    assert refused.code != 0
    assert "not tried again: the model provider failed the last 2 attempts" in refused.out
    assert f"remove {run / 'attempts.jsonl'} to try again" in refused.out
    assert not (run / "workspace" / "out.txt").exists()  # no agent ran
    assert len(_attempts(project, "s/oracle/r1")) == 3  # a refusal is no attempt
    project.write("scenarios/s.yaml", "task: {prompt: Write it.}\nsolution: ['echo a > out.txt']\n")
    again = project.doit("run", *args)
    assert again.code == 0, again.out  # a new key: a new count
    assert project.json("s/oracle/r1/result.json")["outcome"] == "pass"


def test_a_set_up_that_fails_books_nothing(tmp_path: Path) -> None:
    """Runs whose set-up failed sent no request: their holds are released, so the good runs
    after them are not refused for a budget they never spent."""
    with ScriptedServer(["echo ok > out.txt"], api_key=KEY) as provider:
        project = cli_project(tmp_path / "p", _model("paid", provider.url))
        project.write(
            "scenarios/broken.yaml",
            "task: {prompt: Go.}\nsetup: {commands: ['exit 3']}\ncost: {max_usd: 0.35}\n",
        )
        project.write(
            "scenarios/good.yaml",
            "task: {prompt: Go.}\ncost: {max_usd: 0.35}\n"
            "evaluation: {gates: [{type: file_exists, path: out.txt}]}\n",
        )
        env = {"LLMTT_ENABLED": "1", "PAID_KEY": KEY}
        broken = project.doit(
            "run",
            "agent=litellm",
            "model=paid",
            "scenario=broken",
            "repeats=3",
            "budget=1",
            env=env,
        )
        spent = json.loads((project.results() / ".llmtt-cache/budget.json").read_text())
        # What a killed attempt would have left half-written is no sign of spending either.
        for run in project.results().glob("broken/litellm-paid/r*"):
            (run / "events.jsonl.part").write_text("{}\n")
        good = project.doit(
            "run", "agent=litellm", "model=paid", "scenario=broken,good", "budget=1", env=env
        )
        again = json.loads((project.results() / ".llmtt-cache/budget.json").read_text())
    assert broken.code != 0 and "setup command `exit 3` failed" in broken.out
    assert spent["spent"] == 0.0  # three holds of $0.35, none booked
    assert project.json("good/litellm-paid/r1/result.json")["outcome"] == "pass", good.out
    # Only the good run's few cents: the broken runs' holds were released again.
    cost = project.json("good/litellm-paid/r1/metrics.json")["cost_usd"]
    assert again["spent"] == pytest.approx(cost) and 0 < cost < 0.35


def test_an_answer_cut_and_asked_again_leaves_a_run_that_stands_at_a_lower_bound(
    tmp_path: Path,
) -> None:
    """The litellm loop asks again for an answer the provider cut: nothing was lost, so its run
    is judged, and its cost (the cut answer counted as far as it went) is a lower bound in
    every place it is shown."""
    session = ScriptedSession(
        turns=[
            Turn(
                run=["echo a > out.txt"],
                usage=TurnUsage(input=700, output=30),
                hang=Hang(secs=0.05, cut=True, times=1),
            ),
            Turn(say="Done.", usage=TurnUsage(input=800, output=10)),
        ]
    )
    with ScriptedServer(session, api_key=KEY) as provider:
        project = cli_project(
            tmp_path / "p",
            _model("paid", provider.url)
            + "\n[agents.litellm]\nmax_retries = 2\nretry_backoff_secs = 0.01\n",
        )
        project.write(
            "scenarios/s.yaml",
            "task: {prompt: Write out.txt.}\n"
            "evaluation: {gates: [{type: file_exists, path: out.txt}]}\n",
        )
        env = {"LLMTT_ENABLED": "1", "PAID_KEY": KEY}
        result = project.doit("run", "agent=litellm", "model=paid", env=env)
    assert result.code == 0, result.out + result.err
    run = "s/litellm-paid/r1"
    record = project.json(f"{run}/result.json")
    metrics = project.json(f"{run}/metrics.json")
    assert record["outcome"] == "pass"
    assert (metrics["requests"], metrics["turns"], metrics["cost_lower_bound"]) == (3, 2, True)
    # The two answers that arrived whole, to the cent; the cut one showed nothing.
    assert metrics["cost_usd"] == pytest.approx((1500 * 3.0 + 40 * 15.0) / 1e6)
    assert "request 1 (/v1/chat/completions): the answer was cut short" in record["outcome_reason"]
    assert "≥ " in (project.results() / "report.md").read_text()
    assert "The cost is a lower bound" in (project.results() / run / "evaluation.md").read_text()
    report = project.json("report.json")
    assert report["summary"]["cost_lower_bound"] is True


def test_no_agent_spends_past_its_cost_limit(tmp_path: Path) -> None:
    """Each turn costs $0.315 and a run may spend $0.50: whatever an agent does, no request
    after its second turn reaches the provider (the gateway refuses it, if the harness has not
    stopped the agent first), and the run stops for its cost limit."""
    turn = TurnUsage(input=100_000, output=1_000)
    session = ScriptedSession(turns=[Turn(run=[f"echo {i}"], usage=turn) for i in range(6)])
    log = tmp_path / "provider.log"
    with ScriptedServer(session, log, api_key=KEY) as provider:
        project = cli_project(tmp_path / "p", _model("paid", provider.url))
        project.write(
            "scenarios/s.yaml",
            "task: {prompt: Count.}\nrun: {timeout_secs: 60}\ncost: {max_usd: 0.5}\n",
        )
        env = {"LLMTT_ENABLED": "1", "PAID_KEY": KEY}
        result = project.doit("run", "-n", "4", f"agent={','.join(AGENTS)}", "model=paid", env=env)
    assert result.code == 0, result.out + result.err
    asked = [json.loads(line) for line in log.read_text().splitlines()]
    assert len([r for r in asked if r["tools"]]) <= 2 * len(AGENTS)
    for agent in AGENTS:
        run = f"s/{agent}-paid/r1"
        wire = [json.loads(line) for line in (project.results() / run / "wire.jsonl").open()]
        sent = [r for r in wire if r["tools"] and not r.get("refused")]
        assert len(sent) <= 2, (agent, wire)
        metrics = project.json(f"{run}/metrics.json")
        assert metrics["cost_usd"] == pytest.approx(0.315 * len(sent) + metrics["side_cost_usd"])
        stopped = project.json(f"{run}/run.json")["stop_reason"]
        assert stopped.startswith("cost limit reached"), (agent, stopped)


def test_the_litellm_loop_refused_at_its_cost_limit_is_judged(tmp_path: Path) -> None:
    """A turn that spends exactly the limit: the loop's own count goes on (it stops past the
    limit), the gateway refuses the next request (it stops at the limit), litellm takes the 400
    for an error of its own; the run is still judged, stopped for its cost limit."""
    turns = [Turn(run=["echo a > out.txt"], usage=TurnUsage(input=500_000, output=0))]
    session = ScriptedSession(turns=[*turns, Turn(say="Done.")])
    with ScriptedServer(session, api_key=KEY) as provider:
        project = cli_project(
            tmp_path / "p",
            f'\n[models.paid]\napi_base = "{provider.url}/v1"\napi_key_env = "PAID_KEY"\n'
            'litellm = "openai/paid"\ninput_usd_per_mtok = 1.0\noutput_usd_per_mtok = 0.0\n',
        )
        project.write(
            "scenarios/s.yaml",
            "task: {prompt: Write out.txt.}\ncost: {max_usd: 0.5}\n"
            "evaluation: {gates: [{type: file_exists, path: out.txt}]}\n",
        )
        env = {"LLMTT_ENABLED": "1", "PAID_KEY": KEY}
        result = project.doit("run", "agent=litellm", "model=paid", env=env)
    assert result.code == 0, result.out + result.err
    run = project.json("s/litellm-paid/r1/run.json")
    assert (run["status"], run["stop_reason"]) == (
        "completed",
        "cost limit reached: spent $0.5000 of $0.5",
    )
    assert project.json("s/litellm-paid/r1/result.json")["outcome"] == "pass"
