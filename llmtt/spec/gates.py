"""The gates a scenario lists (layer 2): deterministic pass/fail checks of the post-run
workspace, one pydantic model a type, told apart by `type`."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Annotated, Literal, Self

from pydantic import Field, field_validator, model_validator

from llmtt.spec.checks import parse_check
from llmtt.spec.config import Command, Strict, check_regex
from llmtt.spec.validation import register_union_tags

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def check_relative(path: str) -> str:
    """A path inside the workspace: relative and never climbing out of it."""
    if "\0" in path:
        raise ValueError(f"contains a NUL byte, which no file name can hold ({path!r})")
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
        "file_exists:/PATH, dir_exists:/PATH, file_contains:/PATH:TEXT, "
        "file_line_regex:/PATH:PATTERN (a line of the file matches), tool_calls_min:N, "
        "tool_calls_max:N (paths from the workspace as root). Where the agent's record cannot "
        "tell (`stderr_empty` with stdout and stderr as one output, `exit_code` with the last "
        "exit unknown) the gate says so and counts neither as a pass nor as a fail.",
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
    command: Command = Field(
        description="Shell command run with bash on a scratch copy of the post-run workspace."
    )


class CommandOutputContains(GateBase):
    """Runs a command; passes when its stdout contains `substring`."""

    type: Literal["command_output_contains"] = Field(
        "command_output_contains",
        description="Passes when the command's stdout contains the substring.",
    )
    command: Command = Field(
        description="Shell command run with bash on a scratch copy of the post-run workspace."
    )
    substring: str = Field(description="Text the command's stdout must contain.")


class CommandOutputMatches(GateBase):
    """Runs a command; passes when the regex `pattern` matches its stdout."""

    type: Literal["command_output_matches"] = Field(
        "command_output_matches",
        description="Passes when the pattern matches the command's stdout.",
    )
    command: Command = Field(
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
    command: Command = Field(
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
    """Passes when no target command of the run exited non-zero, nor, of those whose exit is
    unknown, shows a failure in its output (approximately; its message says when it cannot
    tell)."""

    type: Literal["no_transcript_errors"] = Field(
        "no_transcript_errors",
        description="Passes when no target command of the run exited non-zero, nor, of those "
        "whose exit code is unknown (behind a pipe, read from a transcript), shows a failure in "
        "its output (approximately: metrics.md); its message says when it cannot tell.",
    )


class ScriptSource(Strict):
    """Where a script comes from: a shell `command`, or the `path` of a script file."""

    command: Command | None = Field(
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


class ScriptGate(GateBase, ScriptSource):
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


class SkillTriggersGate(GateBase):
    """Passes when every skill of the scenario's `skill_triggers` that the run placed was loaded
    as it should be: each `should_trigger` skill loaded, no `should_not_trigger` one. A run that
    placed none of them (a control) or has no wire record (its agent reached its model by
    itself) cannot tell: neither a pass nor a fail."""

    type: Literal["skill_triggers"] = Field(
        "skill_triggers",
        description="Passes when each skill of the scenario's skill_triggers that the run placed "
        "was loaded as it should be (should_trigger loaded, should_not_trigger not); cannot "
        "tell for a run that placed none of them or has no wire record.",
    )
    skills: list[str] = Field(
        default_factory=list,
        description="The skills of skill_triggers this gate holds; default: all of them.",
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
    | ScriptGate
    | EvaluatorGate
    | CheckGate
    | SkillTriggersGate,
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
    "skill_triggers",
]
register_union_tags(GATE_TYPES)
