"""Provider faults through the gateway, for claude-code, opencode, codex and the litellm loop,
against a paid endpoint on loopback (the scripted model, priced and keyed): one that answers 429
with a Retry-After to every request, and one that cuts every first answer after its first
streamed event. Neither is the agent's failure: each run's outcome is `error` with the
provider's cause in the console and every report, it has no line in results.jsonl, it stays
pending and is tried again by the next `doit run`, at most `[run] provider_attempts` times in
a row, every attempt (what it cost, a lower bound where the provider cut its report) kept."""

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
    """Three invocations over the same 8 runs: the first attempt, the retry, the refusal."""
    root = tmp_path_factory.mktemp("faults")
    logs = {name: root / f"{name}.log" for name in ("limited", "cut")}
    with (
        ScriptedServer(LIMITED, logs["limited"], api_key=KEY) as limited,
        ScriptedServer(CUT, logs["cut"], api_key=KEY) as cut,
    ):
        project = cli_project(
            root / "p",
            _model("limited", limited.url)
            + _model("cut", cut.url)
            + "\n[run]\nprovider_attempts = 2\n",
        )
        project.write(
            "scenarios/s.yaml",
            "task: {prompt: Write out.txt.}\nrun: {timeout_secs: 15}\n"
            "evaluation: {gates: [{type: file_exists, path: out.txt}]}\n",
        )
        # Each cut answer is held at its worst ($0.48 at claude's max_tokens) while it runs.
        args = ("-n", "8", f"agent={','.join(AGENTS)}", "model=limited,cut", "budget=1000")
        env = {"LLMTT_ENABLED": "1", "PAID_KEY": KEY}
        rounds, asked, seen = [], [], []
        for _ in range(3):
            rounds.append(project.doit("run", *args, env=env))
            asked.append({name: len(log.read_text().splitlines()) for name, log in logs.items()})
            seen.append(_seen(project))
    return {"project": project, "rounds": rounds, "asked": asked, "seen": seen}


def _seen(project: Project) -> dict[str, Any]:
    """What one invocation left: each run's result and wire records, and the reports."""
    out: dict[str, Any] = {
        name: (project.results() / name).read_text()
        for name in ("report.md", "report.json", "report.html", "junit.xml")
    }
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
    results = faults["project"].results() / "results.jsonl"
    lines = results.read_text().splitlines() if results.exists() else []
    assert not [line for line in lines if json.loads(line)["run_id"] == run]
    turns = [r for r in wire if r["tools"]]  # opencode's title request is answered
    if model == "limited":
        assert turns and all(r["fault"] == "rate_limited" and r["message"] for r in turns)
        # Every agent waited the Retry-After between attempts: the gateway held them back.
        times = [r["ts"] for r in turns]
        assert all(b - a >= 0.9 for a, b in zip(times, times[1:], strict=False)), times
    else:
        assert any(r.get("fault") == "cut" for r in turns), wire


@pytest.mark.parametrize(("agent", "model"), _runs())
def test_each_attempt_is_kept_and_a_cut_report_is_a_lower_bound(
    faults: dict[str, Any], agent: str, model: str
) -> None:
    project: Project = faults["project"]
    run = f"s/{agent}-{model}/r1"
    attempts = _attempts(project, run)
    # Tried again by the second invocation, then no more (provider_attempts = 2).
    assert len(attempts) == 2 and all(a["provider_failed"] for a in attempts), attempts
    for attempt, seen in zip(attempts, faults["seen"][:2], strict=True):
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
        assert attempt["cost_lower_bound"] is bool(cuts) is (model == "cut")
        if agent == "claude-code" and model == "cut":
            # A cut stream showed its input; claude then asks again unstreamed, also cut.
            assert all(r["input_tokens"] == 700 for r in cuts if r["stream"]), cuts


def test_the_third_invocation_refuses_without_asking_the_provider(faults: dict[str, Any]) -> None:
    for result in faults["rounds"]:
        assert result.code != 0  # runs that could not be carried out stay pending
    first, second, third = faults["asked"]
    assert second["limited"] > first["limited"] and second["cut"] > first["cut"]  # retried
    assert third == second  # the refusal asked nothing
    for agent, model in _runs():
        reason = faults["seen"][2][f"{agent}-{model}"]["result"]["outcome_reason"]
        assert "not tried again: the model provider failed the last 2 attempts" in reason
        assert "remove " in reason and "provider_attempts" in reason


def test_no_attempt_booked_more_than_its_worst_case(faults: dict[str, Any]) -> None:
    """The ledger of the last invocation books nothing: no request was sent."""
    project: Project = faults["project"]
    ledger = json.loads((project.results() / ".llmtt-cache/budget.json").read_text())
    assert ledger["spent"] == 0.0 and ledger["reserved"] == {}


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
        good = project.doit(
            "run", "agent=litellm", "model=paid", "scenario=good", "budget=1", env=env
        )
    assert broken.code != 0 and "setup command `exit 3` failed" in broken.out
    assert spent["spent"] == 0.0  # three holds of $0.35, none booked
    assert good.code == 0, good.out + good.err
    assert project.json("good/litellm-paid/r1/result.json")["outcome"] == "pass"
