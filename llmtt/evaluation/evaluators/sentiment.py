"""The `sentiment` evaluator: AgentDock's Sentiment, which scores a text with the npm package
`sentiment` (5.0.x). That package sums the AFINN-165 valences (-5..+5) of the text's words and
divides by the number of words; this module does the same with the AFINN-165 English list the
PyPI package `afinn` ships (read as data: the same 3,382 entries as the npm package's
labels.json) and the npm package's tokenisation and negation, so its figures are AgentDock's.

Not reproduced: the npm package adds emoji valences to the list; `afinn` has none, so an emoji
standing alone between spaces counts 0 here.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Literal

from pydantic import Field, model_validator

from llmtt.evaluation.evaluators.base import (
    EvaluationInput,
    EvaluationResult,
    OneCriterionConfig,
    OneCriterionEvaluator,
    Score,
)
from llmtt.evaluation.evaluators.lexical import (
    FIELD_HELP,
    PASS_THRESHOLD_HELP,
    TextField,
    field_text,
    fraction_score,
    no_text,
)
from llmtt.spec.evaluation import Criterion

LEXICON = "AFINN-en-165.txt"  # in the afinn package's data folder

# JavaScript's whitespace (\s and String.prototype.trim): the tokeniser's, not Python's.
_JS_SPACE = (
    "\t\n\v\f\r \u00a0\u1680"
    + "".join(chr(c) for c in range(0x2000, 0x200B))
    + "\u2028\u2029\u202f\u205f\u3000\ufeff"
)
_SPACE_RUNS = re.compile(f"[{re.escape(_JS_SPACE)}]{{2,}}")
_PUNCTUATION = re.compile(r"[.,/#!?$%^&*;:{}=_`\"~()]")
# A word after one of these counts with its sign flipped (the npm package's English negators).
NEGATORS = frozenset(
    {"cant", "can't", "dont", "don't", "doesnt", "doesn't", "not", "non", "wont", "won't"}
    | {"isnt", "isn't"}
)


@functools.cache
def afinn_165() -> dict[str, int]:
    """Word -> valence, from the afinn package's AFINN-165 English list (word TAB integer)."""
    from importlib.resources import files

    text = files("afinn").joinpath("data", LEXICON).read_text(encoding="utf-8")
    lexicon: dict[str, int] = {}
    for line in text.splitlines():
        if line.strip():
            word, _, valence = line.rpartition("\t")
            lexicon[word] = int(valence)
    return lexicon


def tokens(text: str) -> list[str]:
    """The npm package's tokens: lower-cased, newlines and the punctuation . , / # ! ? $ % ^ & *
    ; : { } = _ ` " ~ ( ) made spaces, every run of two or more whitespace characters one
    space, trimmed, split at each space. (A lone tab stays inside a token, as it does there.)"""
    text = text.lower().replace("\n", " ")
    text = _PUNCTUATION.sub(" ", text)
    text = _SPACE_RUNS.sub(" ", text)
    return text.strip(_JS_SPACE).split(" ")


@dataclass(frozen=True)
class Analysis:
    """The npm package's analysis of a text."""

    score: int  # the sum of the valences
    comparative: float  # score / number of tokens
    positive: list[str]  # words that counted positive, last first (the package's order)
    negative: list[str]


def analyse(text: str) -> Analysis:
    """The npm package's `analyze`: the tokens are read from the last one back; a word in the
    lexicon counts its valence, negated when the token before it is a negator."""
    lexicon = afinn_165()
    words = tokens(text)
    score = 0
    positive: list[str] = []
    negative: list[str] = []
    for i in range(len(words) - 1, -1, -1):
        valence = lexicon.get(words[i])
        if valence is None:
            continue
        if i > 0 and words[i - 1] in NEGATORS:
            valence = -valence
        if valence > 0:
            positive.append(words[i])
        elif valence < 0:
            negative.append(words[i])
        score += valence
    return Analysis(score, score / len(words) if words else 0.0, positive, negative)


def _js_number(value: float) -> str:
    """A number as JavaScript prints it (1 rather than 1.0)."""
    return str(int(value)) if float(value).is_integer() else repr(value)


Output = Literal["comparative_normalized", "raw", "category"]


class SentimentConfig(OneCriterionConfig):
    """AFINN-165 sentiment of a text field."""

    output: Output = Field(
        "comparative_normalized",
        description="comparative_normalized: (comparative + 5) / 10 clamped to 0..1, where "
        "comparative = raw / number of words; raw: the sum of the words' AFINN valences (an "
        "integer, not normalisable outside 0..100); category: positive, negative or neutral "
        "(a string) by the two thresholds.",
    )
    positive_threshold: float = Field(
        0.2, allow_inf_nan=False, description="category: positive when comparative > this."
    )
    negative_threshold: float = Field(
        -0.2, allow_inf_nan=False, description="category: negative when comparative < this."
    )
    source: TextField = Field("response", description=f"The text analysed: {FIELD_HELP}.")
    pass_threshold: float | None = Field(
        None, ge=0, le=1, description=f"comparative_normalized only. {PASS_THRESHOLD_HELP}"
    )

    @model_validator(mode="after")
    def _thresholds(self) -> SentimentConfig:
        if self.negative_threshold >= self.positive_threshold:
            raise ValueError(
                f"negative_threshold ({self.negative_threshold}) must be less than "
                f"positive_threshold ({self.positive_threshold})"
            )
        if self.pass_threshold is not None and self.output != "comparative_normalized":
            raise ValueError(
                f"pass_threshold applies to output comparative_normalized only, not {self.output}"
            )
        return self


class SentimentEvaluator(OneCriterionEvaluator[SentimentConfig]):
    """AgentDock's Sentiment: AFINN-165 valences, as the npm `sentiment` package sums them."""

    type = "sentiment"
    Config = SentimentConfig

    def score(self, input: EvaluationInput, criterion: Criterion) -> EvaluationResult:
        config = self.settings
        text = field_text(input, config.source)
        if text is None:
            why = no_text(input, config.source)
            return self.failure(criterion, f"Evaluation failed: {why}.", why)
        if not text.strip(_JS_SPACE):
            analysis = Analysis(0, 0.0, [], [])
            reasoning = "Source text is empty. Sentiment is considered neutral or baseline."
            score, error = self._output(config, analysis, criterion)
        else:
            analysis = analyse(text)
            score, error = self._output(config, analysis, criterion)
            reasoning = (
                f"Sentiment analysis of '{config.source}'. Raw score: {analysis.score}, "
                f"Comparative: {analysis.comparative:.4f}. Output type: {config.output}"
            )
            if config.output == "raw":
                reasoning += "."
            elif config.output == "category":
                reasoning += (
                    f" -> {score}. (PosThreshold: {_js_number(config.positive_threshold)}, "
                    f"NegThreshold: {_js_number(config.negative_threshold)})."
                )
            else:
                reasoning += f" -> {_normalised(analysis):.4f}."
        return EvaluationResult(
            criterion.name,
            score,
            self.type,
            reasoning=reasoning,
            error=error or None,
            metadata={
                "raw_score": analysis.score,
                "comparative_score": analysis.comparative,
                "positive_words": analysis.positive,
                "negative_words": analysis.negative,
            },
        )

    def _output(
        self, config: SentimentConfig, analysis: Analysis, criterion: Criterion
    ) -> tuple[Score, str]:
        if config.output == "raw":
            return analysis.score, ""
        if config.output == "category":
            if analysis.comparative > config.positive_threshold:
                return "positive", ""
            if analysis.comparative < config.negative_threshold:
                return "negative", ""
            return "neutral", ""
        return fraction_score(_normalised(analysis), criterion.scale, config.pass_threshold)


def _normalised(analysis: Analysis) -> float:
    return max(0.0, min(1.0, (analysis.comparative + 5) / 10))
