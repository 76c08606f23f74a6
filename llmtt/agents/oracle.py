"""The oracle: plays the scenario's reference `solution`, proving the scenario and its gates."""

from __future__ import annotations

import time

from llmtt.agents.base import Agent, AgentExit, RunContext, VersionProbe
from llmtt.events import SHELL


class OracleAgent(Agent):
    """Runs every `solution` command in order through the PTY runner, also after a failure."""

    name = "oracle"
    needs_model = False
    free = True

    def version(self, probe: VersionProbe) -> str:
        """Bumped when the oracle's behaviour changes."""
        return "oracle-1"

    def run(self, ctx: RunContext) -> AgentExit:
        """Run each solution command as one tool call; stop only when time runs out."""
        from llmtt.process.pty import run_in_pty
        from llmtt.process.shell import REFUSED, nul_refusal

        started = time.monotonic()
        commands = ctx.scenario.solution
        ctx.events.emit("spawn", command="oracle", args=[f"{len(commands)} solution commands"])
        for index, command in enumerate(commands, start=1):
            remaining = ctx.timeout_secs - (time.monotonic() - started)
            if remaining <= 0:
                return self._timed_out(ctx, started)
            call_id = f"call_{index}"
            ctx.events.emit("tool_call", id=call_id, tool=SHELL, agent_tool="bash", command=command)
            ctx.transcript.write(f"$ {command}\n".encode())
            refused = nul_refusal(command)
            if refused is not None:  # a scenario made in code: its file would not load
                ctx.transcript.write(f"{refused}\n".encode())
                ctx.events.emit("tool_result", id=call_id, output=refused, exit_code=REFUSED)
                continue
            result = run_in_pty(
                ["bash", "-c", command],
                cwd=ctx.workspace,
                env=ctx.env,
                timeout_secs=remaining,
                transcript=ctx.transcript,
                confine=ctx.confine,
            )
            if result.timed_out:
                ctx.events.emit("tool_result", id=call_id, output=result.output, exit_code=None)
                return self._timed_out(ctx, started)
            ctx.events.emit(
                "tool_result", id=call_id, output=result.output, exit_code=result.exit_code
            )
        duration = time.monotonic() - started
        ctx.events.emit(
            "complete",
            exit_code=0,
            duration_secs=round(duration, 3),
            timed_out=False,
            natural_stop=True,
        )
        return AgentExit(exit_code=0, timed_out=False, duration_secs=duration, natural_stop=True)

    def _timed_out(self, ctx: RunContext, started: float) -> AgentExit:
        duration = time.monotonic() - started
        ctx.transcript.write(f"\n[llmtt: run timed out after {ctx.timeout_secs:g}s]\n".encode())
        ctx.events.emit(
            "complete",
            exit_code=None,
            duration_secs=round(duration, 3),
            timed_out=True,
            natural_stop=False,
        )
        return AgentExit(exit_code=None, timed_out=True, duration_secs=duration, natural_stop=False)
