"""opencode: `opencode run --format json`, normalised into llmtt events."""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llmtt.agents.base import OwnProvider, RunContext
from llmtt.agents.cli_agent import CliAgent
from llmtt.agents.install import pinned
from llmtt.agents.opencode_home import seed_home
from llmtt.agents.pricing import Pricing, Tokens
from llmtt.agents.stream import MAX_TOKENS, StreamParser, figure, json_text, mapping, whole
from llmtt.events import EventWriter, tool_name
from llmtt.process.sandbox.bwrap import Sandbox
from llmtt.process.shell import tool_path

PROVIDER = "llmtt"
CONTEXT_LIMIT = 200_000  # the scripted model's, in opencode's configuration
OUTPUT_LIMIT = 32_000
# The key variable opencode reads for a provider of its own (`-m provider/model`).
PROVIDER_KEYS = {
    "anthropic": ("ANTHROPIC_API_KEY",),
    "openai": ("OPENAI_API_KEY",),
    "openrouter": ("OPENROUTER_API_KEY",),
    "google": ("GOOGLE_GENERATIVE_AI_API_KEY", "GEMINI_API_KEY"),
    "groq": ("GROQ_API_KEY",),
    "mistral": ("MISTRAL_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "xai": ("XAI_API_KEY",),
}
# The providers of its own that opencode reaches through the model gateway when llmtt holds the
# key (both bundled with opencode, so no package is fetched): the provider's base URL as the
# gateway calls it, the variable that moves it (the one claude-code or codex honours), the
# header its key goes in, and what opencode's provider adds to the base URL it is given.
STOOD_IN = {
    "anthropic": ("https://api.anthropic.com", "ANTHROPIC_BASE_URL", "x-api-key", "/v1"),
    "openai": ("https://api.openai.com/v1", "OPENAI_BASE_URL", "authorization", ""),
}
# Where opencode reaches a provider of its own.
PROVIDER_HOSTS = {
    "anthropic": "api.anthropic.com",
    "openai": "api.openai.com",
    "openrouter": "openrouter.ai",
    "google": "generativelanguage.googleapis.com",
    "groq": "api.groq.com",
    "mistral": "api.mistral.ai",
    "deepseek": "api.deepseek.com",
    "xai": "api.x.ai",
}


class OpencodeStream(StreamParser):
    """Reads opencode's JSON events: a `step_start` ... `step_finish` per model request, its
    tool parts printed as each call completes, its usage at `step_finish`.

    opencode runs a request's tool calls at once and prints them in the order they finish; a
    step's tool parts are held until the step ends and emitted in the order the model issued
    them, which is the order of their part ids (opencode numbers parts as it creates them, and
    it creates a tool part as the model's stream names the call).

    A compaction is a step of its own that ends with `stop`, followed by a synthetic text part
    (`metadata.compaction_continue`) that sends the loop on: the usage of a step that ended
    with `stop` waits for what comes next, and is a side request when that text follows.
    opencode's title request does not appear in its stream at all.
    """

    def __init__(self, events: EventWriter, pricing: Pricing) -> None:
        super().__init__(events, pricing)
        self._step: list[dict[str, Any]] = []  # tool parts of the step in progress
        self._in_step = False
        self._stopped: tuple[Tokens, Any] | None = None  # a `stop` step's usage, held

    def handle(self, obj: dict[str, Any]) -> None:
        """step_start -> a request; tool_use -> held; step_finish -> usage, then the step's
        tool calls in the model's order; text -> message."""
        kind = obj.get("type")
        part = mapping(obj.get("part"))
        if kind == "step_start":
            self._release(side=False)
            self._in_step = True
            self.request()
        elif kind == "tool_use":
            self._step.append(part)
        elif kind == "step_finish":
            self._step_finish(part)
        elif kind == "text" and part.get("synthetic"):
            # Text opencode wrote itself (a user message), not the agent's words.
            if mapping(part.get("metadata")).get("compaction_continue"):
                self._release(side=True)
        elif kind == "text" and isinstance(part.get("text"), str) and part["text"]:
            self.events.emit("message", role="assistant", text=part["text"])
        elif kind == "error":
            self.reason = f"opencode error: {json_text(obj.get('error'))}"
            self.events.emit("output", text=self.reason)

    def finish(self) -> None:
        """The tool calls of a step cut off by the end of the run; the last `stop` step."""
        self._release(side=False)
        self._flush()

    def _step_finish(self, part: dict[str, Any]) -> None:
        if not self._in_step:
            self.request()
        self._in_step = False
        tokens = mapping(part.get("tokens"))
        cache = mapping(tokens.get("cache"))
        figures = Tokens(
            figure(tokens, "input"),
            min(MAX_TOKENS, figure(tokens, "output") + figure(tokens, "reasoning")),
            figure(cache, "read"),
            figure(cache, "write"),
        )
        self.natural_stop = part.get("reason") == "stop"
        if self.natural_stop:
            self._stopped = (figures, part.get("cost"))
        else:
            self.usage(figures, part.get("cost"))
        self._flush()

    def _release(self, *, side: bool) -> None:
        """Emit the held `stop` step: the loop's last turn, or a compaction."""
        if self._stopped is not None:
            figures, cost = self._stopped
            self._stopped = None
            if side:
                self.requests -= 1
            self.usage(figures, cost, side=side)

    def _flush(self) -> None:
        step, self._step = self._step, []  # taken first: a part that cannot be read is not
        for part in sorted(step, key=lambda p: str(p.get("id", ""))):  # met again next time
            self._tool(part)

    def _tool(self, part: dict[str, Any]) -> None:
        state = mapping(part.get("state"))
        tool = str(part.get("tool", ""))
        tool_input = state.get("input") or {}
        command = mapping(tool_input).get("command") if tool == "bash" else None
        call_id = str(part.get("callID") or part.get("id"))
        self.called(call_id)
        self.events.emit(
            "tool_call",
            id=call_id,
            tool=tool_name(tool),
            agent_tool=tool,
            command=command if isinstance(command, str) else json_text(tool_input),
        )
        # A command whose own process died of a signal is not reported by opencode 1.18: its
        # bash tool waits for its timeout and reports no exit code, which stays unknown here.
        exit_code = whole(mapping(state.get("metadata")).get("exit"))
        if exit_code is None:
            exit_code = None if tool == "bash" or state.get("status") == "error" else 0
        output = state.get("output")
        if output is None:
            output = state.get("error", "")
        self.answered(call_id)
        self.events.emit("tool_result", id=call_id, output=str(output), exit_code=exit_code)


class OpencodeAgent(CliAgent):
    """sst's opencode CLI, headless, with its JSON event stream."""

    name = "opencode"
    executable_name = "opencode"
    package = pinned("opencode")
    skills_dir = ".opencode/skills"  # its own; it reads .claude/skills and .agents/skills too
    guidance_reads = ("AGENTS.md", "CLAUDE.md")  # CLAUDE.md when there is no AGENTS.md
    skills_reads = (".opencode/skills", ".opencode/skill", ".agents/skills", ".claude/skills")

    def provider_keys(self, model_id: str) -> tuple[str, ...]:
        """The key variable of the provider named in `provider/model`; none for a provider
        llmtt does not know (opencode says what it lacks)."""
        provider = model_id.split("/", 1)[0] if "/" in model_id else ""
        return PROVIDER_KEYS.get(provider, ())

    def provider_urls(self, model_id: str) -> list[str] | None:
        """The host of the provider named in `provider/model` (None: one llmtt does not know)."""
        provider = model_id.split("/", 1)[0] if "/" in model_id else ""
        host = PROVIDER_HOSTS.get(provider)
        return [host] if host else None

    def drift(self, version: str) -> str | None:
        """Besides another version: no ripgrep on PATH, without which opencode's file search
        and skill tool fail (it would download ripgrep from GitHub into the run's HOME)."""
        said = [s for s in (super().drift(version),) if s]
        if shutil.which("rg", path=tool_path()) is None:
            said.append(
                "opencode finds no ripgrep (rg) on PATH: its file search and skill tool fail "
                "(install it: apt-get install ripgrep)"
            )
        return "; ".join(said) or None

    def own_provider(self, model: str, env: Mapping[str, str]) -> OwnProvider | None:
        """Anthropic or OpenAI named in `provider/model`, when llmtt holds its key: the model
        gateway stands in for it (`STOOD_IN`)."""
        spec = self.models.get(model)
        model_id = spec.id if spec is not None and spec.id else model
        provider = model_id.split("/", 1)[0] if "/" in model_id else ""
        if provider not in STOOD_IN:
            return None
        base, base_env, header, _ = STOOD_IN[provider]
        keys = self.named_key(model) or PROVIDER_KEYS[provider]
        return OwnProvider.find(base, base_env, keys, header, env)

    def command(self, ctx: RunContext, exe: str) -> tuple[list[str], dict[str, str]]:
        """`opencode run --format json -m PROVIDER/MODEL PROMPT`, configured by variable."""
        endpoint = self.endpoint(ctx)
        config: dict[str, Any] = {
            "$schema": "https://opencode.ai/config.json",
            "autoupdate": False,
            "share": "disabled",
            "permission": {"bash": "allow", "edit": "allow", "external_directory": "allow"},
        }
        model = endpoint.model
        provider, _, model_id = endpoint.model.partition("/")
        if ctx.stand_in and endpoint.base_url and provider in STOOD_IN:
            # The model gateway standing in for opencode's own provider: that provider, pointed
            # at the gateway with its placeholder key; the model declared, so one opencode's
            # bundled list does not know yet is found all the same (the gateway prices it).
            options = {"baseURL": endpoint.base_url.rstrip("/") + STOOD_IN[provider][3]}
            if endpoint.key:
                options["apiKey"] = endpoint.key
            config["provider"] = {provider: {"options": options, "models": {model_id: {}}}}
        elif endpoint.base_url:
            # A gateway, a proxy or the scripted server: an OpenAI-compatible provider of
            # llmtt's own, whose one model is the endpoint's name for it.
            entry: dict[str, Any] = {"name": endpoint.model, "tool_call": True}
            if endpoint.scripted:
                # A context limit, as a real model has one: a session whose usage comes near
                # it makes opencode compact, as it would with a real model.
                entry["limit"] = {"context": CONTEXT_LIMIT, "output": OUTPUT_LIMIT}
            options = {"baseURL": endpoint.base_url}
            if endpoint.key:
                options["apiKey"] = endpoint.key
            config["provider"] = {
                PROVIDER: {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "llmtt endpoint",
                    "options": options,
                    "models": {endpoint.model: entry},
                }
            }
            model = f"{PROVIDER}/{endpoint.model}"
        elif model_id:
            # The model's own provider (its key from the variable [models.X] names, or its
            # own login); the model declared, as above.
            own: dict[str, Any] = {"models": {model_id: {}}}
            if endpoint.key:
                own["options"] = {"apiKey": endpoint.key}
            config["provider"] = {provider: own}
        env = {
            "OPENCODE_CONFIG_CONTENT": json.dumps(config),
            # Its bundled model list, not models.dev's of the day; and no package look-ups
            # (it asks the registry for its plugin package on every run): a run needs no
            # network but its model's, and keeps no download.
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "npm_config_registry": "http://127.0.0.1:9/",
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            # opencode resolves its project from PWD, not from the real working directory.
            "PWD": str(ctx.workspace),
        }
        return [exe, "run", "--format", "json", "-m", model, ctx.prompt], {
            k: v for k, v in env.items() if v
        }

    def prepare_home(self, home: Path, sandbox: Sandbox | None) -> None:
        """Its database made and migrated, and its plugin package taken as installed, once per
        project and binary instead of in every run's new HOME (opencode_home.py)."""
        exe = self.executable()
        if exe is not None:
            seed_home(home, exe, self.project_root, sandbox)

    def parser(self, ctx: RunContext) -> StreamParser:
        """An opencode JSON event reader."""
        return OpencodeStream(ctx.events, self.pricing(ctx))
