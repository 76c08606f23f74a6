"""Per-run isolation: a fresh copy of the fixture, its own HOME and XDG folders, setup commands."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from llmtt.errors import LlmttError
from llmtt.process.sandbox.bwrap import Confinement
from llmtt.process.shell import ShellResult, run_shell, tool_path

# Variables passed through from the caller's environment; everything else is left behind so
# that neither the agent nor the target sees the user's own configuration or secrets.
PASSTHROUGH = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR")


class WorkspaceError(LlmttError):
    """A run's files cannot be laid out in its workspace (a variant file would land outside)."""


def within(root: Path, path: Path) -> bool:
    """Whether the resolved `path` is `root` or below it, once root's own links are followed."""
    return path.is_relative_to(root.resolve())


def home_env(home: Path) -> dict[str, str]:
    """HOME and the XDG base folders, all inside `home`."""
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "XDG_CACHE_HOME": str(home / ".cache"),
    }


def make_home(home: Path) -> dict[str, str]:
    """Create `home` and its XDG folders; return the variables that point at them."""
    env = home_env(home)
    for folder in env.values():
        Path(folder).mkdir(parents=True, exist_ok=True)
    return env


@dataclass(frozen=True)
class Workspace:
    """The folders of one run."""

    root: Path
    workspace: Path
    home: Path
    path: tuple[str, ...] = ()  # the scenario's `path`: workspace folders put first on PATH

    @property
    def tmp(self) -> Path:
        """The run's own /tmp in its sandbox."""
        return self.root / "tmp"

    def env(self, *layers: Mapping[str, str]) -> dict[str, str]:
        """An isolated environment: HOME and XDG inside the run, then each layer on top."""
        env = {name: os.environ[name] for name in PASSTHROUGH if name in os.environ}
        env.setdefault("LANG", "C.UTF-8")
        env.update(
            {
                "PATH": self.search_path(),
                **home_env(self.home),
                "TERM": "xterm-256color",
                "PWD": str(self.workspace),
            }
        )
        for layer in layers:
            env.update(layer)
        return env

    def search_path(self) -> str:
        """PATH for the run: the scenario's workspace folders, then the tools beside llmtt."""
        return os.pathsep.join([*(str(self.workspace / p) for p in self.path), tool_path()])


def prepare(
    run_dir: Path,
    fixture: Path | None,
    variant_files: Mapping[str, Path],
    removes: Sequence[str] = (),
    path: Sequence[str] = (),
) -> Workspace:
    """Create the run's workspace from scratch: fixture copy, variant files, empty HOME.
    `removes`: workspace paths of guidance files to take out of the fixture's copy (the
    no-guidance control); one that is not there is fine. `path`: the scenario's workspace
    folders put first on PATH.

    Raises WorkspaceError when a variant file would be written (or removed) outside the
    workspace.
    """
    ws = Workspace(run_dir, run_dir / "workspace", run_dir / "home", tuple(path))
    for folder in (ws.workspace, ws.home, ws.tmp):
        if folder.exists():
            shutil.rmtree(folder)
    if fixture is not None:
        shutil.copytree(fixture, ws.workspace, symlinks=True)
    else:
        ws.workspace.mkdir(parents=True)
    for dest in removes:
        _remove_guidance_file(ws.workspace, dest)
    for dest, source in variant_files.items():
        _place_variant_file(ws.workspace, dest, source)
    make_home(ws.home)
    ws.tmp.mkdir()
    # Agents that run commands in a login shell (codex: `bash -lc`) get PATH reset by
    # /etc/profile; the run's own profile puts the tools found beside llmtt back.
    profile = f'export PATH="{ws.search_path()}"\n'
    for name in (".bash_profile", ".profile"):
        (ws.home / name).write_text(profile)
    return ws


def _remove_guidance_file(workspace: Path, dest: str) -> None:
    """Take the file (or link) at `dest` out of the workspace; never anything outside it."""
    target = workspace / dest
    folder = target.parent.resolve()
    if target.name in ("", ".", "..") or not within(workspace, folder):
        raise WorkspaceError(
            f"guidance file {dest!r} lies outside the workspace; a variant destination must be "
            "a path inside the workspace"
        )
    target = folder / target.name
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.is_dir():  # a skill's folder
        shutil.rmtree(target)


def _place_variant_file(workspace: Path, dest: str, source: Path) -> None:
    """Copy a variant file to `dest`, which must stay inside the workspace.

    The folder is resolved through the fixture's links before anything is written, so neither
    `..`, an absolute path nor a folder linked elsewhere leads out; a link at `dest` itself is
    replaced by the file, not written through.
    """
    target = workspace / dest
    folder = target.parent.resolve()
    if target.name in ("", ".", "..") or not within(workspace, folder):
        landing = os.path.normpath(folder / target.name)
        raise WorkspaceError(
            f"variant file {dest!r} would be written outside the workspace (to {landing}); "
            "a variant destination must be a path inside the workspace"
        )
    target = folder / target.name
    try:
        if target.is_symlink():
            target.unlink()
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
    except OSError as exc:
        raise WorkspaceError(
            f"variant file {dest!r}: cannot copy {source} there: {exc.strerror or exc}"
        ) from None


def run_setup(
    commands: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_secs: float,
    confine: Confinement | None = None,
) -> ShellResult | None:
    """Run setup commands in order; return the first that failed, or None when all passed."""
    for command in commands:
        result = run_shell(command, cwd=cwd, env=env, timeout_secs=timeout_secs, confine=confine)
        if not result.ok:
            return result
    return None
