"""`llmtt agents` and `llmtt agents install`: the pinned agent CLIs and where llmtt finds them."""

from __future__ import annotations

import argparse
from pathlib import Path


def agents(args: argparse.Namespace) -> int:
    from llmtt.agents import install

    root = args.project.resolve()
    if args.action == "install":
        dest = args.dir or (install.project_dir(root) if args.into_project else install.user_dir())
        names = args.names or list(install.CLI_AGENTS)
        install.check_names(names)  # before anything is installed
        for name in names:
            print(f"installing {install.pinned(name)} into {dest / name}", flush=True)
            found = install.install(name, dest)
            print(f"  {name}: {', '.join(sorted(p.name for p in found.iterdir()))} in {found}")
        if args.dir and install.user_dir() != args.dir:
            print(f"llmtt finds them there with LLMTT_AGENTS_DIR={args.dir}")
        return 0
    return _list_agents(root)


def _list_agents(root: Path) -> int:
    from llmtt.agents import install
    from llmtt.agents.cli_agent import CliAgent
    from llmtt.agents.registry import agent_class
    from llmtt.spec.config import AgentSettings

    settings: dict[str, AgentSettings] = {}
    if (root / "llmtt.toml").is_file():
        from llmtt.spec.project import load_project

        settings = load_project(root).config.agents
    print(f"{'agent':<12} {'pinned':<36} found")
    for name in install.CLI_AGENTS:
        agent = agent_class(name)(settings.get(name) or AgentSettings(), root)
        assert isinstance(agent, CliAgent)
        exe = agent.executable()
        if exe is None:
            found = f"not installed: llmtt agents install {name}"
        else:
            origin = (
                "llmtt.toml" if agent.settings.executable else install.where_found(root, name, exe)
            )
            version = install.version_of(exe)
            found = f"{version} ({origin}: {exe})"
            if agent.package.rpartition("@")[2] not in version:
                found += ", not the pinned version"
        print(f"{name:<12} {agent.package:<36} {found}")
    print(f"user agents folder: {install.user_dir()}")
    return 0
