"""The `command` agent: any other agent CLI, described in llmtt.toml.

    [agents.my-agent]
    command = ["my-agent", "--model", "{model}", "--prompt", "{prompt}"]
    parser = "claude-code"     # optional: read its JSON lines like that CLI's; else transcript

Without a parser there are no structured events: layer 1 falls back to finding target
commands in the transcript with `command_pattern` (exit codes then stay unknown).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from llmtt.agents.base import RunContext, VersionProbe
from llmtt.agents.cli_agent import CliAgent
from llmtt.agents.pricing import SCRIPTED, Pricing
from llmtt.agents.stream import StreamParser
from llmtt.events import EventWriter
from llmtt.gateway.proxy import PLACEHOLDER_KEY
from llmtt.spec.config import AgentSettings


class _TranscriptOnly(StreamParser):
    """No structured stream: lines are kept as output only, and the turns are unknown."""

    def __init__(self, events: EventWriter, pricing: Pricing) -> None:
        super().__init__(events, pricing)
        self.per_request = False

    def handle(self, obj: dict[str, Any]) -> None:
        """Never called: `line`, its own, reads nothing (see StreamParser.take)."""

    def line(self, text: str) -> None:
        """Nothing to parse; the transcript keeps everything."""


class CommandAgent(CliAgent):
    """An agent CLI launched from a command template."""

    package = "the agent's own package"
    # Through the gateway only when it says where its program takes the model's URL from.
    through_gateway = False
    key_header = "auto"  # whichever wire its program speaks

    def __init__(self, name: str, settings: AgentSettings, project_root: Path) -> None:
        super().__init__(settings, project_root)
        assert settings.command is not None
        self.name = name
        self.template = settings.command
        self.executable_name = settings.command[0]
        # A program told its model's URL (model_url_env) reaches it through the gateway.
        self.through_gateway = settings.model_url_env is not None
        self.needs_model = self.through_gateway or any(
            "{model}" in part for part in settings.command
        )
        self.structured_events = settings.parser is not None
        self.free = settings.free

    def version(self, probe: VersionProbe) -> str:
        """Its `version_command`, if one is configured."""
        if not self.settings.version_command:
            return "unversioned"
        return probe(self.settings.version_command, self.executable(), {})

    def provider_urls(self, model_id: str) -> list[str] | None:
        """None known: a custom agent reaches a model through `[models.X] api_base` or the
        hosts listed in [isolation.network] agent."""
        return []

    def unavailable(self, model: str | None) -> str | None:
        """Only the binary is checked: llmtt cannot know what a custom agent needs."""
        if self.executable() is None:
            return (
                f"{self.name}: {self.template[0]!r} (the first word of [agents.{self.name}] "
                f"command) is not an executable on PATH; install it or give its path"
            )
        return None

    def command(self, ctx: RunContext, exe: str) -> tuple[list[str], dict[str, str]]:
        """The template with {prompt}, {model} and {workspace} filled in."""
        values = {"prompt": ctx.prompt, "model": ctx.model or "", "workspace": str(ctx.workspace)}
        argv = [exe] + [_fill(part, values) for part in self.template[1:]]
        env = {"LLMTT_MODEL_URL": ctx.model_url} if ctx.model == SCRIPTED and ctx.model_url else {}
        url_env, key_env = self.settings.model_url_env, self.settings.model_key_env
        if url_env is not None and ctx.model:
            spec = ctx.models.get(ctx.model)
            if ctx.model == SCRIPTED and ctx.model_url:
                env[url_env] = f"{ctx.model_url}/v1"
            elif spec is not None and spec.api_base:
                env[url_env] = spec.api_base  # the gateway's route (agent_layer._through)
            if key_env is not None and url_env in env:
                env[key_env] = PLACEHOLDER_KEY
        return argv, env

    def parser(self, ctx: RunContext) -> StreamParser:
        """The chosen CLI's stream reader, or none."""
        pricing = self.pricing(ctx)
        if self.settings.parser == "claude-code":
            from llmtt.agents.claude_code import ClaudeStream

            return ClaudeStream(ctx.events, pricing)
        if self.settings.parser == "opencode":
            from llmtt.agents.opencode import OpencodeStream

            return OpencodeStream(ctx.events, pricing)
        if self.settings.parser == "codex":
            from llmtt.agents.codex import CodexStream

            # Where that codex writes its rollout: its CODEX_HOME, else ~/.codex in the run.
            home = ctx.env.get("CODEX_HOME") or str(ctx.home / ".codex")
            return CodexStream(ctx.events, pricing, home=Path(home))
        return _TranscriptOnly(ctx.events, pricing)


def _fill(part: str, values: dict[str, str]) -> str:
    for name, value in values.items():
        part = part.replace("{" + name + "}", value)
    return part
