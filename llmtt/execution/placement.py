"""Guidance and skills, placed where each agent reads them.

A variant's `guidance` file goes where the run's agent loads guidance by itself (its
`guidance_file`: CLAUDE.md for claude-code, AGENTS.md for the others), and each of its `skills`
folders into the agent's skills folder (`skills_dir`), so one declaration is the same experiment
under every agent. A scenario may have its own, which a variant's replace. The no-guidance
control takes out of the fixture's copy what any variant, or the scenario, would place for that
agent. What was placed where is kept in run.json (`placed`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from llmtt.agents.base import Agent, PlacedSkill
from llmtt.errors import LlmttError
from llmtt.spec.config import CONTROL_VARIANT, Config, control_places
from llmtt.spec.scenario import LoadedScenario
from llmtt.spec.skills import read_skill, skill_files


@dataclass(frozen=True)
class Placed:
    """One guidance file or skill, as laid into a run's workspace."""

    kind: str  # "guidance" or "skill"
    source: str  # as llmtt.toml names it, relative to the project
    path: str  # the workspace path it was written to
    name: str | None = None  # a skill's name
    description: str | None = None  # a skill's description

    def record(self) -> dict[str, Any]:
        """Its entry in run.json."""
        entry = {"kind": self.kind, "source": self.source, "path": self.path}
        if self.name is not None:
            entry["name"] = self.name
        return entry


def placement(
    config: Config,
    root: Path,
    variant: str | None,
    agent: Agent,
    scenario: LoadedScenario | None = None,
) -> list[Placed]:
    """Where `agent` finds the guidance and skills of `scenario` and `variant`: the variant's
    guidance replaces the scenario's, and a variant's skill one of the scenario's of its name.
    The no-guidance control places neither.

    Raises LlmttError when a skill folder is no longer a valid skill (it was checked at load;
    this is a change since)."""
    if variant == CONTROL_VARIANT:
        return []
    spec = config.variants.get(variant or "")
    guidance: str | None = None
    skills: dict[str, str] = {}  # source -> relative to the project, by declaration order
    if scenario is not None:
        folder = scenario.path.parent
        own = scenario.spec
        if own.guidance is not None:
            guidance = os.path.relpath(folder / own.guidance, root)
        skills = {s: os.path.relpath(folder / s, root) for s in own.skills}
    if spec is not None:
        guidance = spec.guidance if spec.guidance is not None else guidance
        names = {PurePosixPath(s).name for s in spec.skills}
        skills = {k: v for k, v in skills.items() if PurePosixPath(k).name not in names}
        skills |= {s: s for s in spec.skills}
    placed = []
    if guidance is not None:
        placed.append(Placed("guidance", guidance, agent.guidance_file))
    for source in skills.values():
        skill, problems = read_skill(root / source)
        if skill is None:
            raise LlmttError("; ".join(str(p) for p in problems))
        path = f"{agent.skills_dir}/{skill.name}"
        placed.append(Placed("skill", source, path, skill.name, skill.description))
    return placed


def laid_files(placed: list[Placed], root: Path) -> dict[str, Path]:
    """Workspace path -> project file, for every file the placement writes."""
    files = {}
    for entry in placed:
        source = root / entry.source
        if entry.kind == "guidance":
            files[entry.path] = source
            continue
        for path in skill_files(source):
            files[f"{entry.path}/{path.relative_to(source).as_posix()}"] = path
    return files


def placed_skills(placed: list[Placed]) -> list[PlacedSkill]:
    """The skills of a placement, as an agent lists them to its model."""
    return [
        PlacedSkill(p.name or "", p.description or "", p.path) for p in placed if p.kind == "skill"
    ]


NEEDLE_MIN = 16  # characters of a line that can stand for its text in a request body
NEEDLES = 3  # lines searched for per text: one the agent re-wrapped may still leave others


def needles(placed: list[Placed], root: Path) -> dict[str, tuple[bytes, ...]]:
    """What shows each placement in a request to the model: `guidance` (its text), and for
    each skill `listed:NAME` (its description: the agent offered it) and `loaded:NAME` (its
    SKILL.md body: the model has its instructions).

    A request body is JSON, its text escaped: what is searched for are runs of the text that
    escaping leaves as they are (printable ASCII without quotes or backslashes) of at least
    NEEDLE_MIN characters, the first NEEDLES of them (an agent that cuts a long description
    short keeps its start). A text with none cannot be seen, and gets no label."""
    found: dict[str, tuple[bytes, ...]] = {}
    for entry in placed:
        if entry.kind == "guidance":
            text = (root / entry.source).read_text(encoding="utf-8", errors="replace")
            found["guidance"] = _plain_lines(text)
            continue
        skill, _ = read_skill(root / entry.source)
        if skill is None:
            continue
        found[f"listed:{skill.name}"] = _plain_lines(skill.description)
        found[f"loaded:{skill.name}"] = _plain_lines(skill.body)
    return {label: lines for label, lines in found.items() if lines}


def _plain_lines(text: str) -> tuple[bytes, ...]:
    runs = (run.strip() for run in _ESCAPED.split(text))
    plain = [run for run in runs if len(run) >= NEEDLE_MIN]
    return tuple(run.encode() for run in dict.fromkeys(plain))[:NEEDLES]


_ESCAPED = re.compile(r'[^ -~]|["\\]')  # what a JSON encoder may write otherwise


def control_paths(
    config: Config, agent: Agent, scenario: LoadedScenario | None = None
) -> list[str]:
    """What the no-guidance control takes out for `agent`: every guidance file it reads when
    any variant (or the scenario) has guidance, and each skill any variant (or the scenario)
    has from every folder it reads skills from (a fixture's own copy there would be guidance
    all the same)."""
    guidance, skills = control_places(config)
    if scenario is not None:
        guidance = guidance or scenario.spec.guidance is not None
        skills = [*skills, *(PurePosixPath(s).name for s in scenario.spec.skills)]
    paths = set(agent.guidance_reads if guidance else ())
    paths.update(f"{folder}/{name}" for folder in agent.skills_reads for name in skills)
    return sorted(paths)
