"""How a scenario is evaluated: its gates, scripts, evaluators (with their criteria), judge
settings and composite score, as the user writes them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator, model_validator

from llmtt.spec.config import Strict
from llmtt.spec.gates import EvaluatorGate, Gate, ScriptSource

Scale = Literal["binary", "likert5", "numeric", "pass/fail", "string"]


class Criterion(BaseModel):
    """What is measured: its name, what it means, its scale and its weight in the overall
    score (a weight counts once per result, as AgentDock counts it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, description="Unique within the scenario.")
    description: str = Field("", description="What the criterion means (the judge reads it).")
    scale: Scale = Field(
        "numeric",
        description="binary / pass/fail (true or false), likert5 (1-5), numeric (0-1 or "
        "0-100), string (not part of the overall score).",
    )
    weight: float = Field(1.0, gt=0, allow_inf_nan=False, description="Weight in the overall.")


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
    samples: int | None = Field(
        None,
        ge=1,
        le=10,
        description="How many times the judge is asked about each run (1 to 10); the run's "
        "score is their mean, their spread is kept. Default: [judge] samples.",
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
