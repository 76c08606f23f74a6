"""`nlp_accuracy`: how close in meaning the response is to the reference (AgentDock's
NLPAccuracy): the cosine similarity of their embeddings, asked from an embedding model
through litellm's embedding API (any OpenAI-compatible embeddings endpoint, a gateway included,
through `[models.X]`). With `similarity_threshold` on a binary or pass/fail criterion the
score is whether the similarity reaches it; otherwise it is the cosine itself (which the
overall score takes only within 0..1, as AgentDock's normalisation does).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pydantic import Field

from llmtt.evaluation.evaluators.base import (
    EvaluationInput,
    EvaluationResult,
    ModelEvaluatorConfig,
    OneCriterionEvaluator,
    pass_fail,
)
from llmtt.evaluation.evaluators.lexical import TextField, field_text, no_text
from llmtt.providers import import_litellm
from llmtt.spec.evaluation import Criterion
from llmtt.util.text import most_tokens


class NlpAccuracyConfig(ModelEvaluatorConfig):
    """Which criterion, which embedding model (e.g. "openai/text-embedding-3-small"), which
    texts."""

    similarity_threshold: float | None = Field(
        None,
        ge=-1,
        le=1,
        description="On a binary or pass/fail criterion: the cosine similarity that passes.",
    )
    source: TextField = Field("response", description="The text compared.")
    reference: TextField = Field("ground_truth", description="The text it is compared with.")
    timeout_secs: float = Field(60, gt=0, description="Limit of the embedding request.")


class NlpAccuracyEvaluator(OneCriterionEvaluator[NlpAccuracyConfig]):
    """One embedding request (both texts) per owned criterion."""

    type = "nlp_accuracy"
    Config = NlpAccuracyConfig
    calls_model = True

    def cost_hold(self, input: EvaluationInput, criteria: Sequence[Criterion]) -> float:
        """Both texts' tokens (`most_tokens`) at the model's input price."""
        assert self.model is not None
        config = self.settings
        texts = [field_text(input, config.source) or "", field_text(input, config.reference) or ""]
        tokens = sum(most_tokens(t) + 10 for t in texts)
        count = len(self.owned(criteria, [config.criterion]))
        return count * (self.model.cost(tokens, 0) or 0.0)

    def score(self, input: EvaluationInput, criterion: Criterion) -> EvaluationResult:
        """Embed both texts, compare."""
        config = self.settings
        source = field_text(input, config.source)
        reference = field_text(input, config.reference)
        if source is None or reference is None:
            return self.failure(
                criterion, "", no_text(input, config.source if source is None else config.reference)
            )
        similarity = cosine(*self._embed([source, reference]))
        reasoning = f"Cosine similarity: {similarity:.4f}."
        score: Any = similarity
        if config.similarity_threshold is not None and criterion.scale in ("binary", "pass/fail"):
            passed = similarity >= config.similarity_threshold
            score = pass_fail(passed, criterion.scale)
            verdict = ">=" if passed else "<"
            reasoning += f" {verdict} threshold {config.similarity_threshold:g}."
        return EvaluationResult(
            criterion.name,
            score,
            self.type,
            reasoning=reasoning,
            metadata={"similarity": similarity, "model": self.model and self.model.name},
        )

    def _embed(self, texts: list[str]) -> tuple[list[float], list[float]]:
        assert self.model is not None
        litellm = import_litellm(f"evaluator {self.type}")
        response = litellm.embedding(
            model=self.model.litellm,
            input=texts,
            api_base=self.model.api_base,
            api_key=self.model.api_key,
            timeout=self.settings.timeout_secs,
        )
        usage = getattr(response, "usage", None)
        self.spent(self.model.cost(int(getattr(usage, "prompt_tokens", 0) or 0), 0))
        data = sorted(response.data, key=lambda d: _get(d, "index"))
        vectors = [[float(x) for x in _get(d, "embedding")] for d in data]
        if len(vectors) != 2:
            raise ValueError(f"the embedding endpoint gave {len(vectors)} vectors for 2 texts")
        return vectors[0], vectors[1]


def _get(item: Any, name: str) -> Any:
    return item[name] if isinstance(item, dict) else getattr(item, name)


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """dot(a, b) / (|a| |b|); 0 when a norm is 0 (AgentDock's rule)."""
    if not a or not b:
        raise ValueError("an embedding is empty")
    if len(a) != len(b):
        raise ValueError(f"embeddings of different sizes: {len(a)} and {len(b)}")
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norms = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norms if norms else 0.0
