"""claude-code: `claude -p --output-format stream-json`, normalised into llmtt events."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from llmtt.agents.base import OwnProvider, RunContext
from llmtt.agents.cli_agent import CliAgent
from llmtt.agents.install import pinned
from llmtt.agents.pricing import Pricing, Tokens
from llmtt.agents.stream import StreamParser, figure, json_text, listing, mapping
from llmtt.events import EventWriter, tool_name

_EXIT_CODE = re.compile(r"^(?:Error: )?Exit code (\d{1,10})\b")
SHELL = "Bash"


class ClaudeStream(StreamParser):
    """Reads claude-code's stream-json lines.

    Usage per model request: with `--include-partial-messages` the stream carries the API's own
    events, `message_start` (input and cache figures) and `message_delta` (the final output
    count); the request is complete at `message_stop`. Without them (a `command` agent, older
    recordings) it is the usage on the `assistant` lines, which repeat one request's figures on
    a line per content block (deduplicated by message id, the largest figures kept) and carry
    only the provisional output count of `message_start`: the `result` total corrects it.
    """

    def __init__(self, events: EventWriter, pricing: Pricing) -> None:
        super().__init__(events, pricing)
        self._tools: dict[str, str] = {}  # tool_use id -> tool name
        self._partial = False  # the stream carries the API's events
        self._pending: tuple[str, Tokens] | None = None  # a request whose usage is not out yet
        self._done: set[str] = set()  # message ids whose usage was emitted

    def handle(self, obj: dict[str, Any]) -> None:
        """stream_event -> usage; assistant -> tool_call / message; user -> tool_result;
        result -> the total, how it stopped."""
        kind = obj.get("type")
        if kind == "stream_event":
            self._partial = True
            self._api_event(mapping(obj.get("event")))
        elif kind == "assistant":
            message = mapping(obj.get("message"))
            if not self._partial:
                self._seen(str(message.get("id")), _tokens(message.get("usage")))
            for block in listing(message.get("content")):
                if isinstance(block, dict):
                    self._assistant_block(block)
        elif kind == "user":
            if not self._partial:
                # Tool results: the request that called them is over. (With the API's events,
                # claude may run a call before that request's message_delta has come.)
                self._flush()
            for block in listing(mapping(obj.get("message")).get("content")):
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    self._tool_result(block)
        elif kind == "result":
            self._flush()
            self._result(obj)

    def finish(self) -> None:
        """A request cut off by the end of the run still counts, with what was seen of it."""
        self._flush()

    def _api_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "message_start":
            message = mapping(event.get("message"))
            self._seen(str(message.get("id")), _tokens(message.get("usage")))
        elif kind == "message_delta" and self._pending is not None:
            usage = event.get("usage") or {}
            message_id, tokens = self._pending
            # The delta's figures are cumulative; it may carry only the output count.
            self._pending = (message_id, tokens.at_least(_tokens(usage)))
        elif kind == "message_stop":
            self._flush()

    def _seen(self, message_id: str, tokens: Tokens) -> None:
        """A request's figures, as one of its lines shows them."""
        if message_id in self._done:
            return
        if self._pending is not None and self._pending[0] == message_id:
            self._pending = (message_id, self._pending[1].at_least(tokens))
            return
        self._flush()
        self.request()
        self._pending = (message_id, tokens)

    def _flush(self) -> None:
        if self._pending is not None:
            message_id, tokens = self._pending
            self._pending = None
            self._done.add(message_id)
            self.usage(tokens)

    def _assistant_block(self, block: dict[str, Any]) -> None:
        if block.get("type") == "tool_use":
            name = str(block.get("name", ""))
            call_id = str(block.get("id"))
            tool_input = block.get("input") or {}
            command = mapping(tool_input).get("command") if name == SHELL else None
            command = command if isinstance(command, str) else json_text(tool_input)
            self._tools[call_id] = name
            self.called(call_id)
            self.events.emit(
                "tool_call", id=call_id, tool=tool_name(name), agent_tool=name, command=command
            )
        elif block.get("type") == "text" and isinstance(block.get("text"), str) and block["text"]:
            self.events.emit("message", role="assistant", text=block["text"])

    def _tool_result(self, block: dict[str, Any]) -> None:
        output = _text(block.get("content"))
        call_id = str(block.get("tool_use_id"))
        exit_code = exit_code_of(self._tools.get(call_id), bool(block.get("is_error")), output)
        self.answered(call_id)
        self.events.emit("tool_result", id=call_id, output=output, exit_code=exit_code)

    def _result(self, obj: dict[str, Any]) -> None:
        self.total(_tokens(obj.get("usage")), obj.get("total_cost_usd"))
        subtype = obj.get("subtype")
        self.natural_stop = subtype == "success" and not obj.get("is_error")
        if subtype == "error_max_turns":
            self.turn_limit_hit = True
        elif not self.natural_stop:
            said = obj.get("result") if isinstance(obj.get("result"), str) else ""
            self.reason = f"claude-code stopped: {subtype}" + (f": {said[:300]}" if said else "")
        denied = [
            mapping(mapping(d).get("tool_input")).get("command", mapping(d).get("tool_name"))
            for d in listing(obj.get("permission_denials"))
        ]
        if denied:
            self.events.emit("output", text=f"claude-code denied permission for: {denied}")


def _tokens(usage: Any) -> Tokens:
    """Anthropic's usage: `input_tokens` is already the uncached input."""
    return Tokens(
        figure(usage, "input_tokens"),
        figure(usage, "output_tokens"),
        figure(usage, "cache_read_input_tokens"),
        figure(usage, "cache_creation_input_tokens"),
    )


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
    package = pinned("claude-code")
    key_env = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")
    provider_hosts = ("api.anthropic.com",)
    provider_base = "https://api.anthropic.com"  # claude-code adds /v1/messages itself
    provider_base_env = "ANTHROPIC_BASE_URL"
    provider_key_env = ("ANTHROPIC_API_KEY",)
    key_header = "x-api-key"
    own_turn_limit = True  # --max-turns
    guidance_file = "CLAUDE.md"  # it does not read AGENTS.md
    skills_dir = ".claude/skills"
    guidance_reads = ("CLAUDE.md",)
    skills_reads = (".claude/skills",)

    def own_provider(self, model: str, env: Mapping[str, str]) -> OwnProvider | None:
        """Anthropic, reached with an API key (`x-api-key`), else with a bearer token
        (`ANTHROPIC_AUTH_TOKEN`, as a company's gateway hands out): the model gateway adds
        either, and none of claude-code's credential variables reaches the agent. claude.ai's
        own login (`CLAUDE_CODE_OAUTH_TOKEN`) alone is not stood in for: claude-code uses it."""
        named = self.named_key(model)
        for names, header in (
            (named or ("ANTHROPIC_API_KEY",), "x-api-key"),
            (() if named else ("ANTHROPIC_AUTH_TOKEN",), "authorization"),
        ):
            own = OwnProvider.find(self.provider_base, self.provider_base_env, names, header, env)
            if own is not None:
                return replace(own, secrets=(*named, *self.key_env))
        return None

    def command(self, ctx: RunContext, exe: str) -> tuple[list[str], dict[str, str]]:
        """`claude -p PROMPT --output-format stream-json --verbose --include-partial-messages
        --model M --max-turns N`."""
        endpoint = self.endpoint(ctx)
        argv = [
            exe,
            "-p",
            ctx.prompt,
            "--output-format",
            "stream-json",
            "--verbose",
            # The API's own events: each request's usage, its output count included, as it ends.
            "--include-partial-messages",
            "--model",
            endpoint.model,
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
        if endpoint.base_url:
            # claude-code appends /v1/messages itself.
            env["ANTHROPIC_BASE_URL"] = endpoint.base_url.rstrip("/").removesuffix("/v1")
            # A gateway may need no key, but claude-code will not start without one.
            env["ANTHROPIC_API_KEY"] = endpoint.key or "none"
        elif endpoint.key:
            env["ANTHROPIC_API_KEY"] = endpoint.key
        return argv, env

    def parser(self, ctx: RunContext) -> StreamParser:
        """A claude-code stream-json reader."""
        return ClaudeStream(ctx.events, self.pricing(ctx))
