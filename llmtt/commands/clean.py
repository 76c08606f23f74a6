"""`llmtt clean`: the folders of deleted scenarios and old runs, and opencode templates no run
uses (llmtt/agents/opencode_home.py), listed, and removed on --yes."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llmtt.spec.project import Project

_AGE = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def age(text: str) -> float:
    """`7d`, `12h`, `30m`, `2w` or `45s` as seconds."""
    number, unit = text[:-1], text[-1:]
    if unit not in _AGE or not number.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: write a whole number and s, m, h, d or w")
    return int(number) * _AGE[unit]


def clean(root: Path, older_than: float | None, yes: bool) -> int:
    import shutil
    import time

    from llmtt.agents.opencode_home import FOLDER, leftovers
    from llmtt.report.panels import PANELS_DIR
    from llmtt.spec.project import load_project

    # Loading the whole project (not just llmtt.toml): a scenario whose file is broken is still
    # a scenario, and its results are not pruned as those of a deleted one.
    project = load_project(root)
    results = project.results_dir.resolve()
    names = {s.name for s in project.scenarios}
    doomed: list[tuple[Path, str]] = []
    if results.is_dir():
        for folder in sorted(results.iterdir()):
            if folder.name.startswith(".") or folder.is_symlink() or not folder.is_dir():
                continue
            if folder.name not in names:
                if folder.name == PANELS_DIR:  # report.html's runs' panels, not a scenario's
                    continue
                doomed.append((folder, "its scenario no longer exists"))
            elif older_than is not None:
                cutoff = time.time() - older_than
                for run in sorted(folder.glob("*/*/run.json")):
                    last = max(p.stat().st_mtime for p in run.parent.glob("*.json"))
                    if last < cutoff:
                        doomed.append((run.parent, f"last written {_ago(time.time() - last)}"))
    templates = project.root / FOLDER
    doomed += leftovers(project.root, _opencode(project))
    total = 0
    for folder, why in doomed:
        inside = results if folder.parent != templates else templates.resolve()
        assert folder.resolve().is_relative_to(inside) and folder.resolve() != inside
        size = _size(folder)
        total += size
        print(f"{'removed' if yes else 'would remove'} {folder} ({_bytes(size)}; {why})")
        if yes and not folder.is_dir():
            folder.unlink()  # a template's failure record
        elif yes:
            shutil.rmtree(folder)
            if folder.parent == templates:
                continue
            for parent in (folder.parent, folder.parent.parent):
                if parent.resolve() != results and parent.is_dir() and not any(parent.iterdir()):
                    parent.rmdir()
    if not doomed:
        print(f"nothing to remove in {results}")
    elif yes:
        print(f"freed {_bytes(total)} in {len(doomed)} folders; `doit run` runs them again")
    else:
        print(f"{_bytes(total)} in {len(doomed)} folders would be freed: pass --yes to remove")
    return 0


def _opencode(project: Project) -> str | None:
    """The opencode binary runs of this project start (its template is kept), or None."""
    from llmtt.agents.cli_agent import CliAgent
    from llmtt.agents.registry import make_agent

    agent = make_agent(project.config, project.root, "opencode")
    return agent.executable() if isinstance(agent, CliAgent) else None


def _size(folder: Path) -> int:
    if not folder.is_dir():
        return folder.lstat().st_size
    return sum(p.lstat().st_size for p in folder.rglob("*") if not p.is_dir() or p.is_symlink())


def _bytes(size: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return ""


def _ago(secs: float) -> str:
    return f"{secs / 86400:.1f} days ago" if secs >= 86400 else f"{secs / 3600:.1f} hours ago"
