"""Scenario files (`scenarios/*.yaml`): one task for an agent and how to judge the result."""

from __future__ import annotations

import errno
import os
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from llmtt.errors import ConfigError
from llmtt.spec.config import Command, Strict, TargetSpec
from llmtt.spec.evaluation import EvaluationSpec, ScriptsSpec
from llmtt.spec.gates import NAME_RE, ScriptGate, ScriptSource, check_relative
from llmtt.spec.loading import Loc, read_yaml
from llmtt.spec.reserved import PANELS_FOLDER
from llmtt.spec.scripted import ScriptedSession
from llmtt.spec.validation import validate


class TaskSpec(Strict):
    """What the agent is asked to do."""

    prompt: str = Field(
        min_length=1,
        description="The task as the agent gets it (the judge and the evaluators read it too).",
    )


class SetupSpec(Strict):
    """Shell commands run in the workspace before the agent starts."""

    commands: list[Command] = Field(
        default_factory=list,
        description="Run with bash in the workspace, in order, before the agent; one that fails "
        "means the run cannot be carried out.",
    )
    timeout_secs: float | None = Field(
        None,
        gt=0,
        description="Limit of each setup command and of the health check; default: [run] "
        "setup_timeout_secs.",
    )


class CostSpec(Strict):
    """Money limit for one run."""

    max_usd: float | None = Field(
        None,
        ge=0,
        description="The agent is stopped when the run's running cost passes this; a paid run "
        "holds it in the session budget before it starts.",
    )


class RunLimits(Strict):
    """Limits of one run."""

    timeout_secs: float | None = Field(
        None, gt=0, description="Stop the agent after this long; default: [run] timeout_secs."
    )
    max_turns: int | None = Field(
        None, ge=1, description="Stop the agent after this many turns; default: [run] max_turns."
    )


class ScenarioMatrix(Strict):
    """A scenario's own matrix axes; each one set replaces llmtt.toml's."""

    agents: list[str] | None = Field(None, description="Replaces [matrix] agents.")
    models: list[str] | None = Field(None, description="Replaces [matrix] models.")
    variants: list[str] | None = Field(None, description="Replaces [matrix] variants.")
    repeats: int | None = Field(None, ge=1, le=1000, description="Replaces [matrix] repeats.")


class ScenarioCompare(Strict):
    """A scenario's own comparison settings; each one set replaces llmtt.toml's [compare]."""

    baseline: str | None = Field(None, description="Replaces [compare] baseline.")
    min_effect: float | None = Field(None, gt=0, lt=1, description="Replaces [compare] min_effect.")


class SkillTriggers(Strict):
    """Whether the task should make an agent load a skill (its description matches the task)
    or not: each run that placed the skill counts as a hit or a miss (docs/metrics.md)."""

    should_trigger: list[str] = Field(
        default_factory=list, description="Skills an agent should load for this task."
    )
    should_not_trigger: list[str] = Field(
        default_factory=list, description="Skills an agent should leave alone for this task."
    )

    @model_validator(mode="after")
    def _apart(self) -> SkillTriggers:
        both = sorted(set(self.should_trigger) & set(self.should_not_trigger))
        if both:
            raise ValueError(f"{both[0]!r} is both in should_trigger and should_not_trigger")
        return self


class Scenario(Strict):
    """One scenario file."""

    name: str | None = Field(
        None, description="The scenario's name in run ids and reports; default: the file name."
    )
    description: str = Field("", description="Shown at the top of each run's evaluation.md.")
    tags: list[str] = Field(
        default_factory=list, description="Labels to select scenarios by (`doit run tag=T`)."
    )
    tier: int = Field(1, ge=0, description="A level to select scenarios by (`doit run tier=N`).")
    expect: Literal["pass", "fail"] = Field(
        "pass",
        description="The outcome the scenario should have: `fail` marks a negative control, whose "
        "Fail `llmtt check` accepts (reported as failed as expected) and whose Pass it flags. "
        "The recorded outcome stays what happened; changing this re-runs no agent.",
    )
    split: Literal["tune", "holdout"] = Field(
        "tune",
        description="`holdout` keeps the scenario out of the set guidance is tuned on: `llmtt "
        "check` and the reports give its results apart, so guidance written against the `tune` "
        "scenarios is judged on others. Changing it re-runs no agent.",
    )
    target: TargetSpec | str | None = Field(
        None, description="Overrides of [target], or the name of a [targets.NAME] table."
    )
    skill_triggers: SkillTriggers | None = Field(
        None,
        description="Skills the task should and should not make an agent load: the reports "
        "give trigger precision, recall and F1 per agent and model. Changing it re-runs no "
        "agent.",
    )
    task: TaskSpec = Field(description="What the agent is asked to do.")
    fixture: str | None = Field(
        None, description="Folder copied as the workspace, relative to this file."
    )
    guidance: str | None = Field(
        None,
        min_length=1,
        description="A guidance file of this scenario's (relative to this file), written where "
        "each agent reads guidance, as a variant's `guidance` is; a variant's own replaces it, "
        "and the no-guidance control takes it out.",
    )
    skills: list[str] = Field(
        default_factory=list,
        description="Skill folders of this scenario's (relative to this file), installed where "
        "each agent discovers skills, as a variant's `skills` are; a variant's skill of the "
        "same name replaces one, and the no-guidance control takes them out.",
    )
    mounts: dict[str, str] = Field(
        default_factory=dict,
        description="Folders of the workspace seen at the absolute paths the task names "
        '(`"/data": "data"`, `"/home/eval": "."`), by the agent, the setup and the gates; '
        "needs the sandbox.",
    )
    path: list[str] = Field(
        default_factory=list,
        description="Folders of the workspace put first on PATH, in this order, for the agent, "
        "the setup commands, the scripts and the gates (`llmtt import bashkit-eval` puts a "
        "scripting task's mock tools there: `.bashkit/bin`).",
    )
    setup: SetupSpec = Field(
        default_factory=SetupSpec, description="Commands run in the workspace before the agent."
    )
    solution: list[Command] = Field(
        default_factory=list, description="Reference shell commands, run by the oracle agent."
    )
    scripted: ScriptedSession | None = Field(
        None,
        description="What the scripted model plays (turns, parallel calls, usage, errors, "
        "hangs); without it, the solution, one command a turn.",
    )
    scripts: ScriptsSpec = Field(
        default_factory=ScriptsSpec,
        description="Post-run scripts and script evaluators (`script` gates are gates).",
    )
    evaluation: EvaluationSpec = Field(
        default_factory=EvaluationSpec,
        description="How the run is judged: gates, evaluators, the judge, a composite score.",
    )
    cost: CostSpec = Field(default_factory=CostSpec, description="Money limit of one run.")
    run: RunLimits = Field(default_factory=RunLimits, description="Limits of one run.")
    matrix: ScenarioMatrix | None = Field(
        None, description="Per-scenario overrides of [matrix] (agents, models, variants, repeats)."
    )
    compare: ScenarioCompare | None = Field(
        None, description="Per-scenario overrides of [compare] (baseline, min_effect)."
    )

    @field_validator("mounts")
    @classmethod
    def _mounts(cls, value: dict[str, str]) -> dict[str, str]:
        for inside, folder in value.items():
            problem = mount_problem(inside, folder)
            if problem:
                raise ValueError(f"{inside!r}: {problem}")
        return value

    @field_validator("path")
    @classmethod
    def _path(cls, value: list[str]) -> list[str]:
        for folder in value:
            check_relative(folder)
            if os.pathsep in folder:
                raise ValueError(f"{folder!r}: a folder on PATH cannot hold {os.pathsep!r}")
        return value

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        if value is not None and not NAME_RE.match(value):
            raise ValueError(
                "use letters, digits, '_', '-' and '.', starting with a letter or digit"
            )
        return value


# The system's programs and libraries that a sandbox shows read-only (llmtt.process.sandbox);
# /opt is not among them: only the folders on PATH under it are shown.
SYSTEM_DIRS = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/sys",
)
# Where a workspace folder may not be seen: the system the sandbox is built from.
RESERVED = (*SYSTEM_DIRS, "/proc", "/dev", "/run")


def mount_problem(inside: str, folder: str) -> str | None:
    """What is wrong with seeing workspace `folder` at `inside`, or None."""
    path = PurePosixPath(inside)
    if not path.is_absolute() or ".." in path.parts or path == PurePosixPath("/"):
        return "the path the task names must be absolute, not / and without '..'"
    for reserved in RESERVED:
        if path == PurePosixPath(reserved) or path.is_relative_to(reserved):
            return f"{reserved} is the system's in the sandbox; pick another path"
    rel = PurePosixPath(folder)
    if rel.is_absolute() or ".." in rel.parts:
        return f"the folder {folder!r} must be a path inside the workspace (relative, no '..')"
    return None


class LoadedScenario(BaseModel):
    """A validated scenario with where it came from."""

    model_config = {"frozen": True, "arbitrary_types_allowed": True}

    name: str
    path: Path
    spec: Scenario
    lines: dict[tuple[int | str, ...], int]

    @property
    def fixture_dir(self) -> Path | None:
        """The fixture folder, resolved against the scenario file's folder."""
        if self.spec.fixture is None:
            return None
        # realpath, unlike Path.resolve() on 3.11, does not raise on a link loop: the load
        # reports that with the scenario's line.
        return Path(os.path.realpath(self.path.parent / self.spec.fixture))

    def own_path(self, path: str) -> Path:
        """A path the scenario names (its guidance, a skill), against the scenario file's
        folder, links followed."""
        return Path(os.path.realpath(self.path.parent / path))

    def script_path(self, path: str) -> Path:
        """A script's `path`, resolved against the scenario file's folder, links followed."""
        return self.own_path(path)

    def script_files(self) -> list[tuple[Loc, str]]:
        """Every script of the scenario given by `path`, with where it is written."""
        spec = self.spec
        named: list[tuple[Loc, ScriptSource]] = [
            *((("scripts", "post", i), s) for i, s in enumerate(spec.scripts.post)),
            *((("scripts", "evaluators", i), s) for i, s in enumerate(spec.scripts.evaluators)),
            *(
                (("evaluation", "gates", i), g)
                for i, g in enumerate(spec.evaluation.gates)
                if isinstance(g, ScriptGate)
            ),
        ]
        return [((*loc, "path"), s.path) for loc, s in named if s.path is not None]


def load_scenario(path: Path) -> LoadedScenario:
    """Load and validate one scenario file."""
    data, lines = read_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError.one(
            path, "a scenario file must be a YAML mapping (task:, evaluation: ...)", line=1
        )
    spec = validate(Scenario, data, path, lines)
    loaded = LoadedScenario(name=spec.name or path.stem, path=path, spec=spec, lines=lines)
    if not NAME_RE.match(loaded.name):
        raise ConfigError.one(path, "rename the file or set `name:`", field="name", line=1)
    # A run's folder is <results>/<scenario>/...; "Report-Runs" is the same folder on a
    # file system that ignores case (macOS's, by default).
    if loaded.name.lower() == PANELS_FOLDER:
        raise ConfigError.one(
            path,
            f"the name {PANELS_FOLDER!r} is reserved for report.html's folder of run panels "
            f"(results/{PANELS_FOLDER}/): rename the file or set another `name:`",
            field="name",
            line=lines.get(("name",), 1),
        )
    fixture = loaded.fixture_dir
    if fixture is not None and not fixture.is_dir():
        raise ConfigError.one(
            path,
            f"fixture folder {fixture} {_missing(fixture)} "
            "(paths are relative to the scenario file)",
            field="fixture",
            line=lines.get(("fixture",)),
        )
    return loaded


def _missing(path: Path) -> str:
    """Why `path` is not a folder, in a few words."""
    try:
        path.stat()
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "is a symbolic link loop"
        if exc.errno != errno.ENOENT:
            return f"cannot be read: {exc.strerror}"
        return "does not exist"
    return "is not a folder"
