"""Scenario files (`scenarios/*.yaml`): one task for an agent and how to judge the result."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, Field, JsonValue, field_validator, model_validator

from llmtt.errors import ConfigError
from llmtt.evaluation.evaluators.base import Criterion
from llmtt.scripted.session import ScriptedSession
from llmtt.spec.checks import parse_check
from llmtt.spec.config import Strict, TargetSpec, check_regex
from llmtt.spec.loading import Loc, read_yaml, register_union_tags, validate

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def check_relative(path: str) -> str:
    """A path inside the workspace: relative and never climbing out of it."""
    pure = PurePosixPath(path)
    if not path or pure.is_absolute() or ".." in pure.parts:
        raise ValueError(f"must be a relative path inside the workspace, without '..' ({path!r})")
    return path


class GateBase(Strict):
    """Fields every gate accepts."""

    description: str | None = Field(
        None, description="What the gate checks, shown beside its type in the reports."
    )
    timeout_secs: float | None = Field(
        None,
        gt=0,
        description="Its time limit (its command, or its regex search); default: [run] "
        "gate_timeout_secs. Past it, the gate fails.",
    )
    weight: float = Field(
        1.0,
        ge=0,
        allow_inf_nan=False,
        description="Its weight in the run's gate score (bashkit-eval's task score: the weight "
        "of the gates passed over the weight of all); every gate must still pass for a pass.",
    )


class CheckGate(GateBase):
    """A bashkit-eval expectation in its string form (llmtt/spec/checks.py)."""

    type: Literal["check"] = Field("check", description="A bashkit-eval expectation string.")
    check: str = Field(
        min_length=1,
        description="exit_code:N, stdout_contains:TEXT, stdout_regex:PATTERN, stderr_empty, "
        "file_exists:/PATH, dir_exists:/PATH, file_contains:/PATH:TEXT, tool_calls_min:N, "
        "tool_calls_max:N (paths from the workspace as root).",
    )

    @field_validator("check")
    @classmethod
    def _parses(cls, value: str) -> str:
        if parse_check(value).kind == "llm_judge":
            raise ValueError(
                "an llm_judge check is an llm_judge evaluator and an evaluator gate in llmtt "
                "(`llmtt import bashkit-eval` writes both)"
            )
        return value


class CommandSucceeds(GateBase):
    """Runs a shell command in the workspace; passes on exit code 0."""

    type: Literal["command_succeeds"] = Field(
        "command_succeeds", description="Passes when the command exits 0."
    )
    command: str = Field(
        description="Shell command run with bash on a scratch copy of the post-run workspace."
    )


class CommandOutputContains(GateBase):
    """Runs a command; passes when its stdout contains `substring`."""

    type: Literal["command_output_contains"] = Field(
        "command_output_contains",
        description="Passes when the command's stdout contains the substring.",
    )
    command: str = Field(
        description="Shell command run with bash on a scratch copy of the post-run workspace."
    )
    substring: str = Field(description="Text the command's stdout must contain.")


class CommandOutputMatches(GateBase):
    """Runs a command; passes when the regex `pattern` matches its stdout."""

    type: Literal["command_output_matches"] = Field(
        "command_output_matches",
        description="Passes when the pattern matches the command's stdout.",
    )
    command: str = Field(
        description="Shell command run with bash on a scratch copy of the post-run workspace."
    )
    pattern: str = Field(
        description="Regular expression (Python's, with re.MULTILINE) searched in its stdout."
    )

    _pattern = field_validator("pattern")(check_regex)


ASSERTION_RE = re.compile(
    r"^(exists|equals\s+(?P<eq>.+)|contains\s+(?P<sub>.+)|len\s*(?P<op>>=|==|>)\s*(?P<n>\d+))$"
)


class CommandJsonPath(GateBase):
    """Runs a command, parses stdout as JSON and asserts on the value at a JSONPath."""

    type: Literal["command_json_path"] = Field(
        "command_json_path", description="Asserts on a value of the command's JSON stdout."
    )
    command: str = Field(
        description="Shell command run with bash on a scratch copy of the post-run workspace."
    )
    path: str = Field(description="JSONPath (jsonpath-ng's extended syntax) into its stdout.")
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

    type: Literal["file_exists"] = Field("file_exists", description="Passes when the file exists.")
    path: str = Field(description="A regular file, relative to the workspace (links followed).")

    _path = field_validator("path")(check_relative)


class FileContains(GateBase):
    """Passes when the file exists and contains `substring`."""

    type: Literal["file_contains"] = Field(
        "file_contains", description="Passes when the file contains the substring."
    )
    path: str = Field(description="A regular file, relative to the workspace (links followed).")
    substring: str = Field(description="Text the file must contain.")

    _path = field_validator("path")(check_relative)


class FileMatches(GateBase):
    """Passes when the file exists and the regex `pattern` matches its content."""

    type: Literal["file_matches"] = Field(
        "file_matches", description="Passes when the pattern matches the file's content."
    )
    path: str = Field(
        description="A regular file of at most 16 MiB, relative to the workspace (links followed)."
    )
    pattern: str = Field(
        description="Regular expression (Python's, with re.MULTILINE) searched in the file."
    )

    _path = field_validator("path")(check_relative)
    _pattern = field_validator("pattern")(check_regex)


class NoTranscriptErrors(GateBase):
    """Passes when no target command of the run exited non-zero."""

    type: Literal["no_transcript_errors"] = Field(
        "no_transcript_errors",
        description="Passes when no target command of the run exited non-zero.",
    )


class ScriptSource(Strict):
    """Where a script comes from: a shell `command`, or the `path` of a script file."""

    command: str | None = Field(
        None,
        min_length=1,
        description="A shell command, run with bash in the workspace as it is written "
        "(`./check.sh` is the workspace's own file, which the agent could have changed).",
    )
    path: str | None = Field(
        None,
        min_length=1,
        description="An executable file of the project, relative to the scenario file's folder, "
        "run by its absolute path with the workspace as its folder (the agent never sees it); "
        "its content is part of the evaluate key.",
    )

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if (self.command is None) == (self.path is None):
            raise ValueError(
                "give either `command` (a shell command run in the workspace) or `path` (a "
                "script file of the project, relative to the scenario file), not "
                + ("both" if self.command is not None else "neither")
            )
        return self


class Script(GateBase, ScriptSource):
    """Runs a script (`command` or `path`): a JSON object on its stdout with a boolean `passed`
    decides (its `message` and `detail` are kept); otherwise its exit code does."""

    type: Literal["script"] = Field("script", description="Runs a script (`command` or `path`).")


class EvaluatorGate(GateBase):
    """Passes when a criterion's evaluator score (normalised to 0..1, the mean when several
    evaluators score it) reaches `threshold`."""

    type: Literal["evaluator"] = Field(
        "evaluator", description="Passes when an evaluator criterion's score reaches the threshold."
    )
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
    | EvaluatorGate
    | CheckGate,
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
    "check",
]
register_union_tags(GATE_TYPES)


class PostScript(ScriptSource):
    """A script run after the agent, before the gates (`scripts.post`)."""

    timeout_secs: float = Field(30, gt=0, description="Its time limit (a timeout is a warning).")
    description: str | None = Field(None, description="What it does, for the reports.")


class EvaluatorScript(ScriptSource):
    """A script that measures the run (`scripts.evaluators`): JSON `{metrics, score, summary}`
    on its stdout."""

    name: str = Field(
        pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$",
        description="The key of its results in metrics.json's `script_evaluators`.",
    )
    timeout_secs: float = Field(60, gt=0, description="Its time limit.")


class ScriptsSpec(Strict):
    """The scenario's scripts (specs/llm-tool-test/scripts.md), besides its `script` gates."""

    post: list[PostScript] = Field(
        default_factory=list,
        description="Run in order after the agent, on a copy of its workspace and HOME that the "
        "gates and evaluators then read; a failure is a warning, never a failed run.",
    )
    evaluators: list[EvaluatorScript] = Field(
        default_factory=list,
        description="Run after the gates; their JSON goes to metrics.json (`script_evaluators`) "
        "and evaluation.md; informational, never deciding the outcome.",
    )

    @field_validator("evaluators")
    @classmethod
    def _unique_names(cls, value: list[EvaluatorScript]) -> list[EvaluatorScript]:
        names = [e.name for e in value]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"evaluator names must be unique: {', '.join(twice)} repeated")
        return value


class TaskSpec(Strict):
    """What the agent is asked to do."""

    prompt: str = Field(
        min_length=1,
        description="The task as the agent gets it (the judge and the evaluators read it too).",
    )


class SetupSpec(Strict):
    """Shell commands run in the workspace before the agent starts."""

    commands: list[str] = Field(
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


class JudgeSettings(Strict):
    """Layer 3 for this scenario."""

    enabled: bool = Field(False, description="Let the judge grade this scenario's runs.")
    rubric: str | None = Field(
        None,
        description="Rubric file, relative to the project folder, else to the rubrics folder; "
        "required when enabled.",
    )
    pass_threshold: float = Field(
        0.7, ge=0, le=1, description="The judge's weighted score a run must reach to pass."
    )
    model: str | None = Field(
        None,
        description="The judge's model ([models.<name>] alias or litellm name); default: [judge] "
        "model, else LLMTT_JUDGE.",
    )

    @model_validator(mode="after")
    def _rubric_when_enabled(self) -> JudgeSettings:
        if self.enabled and not self.rubric:
            raise ValueError("judge.enabled is true but no rubric is named")
        return self


class CompositeSpec(Strict):
    """Weights of an optional single composite score."""

    gate_weight: float = Field(0, ge=0, description="Weight of the share of gates passed.")
    judge_weight: float = Field(0, ge=0, description="Weight of the judge's weighted score.")
    interaction_weight: float = Field(
        0, ge=0, description="Weight of the first-try success rate of the target commands."
    )

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

    gates: list[Gate] = Field(
        default_factory=list,
        description="Checks of the post-run workspace and run, all run in order; every one must "
        "pass for the run to pass.",
    )
    evaluators: list[EvaluatorSpec] = Field(
        default_factory=list,
        description="Informational scores (AgentDock's evaluators); a gate of type "
        "`evaluator` makes one decide the outcome.",
    )
    ground_truth: JsonValue = Field(
        None, description="The reference answer evaluators compare the agent's response with."
    )
    judge: JudgeSettings = Field(
        default_factory=JudgeSettings, description="The LLM judge (layer 3) for this scenario."
    )
    composite: CompositeSpec | None = Field(
        None,
        description="Weights (summing to 1) of a single composite score; a part that is absent "
        "is left out and the other weights scaled back to 1. Unset: no composite.",
    )

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

    max_usd: float | None = Field(
        None,
        ge=0,
        description="The agent is stopped when the run's running cost passes this; a paid run "
        "holds it in the session budget before it starts.",
    )


class RunSpec(Strict):
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
    target: TargetSpec | str | None = Field(
        None, description="Overrides of [target], or the name of a [targets.NAME] table."
    )
    task: TaskSpec = Field(description="What the agent is asked to do.")
    fixture: str | None = Field(
        None, description="Folder copied as the workspace, relative to this file."
    )
    setup: SetupSpec = Field(
        default_factory=SetupSpec, description="Commands run in the workspace before the agent."
    )
    solution: list[str] = Field(
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
    run: RunSpec = Field(default_factory=RunSpec, description="Limits of one run.")
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

    def script_path(self, path: str) -> Path:
        """A script's `path`, resolved against the scenario file's folder, links followed."""
        return Path(os.path.realpath(self.path.parent / path))

    def script_files(self) -> list[tuple[Loc, str]]:
        """Every script of the scenario given by `path`, with where it is written."""
        spec = self.spec
        named: list[tuple[Loc, ScriptSource]] = [
            *((("scripts", "post", i), s) for i, s in enumerate(spec.scripts.post)),
            *((("scripts", "evaluators", i), s) for i, s in enumerate(spec.scripts.evaluators)),
            *(
                (("evaluation", "gates", i), g)
                for i, g in enumerate(spec.evaluation.gates)
                if isinstance(g, Script)
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
