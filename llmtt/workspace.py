"""Per-run isolation: a fresh copy of the fixture, its own HOME and XDG folders, setup commands."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from llmtt.shell import ShellResult, run_shell

# Variables passed through from the caller's environment; everything else is left behind so
# that neither the agent nor the target sees the user's own configuration or secrets.
PASSTHROUGH = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR")


def tool_path() -> str:
    """PATH for runs: the caller's PATH with this Python's bin folder first.

    Tools installed beside llmtt (e.g. in its virtualenv) are found even when that
    virtualenv is not activated.
    """
    here = str(Path(sys.executable).parent)
    parts = [here] + [p for p in os.environ.get("PATH", os.defpath).split(os.pathsep) if p != here]
    return os.pathsep.join(parts)


@dataclass(frozen=True)
class Workspace:
    """The folders of one run."""

    root: Path
    workspace: Path
    home: Path

    def env(self, *layers: Mapping[str, str]) -> dict[str, str]:
        """An isolated environment: HOME and XDG inside the run, then each layer on top."""
        env = {name: os.environ[name] for name in PASSTHROUGH if name in os.environ}
        env.setdefault("LANG", "C.UTF-8")
        env.update(
            {
                "PATH": tool_path(),
                "HOME": str(self.home),
                "XDG_CONFIG_HOME": str(self.home / ".config"),
                "XDG_DATA_HOME": str(self.home / ".local" / "share"),
                "XDG_STATE_HOME": str(self.home / ".local" / "state"),
                "XDG_CACHE_HOME": str(self.home / ".cache"),
                "TERM": "xterm-256color",
                "PWD": str(self.workspace),
            }
        )
        for layer in layers:
            env.update(layer)
        return env


def prepare(run_dir: Path, fixture: Path | None, variant_files: Mapping[str, Path]) -> Workspace:
    """Create the run's workspace from scratch: fixture copy, variant files, empty HOME."""
    ws = Workspace(run_dir, run_dir / "workspace", run_dir / "home")
    for folder in (ws.workspace, ws.home):
        if folder.exists():
            shutil.rmtree(folder)
    if fixture is not None:
        shutil.copytree(fixture, ws.workspace, symlinks=True)
    else:
        ws.workspace.mkdir(parents=True)
    for dest, source in variant_files.items():
        target = ws.workspace / dest
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
    for sub in (".config", ".local/share", ".local/state", ".cache"):
        (ws.home / sub).mkdir(parents=True, exist_ok=True)
    # Agents that run commands in a login shell (codex: `bash -lc`) get PATH reset by
    # /etc/profile; the run's own profile puts the tools found beside llmtt back.
    profile = f'export PATH="{tool_path()}"\n'
    for name in (".bash_profile", ".profile"):
        (ws.home / name).write_text(profile)
    return ws


def run_setup(
    commands: list[str], *, cwd: Path, env: Mapping[str, str], timeout_secs: float
) -> ShellResult | None:
    """Run setup commands in order; return the first that failed, or None when all passed."""
    for command in commands:
        result = run_shell(command, cwd=cwd, env=env, timeout_secs=timeout_secs)
        if not result.ok:
            return result
    return None
