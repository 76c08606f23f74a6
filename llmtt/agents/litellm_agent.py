"""llmtt's own agent loop, in the manner of bashkit-eval: one `bash` tool, a turn limit, and
every turn's tokens, cost and tool calls recorded — for any model litellm reaches."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from typing import Any

from llmtt.agents.base import (
    Agent,
    AgentExit,
    OwnProvider,
    PlacedSkill,
    RunContext,
    VersionProbe,
)
from llmtt.agents.pricing import pricing_of
from llmtt.errors import LlmttError
from llmtt.events import tool_name
from llmtt.process.shell import run_shell
from llmtt.providers import (
    SCRIPTED,
    ProviderGaveUp,
    ProviderStop,
    ResolvedModel,
    complete,
    first_message,
    import_litellm,
    litellm_missing,
    missing_key,
    resolve_model,
)
from llmtt.spec.config import ModelSpec
from llmtt.util.text import strip_ansi

# Part of every litellm run's key: a change to what the model is told, or to how its commands
# run, makes new runs rather than reusing old ones. 2: commands without a terminal.
LOOP_VERSION = "llmtt-loop-2"
BASH_TOOL = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run a shell command in the task's working directory and return its "
        "output and exit code.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string", "description": "The command to run."}},
            "required": ["command"],
        },
    },
}
# The commands run with no terminal (run_shell: stdin is /dev/null, output goes to a file, a
# session of their own), so nothing can wait for a key or a password, and most tools print
# neither colours nor progress bars. These settings cover the tools that would still try: a
# pager becomes `cat` (git, man, systemctl), git asks for no credentials, an editor exits at
# once leaving its file unchanged (`git commit` without -m aborts instead of waiting), and
# TERM=dumb with NO_COLOR=1 asks for plain output. Colour codes that get through anyway are
# removed from what the model sees. [agents.litellm] env can still set any of these.
COMMAND_ENV = {
    "PAGER": "cat",
    "GIT_PAGER": "cat",
    "MANPAGER": "cat",
    "SYSTEMD_PAGER": "cat",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_EDITOR": "true",
    "EDITOR": "true",
    "VISUAL": "true",
    "TERM": "dumb",
    "NO_COLOR": "1",
}
SYSTEM = """You are working in a shell, in the folder that holds the task's files.
Use the `bash` tool to run commands; each call returns the command's output and exit code.
Commands run without a terminal and read no input.
When the task is done, answer with a short summary and no tool call."""


SKILLS = """Skills are folders of instructions for particular kinds of task. When the task
matches a skill's description, read its SKILL.md (with `cat`) before you act, and follow it."""


def system_prompt(guidance: dict[str, str], skills: Sequence[PlacedSkill] = ()) -> str:
    """The system prompt: the loop's instructions, the guidance files verbatim, and the skills
    by name, description and SKILL.md path, as the agent CLIs list theirs (the body is read
    only when the model asks for it)."""
    parts = [SYSTEM]
    for name, text in guidance.items():
        parts.append(f'<file name="{name}">\n{text.rstrip()}\n</file>')
    if skills:
        listing = "\n".join(
            f"- {s.name}: {s.description} (file: {s.path}/SKILL.md)" for s in skills
        )
        parts.append(f"{SKILLS}\n{listing}")
    return "\n\n".join(parts)


def truncate(text: str, limit: int) -> str:
    """`text` cut to `limit` characters with a visible marker saying how much was left out."""
    if len(text) <= limit:
        return text
    head = limit // 2
    tail = limit - head
    cut = len(text) - limit
    return f"{text[:head]}\n[... {cut} characters cut by llmtt ...]\n{text[-tail:]}"


@dataclass
class _Loop:
    """The state of one run of the loop."""

    started: float
    deadline: float
    turns: int = 0
    spent: float = 0.0
    cost_known: bool = True


@dataclass(frozen=True)
class _Stop:
    """How the loop ended. `reason`: why a run that is a result stopped before the model was
    done; `error`: why the run could not be carried out (it stays pending, to be redone)."""

    natural: bool = False
    timed_out: bool = False
    reason: str | None = None
    error: str | None = None
    exit_code: int | None = 0  # the loop's own: 1 when the provider failed, None at a timeout


# The providers whose endpoints the gateway stands in for: (base URL, the variable that moves
# it, the key variables, the header the key goes in).
OWN_PROVIDERS: dict[str, tuple[str, str, tuple[str, ...], str]] = {
    "anthropic": (
        "https://api.anthropic.com",
        "ANTHROPIC_BASE_URL",
        ("ANTHROPIC_API_KEY",),
        "x-api-key",
    ),
    "openai": (
        "https://api.openai.com/v1",
        "OPENAI_BASE_URL",
        ("OPENAI_API_KEY",),
        "authorization",
    ),
}


class LitellmAgent(Agent):
    """The loop: ask the model, run the bash calls it makes, until it answers or turns run out.

    The run's time limit bounds everything, model requests and their retries included. A
    provider that still fails after the retries ends the run as a result with the error as
    its reason; one that refuses it outright (quota, key, billing, unknown model) means the
    run could not be carried out.
    """

    name = "litellm"
    model_name_field = "litellm"
    through_gateway = True
    # Its system prompt holds the workspace's AGENTS.md, else CLAUDE.md (agent_layer._guidance).
    guidance_reads = ("AGENTS.md", "CLAUDE.md")

    def own_provider(self, model: str, env: Mapping[str, str]) -> OwnProvider | None:
        """Anthropic's and OpenAI's own endpoints, for a model litellm names `anthropic/...`
        or `openai/...` without an `api_base` (moved, as litellm moves them, by
        ANTHROPIC_BASE_URL or OPENAI_BASE_URL)."""
        spec = self.models.get(model)
        name = spec.litellm if spec is not None and spec.litellm else model
        found = OWN_PROVIDERS.get(name.split("/", 1)[0]) if "/" in name else None
        return OwnProvider.find(*found, env) if found is not None else None

    def key_header_for(self, model: ModelSpec) -> str:
        """Anthropic's models take their key in `x-api-key`; litellm's other providers, as
        OpenAI's, in `Authorization`."""
        return "x-api-key" if (model.litellm or "").startswith("anthropic/") else "authorization"

    def version(self, probe: VersionProbe) -> str:
        """The loop's own version and litellm's ("not installed" without it, as a CLI's)."""
        try:
            return f"{LOOP_VERSION}/litellm-{package_version('litellm')}"
        except PackageNotFoundError:
            return f"{LOOP_VERSION}/litellm not installed"

    def missing_dependency(self) -> str | None:
        """litellm, when it is not installed."""
        return litellm_missing("the litellm agent")

    def unavailable(self, model: str | None) -> str | None:
        """No litellm, or a paid model whose API key is nowhere: what to install or set."""
        missing = self.missing_dependency()
        if missing is not None or model is None or model == SCRIPTED:
            return missing
        missing = missing_key(resolve_model(model, self.models), "the litellm agent")
        return f"litellm with model {model!r}: {missing}" if missing else None

    def warm(self) -> None:
        """litellm: 3 s of CPU and 140 MB to import, paid once in the forker, its pages then
        shared by the workers (a missing litellm is said by the run)."""
        with contextlib.suppress(LlmttError):
            import_litellm("the litellm agent")

    def run(self, ctx: RunContext) -> AgentExit:
        """Run the loop, then close the event log with how it ended."""
        assert ctx.model is not None
        # litellm loads before the clock starts (3 s, and far more on a busy machine, once in
        # each worker process): a library of llmtt's is no part of the agent's time, and the
        # first run of a worker must not get less of its time limit than the others.
        import_litellm("the litellm agent")
        started = time.monotonic()
        loop = _Loop(started, started + ctx.timeout_secs)
        stop = self._loop(ctx, loop)
        reason = stop.error or stop.reason
        if reason is not None:
            ctx.events.emit("output", text=reason)
        duration = time.monotonic() - loop.started
        ctx.events.emit(
            "complete",
            exit_code=stop.exit_code,
            duration_secs=round(duration, 3),
            timed_out=stop.timed_out,
            natural_stop=stop.natural,
            turns=loop.turns,
            **({"reason": reason} if reason else {}),
        )
        return AgentExit(
            exit_code=stop.exit_code,
            timed_out=stop.timed_out,
            duration_secs=duration,
            natural_stop=stop.natural,
            error=stop.error,
            reason=reason,
        )

    def _loop(self, ctx: RunContext, loop: _Loop) -> _Stop:
        assert ctx.model is not None
        model = resolve_model(ctx.model, ctx.models, ctx.model_url)
        if model.api_key is None and model.api_key_env in ctx.env:
            # The run's own key variable: the model gateway's placeholder, when it stands in.
            model = replace(model, api_key=ctx.env[model.api_key_env or ""])
        ctx.events.emit("spawn", command="litellm", args=[model.litellm])
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": system_prompt(dict(ctx.guidance), ctx.skills)},
            {"role": "user", "content": ctx.prompt},
        ]
        while loop.turns < ctx.max_turns:
            response = self._ask(ctx, model, messages, loop.deadline)
            if isinstance(response, _Stop):
                return response
            stop = self._spend(ctx, model, loop, response)
            if stop is not None:
                return stop
            message = first_message(response)
            if message is None:
                return _Stop(reason="provider error: an answer without a message", exit_code=1)
            calls = list(message.tool_calls or [])
            if message.content:
                ctx.events.emit("message", role="assistant", text=str(message.content))
            messages.append(_assistant(message, calls))
            if not calls:
                return _Stop(natural=True)
            for call in calls:
                messages.append(self._call(ctx, call, loop.deadline))
            if ctx.max_usd is not None and loop.cost_known and loop.spent > ctx.max_usd:
                return _Stop(
                    reason=f"cost limit reached: spent ${loop.spent:.4f} of ${ctx.max_usd:g}"
                )
        return _Stop(reason=f"turn limit reached ({ctx.max_turns} turns)")

    def _ask(
        self, ctx: RunContext, model: ResolvedModel, messages: list[dict[str, Any]], deadline: float
    ) -> Any:
        """The model's answer, or how the run stops when there is none in the time left."""
        if time.monotonic() >= deadline:
            return _timed_out(ctx)
        try:
            return complete(
                model,
                messages=messages,
                tools=[BASH_TOOL],
                max_retries=self.settings.max_retries,
                backoff_secs=self.settings.retry_backoff_secs,
                timeout_secs=deadline - time.monotonic(),
                deadline=deadline,
            )
        except ProviderGaveUp as exc:
            if exc.out_of_time:
                return _timed_out(ctx, f" waiting for the model: {exc}")
            return _Stop(reason=f"provider error: {exc}", exit_code=1)
        except ProviderStop as exc:
            return _Stop(error=f"provider error: {exc}", exit_code=1)

    def _spend(
        self, ctx: RunContext, model: ResolvedModel, loop: _Loop, response: Any
    ) -> _Stop | None:
        """Record an answer's usage as it arrives (a run stopped later keeps it) and tell the
        session budget; the stop the budget asks for, if it does."""
        loop.turns += 1
        tokens = _usage(response)
        cost = model.cost(tokens.uncached, tokens.output, tokens.cache_read, tokens.cache_write)
        loop.cost_known = loop.cost_known and cost is not None
        loop.spent += cost or 0.0
        ctx.events.emit(
            "usage",
            input_tokens=tokens.uncached,
            output_tokens=tokens.output,
            cache_read_tokens=tokens.cache_read,
            cache_write_tokens=tokens.cache_write,
            cost_usd=cost,
            cost_source=None if cost is None else pricing_of(ctx.model, ctx.models).source,
        )
        error = ctx.over_budget(loop.spent if loop.cost_known else None)
        return _Stop(error=error, exit_code=1) if error is not None else None

    def _call(self, ctx: RunContext, call: Any, deadline: float) -> dict[str, Any]:
        """Run one bash call; return the tool message for the model."""
        function = getattr(call, "function", None)
        name = str(getattr(function, "name", None) or "")  # a model may leave it out
        try:
            arguments = json.loads(getattr(function, "arguments", None) or "{}")
        except (ValueError, TypeError, RecursionError):
            arguments = None
        command = arguments.get("command") if isinstance(arguments, dict) else None
        command = command if isinstance(command, str) else ""
        ctx.events.emit(
            "tool_call", id=call.id, tool=tool_name(name), agent_tool=name, command=command
        )
        if name != "bash" or not command:
            text = f"error: unknown tool {name!r} or no command; use bash"
            ctx.events.emit("tool_result", id=call.id, output=text, exit_code=None)
            return {"role": "tool", "tool_call_id": call.id, "content": text}
        ctx.transcript.write(f"$ {command}\n".encode())
        left = deadline - time.monotonic()
        result = run_shell(
            command,
            cwd=ctx.workspace,
            env={**ctx.env, **COMMAND_ENV, **self.settings.env},
            timeout_secs=max(0.1, min(self.settings.tool_timeout_secs, left)),
            combined=True,
            keep_tail=True,
            confine=ctx.confine,
        )
        ctx.transcript.write(result.stdout.encode())
        ctx.transcript.flush()
        output = truncate(strip_ansi(result.stdout), self.settings.max_output_chars)
        code = result.shell_exit_code
        ctx.events.emit("tool_result", id=call.id, output=output, exit_code=code)
        if result.timed_out:
            status = f"stopped: timed out after {result.duration_secs:.0f}s"
        elif result.signal is not None:
            status = f"exit code {code}: killed by signal {result.signal}"
        else:
            status = f"exit code {code}"
        return {"role": "tool", "tool_call_id": call.id, "content": f"{output}\n[{status}]"}


def _timed_out(ctx: RunContext, detail: str = "") -> _Stop:
    return _Stop(
        timed_out=True, reason=f"timed out after {ctx.timeout_secs:g}s{detail}", exit_code=None
    )


@dataclass(frozen=True)
class _Tokens:
    """One response's tokens; `uncached` input excludes the cache reads and writes."""

    uncached: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0


def _usage(response: Any) -> _Tokens:
    """The tokens of a response as litellm reports them.

    litellm's `prompt_tokens` counts all input, cache reads and writes included (it adds
    Anthropic's `cache_read_input_tokens` and `cache_creation_input_tokens` in); the reads are
    `prompt_tokens_details.cached_tokens`, the writes `prompt_tokens_details.cache_write_tokens`
    (named `cache_creation_tokens` too, and `cache_creation_input_tokens` on the usage itself).
    """
    usage = getattr(response, "usage", None)
    if usage is None:
        return _Tokens()
    details = getattr(usage, "prompt_tokens_details", None)
    read = _count(details, "cached_tokens") or _count(usage, "cache_read_input_tokens")
    write = (
        _count(details, "cache_write_tokens")
        or _count(details, "cache_creation_tokens")
        or _count(usage, "cache_creation_input_tokens")
    )
    prompt = _count(usage, "prompt_tokens")
    return _Tokens(max(0, prompt - read - write), _count(usage, "completion_tokens"), read, write)


def _count(source: Any, name: str) -> int:
    value = getattr(source, name, None) if source is not None else None
    return int(value) if isinstance(value, int | float) and value > 0 else 0


def _assistant(message: Any, calls: list[Any]) -> dict[str, Any]:
    entry: dict[str, Any] = {"role": "assistant", "content": message.content or ""}
    if calls:
        entry["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.function.name, "arguments": c.function.arguments},
            }
            for c in calls
        ]
    return entry
