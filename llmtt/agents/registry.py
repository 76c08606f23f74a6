"""Agents by name, found through the `llmtt.agents` entry points (built-ins use them too)."""

from __future__ import annotations

from functools import lru_cache
from importlib.metadata import entry_points

from llmtt.agents.base import Agent
from llmtt.config import AgentSettings
from llmtt.errors import LlmttError
from llmtt.project import Project

GROUP = "llmtt.agents"


@lru_cache(maxsize=1)
def _entry_points() -> dict[str, str]:
    return {ep.name: ep.value for ep in entry_points(group=GROUP)}


def agent_names() -> list[str]:
    """Names of every installed agent."""
    return sorted(_entry_points())


@lru_cache(maxsize=64)
def agent_class(name: str) -> type[Agent]:
    """The agent class registered under `name` (entry points do not change within a process)."""
    for ep in entry_points(group=GROUP, name=name):
        cls = ep.load()
        if not (isinstance(cls, type) and issubclass(cls, Agent)):
            raise LlmttError(f"entry point {name} = {ep.value} is not an llmtt Agent class")
        return cls
    raise LlmttError(f"unknown agent {name!r}; installed agents: {', '.join(agent_names())}")


def make_agent(project: Project, name: str) -> Agent:
    """The agent called `name`: a registered one, or a `command` agent from llmtt.toml."""
    settings = project.config.agents.get(name) or AgentSettings()
    if settings.command is not None:
        from llmtt.agents.command import CommandAgent

        return CommandAgent(name, settings, project.root)
    try:
        cls = agent_class(name)
    except LlmttError:
        raise LlmttError(
            f"unknown agent {name!r}; installed agents: {', '.join(agent_names())}, "
            f"or describe it in llmtt.toml as [agents.{name}] with command = [...]"
        ) from None
    return cls(settings, project.root)
