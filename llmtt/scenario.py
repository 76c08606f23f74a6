"""Scenario files (`scenarios/*.yaml`): one task for an agent and how to judge the result."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, JsonValue, field_validator, model_validator

from llmtt.config import Strict, TargetSpec, check_regex
from llmtt.errors import ConfigError
from llmtt.evaluation.evaluators.base import Criterion
from llmtt.loading import read_yaml, register_union_tags, validate
from llmtt.scripted.session import ScriptedSession

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def check_relative(path: str) -> str:
    """A path inside the workspace: relative and never climbing out of it."""
    pure = PurePosixPath(path)
    if not path or pure.is_absolute() or ".." in pure.parts:
        raise ValueError(f"must be a relative path inside the workspace, without '..' ({path!r})")
    return path


class GateBase(Strict):
    """Fields every gate accepts."""

    description: str | None = None
    timeout_secs: float | None = Field(None, gt=0)


class CommandSucceeds(GateBase):
    """Runs a shell command in the workspace; passes on exit code 0."""

    type: Literal["command_succeeds"] = "command_succeeds"
    command: str


class CommandOutputContains(GateBase):
    """Runs a command; passes when its stdout contains `substring`."""

    type: Literal["command_output_contains"] = "command_output_contains"
    command: str
    substring: str


class CommandOutputMatches(GateBase):
    """Runs a command; passes when the regex `pattern` matches its stdout."""

    type: Literal["command_output_matches"] = "command_output_matches"
    command: str
    pattern: str

    _pattern = field_validator("pattern")(check_regex)


ASSERTION_RE = re.compile(
    r"^(exists|equals\s+(?P<eq>.+)|contains\s+(?P<sub>.+)|len\s*(?P<op>>=|==|>)\s*(?P<n>\d+))$"
)


class CommandJsonPath(GateBase):
    """Runs a command, parses stdout as JSON and asserts on the value at a JSONPath."""

    type: Literal["command_json_path"] = "command_json_path"
    command: str
    path: str
    assertion: str = Field(description="exists | equals V | contains S | len >=|==|> N")

    @field_validator("path")
    @classmethod
    def _parse_path(cls, value: str) -> str:
        from jsonpath_ng.exceptions import JsonPathLexerError, JsonPathParserError
        from jsonpath_ng.ext.parser import parse

        try:
            parse(value)
        except (JsonPathLexerError, JsonPathParserError, Exception) as exc:
            raise ValueError(f"invalid JSONPath: {exc}") from None
        return value

    @field_validator("assertion")
    @classmethod
    def _check_assertion(cls, value: str) -> str:
        if not ASSERTION_RE.match(value.strip()):
            raise ValueError(
                "expected one of: 'exists', 'equals V', 'contains S', 'len >= N', "
                "'len == N', 'len > N'"
            )
        return value.strip()


class FileExists(GateBase):
    """Passes when the file exists in the workspace."""

    type: Literal["file_exists"] = "file_exists"
    path: str

    _path = field_validator("path")(check_relative)


class FileContains(GateBase):
    """Passes when the file exists and contains `substring`."""

    type: Literal["file_contains"] = "file_contains"
    path: str
    substring: str

    _path = field_validator("path")(check_relative)


class FileMatches(GateBase):
    """Passes when the file exists and the regex `pattern` matches its content."""

    type: Literal["file_matches"] = "file_matches"
    path: str
    pattern: str

    _path = field_validator("path")(check_relative)
    _pattern = field_validator("pattern")(check_regex)


class NoTranscriptErrors(GateBase):
    """Passes when no target command of the run exited non-zero."""

    type: Literal["no_transcript_errors"] = "no_transcript_errors"


class Script(GateBase):
    """Runs a script; passes on exit code 0. A JSON object on its last stdout line is kept."""

    type: Literal["script"] = "script"
    command: str


class EvaluatorGate(GateBase):
    """Passes when a criterion's evaluator score (normalised to 0..1, the mean when several
    evaluators score it) reaches `threshold`."""

    type: Literal["evaluator"] = "evaluator"
    criterion: str = Field(min_length=1, description="A criterion of evaluation.evaluators.")
    threshold: float = Field(
        1.0, ge=0, le=1, description="The normalised score it must reach (0..1)."
    )


Gate = Annotated[
    CommandSucceeds
    | CommandOutputContains
    | CommandOutputMatches
    | CommandJsonPath
    | FileExists
    | FileContains
    | FileMatches
    | NoTranscriptErrors
    | Script
    | EvaluatorGate,
    Field(discriminator="type"),
]
GATE_TYPES = [
    "command_succeeds",
    "command_output_contains",
    "command_output_matches",
    "command_json_path",
    "file_exists",
    "file_contains",
    "file_matches",
    "no_transcript_errors",
    "script",
    "evaluator",
]
register_union_tags(GATE_TYPES)


class TaskSpec(Strict):
    """What the agent is asked to do."""

    prompt: str = Field(min_length=1)


class SetupSpec(Strict):
    """Shell commands run in the workspace before the agent starts."""

    commands: list[str] = Field(default_factory=list)
    timeout_secs: float | None = Field(None, gt=0)


class JudgeSettings(Strict):
    """Layer 3 for this scenario."""

    enabled: bool = False
    rubric: str | None = None
    pass_threshold: float = Field(0.7, ge=0, le=1)
    model: str | None = None

    @model_validator(mode="after")
    def _rubric_when_enabled(self) -> JudgeSettings:
        if self.enabled and not self.rubric:
            raise ValueError("judge.enabled is true but no rubric is named")
        return self


class CompositeSpec(Strict):
    """Weights of an optional single composite score."""

    gate_weight: float = Field(0, ge=0)
    judge_weight: float = Field(0, ge=0)
    interaction_weight: float = Field(0, ge=0)

    @model_validator(mode="after")
    def _some_weight(self) -> CompositeSpec:
        total = self.gate_weight + self.judge_weight + self.interaction_weight
        if abs(total - 1.0) > 0.01:
            raise ValueError(f"weights must sum to 1 (+/- 0.01), they sum to {total:g}")
        return self


class EvaluatorSpec(Strict):
    """One evaluator of a scenario: its type, the criteria it scores, its config (checked
    against the evaluator's own config model when the project loads)."""

    type: str = Field(
        min_length=1,
        description="A built-in evaluator, one installed through the `llmtt.evaluators` entry "
        "points, or one named in llmtt.toml's [evaluators].",
    )
    criteria: list[Criterion] = Field(min_length=1, description="What it scores.")
    config: dict[str, Any] = Field(default_factory=dict, description="The evaluator's settings.")


class EvaluationSpec(Strict):
    """Gates (layer 2), evaluators, judge (layer 3) and the optional composite."""

    gates: list[Gate] = Field(default_factory=list)
    evaluators: list[EvaluatorSpec] = Field(
        default_factory=list,
        description="Informational scores (AgentDock's evaluators); a gate of type "
        "`evaluator` makes one decide the outcome.",
    )
    ground_truth: JsonValue = Field(
        None, description="The reference answer evaluators compare the agent's response with."
    )
    judge: JudgeSettings = Field(default_factory=JudgeSettings)
    composite: CompositeSpec | None = None

    @model_validator(mode="after")
    def _criteria(self) -> EvaluationSpec:
        names = [c.name for e in self.evaluators for c in e.criteria]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"criterion names must be unique: {', '.join(twice)} repeated")
        for gate in self.gates:
            if isinstance(gate, EvaluatorGate) and gate.criterion not in names:
                raise ValueError(
                    f"gate of type evaluator names criterion {gate.criterion!r}, which no "
                    f"evaluator scores (criteria: {', '.join(names) or 'none'})"
                )
        return self


class CostSpec(Strict):
    """Money limit for one run."""

    max_usd: float | None = Field(None, ge=0)


class RunSpec(Strict):
    """Limits of one run."""

    timeout_secs: float | None = Field(None, gt=0)
    max_turns: int | None = Field(None, ge=1)


class ScenarioMatrix(Strict):
    """A scenario's own matrix axes; each one set replaces llmtt.toml's."""

    agents: list[str] | None = None
    models: list[str] | None = None
    variants: list[str] | None = None
    repeats: int | None = Field(None, ge=1, le=1000)


class Scenario(Strict):
    """One scenario file."""

    name: str | None = None
    description: str = ""
    tags: list[str] = Field(default_factory=list)
    tier: int = Field(1, ge=0)
    target: TargetSpec | str | None = Field(
        None, description="Overrides of [target], or the name of a [targets.NAME] table."
    )
    task: TaskSpec
    fixture: str | None = Field(
        None, description="Folder copied as the workspace, relative to this file."
    )
    setup: SetupSpec = Field(default_factory=SetupSpec)
    solution: list[str] = Field(
        default_factory=list, description="Reference shell commands, run by the oracle agent."
    )
    scripted: ScriptedSession | None = Field(
        None,
        description="What the scripted model plays (turns, parallel calls, usage, errors, "
        "hangs); without it, the solution, one command a turn.",
    )
    evaluation: EvaluationSpec = Field(default_factory=EvaluationSpec)
    cost: CostSpec = Field(default_factory=CostSpec)
    run: RunSpec = Field(default_factory=RunSpec)
    matrix: ScenarioMatrix | None = Field(
        None, description="Per-scenario overrides of [matrix] (agents, models, variants, repeats)."
    )

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        if value is not None and not NAME_RE.match(value):
            raise ValueError(
                "use letters, digits, '_', '-' and '.', starting with a letter or digit"
            )
        return value


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
