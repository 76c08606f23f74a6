"""The one contract every agent implements: run in a prepared workspace, emit events."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, ClassVar

from llmtt.config import AgentSettings
from llmtt.events import EventWriter
from llmtt.scenario import Scenario


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


@dataclass(frozen=True)
class AgentExit:
    """How the agent's run ended. `error` means it could not be carried out at all."""

    exit_code: int | None
    timed_out: bool
    duration_secs: float
    natural_stop: bool | None = None
    error: str | None = None


class Agent(ABC):
    """Base of all agents; subclasses implement `run` and may override the policies."""

    name: ClassVar[str]
    needs_model: ClassVar[bool] = True
    free: ClassVar[bool] = False
    structured_events: ClassVar[bool] = True

    def __init__(self, settings: AgentSettings) -> None:
        self.settings = settings

    def version(self) -> str:
        """The agent's version; part of the run key."""
        return "unknown"

    def unavailable(self) -> str | None:
        """Why this agent cannot run here (what to install or set), or None when it can."""
        return None

    @abstractmethod
    def run(self, ctx: RunContext) -> AgentExit:
        """Perform the task in `ctx.workspace`, emitting events through `ctx.events`."""
