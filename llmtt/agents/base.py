"""The one contract every agent implements: run in a prepared workspace, emit events."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, ClassVar

from llmtt.events import EventWriter
from llmtt.process.sandbox.bwrap import Confinement, Sandbox
from llmtt.spec.config import AgentSettings, ModelSpec
from llmtt.spec.scenario import Scenario


@dataclass(frozen=True)
class RunContext:
    """Everything an agent gets for one run."""

    run_id: str
    scenario: Scenario
    prompt: str
    workspace: Path
    home: Path
    env: dict[str, str]
    model: str | None
    timeout_secs: float
    max_turns: int
    transcript: BinaryIO
    events: EventWriter
    model_url: str | None = None  # base URL of the scripted model server, when model=scripted
    # The sandbox the agent's processes are started in (llmtt.execution.isolation), or None.
    confine: Confinement | None = None
    guidance: Mapping[str, str] = field(default_factory=dict)  # guidance file -> its text
    max_usd: float | None = None  # the scenario's cost limit for this run
    models: Mapping[str, ModelSpec] = field(default_factory=dict)  # [models.*] of llmtt.toml
    # The session budget: given the run's cost so far, why it must stop now (None: go on).
    session_budget: Callable[[float], str | None] | None = None
    skills: Sequence[PlacedSkill] = ()  # the variant's skills, where this run placed them
    # The model's `api_base` in `models` is the model gateway standing in for the provider the
    # agent reaches by itself (`Agent.own_provider`), not an endpoint the user configured.
    stand_in: bool = False

    def over_budget(self, spent: float | None) -> str | None:
        """Why a run that has spent `spent` must stop for the session budget, or None."""
        if spent is None or self.session_budget is None:
            return None
        return self.session_budget(spent)


@dataclass(frozen=True)
class AgentExit:
    """How the agent's run ended. `error` means it could not be carried out at all; `reason`
    says why a run that is a result stopped early (a limit, a timeout, an endpoint error)."""

    exit_code: int | None
    timed_out: bool
    duration_secs: float
    natural_stop: bool | None = None
    error: str | None = None
    reason: str | None = None


VersionProbe = Callable[[str, str | None, Mapping[str, str]], str]


@dataclass(frozen=True)
class PlacedSkill:
    """A skill laid into a run's workspace: its name, description and folder there."""

    name: str
    description: str
    path: str  # workspace path of its folder


@dataclass(frozen=True)
class OwnProvider:
    """A provider an agent reaches by itself, as the model gateway stands in for it."""

    base_url: str
    key: str
    header: str  # the header the provider takes the key in
    secrets: tuple[str, ...]  # the variables holding the key: never passed to the agent

    @classmethod
    def find(
        cls,
        base_url: str,
        base_env: str | None,
        key_env: tuple[str, ...],
        header: str,
        env: Mapping[str, str],
    ) -> OwnProvider | None:
        """The provider at `base_url` (moved by the caller's `base_env`, the variable the
        agent itself honours), when a key for it is set (the run's `env`, else the caller's);
        None without one (an agent logged in by other means reaches its provider itself)."""
        key = next((v for v in (env.get(k) or os.environ.get(k) for k in key_env) if v), None)
        if key is None:
            return None
        moved = os.environ.get(base_env) if base_env else None
        return cls(moved or base_url, key, header, key_env)


class Agent(ABC):
    """Base of all agents; subclasses implement `run` and may override the policies."""

    plugin_kind: ClassVar[str] = "agent"  # what the registry accepts under `llmtt.agents`
    name: str
    needs_model: bool = True
    free: bool = False
    # It replays a recorded run, the same every time: the plan gives it one repeat, so no
    # judge or triage is paid again for the same trajectory.
    replays: bool = False
    structured_events: bool = True
    # The `[models.X]` field holding the name this agent calls a model by (part of its key).
    model_name_field: str = "id"
    # The header a provider of this agent's wire takes its key in (`x-api-key`: Anthropic's),
    # which the model gateway puts the real key in.
    key_header: str = "authorization"
    # It takes its endpoint from `[models]` (RunContext.models), so the gateway can stand in.
    through_gateway: bool = False
    # Where it reads a project's guidance and discovers skills, as workspace paths (what each
    # pinned CLI was seen to read: docs/metrics.md, "Guidance and skills").
    guidance_file: str = "AGENTS.md"
    skills_dir: str = ".agents/skills"
    # Every place it reads them from (what the no-guidance control takes out of a fixture).
    guidance_reads: tuple[str, ...] = ("AGENTS.md",)
    skills_reads: tuple[str, ...] = (".agents/skills",)

    def __init__(self, settings: AgentSettings, project_root: Path) -> None:
        self.settings = settings
        self.project_root = project_root
        # The project's `[models.*]`, set by `make_agent`: a model's endpoint and key variable.
        self.models: Mapping[str, ModelSpec] = {}

    def version(self, probe: VersionProbe) -> str:
        """The agent's version (part of the run key), asked through `probe` (cached)."""
        return "unknown"

    def key_header_for(self, model: ModelSpec) -> str:
        """The header the provider of `model` takes its key in, as this agent calls it."""
        return self.key_header

    def own_provider(self, model: str, env: Mapping[str, str]) -> OwnProvider | None:
        """Where this agent reaches `model` by itself (no `[models.X] api_base`), and the key
        it would use there (from the run's `env`, else the caller's), when the model gateway
        can stand in for it; else None."""
        return None

    def drift(self, version: str) -> str | None:
        """Why a run with this agent at `version` is not on proven ground (a CLI other than
        the one llmtt pins and tests), or None."""
        return None

    def warm(self) -> None:
        """Load what each run of this agent loads first (a library), once in the forker of a
        `doit run -n N` (llmtt.taskgraph.warm) rather than in each of its workers."""
        return None

    def prepare_home(self, home: Path, sandbox: Sandbox | None) -> None:
        """Lay this agent's own files into a run's new `home`, before any process of the run
        (its setup included) has started there, so none can have put a link in their way;
        `sandbox`: the project's, for a process that helps (None: runs are unconfined)."""
        return None

    def install_paths(self) -> tuple[Path, ...]:
        """The programs of this agent a sandbox must show (read-only, with their installs)."""
        return ()

    def model_urls(self, model: str) -> list[str] | None:
        """Where this agent's own process calls `model` (not the scripted one): URLs or
        `host:port`; [] when it calls none itself, None when llmtt cannot know."""
        return []

    def unavailable(self, model: str | None) -> str | None:
        """Why this agent cannot run here with `model` (what to install or set), or None."""
        return self.missing_dependency()

    def missing_dependency(self) -> str | None:
        """What llmtt's own Python lacks for this agent (an optional dependency, with the
        command that installs it), or None; `llmtt validate` says it before any run."""
        return None

    @abstractmethod
    def run(self, ctx: RunContext) -> AgentExit:
        """Perform the task in `ctx.workspace`, emitting events through `ctx.events`."""
