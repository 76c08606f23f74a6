"""claude-code: `claude -p --output-format stream-json`, normalised into llmtt events."""

from __future__ import annotations

import json
import re
from typing import Any

from llmtt.agents.base import RunContext
from llmtt.agents.cli import SCRIPTED, CliAgent, StreamParser
from llmtt.events import EventWriter

_EXIT_CODE = re.compile(r"^(?:Error: )?Exit code (\d+)\b")
SHELL = "Bash"


class ClaudeStream(StreamParser):
    """Reads claude-code's stream-json lines."""

    def __init__(self, events: EventWriter, *, scripted: bool) -> None:
        super().__init__(events, scripted=scripted)
        self._tools: dict[str, str] = {}  # tool_use id -> tool name

    def handle(self, obj: dict[str, Any]) -> None:
        """assistant -> tool_call / message; user -> tool_result; result -> usage, stop."""
        kind = obj.get("type")
        if kind == "assistant":
            for block in obj.get("message", {}).get("content", []):
                self._assistant_block(block)
        elif kind == "user":
            content = obj.get("message", {}).get("content", [])
            for block in content if isinstance(content, list) else []:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    self._tool_result(block)
        elif kind == "result":
            self._result(obj)

    def _assistant_block(self, block: dict[str, Any]) -> None:
        if block.get("type") == "tool_use":
            name = str(block.get("name", ""))
            self._tools[str(block.get("id"))] = name
            tool_input = block.get("input") or {}
            command = tool_input.get("command") if name == SHELL else None
            self.events.emit(
                "tool_call",
                id=block.get("id"),
                tool=name,
                command=command if isinstance(command, str) else json.dumps(tool_input),
            )
        elif block.get("type") == "text" and block.get("text"):
            self.events.emit("message", role="assistant", text=block["text"])

    def _tool_result(self, block: dict[str, Any]) -> None:
        output = _text(block.get("content"))
        call_id = str(block.get("tool_use_id"))
        exit_code = exit_code_of(self._tools.get(call_id), bool(block.get("is_error")), output)
        self.events.emit("tool_result", id=call_id, output=output, exit_code=exit_code)

    def _result(self, obj: dict[str, Any]) -> None:
        usage = obj.get("usage") or {}
        self.events.emit(
            "usage",
            input_tokens=int(usage.get("input_tokens") or 0)
            + int(usage.get("cache_creation_input_tokens") or 0),
            output_tokens=int(usage.get("output_tokens") or 0),
            cache_read_tokens=int(usage.get("cache_read_input_tokens") or 0),
            cost_usd=self.cost(obj.get("total_cost_usd")),
        )
        self.turns = obj.get("num_turns")
        self.natural_stop = obj.get("subtype") == "success" and not obj.get("is_error")
        if obj.get("permission_denials"):
            denied = [
                d.get("tool_input", {}).get("command", d.get("tool_name"))
                for d in obj["permission_denials"]
            ]
            self.events.emit("output", text=f"claude-code denied permission for: {denied}")


def exit_code_of(tool: str | None, is_error: bool, output: str) -> int | None:
    """The Bash tool's exit code: 0 on success, N from its "Exit code N" text on failure;
    null when it failed without saying a code, or for a tool that has none."""
    if tool != SHELL:
        return None if is_error else 0
    if not is_error:
        return 0
    match = _EXIT_CODE.match(output)
    return int(match.group(1)) if match else None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


class ClaudeCodeAgent(CliAgent):
    """Anthropic's claude-code CLI, headless, with its structured stream."""

    name = "claude-code"
    executable_name = "claude"
    package = "@anthropic-ai/claude-code@2.1.197"
    key_env = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")

    def command(self, ctx: RunContext, exe: str) -> tuple[list[str], dict[str, str]]:
        """`claude -p PROMPT --output-format stream-json --verbose --model M`."""
        assert ctx.model is not None
        argv = [
            exe,
            "-p",
            ctx.prompt,
            "--output-format",
            "stream-json",
            "--verbose",
            "--model",
            ctx.model,
            "--max-turns",
            str(ctx.max_turns),
            # Bash without prompts; running as root refuses --dangerously-skip-permissions.
            "--allowedTools",
            "Bash",
        ]
        env = {
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
        if ctx.model == SCRIPTED:
            assert ctx.model_url is not None
            env.update({"ANTHROPIC_BASE_URL": ctx.model_url, "ANTHROPIC_API_KEY": "scripted"})
        return argv, env

    def parser(self, ctx: RunContext) -> StreamParser:
        """A claude-code stream-json reader."""
        return ClaudeStream(ctx.events, scripted=ctx.model == SCRIPTED)
