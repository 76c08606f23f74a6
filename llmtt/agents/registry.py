"""Agents by name, through the one registry (`llmtt.registry`): an installed agent class, or a
`command` agent described in llmtt.toml."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import cast

from llmtt import registry
from llmtt.agents.base import Agent
from llmtt.spec.config import AgentSettings, Config


@lru_cache(maxsize=64)
def agent_class(name: str) -> type[Agent]:
    """The agent class registered under `name` (entry points do not change within a process)."""
    return cast(type[Agent], registry.load("agent", name))


def make_agent(config: Config, root: Path, name: str) -> Agent:
    """The agent called `name` in the project at `root`: a registered one, or a `command`
    agent from llmtt.toml."""
    settings = config.agents.get(name) or AgentSettings()
    agent: Agent
    if settings.trajectories is not None:
        from llmtt.agents.replay import ReplayAgent

        agent = ReplayAgent(name, settings, root)
    elif settings.command is not None:
        from llmtt.agents.command import CommandAgent

        agent = CommandAgent(name, settings, root)
    else:
        agent = agent_class(name)(settings, root)
    agent.models = config.models
    return agent
