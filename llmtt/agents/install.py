"""Where llmtt finds the agent CLIs, and `llmtt agents install`, which puts them there.

The pinned versions ship with llmtt as one npm lock file per agent (`agents/npm/<agent>/`), so
an install from a wheel gets exactly the versions llmtt was tested with. `install` runs npm in a
staging folder beside the destination and renames it into place only when npm succeeded: a
killed or failed install never leaves a folder that looks installed.

Where a CLI agent's binary is looked for, first match wins:
1. `[agents.X] executable` in llmtt.toml (nothing else is tried when it is set);
2. the project's `node_modules/.bin` (an `npm install` in the project);
3. the project's `.llmtt/agents/<agent>` (`llmtt agents install --project`);
4. the user's agents folder (`llmtt agents install`): `$LLMTT_AGENTS_DIR`, else
   `$XDG_DATA_HOME/llmtt/agents`, else `~/.local/share/llmtt/agents`;
5. PATH.
What llmtt installed comes before PATH, so a globally installed CLI of another version does not
silently replace the pinned one llmtt put there on purpose.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from llmtt.errors import LlmttError
from llmtt.util import signatures as inputs

PINS = Path(__file__).parent / "npm"
CLI_AGENTS = ("claude-code", "opencode", "codex")
NPM_TIMEOUT = 1800


def pinned(agent: str) -> str:
    """The npm package and version llmtt pins for `agent`, e.g. "opencode-ai@1.18.33"."""
    manifest = json.loads((PINS / agent / "package.json").read_text(encoding="utf-8"))
    ((package, version),) = manifest["dependencies"].items()
    return f"{package}@{version}"


def user_dir() -> Path:
    """The per-user agents folder (see the module's docstring)."""
    for name in ("LLMTT_AGENTS_DIR", "XDG_DATA_HOME", "HOME"):
        inputs.note_env(name)  # a cached plan found its agents by these
    named = os.environ.get("LLMTT_AGENTS_DIR")
    if named:
        return Path(named).expanduser()
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "llmtt" / "agents"


def project_dir(project_root: Path) -> Path:
    """A project's own agents folder, for `llmtt agents install --project`."""
    return project_root / ".llmtt" / "agents"


@dataclass(frozen=True)
class Place:
    """A folder where an agent CLI may be installed, and what to call it in messages."""

    label: str
    bin: Path


def places(project_root: Path, agent: str) -> list[Place]:
    """The folders llmtt looks in before PATH, in order."""
    return [
        Place("project node_modules", project_root / "node_modules" / ".bin"),
        Place("project", project_dir(project_root) / agent / "node_modules" / ".bin"),
        Place("user", user_dir() / agent / "node_modules" / ".bin"),
    ]


def check_names(names: list[str]) -> None:
    """Every name is an agent llmtt can install (else an error naming the first that is not)."""
    for name in names:
        if name not in CLI_AGENTS:
            raise LlmttError(
                f"agents install: unknown agent {name!r}; installable: {', '.join(CLI_AGENTS)}"
            )


def install(agent: str, dest: Path) -> Path:
    """Install the pinned `agent` CLI into `dest/<agent>`, replacing what is there; return the
    folder of its binaries. npm reads its usual settings (registry, proxy, cache, offline)."""
    check_names([agent])
    npm = shutil.which("npm")
    if npm is None:
        raise LlmttError(
            "agents install needs npm (Node.js 20 or newer): install it, e.g. "
            "`apt-get install nodejs npm`, and run again"
        )
    dest.mkdir(parents=True, exist_ok=True)
    final = dest / agent
    staging = dest / f".{agent}.installing-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        for name in ("package.json", "package-lock.json"):
            shutil.copyfile(PINS / agent / name, staging / name)
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=staging,
            stdin=subprocess.DEVNULL,
            timeout=NPM_TIMEOUT,
            check=False,
        )
        if done.returncode != 0:
            raise LlmttError(
                f"agents install {agent}: npm install {pinned(agent)} failed "
                f"(exit {done.returncode}); npm's message is above. Nothing was changed in {dest}"
            )
        old = dest / f".{agent}.old-{os.getpid()}"
        if final.exists():
            final.rename(old)
        staging.rename(final)
        shutil.rmtree(old, ignore_errors=True)
    except subprocess.TimeoutExpired:
        raise LlmttError(
            f"agents install {agent}: npm did not finish in {NPM_TIMEOUT} s; nothing was changed"
        ) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return final / "node_modules" / ".bin"


def version_of(executable: str) -> str:
    """`<binary> --version`'s first line, or why there is none."""
    try:
        done = subprocess.run(
            [executable, "--version"],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"(--version failed: {exc})"
    lines = (done.stdout or done.stderr).strip().splitlines()
    return lines[0] if done.returncode == 0 and lines else f"(--version exited {done.returncode})"


def where_found(project_root: Path, agent: str, executable: str) -> str:
    """Which of llmtt's places (or PATH) `executable` came from."""
    folder = Path(executable).parent
    for place in places(project_root, agent):
        if folder == place.bin:
            return place.label
    return "PATH"
