"""Rubric files (`rubrics/*.yaml`): weighted criteria for the LLM judge."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator

from llmtt.errors import ConfigError
from llmtt.spec.config import Strict
from llmtt.spec.gates import NAME_RE
from llmtt.spec.loading import dotted, line_of, read_yaml
from llmtt.spec.validation import validate


class RubricCriterion(Strict):
    """One thing the judge scores, from 0 to 1."""

    id: str = Field(description="Its key in the judge's `scores`; unique in the rubric.")
    weight: float = Field(
        gt=0, le=1, description="Its share of the weighted score; the weights sum to 1."
    )
    description: str = Field(min_length=1, description="What the judge scores, as it reads it.")

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not NAME_RE.match(value):
            raise ValueError(f"id {value!r}: use letters, digits, '_', '-' and '.'")
        return value


class RubricOutput(Strict):
    """The answer format the judge is held to."""

    format: str = Field(
        "json",
        description="Accepted as the seed's rubrics write it; not read: the judge always "
        "answers in JSON.",
    )
    require_fields: list[str] = Field(
        default_factory=lambda: ["scores", "weighted_score", "confidence", "issues", "highlights"],
        description="Accepted as the seed's rubrics write it; not read: the judge's answer "
        "always has these five fields.",
    )


class Rubric(Strict):
    """A rubric file."""

    name: str | None = Field(None, description="A name for people; not read by llmtt.")
    description: str = Field("", description="What the rubric is for; not read by llmtt.")
    criteria: list[RubricCriterion] = Field(
        min_length=1, description="What the judge scores, each from 0 to 1."
    )
    output: RubricOutput = Field(
        default_factory=RubricOutput, description="The judge's answer format (fixed)."
    )

    @field_validator("criteria")
    @classmethod
    def _weights_and_ids(cls, criteria: list[RubricCriterion]) -> list[RubricCriterion]:
        total = sum(c.weight for c in criteria)
        if criteria and abs(total - 1.0) > 0.01:
            raise ValueError(f"criteria weights must sum to 1 (+/- 0.01), they sum to {total:g}")
        return criteria


def load_rubric(path: Path) -> Rubric:
    """Load and validate one rubric file."""
    data, lines = read_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError.one(path, "a rubric file must be a YAML mapping with `criteria:`", line=1)
    rubric = validate(Rubric, data, path, lines)
    seen: set[str] = set()
    for index, criterion in enumerate(rubric.criteria):
        if criterion.id in seen:
            loc = ("criteria", index, "id")
            raise ConfigError.one(
                path,
                f"criterion id {criterion.id!r} appears more than once",
                line=line_of(lines, loc),
                field=dotted(loc),
            )
        seen.add(criterion.id)
    return rubric
