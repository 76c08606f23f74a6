"""What the real agent CLIs share: finding the binary, isolation, the run, the JSON-lines stream.

An adapter says how to launch its CLI (`command`) and how to read its stream (a `StreamParser`,
which emits the events docs/metrics.md describes: usage per model request as soon as the stream
shows it, the agent's own totals, tool calls in the order the model issued them); this module
runs it under the PTY runner, feeds the parser line by line as output arrives, stops the run at
its turn limit, cost limit or session budget (`Limits`), and closes the event log with how it
ended.
"""

from __future__ import annotations

import os
import shlex
from abc import abstractmethod
from collections.abc import Mapping
from pathlib import Path

from llmtt.agents.base import Agent, AgentExit, OwnProvider, RunContext, VersionProbe
from llmtt.agents.install import places
from llmtt.agents.pricing import SCRIPTED, Pricing, pricing_of
from llmtt.agents.stream import LineBuffer, StreamParser
from llmtt.process.pty import run_in_pty
from llmtt.process.shell import tool_path
from llmtt.providers import Endpoint, endpoint_of, toml_key
from llmtt.util import signatures as inputs


class CliAgent(Agent):
    """Base of the adapters for real agent CLIs installed from npm."""

    executable_name: str
    package: str  # what to install, e.g. "@anthropic-ai/claude-code@2.1.332"
    key_env: tuple[str, ...] = ()  # variables that authenticate it with a real provider
    own_turn_limit = False  # the CLI stops itself at ctx.max_turns (llmtt passes its flag)
    provider_hosts: tuple[str, ...] = ()  # where it calls its own provider's models
    # Its own provider, as the gateway reaches it for a model without `api_base`: the base URL
    # (moved by the CLI's own variable, e.g. ANTHROPIC_BASE_URL, when the caller sets it) and
    # the key variables whose value the gateway adds. None: the CLI reaches it itself.
    provider_base: str | None = None
    provider_base_env: str | None = None
    provider_key_env: tuple[str, ...] = ()
    through_gateway = True

    def own_provider(self, model: str, env: Mapping[str, str]) -> OwnProvider | None:
        """The CLI's own provider and the key for it, when llmtt holds one (an API key; a
        login token the CLI keeps to itself is not passed on)."""
        if self.provider_base is None:
            return None
        keys = self.named_key(model) or self.provider_key_env
        return OwnProvider.find(
            self.provider_base, self.provider_base_env, keys, self.key_header, env
        )

    def named_key(self, model: str) -> tuple[str, ...]:
        """The key variable `[models.X] api_key_env` names for `model`: the only one its own
        provider is then reached with (none named: the CLI's usual ones)."""
        spec = self.models.get(model)
        return (spec.api_key_env,) if spec is not None and spec.api_key_env else ()

    def drift(self, version: str) -> str | None:
        """A CLI other than the pinned one: its events and usage are not what llmtt's contract
        tests proved (`llmtt agents` lists what is found where)."""
        _, at, pinned = self.package.rpartition("@")
        if not at or pinned in version or not any(c.isdigit() for c in version):
            return None  # no pin (a `command` agent), the pinned one, or no version known
        return (
            f"{self.name} {version} is not the version llmtt pins and tests ({self.package}): "
            f"its events and metrics may differ; `llmtt agents install {self.name}` installs "
            "the pinned one"
        )

    def executable(self) -> str | None:
        """The configured binary, else the first found where llmtt installs agents, else PATH
        (the order is in llmtt/agents/install.py)."""
        configured = self.settings.executable
        if configured:
            path = Path(configured).expanduser()
            path = path if path.is_absolute() else self.project_root / path
            inputs.note_file(path)
            return str(path) if path.is_file() and os.access(path, os.X_OK) else None
        for place in places(self.project_root, self.name):
            local = place.bin / self.executable_name
            inputs.note_file(local)
            if local.is_file() and os.access(local, os.X_OK):
                return str(local)
        return inputs.which(self.executable_name, tool_path())

    def install_paths(self) -> tuple[Path, ...]:
        """The binary, as found (a link in node_modules/.bin) and where it leads."""
        exe = self.executable()
        return (Path(exe),) if exe else ()

    def model_urls(self, model: str) -> list[str] | None:
        """`[models.X] api_base`, else the provider the CLI reaches by itself."""
        spec = self.models.get(model)
        if spec is not None and spec.api_base:
            return [spec.api_base]
        return self.provider_urls(spec.id if spec is not None and spec.id else model)

    def provider_urls(self, model_id: str) -> list[str] | None:
        """Where the CLI reaches a model of its own provider (None: unknown to llmtt)."""
        return list(self.provider_hosts) or None

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
                f"{self.name} is not installed: run `llmtt agents install {self.name}` (the "
                f"pinned {self.package}, for every project of this user), or set "
                f"[agents.{self.name}] executable in llmtt.toml"
            )
        keys = self.key_variables(model)
        if keys and not any(os.environ.get(k) or self.settings.env.get(k) for k in keys):
            spec = self.models.get(model or "")
            where = (
                f" ([models.{toml_key(model or '')}] api_key_env)"
                if spec and spec.api_key_env
                else ""
            )
            return (
                f"{self.name} needs {' or '.join(keys)} for model {model!r}{where}: set it "
                f"(or use model=scripted)"
            )
        return None

    def key_variables(self, model: str | None) -> tuple[str, ...]:
        """The variables that authenticate this agent with `model`: the one its `[models.X]`
        names, none for a gateway given without one (it may need no key), else the CLI's own
        for the model's provider."""
        if model is None or model == SCRIPTED:
            return ()
        spec = self.models.get(model)
        if spec is not None and spec.api_key_env:
            return (spec.api_key_env,)
        if spec is not None and spec.api_base:
            return ()
        return self.provider_keys(spec.id if spec is not None and spec.id else model)

    def provider_keys(self, model_id: str) -> tuple[str, ...]:
        """The CLI's own key variables for a model it reaches by itself."""
        return self.key_env

    def passed_env(self, model: str | None) -> dict[str, str]:
        """Variables from the caller's environment this agent may see: the configured ones,
        and the key variables of the model it talks to (never another provider's)."""
        names = [*self.settings.pass_env, *self.key_variables(model)]
        return {n: os.environ[n] for n in names if n in os.environ}

    def endpoint(self, ctx: RunContext) -> Endpoint:
        """Where this run's model is reached, and with which key."""
        assert ctx.model is not None
        return endpoint_of(ctx.model, ctx.models, ctx.env, ctx.model_url)

    @abstractmethod
    def command(self, ctx: RunContext, exe: str) -> tuple[list[str], dict[str, str]]:
        """argv and the extra environment for one run."""

    @abstractmethod
    def parser(self, ctx: RunContext) -> StreamParser:
        """A fresh parser for this agent's stream in this run."""

    def pricing(self, ctx: RunContext) -> Pricing:
        """Who knows the price of the run's model (the usage events' cost and cost_source)."""
        return pricing_of(ctx.model, ctx.models, free=self.free)

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
        limits = Limits(ctx, parser, own_turn_limit=self.own_turn_limit)
        result = run_in_pty(
            argv,
            cwd=ctx.workspace,
            env=env,
            timeout_secs=ctx.timeout_secs,
            transcript=ctx.transcript,
            on_output=lines.feed,
            stop=limits.reached,
            confine=ctx.confine,
        )
        with ctx.events.held():  # what only the end shows, written at once
            lines.flush()
            parser.poll()
            parser.finish()
        reason = limits.reason if result.stopped else None
        if reason is not None:
            ctx.events.emit("output", text=reason)
        elif result.timed_out:
            reason = f"timed out after {ctx.timeout_secs:g}s"
        elif parser.turn_limit_hit:
            reason = f"turn limit reached ({ctx.max_turns} turns)"
        else:
            reason = parser.reason
        natural = False if result.timed_out or result.stopped else parser.natural_stop
        ctx.events.emit(
            "complete",
            exit_code=result.exit_code,
            duration_secs=round(result.duration_secs, 3),
            timed_out=result.timed_out,
            natural_stop=natural,
            turns=parser.turns if parser.per_request else None,
            **({"reason": reason} if reason else {}),
        )
        if result.timed_out:
            ctx.transcript.write(f"\n[llmtt: run timed out after {ctx.timeout_secs:g}s]\n".encode())
        return AgentExit(
            exit_code=result.exit_code,
            timed_out=result.timed_out,
            duration_secs=result.duration_secs,
            natural_stop=natural,
            error=limits.budget if result.stopped and reason == limits.budget else None,
            reason=reason,
        )


class Limits:
    """What stops a CLI run early, counted from its event stream: the turn limit (where the CLI
    has no flag of its own), the scenario's cost limit and the session budget.

    Costs count only where a price is known. When the cost is unknown nothing can be compared
    with a limit in dollars: the run is then not stopped for its cost, and the event log says
    so once.
    """

    def __init__(self, ctx: RunContext, parser: StreamParser, *, own_turn_limit: bool) -> None:
        self.ctx = ctx
        self.parser = parser
        self.own_turn_limit = own_turn_limit
        self.reason: str | None = None  # why the run was stopped
        self.budget: str | None = None  # the session budget's reason: the run stays pending
        self._checked: float | None = None  # the cost the session budget last saw
        self._told = False

    def reached(self) -> bool:
        """Whether the run must stop now (asked after each read of its output)."""
        self.parser.poll()
        self.reason = self._turns() or self._cost()
        return self.reason is not None

    def _turns(self) -> str | None:
        # The agent made max_turns requests and would make another one once the last one's
        # tool calls have their results; a request beyond the limit stops even an agent that
        # keeps its own count.
        parser, limit = self.parser, self.ctx.max_turns
        over = parser.requests > limit
        if over or (not self.own_turn_limit and parser.requests == limit and parser.settled):
            return f"turn limit reached ({limit} turns)"
        return None

    def _cost(self) -> str | None:
        spent, ctx = self.parser.spent, self.ctx
        if spent is None:
            if not self._told and (ctx.max_usd is not None or ctx.session_budget is not None):
                self._told = True
                model = f"model {ctx.model!r}" if ctx.model else "the agent's model"
                ctx.events.emit(
                    "output",
                    text=f"llmtt: no price is known for {model}, so neither the cost limit "
                    "nor the session budget can stop this run (give its prices in [models] "
                    "input_usd_per_mtok and output_usd_per_mtok)",
                )
            return None
        if ctx.max_usd is not None and spent > ctx.max_usd:
            return f"cost limit reached: spent ${spent:.4f} of ${ctx.max_usd:g}"
        if spent != self._checked:
            self._checked = spent
            self.budget = ctx.over_budget(spent)
        return self.budget
