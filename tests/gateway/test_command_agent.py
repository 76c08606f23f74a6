"""A `command` agent that says where its program takes its model's URL and key from
(`model_url_env`, `model_key_env`) reaches its model through the gateway like the built-in
agents: a placeholder key in its environment, the real one added upstream, its usage from the
wire. The agent is a small Python program speaking Chat Completions."""

from __future__ import annotations

import json
from pathlib import Path

from llmtt.gateway.proxy import PLACEHOLDER_KEY
from llmtt.scripted.server import ScriptedServer
from tests.conftest import GIT_TOML, Project

KEY = "sk-command-agent-real-8e1"
AGENT = """\
#!/usr/bin/env python3
import json, os, subprocess, urllib.request

base, key = os.environ["MY_BASE_URL"], os.environ["MY_KEY"]
with open("seen-key.txt", "w") as handle:
    handle.write(key)
tool = {"type": "object", "properties": {"command": {"type": "string"}}}
tools = [{"type": "function", "function": {"name": "bash", "parameters": tool}}]
messages = [{"role": "user", "content": "go"}]
while True:
    body = {"model": "m", "messages": messages, "tools": tools}
    request = urllib.request.Request(
        base + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"},
    )
    message = json.load(urllib.request.urlopen(request))["choices"][0]["message"]
    messages.append(message)
    calls = message.get("tool_calls") or []
    if not calls:
        break
    for call in calls:
        command = json.loads(call["function"]["arguments"])["command"]
        print("$ " + command, flush=True)
        done = subprocess.run(command, shell=True, capture_output=True, text=True)
        print(done.stdout, end="", flush=True)
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": done.stdout})
"""


def test_a_command_agent_reaches_its_model_through_the_gateway(tmp_path: Path) -> None:
    program = tmp_path / "my-agent"
    program.write_text(AGENT)
    program.chmod(0o755)
    with ScriptedServer(["echo a > out.txt"], api_key=KEY) as provider:
        project = Project(tmp_path / "p")
        project.write(
            "llmtt.toml",
            GIT_TOML + f'\n[agents.mine]\ncommand = ["{program}"]\nmodel_url_env = "MY_BASE_URL"\n'
            'model_key_env = "MY_KEY"\n'
            f'\n[models.paid]\napi_base = "{provider.url}/v1"\napi_key_env = "PAID_KEY"\n'
            "input_usd_per_mtok = 3.0\noutput_usd_per_mtok = 15.0\n",
        )
        project.write(
            "scenarios/s.yaml",
            "task: {prompt: Write out.txt.}\n"
            "evaluation: {gates: [{type: file_exists, path: out.txt}]}\n",
        )
        env = {"LLMTT_ENABLED": "1", "PAID_KEY": KEY}
        result = project.doit("run", "agent=mine", "model=paid", env=env)
    assert result.code == 0, result.out + result.err
    run = project.results() / "s/mine-paid/r1"
    record = project.json("s/mine-paid/r1/result.json")
    assert record["outcome"] == "pass", record["outcome_reason"]
    assert (run / "workspace" / "seen-key.txt").read_text() == PLACEHOLDER_KEY
    for path in run.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    metrics = project.json("s/mine-paid/r1/metrics.json")
    wire = [json.loads(line) for line in (run / "wire.jsonl").open()]
    assert len(wire) == 2 and all(r["status"] == 200 for r in wire)  # the real key opened it
    assert (metrics["usage_source"], metrics["turns"]) == ("wire", 2)
    billed = sum(r["input_tokens"] * 3.0 + r["output_tokens"] * 15.0 for r in wire) / 1e6
    assert metrics["cost_usd"] == round(billed, 6) and billed > 0
