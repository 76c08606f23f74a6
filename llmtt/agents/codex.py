"""codex: `codex exec --json`, normalised into llmtt events."""

from __future__ import annotations

import json
from typing import Any

from llmtt.agents.base import RunContext
from llmtt.agents.cli import SCRIPTED, CliAgent, StreamParser, unwrap_shell
from llmtt.events import EventWriter

PROVIDER = "llmtt"
# USD per million tokens (input, cached input, output). codex reports tokens but no cost, so
# llmtt estimates it from this table; a model not in it gets a null cost, never a made-up 0.
PRICES: dict[str, tuple[float, float, float]] = {
    "gpt-5": (1.25, 0.125, 10.0),
    "gpt-5-mini": (0.25, 0.025, 2.0),
    "gpt-5-nano": (0.05, 0.005, 0.4),
    "gpt-5-codex": (1.25, 0.125, 10.0),
    "gpt-4.1": (2.0, 0.5, 8.0),
    "gpt-4.1-mini": (0.4, 0.1, 1.6),
    "o4-mini": (1.1, 0.275, 4.4),
    "o3": (2.0, 0.5, 8.0),
}


def estimate_cost(model: str | None, fresh: int, cached: int, output: int) -> float | None:
    """Cost at list price, or None for a model without a price."""
    price = PRICES.get((model or "").split("/")[-1])
    if price is None:
        return None
    return round((fresh * price[0] + cached * price[1] + output * price[2]) / 1_000_000, 6)


class CodexStream(StreamParser):
    """Reads codex's JSONL events: command executions, messages, per-turn usage."""

    def __init__(self, events: EventWriter, *, scripted: bool, model: str | None) -> None:
        super().__init__(events, scripted=scripted)
        self.model = model
        self.turns = 0
        self._started: set[str] = set()

    def handle(self, obj: dict[str, Any]) -> None:
        """item.started/completed -> tool_call/tool_result/message; turn.completed -> usage."""
        kind = obj.get("type")
        item = obj.get("item") or {}
        if kind in ("item.started", "item.completed") and item.get("type") == "command_execution":
            self._command(kind, item)
        elif kind == "item.completed" and item.get("type") == "agent_message":
            self.turns = (self.turns or 0) + 1
            self.events.emit("message", role="assistant", text=str(item.get("text", "")))
        elif kind == "item.completed" and item.get("type") == "error":
            self.events.emit("output", text=f"codex: {item.get('message', '')}")
        elif kind == "turn.completed":
            self._usage(obj.get("usage") or {})
            self.natural_stop = True
        elif kind in ("turn.failed", "error"):
            self.natural_stop = False
            self.error = json.dumps(obj.get("error") or obj.get("message"))
            self.events.emit("output", text=f"codex {kind}: {self.error}")

    def _command(self, kind: str, item: dict[str, Any]) -> None:
        call_id = str(item.get("id"))
        if call_id not in self._started:
            # One model response asked for this command (codex does not count responses).
            self._started.add(call_id)
            self.turns = (self.turns or 0) + 1
            command = unwrap_shell(str(item.get("command", "")))
            self.events.emit("tool_call", id=call_id, tool="exec_command", command=command)
        if kind == "item.completed":
            exit_code = item.get("exit_code")
            self.events.emit(
                "tool_result",
                id=call_id,
                output=str(item.get("aggregated_output", "")),
                exit_code=exit_code if isinstance(exit_code, int) else None,
            )

    def _usage(self, usage: dict[str, Any]) -> None:
        total_in = int(usage.get("input_tokens") or 0)
        cached = int(usage.get("cached_input_tokens") or 0)
        output = int(usage.get("output_tokens") or 0)
        cost = estimate_cost(self.model, total_in - cached, cached, output)
        self.events.emit(
            "usage",
            input_tokens=total_in,
            output_tokens=output,
            cache_read_tokens=cached,
            cost_usd=self.cost(cost),
            estimated=not self.scripted,
        )


class CodexAgent(CliAgent):
    """OpenAI's codex CLI, `exec` mode, with its JSONL stream."""

    name = "codex"
    executable_name = "codex"
    package = "@openai/codex@0.169.0"
    key_env = ("OPENAI_API_KEY", "CODEX_API_KEY")

    def command(self, ctx: RunContext, exe: str) -> tuple[list[str], dict[str, str]]:
        """`codex exec --json ...` with its home inside the run and no approvals."""
        assert ctx.model is not None
        argv = [
            exe,
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            "-c",
            'approval_policy="never"',
        ]
        env = {"CODEX_HOME": str(ctx.home / ".codex")}
        if ctx.model == SCRIPTED:
            provider = (
                f'{{ name = "llmtt scripted", base_url = "{ctx.model_url}/v1", '
                f'env_key = "LLMTT_SCRIPTED_KEY", wire_api = "responses", '
                f"request_max_retries = 0, stream_max_retries = 0 }}"
            )
            argv += [
                "-c",
                f'model_provider="{PROVIDER}"',
                "-c",
                f"model_providers.{PROVIDER}={provider}",
            ]
            env["LLMTT_SCRIPTED_KEY"] = "scripted"
        argv += ["-m", ctx.model, ctx.prompt]
        (ctx.home / ".codex").mkdir(parents=True, exist_ok=True)
        return argv, env

    def parser(self, ctx: RunContext) -> StreamParser:
        """A codex JSONL reader (its cost estimate needs the model)."""
        return CodexStream(ctx.events, scripted=ctx.model == SCRIPTED, model=ctx.model)
