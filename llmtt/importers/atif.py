"""`llmtt import atif FILE --scenario NAME`: an ATIF trajectory (Harbor's, SkillEvaluator's, or
one `llmtt export atif` wrote) kept as a run of a scenario, for `doit run` to grade.

The trajectory is checked against ATIF-v1.7 (llmtt.trajectories.atif), redacted like every
artifact llmtt writes, and kept as `trajectories/<agent>/<scenario>.json` of the project, with
the workspace it left (`--workspace DIR`) as `<scenario>.workspace/` (copied beside it and
renamed into place, the trajectory written last, so an import cut short leaves no trajectory
to replay). The agent is named after
the trajectory's (`atif-<its name>`, so a built-in agent's name is never taken) unless
`--agent` names it; its `[agents.<name>] trajectories` table makes it an agent that replays them
(llmtt.agents.replay) and never starts one.
"""

from __future__ import annotations

import difflib
import json
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from llmtt.agents.replay import WORKSPACE_SUFFIX
from llmtt.errors import LlmttError
from llmtt.spec.project import Project, load_project
from llmtt.trajectories.atif import Trajectory
from llmtt.util.atomic import write_json
from llmtt.util.hashing import hash_tree

FOLDER = "trajectories"


@dataclass(frozen=True)
class Imported:
    """Where a trajectory was kept, for which agent, and what the project still needs."""

    trajectory: Path
    agent: str
    advice: str | None


def import_trajectory(
    root: Path, file: Path, scenario: str, *, agent: str | None, workspace: Path | None
) -> Imported:
    """Keep `file` as the run of `scenario` by `agent` (else the trajectory's own agent)."""
    project = load_project(root)
    names = [s.name for s in project.scenarios]
    if scenario not in names:
        near = difflib.get_close_matches(scenario, names, n=3)
        hint = f"did you mean {', '.join(near)}?" if near else f"the project has {len(names)}"
        raise LlmttError(f"import atif: --scenario {scenario!r} is not a scenario ({hint})")
    trajectory = read_trajectory(file)
    name = agent or "atif-" + (_slug(trajectory.agent.name) or "agent")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
        raise LlmttError(
            f"import atif: --agent {name!r}: an agent name is letters, digits, '.', '_' and '-'"
        )
    if workspace is not None and not workspace.is_dir():
        raise LlmttError(f"import atif: --workspace {workspace}: not a folder")
    folder = project.root / FOLDER / name
    kept = folder / f"{scenario}.json"
    data = trajectory.model_dump(mode="json", exclude_none=True)
    try:
        _keep(kept, data, folder / f"{scenario}{WORKSPACE_SUFFIX}", workspace, project)
    except (OSError, shutil.Error) as exc:
        raise LlmttError(f"import atif: cannot keep the trajectory as {kept}: {exc}") from None
    wanted = f"{FOLDER}/{name}"
    settings = project.config.agents.get(name)
    advice = None
    if settings is None or settings.trajectories != wanted:
        advice = (
            f'llmtt: add to llmtt.toml:\n\n[agents.{name}]\ntrajectories = "{wanted}"\n\n'
            f"then grade it with: doit run agent={name} scenario={scenario}"
        )
    return Imported(kept, name, advice)


def _keep(
    kept: Path, data: dict[str, Any], saved: Path, workspace: Path | None, project: Project
) -> None:
    """The trajectory and its workspace in place, never half: the old trajectory goes first
    (a run with none says so), the workspace is copied beside its place and renamed into it,
    and the trajectory, with the workspace's hash (what the replay agent's version reads), is
    written last."""
    kept.parent.mkdir(parents=True, exist_ok=True)
    kept.unlink(missing_ok=True)
    if saved.exists():
        gone = Path(tempfile.mkdtemp(prefix=f".{saved.name}.old-", dir=saved.parent))
        saved.rename(gone / "w")
        shutil.rmtree(gone)
    if workspace is not None:
        building = Path(tempfile.mkdtemp(prefix=f".{saved.name}.new-", dir=saved.parent))
        try:
            shutil.copytree(workspace, building / "w", symlinks=True)
            (building / "w").rename(saved)
        finally:
            shutil.rmtree(building, ignore_errors=True)
        extra = data.setdefault("extra", {})
        extra.setdefault("llmtt", {})["workspace_hash"] = hash_tree(saved)
    write_json(kept, data, project.redactor())  # a trajectory may quote a key the agent saw


def read_trajectory(file: Path) -> Trajectory:
    """The ATIF trajectory in `file`; a file that is not one is an error naming what is wrong."""
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise LlmttError(f"{file}: cannot be read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise LlmttError(f"{file}: not JSON: {exc}") from None
    try:
        return Trajectory.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the top level"
        raise LlmttError(
            f"{file}: not an ATIF trajectory (ATIF-v1.0 to v1.7): {where}: {first['msg']} "
            f"({exc.error_count()} problem(s))"
        ) from None


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
