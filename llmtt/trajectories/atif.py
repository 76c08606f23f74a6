"""ATIF, the Agent Trajectory Interchange Format of Harbor (laude-institute/harbor, now
harbor-framework/harbor), version ATIF-v1.7: the models here follow Harbor's own, field for field,
in src/harbor/models/trajectories/ (trajectory.py, agent.py, step.py, tool_call.py,
observation.py, observation_result.py, metrics.py, final_metrics.py) as released in harbor
0.23-0.24, whose `Trajectory.schema_version` defaults to "ATIF-v1.7"; the specification is
Harbor's docs/rfcs/0001-trajectory-format.md. Their rules are kept: unknown fields are refused,
step ids run from 1, an observation answers the tool calls of its own step, and only an agent
step has a model, tool calls or metrics. Multimodal content parts (ATIF-v1.6) are read as their
text; embedded subagent trajectories are kept by the model but not replayed.

What llmtt records and ATIF has no field for (a tool's exit code, how the agent's process
ended, cache writes) travels in the `extra` objects, under `llmtt`.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    field_validator,
    model_validator,
)

SCHEMA_VERSION: Final = "ATIF-v1.7"
Version = Literal[
    "ATIF-v1.0",
    "ATIF-v1.1",
    "ATIF-v1.2",
    "ATIF-v1.3",
    "ATIF-v1.4",
    "ATIF-v1.5",
    "ATIF-v1.6",
    "ATIF-v1.7",
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Open(BaseModel):
    """An `extra` object: anything goes, but the fields llmtt reads are typed, so a trajectory
    llmtt cannot replay is refused on import, naming the field."""

    model_config = ConfigDict(extra="allow")


class Ended(_Open):
    """How the agent's process ended (llmtt's `complete` event)."""

    exit_code: StrictInt | None = None
    duration_secs: float | None = Field(None, ge=0)
    timed_out: StrictBool | None = None
    natural_stop: StrictBool | None = None
    reason: str | None = None


class RunLlmtt(_Open):
    """llmtt's own fields of a whole trajectory."""

    ended: Ended | None = None
    workspace_hash: str | None = None  # of the workspace kept beside it (llmtt import atif)


class RunExtra(_Open):
    """A trajectory's `extra`."""

    llmtt: RunLlmtt | None = None


class StepLlmtt(_Open):
    """llmtt's own fields of a step: each tool call's exit code, by tool_call_id."""

    exit_codes: dict[str, StrictInt | None] | None = None


class StepExtra(_Open):
    """A step's `extra`."""

    llmtt: StepLlmtt | None = None


class MetricsLlmtt(_Open):
    """llmtt's own fields of a step's metrics."""

    cache_write_tokens: StrictInt | None = Field(None, ge=0)


class MetricsExtra(_Open):
    """A step's metrics' `extra`."""

    llmtt: MetricsLlmtt | None = None


class Agent(_Model):
    """The agent that produced the trajectory."""

    name: str
    version: str
    model_name: str | None = None
    tool_definitions: list[dict[str, Any]] | None = None
    extra: dict[str, Any] | None = None


class ToolCall(_Model):
    """One tool call of an agent step."""

    tool_call_id: str
    function_name: str
    arguments: dict[str, Any]
    extra: dict[str, Any] | None = None


class ContentPart(BaseModel):
    """A part of a multimodal message (ATIF-v1.6): llmtt reads its text."""

    model_config = ConfigDict(extra="allow")

    type: str
    text: str | None = None


class ObservationResult(_Model):
    """What one tool call (or an action without one) gave back."""

    source_call_id: str | None = None
    content: str | list[ContentPart] | None = None
    subagent_trajectory_ref: list[dict[str, Any]] | None = None


class Observation(_Model):
    """The environment's feedback in a step."""

    results: list[ObservationResult]


class Metrics(_Model):
    """One step's model usage; `prompt_tokens` include the cached ones."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    cost_usd: float | None = None
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    extra: MetricsExtra | None = None


class FinalMetrics(_Model):
    """The whole trajectory's usage."""

    total_prompt_tokens: int | None = None
    total_completion_tokens: int | None = None
    total_cached_tokens: int | None = None
    total_cost_usd: float | None = None
    total_steps: int | None = Field(None, ge=0)
    extra: dict[str, Any] | None = None


_AGENT_ONLY = ("model_name", "reasoning_effort", "reasoning_content", "tool_calls", "metrics")


class Step(_Model):
    """One step: a user's or the system's message, or an agent's turn with its tool calls and
    what they gave back."""

    step_id: int = Field(ge=1)
    timestamp: str | None = None
    source: Literal["system", "user", "agent"]
    model_name: str | None = None
    reasoning_effort: str | float | None = None
    message: str | list[ContentPart]
    reasoning_content: str | None = None
    tool_calls: list[ToolCall] | None = None
    observation: Observation | None = None
    metrics: Metrics | None = None
    is_copied_context: bool | None = None
    llm_call_count: int | None = Field(None, ge=0)
    extra: StepExtra | None = None

    @field_validator("timestamp")
    @classmethod
    def _iso(cls, value: str | None) -> str | None:
        if value is not None:
            dt.datetime.fromisoformat(value.replace("Z", "+00:00"))  # ValueError: not ISO 8601
        return value

    @model_validator(mode="after")
    def _agent_fields(self) -> Step:
        if self.source != "agent":
            for name in _AGENT_ONLY:
                if getattr(self, name) is not None:
                    raise ValueError(f"{name} is only for steps whose source is agent")
        elif self.llm_call_count == 0 and (self.metrics or self.reasoning_content):
            raise ValueError("a step with llm_call_count 0 has no metrics or reasoning_content")
        calls = {c.tool_call_id for c in self.tool_calls or []}
        for result in self.observation.results if self.observation else []:
            if result.source_call_id is not None and result.source_call_id not in calls:
                raise ValueError(
                    f"observation answers source_call_id {result.source_call_id!r}, which is "
                    "not one of this step's tool_calls"
                )
        return self


class Trajectory(_Model):
    """A whole trajectory (ATIF's root object)."""

    schema_version: Version = SCHEMA_VERSION
    session_id: str | None = None
    trajectory_id: str | None = None
    agent: Agent
    steps: list[Step] = Field(min_length=1)
    notes: str | None = None
    final_metrics: FinalMetrics | None = None
    continued_trajectory_ref: str | None = None
    extra: RunExtra | None = None
    subagent_trajectories: list[Trajectory] | None = None

    @model_validator(mode="after")
    def _numbered(self) -> Trajectory:
        for index, step in enumerate(self.steps, start=1):
            if step.step_id != index:
                raise ValueError(f"steps[{index - 1}].step_id is {step.step_id}, not {index}")
        return self


def text_of(content: str | list[ContentPart] | None) -> str:
    """A message or an observation as text (an image part is named, not shown)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(p.text if p.text is not None else f"[{p.type}]" for p in content)
