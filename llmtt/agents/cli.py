"""What the real agent CLIs share: finding the binary, isolation, the run, the JSON-lines stream.

An adapter says how to launch its CLI (`command`) and how to read its stream (a `StreamParser`);
this module runs it under the PTY runner, feeds the parser line by line as output arrives, and
closes the event log with the agent's own totals.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from abc import abstractmethod
from pathlib import Path
from typing import Any

from llmtt import inputs
from llmtt.agents.base import Agent, AgentExit, RunContext, VersionProbe
from llmtt.agents.runner import run_in_pty
from llmtt.events import EventWriter
from llmtt.workspace import tool_path

_ANSI = re.compile(
    r"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][A-Za-z0-9]|\x1b[78=>]"
)
SCRIPTED = "scripted"


def strip_ansi(text: str) -> str:
    """Terminal control sequences removed."""
    return _ANSI.sub("", text)


class StreamParser:
    """Turns one agent's JSON lines into llmtt events, as they arrive."""

    def __init__(self, events: EventWriter, *, scripted: bool) -> None:
        self.events = events
        self.scripted = scripted
        self.turns: int | None = None
        self.natural_stop: bool | None = None
        self.error: str | None = None
        self.spent: float | None = 0.0  # running cost as the agent reports it; None: unknown

    def line(self, text: str) -> None:
        """One line of the agent's output (JSON or not)."""
        text = strip_ansi(text).strip()
        if not text:
            return
        if text.startswith("{"):
            try:
                value = json.loads(text)
            except ValueError:
                value = None
            if isinstance(value, dict):
                self.handle(value)
                return
        self.events.emit("output", text=text)

    @abstractmethod
    def handle(self, obj: dict[str, Any]) -> None:
        """One JSON object of the agent's stream."""

    def finish(self) -> None:
        """Called once after the process ended: emit totals that only the end knows."""

    def cost(self, reported: float | None) -> float | None:
        """The scripted model costs nothing, whatever price the client computed. Adds the
        turn's cost to the running total that the run's cost limit watches."""
        cost = 0.0 if self.scripted else reported
        if cost is None or self.spent is None:
            self.spent = None
        else:
            self.spent += float(cost)
        return cost


class LineBuffer:
    """Splits raw PTY bytes into lines (tolerating `\\r\\n` and partial chunks)."""

    def __init__(self, parser: StreamParser) -> None:
        self._parser = parser
        self._pending = b""

    def feed(self, data: bytes) -> None:
        """Take a chunk; complete lines go to the parser."""
        self._pending += data
        *lines, self._pending = self._pending.split(b"\n")
        for line in lines:
            self._parser.line(line.decode("utf-8", errors="replace"))

    def flush(self) -> None:
        """The last, unterminated line."""
        if self._pending:
            self._parser.line(self._pending.decode("utf-8", errors="replace"))
            self._pending = b""


def unwrap_shell(command: str) -> str:
    """`/bin/bash -lc 'git init'` -> `git init`: the command the model asked for."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return command
    shells = ("bash", "sh", "zsh", "dash")
    if len(argv) == 3 and Path(argv[0]).name in shells and argv[1] in ("-c", "-lc", "-ic"):
        return argv[2]
    return command


class CliAgent(Agent):
    """Base of the adapters for real agent CLIs installed from npm."""

    executable_name: str
    package: str  # what to install, e.g. "@anthropic-ai/claude-code@2.1.197"
    key_env: tuple[str, ...] = ()  # variables that authenticate it with a real provider

    def executable(self) -> str | None:
        """The configured binary, else one on PATH, else the project's node_modules/.bin."""
        configured = self.settings.executable
        if configured:
            path = Path(configured).expanduser()
            path = path if path.is_absolute() else self.project_root / path
            inputs.note_file(path)
            return str(path) if path.is_file() and os.access(path, os.X_OK) else None
        found = inputs.which(self.executable_name, tool_path())
        if found:
            return found
        local = self.project_root / "node_modules" / ".bin" / self.executable_name
        inputs.note_file(local)
        return str(local) if local.exists() else None

    def version(self, probe: VersionProbe) -> str:
        """`<binary> --version`, through the cache."""
        exe = self.executable()
        if exe is None:
            return "not installed"
        return probe(f"{shlex.quote(exe)} --version", exe, {})

    def unavailable(self, model: str | None) -> str | None:
        """Missing binary or, for a real model, missing credentials: say what to do."""
        if self.executable() is None:
            where = self.settings.executable
            if where:
                return (
                    f"{self.name}: [agents.{self.name}] executable {where!r} "
                    f"is not an executable file"
                )
            return (
                f"{self.name} is not installed: run `npm install {self.package}` in the project "
                f"(or `npm ci` with llmtt's package.json), or set [agents.{self.name}] "
                f"executable in llmtt.toml"
            )
        if (
            model != SCRIPTED
            and self.key_env
            and not any(os.environ.get(k) or self.settings.env.get(k) for k in self.key_env)
        ):
            keys = " or ".join(self.key_env)
            return f"{self.name} needs {keys} for model {model!r}: set it (or use model=scripted)"
        return None

    def passed_env(self, model: str | None) -> dict[str, str]:
        """Variables from the caller's environment this agent may see: the configured ones,
        and its provider keys when it talks to a real model."""
        names = list(self.settings.pass_env)
        if model != SCRIPTED:
            names += self.key_env
        return {n: os.environ[n] for n in names if n in os.environ}

    @abstractmethod
    def command(self, ctx: RunContext, exe: str) -> tuple[list[str], dict[str, str]]:
        """argv and the extra environment for one run."""

    @abstractmethod
    def parser(self, ctx: RunContext) -> StreamParser:
        """A fresh parser for this agent's stream in this run."""

    def run(self, ctx: RunContext) -> AgentExit:
        """Launch the CLI under the PTY, normalise its stream, close with `complete`."""
        exe = self.executable()
        assert exe is not None  # checked by unavailable() before the run
        argv, extra = self.command(ctx, exe)
        argv += self.settings.args
        env = {**ctx.env, **self.passed_env(ctx.model), **extra}
        ctx.events.emit("spawn", command=argv[0], args=argv[1:])
        parser = self.parser(ctx)
        lines = LineBuffer(parser)
        limit = ctx.max_usd
        checked: list[float | None] = [None]  # the cost the session budget last saw
        budget_stop: list[str | None] = [None]

        def over_limit() -> bool:
            # Agents that report cost as they go (opencode per step) are stopped at the limit.
            if limit is not None and parser.spent is not None and parser.spent > limit:
                return True
            if parser.spent is not None and parser.spent != checked[0]:
                checked[0] = parser.spent
                budget_stop[0] = ctx.over_budget(parser.spent)
            return budget_stop[0] is not None

        result = run_in_pty(
            argv,
            cwd=ctx.workspace,
            env=env,
            timeout_secs=ctx.timeout_secs,
            transcript=ctx.transcript,
            on_output=lines.feed,
            stop=over_limit,
        )
        lines.flush()
        parser.finish()
        if result.stopped:
            ctx.events.emit(
                "output",
                text=budget_stop[0]
                or f"cost limit reached: spent ${parser.spent or 0:.4f} of ${limit:g}",
            )
        natural = False if result.timed_out or result.stopped else parser.natural_stop
        ctx.events.emit(
            "complete",
            exit_code=result.exit_code,
            duration_secs=round(result.duration_secs, 3),
            timed_out=result.timed_out,
            natural_stop=natural,
            turns=parser.turns,
        )
        if result.timed_out:
            ctx.transcript.write(f"\n[llmtt: run timed out after {ctx.timeout_secs:g}s]\n".encode())
        return AgentExit(
            exit_code=result.exit_code,
            timed_out=result.timed_out,
            duration_secs=result.duration_secs,
            natural_stop=natural,
            error=budget_stop[0],
        )
