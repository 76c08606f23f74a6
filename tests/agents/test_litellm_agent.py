"""llmtt's litellm loop over real HTTP on loopback: turn limit, truncation, prices, cost limit,
retries and quota errors (a paid provider is stood in for at the wire, nowhere else)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import GIT_TOML, FakeProvider, Project, chat_answer

from llmtt.agents.litellm_agent import truncate
from llmtt.scripted import ScriptedServer

ENABLED = {"LLMTT_ENABLED": "1", "REMOTE_KEY": "test-key"}


def scenario(project: Project, solution: list[str], extra: str = "", toml: str = "") -> None:
    project.write("llmtt.toml", GIT_TOML + toml)
    steps = "".join(f"\n  - {json.dumps(c)}" for c in solution)
    project.write("scenarios/s.yaml", f"task: {{prompt: Do it.}}\nsolution:{steps}\n{extra}")


def events(project: Project, run: str) -> list[dict[str, Any]]:
    text = (project.results() / run / "events.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


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
