"""llmtt's own agent loop, in the manner of bashkit-eval: one `bash` tool, a turn limit, and
every turn's tokens, cost and tool calls recorded — for any model litellm reaches."""

from __future__ import annotations

import json
import time
from importlib.metadata import version as package_version
from typing import Any

from llmtt.agents.base import Agent, AgentExit, RunContext, VersionProbe
from llmtt.agents.runner import run_in_pty
from llmtt.models import ProviderStop, complete, resolve_model

LOOP_VERSION = "llmtt-loop-1"
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
SYSTEM = """You are working in a terminal, in the folder that holds the task's files.
Use the `bash` tool to run commands; each call returns the command's output and exit code.
When the task is done, answer with a short summary and no tool call."""


def system_prompt(guidance: dict[str, str]) -> str:
    """The system prompt: the loop's instructions and the guidance files, verbatim."""
    parts = [SYSTEM]
    for name, text in guidance.items():
        parts.append(f'<file name="{name}">\n{text.rstrip()}\n</file>')
    return "\n\n".join(parts)


def truncate(text: str, limit: int) -> str:
    """`text` cut to `limit` characters with a visible marker saying how much was left out."""
    if len(text) <= limit:
        return text
    head = limit // 2
    tail = limit - head
    cut = len(text) - limit
    return f"{text[:head]}\n[... {cut} characters cut by llmtt ...]\n{text[-tail:]}"


class LitellmAgent(Agent):
    """The loop: ask the model, run the bash calls it makes, until it answers or turns run out."""

    name = "litellm"

    def version(self, probe: VersionProbe) -> str:
        """The loop's own version and litellm's."""
        return f"{LOOP_VERSION}/litellm-{package_version('litellm')}"

    def run(self, ctx: RunContext) -> AgentExit:
        """Run the loop; a provider error that retrying cannot fix: the run is not carried out."""
        assert ctx.model is not None
        started = time.monotonic()
        model = resolve_model(ctx.model, ctx.models, ctx.model_url)
        ctx.events.emit("spawn", command="litellm", args=[model.litellm])
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": system_prompt(dict(ctx.guidance))},
            {"role": "user", "content": ctx.prompt},
        ]
        spent = 0.0
        cost_known = True
        turns = 0
        natural = False
        error: str | None = None
        while turns < ctx.max_turns:
            remaining = ctx.timeout_secs - (time.monotonic() - started)
            if remaining <= 0:
                return self._finish(ctx, started, turns, timed_out=True, natural=False)
            try:
                response = complete(
                    model,
                    messages=messages,
                    tools=[BASH_TOOL],
                    max_retries=self.settings.max_retries,
                    backoff_secs=self.settings.retry_backoff_secs,
                    timeout_secs=max(1.0, remaining),
                )
            except ProviderStop as exc:
                error = f"provider error: {exc}"
                ctx.events.emit("output", text=error)
                break
            turns += 1
            tokens_in, tokens_out = _usage(response)
            cost = model.cost(tokens_in, tokens_out)
            cost_known = cost_known and cost is not None
            spent += cost or 0.0
            ctx.events.emit(
                "usage",
                input_tokens=tokens_in,
                output_tokens=tokens_out,
                cache_read_tokens=0,
                cost_usd=cost,
            )
            message = response.choices[0].message
            calls = list(message.tool_calls or [])
            if message.content:
                ctx.events.emit("message", role="assistant", text=str(message.content))
            messages.append(_assistant(message, calls))
            if not calls:
                natural = True
                break
            for call in calls:
                messages.append(self._call(ctx, call, started))
            if ctx.max_usd is not None and cost_known and spent > ctx.max_usd:
                ctx.events.emit(
                    "output", text=f"cost limit reached: spent ${spent:.4f} of ${ctx.max_usd:g}"
                )
                break
            error = ctx.over_budget(spent if cost_known else None)
            if error is not None:
                ctx.events.emit("output", text=error)
                break
        return self._finish(ctx, started, turns, timed_out=False, natural=natural, error=error)

    def _call(self, ctx: RunContext, call: Any, started: float) -> dict[str, Any]:
        """Run one bash call; return the tool message for the model."""
        try:
            command = str(json.loads(call.function.arguments or "{}").get("command", ""))
        except (ValueError, AttributeError):
            command = ""
        ctx.events.emit("tool_call", id=call.id, tool=call.function.name, command=command)
        if call.function.name != "bash" or not command:
            text = f"error: unknown tool {call.function.name!r} or no command; use bash"
            ctx.events.emit("tool_result", id=call.id, output=text, exit_code=None)
            return {"role": "tool", "tool_call_id": call.id, "content": text}
        ctx.transcript.write(f"$ {command}\n".encode())
        left = ctx.timeout_secs - (time.monotonic() - started)
        result = run_in_pty(
            ["bash", "-c", command],
            cwd=ctx.workspace,
            env=ctx.env,
            timeout_secs=max(0.1, min(self.settings.tool_timeout_secs, left)),
            transcript=ctx.transcript,
        )
        output = truncate(result.output, self.settings.max_output_chars)
        code = result.exit_code
        ctx.events.emit("tool_result", id=call.id, output=output, exit_code=code)
        status = "timed out" if result.timed_out else f"exit code {code}"
        return {"role": "tool", "tool_call_id": call.id, "content": f"{output}\n[{status}]"}

    def _finish(
        self,
        ctx: RunContext,
        started: float,
        turns: int,
        *,
        timed_out: bool,
        natural: bool,
        error: str | None = None,
    ) -> AgentExit:
        duration = time.monotonic() - started
        exit_code = None if timed_out else (1 if error else 0)
        ctx.events.emit(
            "complete",
            exit_code=exit_code,
            duration_secs=round(duration, 3),
            timed_out=timed_out,
            natural_stop=natural,
            turns=turns,
        )
        return AgentExit(
            exit_code=exit_code,
            timed_out=timed_out,
            duration_secs=duration,
            natural_stop=natural,
            error=error,
        )


def _usage(response: Any) -> tuple[int, int]:
    usage = getattr(response, "usage", None)
    if usage is None:
        return 0, 0
    return int(usage.prompt_tokens or 0), int(usage.completion_tokens or 0)


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
