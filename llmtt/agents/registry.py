"""Agents by name, found through the `llmtt.agents` entry points (built-ins use them too)."""

from __future__ import annotations

import difflib
from functools import lru_cache
from importlib.metadata import entry_points

from llmtt.agents.base import Agent
from llmtt.errors import LlmttError
from llmtt.spec.config import AgentSettings, Config
from llmtt.spec.project import Project

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
    raise LlmttError(unknown_agent(name))


def known_agents(config: Config) -> set[str]:
    """Every agent name a project can use: the installed ones and its `command` agents."""
    own = {name for name, settings in config.agents.items() if settings.command is not None}
    return set(agent_names()) | own


def unknown_agent(name: str) -> str:
    """What to say of an agent name that is neither installed nor described in llmtt.toml."""
    names = agent_names()
    close = difflib.get_close_matches(name, names, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return (
        f"unknown agent {name!r}{hint} (installed agents: {', '.join(names)}; "
        f"any other agent CLI needs an [agents.{name}] table with command = [...])"
    )


def make_agent(project: Project, name: str) -> Agent:
    """The agent called `name`: a registered one, or a `command` agent from llmtt.toml."""
    settings = project.config.agents.get(name) or AgentSettings()
    agent: Agent
    if settings.command is not None:
        from llmtt.agents.command import CommandAgent

        agent = CommandAgent(name, settings, project.root)
    else:
        agent = agent_class(name)(settings, project.root)
    agent.models = project.config.models
    return agent
