"""`llm_judge`: a model grades one criterion (AgentDock's LLMJudge, on llmtt's judge rules).

The prompt template's placeholders are replaced everywhere they occur: {{input}} (the task),
{{response}}, {{reference}} (the ground truth), {{criterion_name}}, {{criterion_description}},
{{criterion_scale}} and {{context.<key>}} (objects as JSON, a missing key as N/A). The model
answers `{"score": ..., "reasoning": ...}`, the score on the criterion's scale; an answer that
does not parse or fit the scale is asked to be repaired once. Like the judge it needs
LLMTT_ENABLED=1 for a paid model, a key and room in the session budget (the runner checks and
holds before it runs), and it passes `max_tokens`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from pydantic import Field

from llmtt.evaluation.evaluators.base import (
    EvaluationInput,
    EvaluationResult,
    ModelEvaluatorConfig,
    OneCriterionEvaluator,
    Score,
)
from llmtt.evaluation.evaluators.lexical import field_value
from llmtt.providers import ProviderStop, answer_text, complete
from llmtt.spec.evaluation import Criterion
from llmtt.util.text import most_tokens

SYSTEM = "You are an expert evaluator. Respond in JSON format using the provided schema."
TEMPLATE = """\
Grade the response against the criterion.

Task given: {{input}}

Response: {{response}}

Reference answer: {{reference}}

Criterion: {{criterion_name}} - {{criterion_description}}
Scale: {{criterion_scale}}

Reply with only a JSON object: {"score": <score>, "reasoning": "<one or two sentences>"}."""
MAX_ANSWER_TOKENS = 800
_PLACEHOLDER = re.compile(r"\{\{\s*([\w.-]{1,100})\s*\}\}")
_SCHEMAS = {
    "binary": "true or false",
    "pass/fail": '"pass" or "fail"',
    "likert5": "an integer from 1 to 5",
    "numeric": "a number from 0 to 1",
    "string": "a short string",
}
_TRUE = ("true", "pass", "yes", "1")
_FALSE = ("false", "fail", "no", "0")


class LlmJudgeConfig(ModelEvaluatorConfig):
    """Which criterion, which model, and what it is asked."""

    prompt_template: str = Field(
        TEMPLATE,
        min_length=1,
        description="What the model is asked; placeholders {{input}}, {{response}}, "
        "{{reference}}, {{criterion_name}}, {{criterion_description}}, {{criterion_scale}}, "
        "{{context.<key>}}.",
    )
    system_prompt: str = Field(SYSTEM, description="The system message.")
    timeout_secs: float = Field(120, gt=0, description="Limit of one request.")


class LlmJudgeEvaluator(OneCriterionEvaluator[LlmJudgeConfig]):
    """One model request (two when the answer needs repair) per owned criterion."""

    type = "llm_judge"
    Config = LlmJudgeConfig
    calls_model = True

    def cost_hold(self, input: EvaluationInput, criteria: Sequence[Criterion]) -> float:
        """The prompt asked twice with the longest answers, per owned criterion."""
        assert self.model is not None
        config = self.settings
        total = 0.0
        for criterion in self.owned(criteria, [config.criterion]):
            prompt = fill(config.prompt_template, input, criterion)
            tokens = 2 * (most_tokens(prompt) + most_tokens(config.system_prompt) + 200)
            total += self.model.cost(tokens + MAX_ANSWER_TOKENS, 2 * MAX_ANSWER_TOKENS) or 0.0
        return total

    def score(self, input: EvaluationInput, criterion: Criterion) -> EvaluationResult:
        """Ask, check the score against the scale, repair once."""
        config = self.settings
        assert self.model is not None
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": config.system_prompt},
            {"role": "user", "content": fill(config.prompt_template, input, criterion)},
        ]
        problem = "no answer"
        for _ in range(2):
            try:
                response = complete(
                    self.model,
                    messages=messages,
                    max_retries=3,
                    backoff_secs=2.0,
                    timeout_secs=config.timeout_secs,
                    max_tokens=MAX_ANSWER_TOKENS,
                )
            except ProviderStop as exc:
                return self._failed(criterion, f"provider error: {exc}")
            usage = getattr(response, "usage", None)
            self.spent(
                self.model.cost(
                    int(getattr(usage, "prompt_tokens", 0) or 0),
                    int(getattr(usage, "completion_tokens", 0) or 0),
                )
            )
            text = answer_text(response)
            answer, problem = parse(text, criterion.scale)
            if answer is not None:
                score, reasoning, raw = answer
                return EvaluationResult(
                    criterion.name,
                    score,
                    self.type,
                    reasoning=reasoning,
                    metadata={"raw_llm_score": raw, "model": self.model.name},
                )
            messages += [
                {"role": "assistant", "content": text},
                {
                    "role": "user",
                    "content": f"That answer is not valid ({problem}). Reply with only the JSON "
                    f'object {{"score": ..., "reasoning": ...}}, the score '
                    f"{_SCHEMAS[criterion.scale]}.",
                },
            ]
        return self._failed(criterion, f"malformed answer twice ({problem})")

    def _failed(self, criterion: Criterion, why: str) -> EvaluationResult:
        return EvaluationResult(criterion.name, "error", self.type, error=why)


def fill(template: str, input: EvaluationInput, criterion: Criterion) -> str:
    """The template with every placeholder replaced (objects as JSON, missing ones as N/A)."""

    def value(match: re.Match[str]) -> str:
        key = match.group(1)
        found: Any
        if key == "input":
            found = input.prompt
        elif key == "response":
            found = input.response
        elif key == "reference":
            found = input.ground_truth
        elif key == "criterion_name":
            found = criterion.name
        elif key == "criterion_description":
            found = criterion.description
        elif key == "criterion_scale":
            found = f"{criterion.scale} ({_SCHEMAS[criterion.scale]})"
        elif key.startswith("context."):
            found = field_value(input, key)
        else:
            return match.group(0)  # not a placeholder of ours: left as written
        if found is None:
            return "N/A"
        return found if isinstance(found, str) else json.dumps(found, default=str)

    return _PLACEHOLDER.sub(value, template)


def parse(text: str, scale: str) -> tuple[tuple[Score, str, Any] | None, str]:
    """(score, reasoning, raw score) from an answer, or None and what is wrong with it."""
    body = text.strip()
    if body.startswith("```"):
        body = body.strip("`").removeprefix("json").strip()
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: nested too deep to read
        start, end = body.find("{"), body.rfind("}")
        try:
            data = json.loads(body[start : end + 1]) if 0 <= start < end else None
        except (ValueError, RecursionError):
            data = None
    if not isinstance(data, dict) or "score" not in data:
        return None, 'not a JSON object with "score"'
    raw = data["score"]
    reasoning = data.get("reasoning")
    reasoning = reasoning if isinstance(reasoning, str) else ""
    score = _on_scale(raw, scale)
    if score is None:
        return None, f"score {raw!r} is not {_SCHEMAS[scale]}"
    return (score, reasoning, raw), ""


def _on_scale(raw: Any, scale: str) -> Score:
    """`raw` as a score on `scale`, or None when it does not fit."""
    if scale in ("binary", "pass/fail"):
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        return None
    if scale == "likert5":
        if isinstance(raw, bool) or not isinstance(raw, int | float) or raw != int(raw):
            return None
        return int(raw) if 1 <= raw <= 5 else None
    if scale == "numeric":
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            return None
        return float(raw) if 0 <= raw <= 1 or 0 <= raw <= 100 else None
    return str(raw)
