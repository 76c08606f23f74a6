"""The evaluator interface (AgentDock's model, Python-shaped; specs/agentdock-algorithms.md).

An evaluator has a type id and `evaluate(input, criteria) -> list[EvaluationResult]`: it is
handed its own criteria (those listed under it in the scenario; unlike AgentDock, never every
criterion of the scenario) and scores them (a built-in: those its config names). Its config is
a pydantic model (`Config`), validated when the scenario loads, so a mistake is a located load
error rather than a failure at evaluation time. Heavy libraries are imported inside `evaluate`.
"""

from __future__ import annotations

import builtins
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field

from llmtt.providers import ResolvedModel
from llmtt.spec.evaluation import Criterion as Criterion  # the plugin API: still importable here
from llmtt.spec.evaluation import Scale as Scale

Score = float | int | bool | str | None


class EvaluatorConfig(BaseModel):
    """Base of an evaluator's config: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class OneCriterionConfig(EvaluatorConfig):
    """A config that names the one criterion its evaluator scores."""

    criterion: str = Field(min_length=1, description="The criterion this evaluator scores.")


class ModelEvaluatorConfig(OneCriterionConfig):
    """Base of the config of an evaluator that calls a model: the criterion and the model."""

    model: str | None = Field(
        None,
        description="A [models.X] name or litellm's name; default: [judge] model, else "
        "LLMTT_JUDGE.",
    )


@dataclass(frozen=True)
class ToolUse:
    """One tool call of the run, with its result when there is one.

    `tool` is llmtt's name of the tool, the same under every agent (`shell` for claude-code's
    `Bash`, codex's `exec_command`, opencode's and the litellm loop's `bash`; see
    `llmtt.events.tool_name`), and `agent_tool` the agent's own name (None when not known: a
    run read from its transcript). `command` is a shell tool's command line, another tool's
    input as JSON. `exit_code` is None when not known.
    """

    tool: str
    command: str
    exit_code: int | None = None
    output: str = ""
    agent_tool: str | None = None


@dataclass(frozen=True)
class EvaluationInput:
    """What an evaluator is given about one run."""

    prompt: str
    response: str | None  # the agent's final answer: the last assistant message
    ground_truth: Any = None  # the scenario's evaluation.ground_truth
    messages: Sequence[Mapping[str, str]] = ()  # {role, text}, in order
    tool_calls: Sequence[ToolUse] = ()
    events: Sequence[Mapping[str, Any]] = ()  # the run's events.jsonl records
    workspace: Path | None = None
    context: Mapping[str, Any] = field(default_factory=dict)  # run, scenario, agent, model


@dataclass(frozen=True)
class EvaluationResult:
    """An evaluator's score for one criterion: what `Evaluator.evaluate` returns, one per
    criterion it scores.

    Required, in this order:
    - `criterion` (str): the name of one of the criteria `evaluate` was handed, which are the
      evaluator's own (those listed under it in the scenario). A result for any other name is
      refused: it is left out, and the run's outcome is `error`, naming the evaluator.
    - `score`: a bool, an int, a float, a str or None, on the criterion's scale: `binary` and
      `pass/fail` take true/false (or 1/0, "pass"/"fail", "yes"/"no"), `likert5` 1 to 5,
      `numeric` 0 to 1 (or 0 to 100), `string` any text (never part of the overall score);
      `pass_fail(passed, scale)` gives a pass or a fail on any scale. A score that does not
      normalise on its scale counts in no overall score nor gate.
    - `evaluator` (str): the evaluator's type id (`self.type`).

    Optional:
    - `reasoning` (str): why, in words; the reports show it.
    - `error` (str or None): set when the criterion could not be scored as asked (the text to
      check is missing, ...): the result then counts in no overall score nor gate, and the
      reports say "not scored" with the error. An evaluator that cannot run at all should
      raise instead: the run's outcome is then `error`.
    - `metadata` (a mapping of JSON values): anything else worth keeping; metrics.json and
      evaluations.jsonl hold it.
    """

    criterion: str
    score: Score
    evaluator: str
    reasoning: str = ""
    error: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        """As metrics.json and evaluations.jsonl hold it."""
        out: dict[str, Any] = {
            "criterion": self.criterion,
            "score": self.score,
            "evaluator": self.evaluator,
            "reasoning": self.reasoning,
        }
        if self.error is not None:
            out["error"] = self.error
        if self.metadata:
            out["metadata"] = dict(self.metadata)
        return out


class Evaluator(ABC):
    """Base of every evaluator, built-in or third-party.

    One that calls a model (`calls_model`) has a `model` field in its config (else the project's
    judge model is used). The runner resolves it and, before `evaluate`, refuses to let it spend
    money without LLMTT_ENABLED=1, a key, or room in the session budget, where it holds
    `cost_hold(...)`; the evaluator calls `self.model` and adds what it spent to `cost_usd`
    (None once a cost is unknown).
    """

    plugin_kind: ClassVar[str] = "evaluator"  # what the registry accepts under `llmtt.evaluators`
    type: ClassVar[str]
    Config: ClassVar[builtins.type[EvaluatorConfig]] = EvaluatorConfig  # `type` is the id here
    calls_model: ClassVar[bool] = False

    def __init__(self, config: EvaluatorConfig) -> None:
        self.config = config
        self.model: ResolvedModel | None = None  # set by the runner when it calls a model
        self.cost_usd: float | None = 0.0

    def cost_hold(self, input: EvaluationInput, criteria: Sequence[Criterion]) -> float:
        """The most this evaluation may spend (`self.model` is set): held in the budget."""
        return 0.0

    def spent(self, cost: float | None) -> None:
        """Add a call's cost (None: unknown, and the total with it)."""
        self.cost_usd = None if cost is None or self.cost_usd is None else self.cost_usd + cost

    @abstractmethod
    def evaluate(
        self, input: EvaluationInput, criteria: Sequence[Criterion]
    ) -> list[EvaluationResult]:
        """An `EvaluationResult` per criterion scored. `criteria` are this evaluator's own:
        those listed under it in the scenario, never another evaluator's. A result for a
        criterion not among them is refused, and an exception makes the run's outcome
        `error` (the evaluator's fault, not the agent's): both are said, with the scenario
        file and the evaluator's place in it, in metrics.json, the console and the reports."""

    def owned(self, criteria: Sequence[Criterion], names: Sequence[str]) -> list[Criterion]:
        """Those of `criteria` named in `names`, in `names`' order."""
        by_name = {c.name: c for c in criteria}
        return [by_name[n] for n in names if n in by_name]


def normalise(score: Score, scale: str) -> float | None:
    """A score on 0..1, as AgentDock normalises it; None when it does not normalise."""
    if isinstance(score, bool):
        return 1.0 if score else 0.0
    if isinstance(score, int | float):
        value = float(score)
        if not math.isfinite(value):
            return None
        if scale == "likert5":
            return (value - 1) / 4 if 1 <= value <= 5 else None
        if scale == "numeric":
            if 0 <= value <= 1:
                return value
            return value / 100 if 0 <= value <= 100 else None
        if scale in ("binary", "pass/fail"):
            return value if value in (0, 1) else None
        return None
    if isinstance(score, str):
        text = score.strip().lower()
        if scale in ("binary", "pass/fail"):
            if text in ("true", "pass", "yes", "1"):
                return 1.0
            if text in ("false", "fail", "no", "0"):
                return 0.0
            return None
        if scale in ("likert5", "numeric"):
            try:
                number = float(text)
            except ValueError:
                return None
            return normalise(number, scale)
    return None


def overall_score(
    results: Sequence[EvaluationResult], criteria: Sequence[Criterion]
) -> float | None:
    """sum(normalised x weight) / sum(weight) over the results without an error whose
    criterion exists and whose score normalises; None when there is none. A criterion scored
    by several evaluators counts once per result (AgentDock's rule)."""
    by_name = {c.name: c for c in criteria}
    total = weights = 0.0
    for result in results:
        criterion = by_name.get(result.criterion)
        if result.error is not None or criterion is None:
            continue
        value = normalise(result.score, criterion.scale)
        if value is None:
            continue
        total += value * criterion.weight
        weights += criterion.weight
    return total / weights if weights else None


def pass_fail(passed: bool, scale: str) -> Score:
    """A pass or fail on the criterion's scale (AgentDock's mapPassFailToScore)."""
    if scale == "numeric":
        return 1 if passed else 0
    if scale == "likert5":
        return 5 if passed else 1
    if scale == "string":
        return "pass" if passed else "fail"
    return passed


ConfigT = TypeVar("ConfigT", bound=OneCriterionConfig)


class OneCriterionEvaluator(Evaluator, Generic[ConfigT]):
    """An evaluator whose config names one criterion: it scores that one (`score`) when it is
    among the criteria given, and nothing else. `settings` is the config, typed."""

    def __init__(self, config: EvaluatorConfig) -> None:
        if not isinstance(config, self.Config):
            raise TypeError(
                f"{type(self).__name__} takes a {self.Config.__name__}, "
                f"not a {type(config).__name__}"
            )
        super().__init__(config)
        self.settings = cast(ConfigT, config)

    def evaluate(
        self, input: EvaluationInput, criteria: Sequence[Criterion]
    ) -> list[EvaluationResult]:
        return [self.score(input, c) for c in self.owned(criteria, [self.settings.criterion])]

    @abstractmethod
    def score(self, input: EvaluationInput, criterion: Criterion) -> EvaluationResult:
        """The result for `criterion`, the one the config names."""

    def failure(self, criterion: Criterion, reasoning: str, error: str) -> EvaluationResult:
        """A failing score on the criterion's scale, with `error` set."""
        return EvaluationResult(
            criterion.name,
            pass_fail(False, criterion.scale),
            self.type,
            reasoning=reasoning,
            error=error,
        )
