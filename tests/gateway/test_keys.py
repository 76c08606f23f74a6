"""Keys stay in the harness: the real CLIs, against a paid endpoint on loopback (the scripted
model, requiring the key), get the gateway's URL and a placeholder. Their commands look for
the key everywhere they can; it is found in no file of the run, and the endpoint still got it
on every request."""

from __future__ import annotations

import json
from pathlib import Path

from llmtt.scripted.server import ScriptedServer
from tests.conftest import cli_project

KEY = "sk-planted-7d2e41ab9c"
AGENTS = ("claude-code", "opencode", "codex")


def test_the_agent_never_holds_the_key_the_gateway_adds(tmp_path: Path) -> None:
    hunt = [
        "env > seen-env.txt; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' >> seen-env.txt",
        # done.txt first: the gate shows the run got this far whatever the search costs (an
        # agent CLI may stop a slow command). -D skip: a named pipe would hold grep for ever.
        "echo hunted > done.txt; timeout 5 grep -rlI -D skip sk-planted ~ . > found.txt",
    ]
    log = tmp_path / "provider.log"
    with ScriptedServer(hunt, log=log, api_key=KEY) as provider:
        project = cli_project(
            tmp_path / "p",
            f'\n[models.paid]\napi_base = "{provider.url}/v1"\napi_key_env = "PAID_KEY"\n',
        )
        project.write(
            "scenarios/keys.yaml",
            json.dumps(
                {
                    "task": {"prompt": "look around"},
                    "evaluation": {"gates": [{"type": "file_exists", "path": "done.txt"}]},
                }
            ),
        )
        result = project.doit(
            "run",
            "-n",
            "3",
            f"agent={','.join(AGENTS)}",
            "model=paid",
            env={"LLMTT_ENABLED": "1", "PAID_KEY": KEY},
        )
    assert result.code == 0, result.out + result.err
    statuses = [json.loads(line)["status"] for line in log.read_text().splitlines()]
    assert statuses and set(statuses) == {200}  # every request carried the real key
    for agent in AGENTS:
        run = project.results() / "keys" / f"{agent}-paid" / "r1"
        record = project.json(f"keys/{agent}-paid/r1/result.json")
        events = (run / "events.jsonl").read_text()
        assert record["outcome"] == "pass", (agent, record["outcome_reason"], events[-3000:])
        assert (run / "workspace" / "seen-env.txt").stat().st_size > 0  # it did look
        for path in run.rglob("*"):
            if path.is_file():
                assert KEY.encode() not in path.read_bytes(), (agent, path)
        wire = [json.loads(line) for line in (run / "wire.jsonl").read_text().splitlines()]
        assert wire and all(r["status"] == 200 and r["complete"] for r in wire), agent


def test_a_clis_own_provider_is_reached_through_the_gateway_too(tmp_path: Path) -> None:
    """A model without `api_base`: claude-code, codex, opencode (its Anthropic and OpenAI
    providers) and the litellm loop reach their own provider (moved to loopback by the variables they themselves honour) through the gateway,
    holding a placeholder; the key the caller set never enters the run."""
    log = tmp_path / "provider.log"
    hunt = [
        "env > seen-env.txt; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' >> seen-env.txt",
        "echo hunted > done.txt; timeout 5 grep -rlI -D skip sk-planted ~ . > found.txt",
    ]
    with ScriptedServer(hunt, log=log, api_key=KEY) as provider:
        # The litellm loop: a model litellm reaches at Anthropic's own endpoint.
        # opencode: its own providers, by `provider/model` ids.
        project = cli_project(
            tmp_path / "p",
            '\n[models.sonnet]\nlitellm = "anthropic/claude-sonnet-4-5"\n'
            '\n[models.oc-a]\nid = "anthropic/claude-sonnet-4-5"\n'
            '\n[models.oc-o]\nid = "openai/gpt-5"\n',
        )
        project.write(
            "scenarios/keys.yaml",
            json.dumps(
                {
                    "task": {"prompt": "look around"},
                    "evaluation": {"gates": [{"type": "file_exists", "path": "done.txt"}]},
                }
            ),
        )
        runs = [
            ("claude-code", "claude-sonnet-4-5"),
            ("codex", "gpt-5"),
            ("litellm", "sonnet"),
            ("opencode", "oc-a"),
            ("opencode", "oc-o"),
        ]
        result = project.doit(
            "run",
            "-n",
            "4",
            "agent=claude-code,codex,litellm,opencode",
            "model=claude-sonnet-4-5,gpt-5,sonnet,oc-a,oc-o",
            *(f"keys/{agent}-{model}/r1" for agent, model in runs),
            env={
                "LLMTT_ENABLED": "1",
                "ANTHROPIC_API_KEY": KEY,
                "ANTHROPIC_BASE_URL": provider.url,
                "OPENAI_API_KEY": KEY,
                "OPENAI_BASE_URL": f"{provider.url}/v1",
            },
        )
    assert result.code == 0, result.out + result.err
    statuses = [json.loads(line)["status"] for line in log.read_text().splitlines()]
    assert statuses and set(statuses) == {200}  # every request carried the real key
    for agent, model in runs:
        run = project.results() / "keys" / f"{agent}-{model}" / "r1"
        record = project.json(f"keys/{agent}-{model}/r1/result.json")
        assert record["outcome"] == "pass", (agent, record["outcome_reason"])
        for path in run.rglob("*"):
            if path.is_file():
                assert KEY.encode() not in path.read_bytes(), (agent, path)
        metrics = project.json(f"keys/{agent}-{model}/r1/metrics.json")
        assert metrics["usage_source"] == "wire" and metrics["turns"] == 3, agent
