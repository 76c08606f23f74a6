"""An example third-party evaluator: the agent's final answer has at most `max_words` words."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field

from llmtt.plugins import (
    Criterion,
    EvaluationInput,
    EvaluationResult,
    Evaluator,
    EvaluatorConfig,
    pass_fail,
)


class WordCountConfig(EvaluatorConfig):
    """Which criterion, and the most words the answer may have."""

    criterion: str = Field(description="The criterion it scores.")
    max_words: int = Field(gt=0, description="The most words the answer may have.")


class WordCount(Evaluator):
    """Passes when the final answer has at most `max_words` words."""

    type = "word_count"
    Config = WordCountConfig

    def evaluate(
        self, input: EvaluationInput, criteria: Sequence[Criterion]
    ) -> list[EvaluationResult]:
        config = self.config
        assert isinstance(config, WordCountConfig)
        out = []
        for criterion in self.owned(criteria, [config.criterion]):
            if input.response is None:
                out.append(
                    EvaluationResult(
                        criterion.name,
                        pass_fail(False, criterion.scale),
                        self.type,
                        error="the agent gave no final answer",
                    )
                )
                continue
            words = len(input.response.split())
            out.append(
                EvaluationResult(
                    criterion.name,
                    pass_fail(words <= config.max_words, criterion.scale),
                    self.type,
                    reasoning=f"The answer has {words} word(s); at most {config.max_words} allowed.",
                    metadata={"words": words},
                )
            )
        return out
