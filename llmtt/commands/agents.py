"""`llmtt agents`, `llmtt agents install` and `llmtt agents check`: the pinned agent CLIs,
where llmtt finds them, and whether the ones found keep llmtt's event and metrics contract."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llmtt.spec.config import AgentSettings


def agents(args: argparse.Namespace) -> int:
    from llmtt.agents import install

    root = args.project.resolve()
    if args.action == "install" and args.skill:
        return _install_skill(root, args.names)
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
    if args.action == "check":
        return _check(root, args.names)
    return _list_agents(root)


def _install_skill(root: Path, names: list[str]) -> int:
    """llmtt's skill, written (or brought up to date) where coding agents find it."""
    from llmtt.commands.init import SKILL_PLACES, own_skill
    from llmtt.errors import LlmttError
    from llmtt.util.atomic import write_text

    if names:
        raise LlmttError(
            f"--skill installs llmtt's skill, not an agent CLI: leave out {' '.join(names)}, or "
            "install the CLIs with a second `llmtt agents install`"
        )
    text = own_skill()
    for place in SKILL_PLACES:
        path = root / place / "llmtt" / "SKILL.md"
        try:
            before = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            before = None
        except (OSError, UnicodeDecodeError) as exc:
            raise LlmttError(f"{path} cannot be read ({exc}); nothing more was written") from None
        if before == text:
            print(f"{path.relative_to(root)}: up to date")
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, text)
        print(f"{path.relative_to(root)}: {'installed' if before is None else 'updated'}")
    return 0


# One scripted session with known truth: what every pinned CLI gives for it (docs/metrics.md).
CHECK_SCENARIO = """\
task: {prompt: Write one.txt and show it.}
run: {timeout_secs: 120}
scripted:
  turns:
    - run: ["echo one > one.txt"]
      usage: {input: 400, output: 25, cache_read: 1500, cache_write: 200}
    - run: ["cat one.txt"]
      usage: {input: 60, output: 15, cache_read: 1800}
    - say: Done.
      usage: {input: 80, output: 12, cache_read: 1900, cache_write: 40}
evaluation:
  gates:
    - {type: file_contains, path: one.txt, substring: one}
"""
CHECK_TRUTH = {
    "outcome": "pass",
    "turns": 3,
    "tool_calls": 2,
    "tool_calls_ok": 2,
    "input_tokens": 540,
    "output_tokens": 52,
    "cache_read_tokens": 5200,
    "client_turns": 3,
    "client_input_tokens": 540,
    "client_output_tokens": 52,
    "natural_stop": True,
}
# Only the Anthropic wire carries cache writes.
CHECK_CACHE_WRITES = {"claude-code": 240, "opencode": 0, "codex": 0}


def _check(root: Path, names: list[str]) -> int:
    """Play CHECK_SCENARIO through each CLI (the project's settings for it, else where llmtt
    finds it) on the scripted model, free, and compare its metrics with the truth."""
    import subprocess
    import sys
    import tempfile

    from llmtt.agents import install
    from llmtt.agents.cli_agent import CliAgent
    from llmtt.agents.registry import agent_class
    from llmtt.spec.config import AgentSettings

    install.check_names(names)
    asked = names or list(install.CLI_AGENTS)
    settings: dict[str, AgentSettings] = {}
    isolation = ""
    if (root / "llmtt.toml").is_file():
        from llmtt.spec.project import load_project

        config = load_project(root).config
        settings = config.agents
        isolation = f'\n[isolation]\nmode = "{config.isolation.mode}"\n'
    # Each CLI as this project finds it (its llmtt.toml, its .llmtt/agents, the user's, PATH).
    found: dict[str, str] = {}
    for name in asked:
        own = settings.get(name) or AgentSettings()
        agent = agent_class(name)(own, root)
        assert isinstance(agent, CliAgent)
        exe = agent.executable()
        if exe is None:
            print(f"{name}: not installed here (llmtt agents install {name})")
        else:
            found[name] = exe
    if not found:
        return 1
    names = list(found)
    tables = "".join(_agent_table(n, settings.get(n) or AgentSettings(), found[n]) for n in names)
    with tempfile.TemporaryDirectory(prefix="llmtt-agents-check-") as folder:
        where = Path(folder)
        (where / "scenarios").mkdir()
        (where / "scenarios" / "check.yaml").write_text(CHECK_SCENARIO)
        (where / "dodo.py").write_text("from llmtt.tasks import *  # noqa: F403\n")
        (where / "llmtt.toml").write_text(
            '[target]\nbinary = "cat"\nversion_command = "echo 1"\n' + tables + isolation
        )
        print(f"playing one scripted session through {', '.join(names)} (free, offline)")
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "doit",
                "run",
                "-n",
                str(len(names)),
                f"agent={','.join(names)}",
                "model=scripted",
            ],
            cwd=where,
            capture_output=True,
            text=True,
            check=False,
        )
        failed = 0
        if not (where / "llm-tool-test-results").is_dir():
            # Nothing was run: doit's own words say why.
            print((done.stdout + done.stderr).strip()[-3000:])
            return 1
        for name in names:
            run = where / "llm-tool-test-results" / "check" / f"{name}-scripted" / "r1"
            problems = _against_truth(name, run)
            versions = _read(run / "run.json").get("versions")
            version = versions.get("agent", "?") if isinstance(versions, dict) else "?"
            if problems:
                failed += 1
                print(f"{name} {version}: differs from llmtt's contract: {'; '.join(problems)}")
            else:
                print(f"{name} {version}: keeps llmtt's event and metrics contract")
        if failed:
            print(
                "a CLI that differs gives other turns, tokens, costs or commands than the "
                "pinned one would: `llmtt agents install` installs the pinned versions"
            )
        return 1 if failed else 0


def _agent_table(name: str, settings: AgentSettings, executable: str) -> str:
    """The [agents.NAME] table of the check's project: the CLI found, and the user's env."""
    import json

    lines = [f"\n[agents.{name}]", f"executable = {json.dumps(executable)}"]
    if settings.env:
        pairs = ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in settings.env.items())
        lines.append(f"env = {{ {pairs} }}")
    return "\n".join(lines) + "\n"


def _read(path: Path) -> dict[str, object]:
    import json

    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _against_truth(name: str, run: Path) -> list[str]:
    """How a CLI's run differs from the truth, in words ([] when it does not)."""
    record, metrics = _read(run / "result.json"), _read(run / "metrics.json")
    if not record:
        info = _read(run / "run.json")
        return [f"the run could not be carried out: {info.get('error') or 'no record'}"]
    if record.get("outcome") != "pass":
        return [f"outcome {record.get('outcome')}: {record.get('outcome_reason')}"]
    truth = {**CHECK_TRUTH, "cache_write_tokens": CHECK_CACHE_WRITES[name]}
    seen = {**metrics, "outcome": record.get("outcome")}
    return [
        f"{field} {seen.get(field)!r} (expected {expected!r})"
        for field, expected in truth.items()
        if seen.get(field) != expected
    ]


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
