"""opencode: `opencode run --format json`, normalised into llmtt events."""

from __future__ import annotations

import json
from typing import Any

from llmtt.agents.base import RunContext
from llmtt.agents.cli import SCRIPTED, CliAgent, StreamParser
from llmtt.events import EventWriter

PROVIDER = "llmtt"


class OpencodeStream(StreamParser):
    """Reads opencode's JSON events: tool_use parts, step_finish totals, text."""

    def __init__(self, events: EventWriter, *, scripted: bool) -> None:
        super().__init__(events, scripted=scripted)
        self.turns = 0

    def handle(self, obj: dict[str, Any]) -> None:
        """tool_use -> tool_call + tool_result; step_finish -> usage; text -> message."""
        kind = obj.get("type")
        part = obj.get("part") or {}
        if kind == "tool_use":
            self._tool(part)
        elif kind == "step_finish":
            tokens = part.get("tokens") or {}
            cache = tokens.get("cache") or {}
            self.turns = (self.turns or 0) + 1
            self.events.emit(
                "usage",
                input_tokens=int(tokens.get("input") or 0),
                output_tokens=int(tokens.get("output") or 0) + int(tokens.get("reasoning") or 0),
                cache_read_tokens=int(cache.get("read") or 0),
                cost_usd=self.cost(part.get("cost")),
            )
            self.natural_stop = part.get("reason") == "stop"
        elif kind == "text" and part.get("text"):
            self.events.emit("message", role="assistant", text=part["text"])
        elif kind == "error":
            self.error = json.dumps(obj.get("error"))
            self.events.emit("output", text=f"opencode error: {self.error}")

    def _tool(self, part: dict[str, Any]) -> None:
        state = part.get("state") or {}
        tool = str(part.get("tool", ""))
        tool_input = state.get("input") or {}
        command = tool_input.get("command") if tool == "bash" else None
        call_id = part.get("callID") or part.get("id")
        self.events.emit(
            "tool_call",
            id=call_id,
            tool=tool,
            command=command if isinstance(command, str) else json.dumps(tool_input),
        )
        exit_code = (state.get("metadata") or {}).get("exit")
        if not isinstance(exit_code, int):
            exit_code = None if tool == "bash" or state.get("status") == "error" else 0
        output = state.get("output")
        if output is None:
            output = state.get("error", "")
        self.events.emit("tool_result", id=call_id, output=str(output), exit_code=exit_code)


class OpencodeAgent(CliAgent):
    """sst's opencode CLI, headless, with its JSON event stream."""

    name = "opencode"
    executable_name = "opencode"
    package = "opencode-ai@1.18.33"
    key_env = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENROUTER_API_KEY", "GEMINI_API_KEY")

    def command(self, ctx: RunContext, exe: str) -> tuple[list[str], dict[str, str]]:
        """`opencode run --format json -m PROVIDER/MODEL PROMPT`, configured by variable."""
        assert ctx.model is not None
        config: dict[str, Any] = {
            "$schema": "https://opencode.ai/config.json",
            "autoupdate": False,
            "share": "disabled",
            "permission": {"bash": "allow", "edit": "allow", "external_directory": "allow"},
        }
        model = ctx.model
        if ctx.model == SCRIPTED:
            config["provider"] = {
                PROVIDER: {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "llmtt scripted",
                    "options": {"baseURL": f"{ctx.model_url}/v1", "apiKey": "scripted"},
                    "models": {SCRIPTED: {"name": SCRIPTED, "tool_call": True}},
                }
            }
            model = f"{PROVIDER}/{SCRIPTED}"
        env = {
            "OPENCODE_CONFIG_CONTENT": json.dumps(config),
            "OPENCODE_DISABLE_MODELS_FETCH": "1" if ctx.model == SCRIPTED else "",
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            # opencode resolves its project from PWD, not from the real working directory.
            "PWD": str(ctx.workspace),
        }
        if ctx.model == SCRIPTED:
            env["npm_config_registry"] = "http://127.0.0.1:9/"  # no package look-ups offline
        return [exe, "run", "--format", "json", "-m", model, ctx.prompt], {
            k: v for k, v in env.items() if v
        }

    def parser(self, ctx: RunContext) -> StreamParser:
        """An opencode JSON event reader."""
        return OpencodeStream(ctx.events, scripted=ctx.model == SCRIPTED)
