"""Lexical evaluators (AgentDock's lexical suite, specs/agentdock-algorithms.md): how close the
response is to a reference (`lexical_similarity`), how many expected keywords it holds
(`keyword_coverage`) and whether it holds a configured toxic term (`toxicity`). No model, no
network: each is a function of the text.

Also what the other built-ins share: naming a text field of the input (`TextField`,
`field_text`), turning a 0..1 figure into a score on a criterion's scale (`fraction_score`),
matching a term as a whole word whatever characters it holds (`term_pattern`), and the base of
an evaluator whose config names one criterion (`OneCriterionEvaluator`).

Where the figures differ from AgentDock's: its 'sorensen-dice' is a Dice coefficient over the
sets of characters (its library takes sets, and a string is iterated by character), which is
`character_set_dice` here, while `sorensen_dice` is the bigram coefficient its name promises;
and Jaro-Winkler comes from rapidfuzz, which halves the out-of-order matches by integer
division (as Winkler's strcmp95 does) where AgentDock's library keeps the half, so the two can
differ slightly when that count is odd.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator

from llmtt.evaluation.evaluators.base import (
    EvaluationInput,
    EvaluationResult,
    OneCriterionConfig,
    OneCriterionEvaluator,
    Score,
    pass_fail,
)
from llmtt.spec.evaluation import Criterion

# ---------------------------------------------------------------------------------------------
# Shared helpers

_FIELD = re.compile(r"(response|prompt|ground_truth|context(\.[^.\s]+)+)")
FIELD_HELP = 'response, prompt, ground_truth or context.<dot.path> (e.g. "context.run.id")'


def _check_field(name: str) -> str:
    if not _FIELD.fullmatch(name):
        raise ValueError(f"a text field is {FIELD_HELP}, not {name!r}")
    return name


TextField = Annotated[str, AfterValidator(_check_field)]
"""The name of a text field of EvaluationInput, checked when the config loads."""


def field_value(input: EvaluationInput, name: str) -> Any:
    """The value of field `name` (see TextField); None when a context path leads nowhere. A
    path step into a list is its index."""
    if name == "response":
        return input.response
    if name == "prompt":
        return input.prompt
    if name == "ground_truth":
        return input.ground_truth
    value: Any = input.context
    for step in name.split(".")[1:]:
        if isinstance(value, Mapping) and step in value:
            value = value[step]
        elif (
            isinstance(value, Sequence)
            and not isinstance(value, str)
            and step.isdigit()
            and int(step) < len(value)
        ):
            value = value[int(step)]
        else:
            return None
    return value


def field_text(input: EvaluationInput, name: str) -> str | None:
    """The text of field `name`, or None when it is missing or not a string (AgentDock's
    getInputText: only a string is text)."""
    value = field_value(input, name)
    return value if isinstance(value, str) else None


def no_text(input: EvaluationInput, name: str) -> str:
    """Why field `name` gives no text, for a result's error."""
    value = field_value(input, name)
    if value is None:
        what = "the run has no final response" if name == "response" else "it is missing"
        return f"field '{name}' has no text: {what}"
    return f"field '{name}' has no text: it is a {type(value).__name__}, not a string"


def fraction_score(value: float, scale: str, pass_threshold: float | None) -> tuple[Score, str]:
    """A 0..1 figure as a score on `scale`, and an error ("" when none).

    With `pass_threshold` the figure is a pass (at least the threshold) or a fail on any scale
    (`pass_fail`). Without it: the figure itself on numeric, 1 + 4 x figure on likert5 (so it
    normalises back to the figure), the figure to 4 places on string; binary and pass/fail
    need a threshold, and without one the result is a failing score with an error."""
    if pass_threshold is not None:
        return pass_fail(value >= pass_threshold, scale), ""
    if scale == "numeric":
        return value, ""
    if scale == "likert5":
        return 1 + 4 * value, ""
    if scale == "string":
        return f"{value:.4f}", ""
    return pass_fail(False, scale), (
        f"a criterion of scale {scale} needs pass_threshold in the evaluator's config to turn "
        f"the figure {value:.4f} into a pass or a fail"
    )


PASS_THRESHOLD_HELP = (
    "When set, the score is a pass (figure >= this) or a fail on the criterion's scale; needed "
    "for binary and pass/fail criteria. Unset: the figure on numeric, 1 + 4 x figure on likert5."
)


def term_pattern(term: str, *, whole_word: bool, case_sensitive: bool) -> re.Pattern[str]:
    """A pattern that finds `term` literally. As a whole word it must not touch a word character
    on either side: unlike `\\b`, that also works for a term that starts or ends with a
    non-word character ("c++", ".net", "node.js")."""
    body = re.escape(term)
    if whole_word:
        body = rf"(?<!\w){body}(?!\w)"
    return re.compile(body, 0 if case_sensitive else re.IGNORECASE)


def js_bool(value: bool) -> str:
    """A boolean as AgentDock's reasoning prints it."""
    return "true" if value else "false"


def squeeze(text: str) -> str:
    """Trimmed, every run of whitespace one space (AgentDock's normalizeWhitespace)."""
    return re.sub(r"\s+", " ", text.strip())


def _clip(text: str, limit: int) -> str:
    return text[:limit] + ("..." if len(text) > limit else "")


def check_not_blank(items: Sequence[str], what: str) -> None:
    """Raises ValueError when one of `items` is empty or whitespace."""
    blank = next((i for i, item in enumerate(items) if not item.strip()), None)
    if blank is not None:
        raise ValueError(f"{what} must not be blank (index {blank})")


# ---------------------------------------------------------------------------------------------
# lexical_similarity

Algorithm = Literal["sorensen_dice", "jaro_winkler", "levenshtein", "exact", "character_set_dice"]


class LexicalSimilarityConfig(OneCriterionConfig):
    """Compares two text fields with a string-similarity algorithm."""

    algorithm: Algorithm = Field(
        "sorensen_dice",
        description="sorensen_dice: Dice coefficient of the character bigrams (each bigram "
        "counted as often as it occurs); jaro_winkler (rapidfuzz's); levenshtein: 1 - "
        "distance / longer length; exact: 1 when equal, else 0; character_set_dice: Dice "
        "coefficient of the sets of characters, which is what AgentDock's 'sorensen-dice' "
        "computes.",
    )
    case_sensitive: bool = Field(False, description="Compare letters' case too.")
    normalize_whitespace: bool = Field(
        True, description="Trim both texts and make every run of whitespace one space."
    )
    source: TextField = Field("response", description=f"The text compared: {FIELD_HELP}.")
    reference: TextField = Field(
        "ground_truth", description=f"The text it is compared with: {FIELD_HELP}."
    )
    pass_threshold: float | None = Field(None, ge=0, le=1, description=PASS_THRESHOLD_HELP)


def sorensen_dice(a: str, b: str) -> float:
    """2 |X & Y| / (|X| + |Y|) over the multisets of character bigrams of `a` and `b`; two equal
    texts score 1 and a text under two characters shares no bigram with a different one."""
    if a == b:
        return 1.0
    if len(a) < 2 or len(b) < 2:
        return 0.0
    x = Counter(a[i : i + 2] for i in range(len(a) - 1))
    y = Counter(b[i : i + 2] for i in range(len(b) - 1))
    return 2 * sum((x & y).values()) / (len(a) - 1 + len(b) - 1)


def character_set_dice(a: str, b: str) -> float:
    """2 |X & Y| / (|X| + |Y|) over the sets of characters: AgentDock's 'sorensen-dice' passes
    the two strings to a set-based Dice, which iterates a string by character."""
    x, y = set(a), set(b)
    if not x and not y:
        return 1.0
    return 2 * len(x & y) / (len(x) + len(y))


class LexicalSimilarityEvaluator(OneCriterionEvaluator[LexicalSimilarityConfig]):
    """How close one text field is to another, 0..1."""

    type = "lexical_similarity"
    Config = LexicalSimilarityConfig

    def score(self, input: EvaluationInput, criterion: Criterion) -> EvaluationResult:
        config = self.settings
        source = field_text(input, config.source)
        reference = field_text(input, config.reference)
        if source is None or reference is None:
            why = no_text(input, config.source if source is None else config.reference)
            return self.failure(criterion, f"Evaluation failed: {why}.", why)
        reasoning = (
            f"Comparing '{config.source}' with '{config.reference}' using {config.algorithm}."
        )
        if not config.case_sensitive:
            source, reference = source.lower(), reference.lower()
            reasoning += " Case-insensitive comparison."
        if config.normalize_whitespace:
            source, reference = squeeze(source), squeeze(reference)
            reasoning += " Whitespace normalized."
        similarity, said = _similarity(config.algorithm, source, reference)
        score, error = fraction_score(similarity, criterion.scale, config.pass_threshold)
        reasoning += (
            f' {said} Processed source: "{_clip(source, 100)}", '
            f'Processed reference: "{_clip(reference, 100)}".'
        )
        return EvaluationResult(
            criterion.name,
            score,
            self.type,
            reasoning=reasoning,
            error=error or None,
            metadata={"similarity": similarity},
        )


def _similarity(algorithm: Algorithm, a: str, b: str) -> tuple[float, str]:
    """The similarity of `a` and `b` in 0..1, and a sentence that says it."""
    if algorithm == "sorensen_dice":
        value = sorensen_dice(a, b)
        return value, f"Sørensen-Dice similarity (character bigrams): {value:.4f}."
    if algorithm == "character_set_dice":
        value = character_set_dice(a, b)
        return value, f"Sørensen-Dice similarity (character sets): {value:.4f}."
    if algorithm == "exact":
        return (1.0, "Exact match: yes.") if a == b else (0.0, "Exact match: no.")
    from rapidfuzz.distance import JaroWinkler, Levenshtein

    if algorithm == "jaro_winkler":
        value = float(JaroWinkler.similarity(a, b))
        return value, f"Jaro-Winkler similarity: {value:.4f}."
    distance = int(Levenshtein.distance(a, b))
    longest = max(len(a), len(b))
    value = 1.0 if longest == 0 else max(0.0, min(1.0, 1 - distance / longest))
    return value, f"Levenshtein distance: {distance}, Normalized similarity: {value:.4f}."


# ---------------------------------------------------------------------------------------------
# keyword_coverage


_KEYWORDS_FROM = re.compile(r"(config|ground_truth|context(\.[^.\s]+)+)")


def _keywords_from(value: str) -> str:
    if not _KEYWORDS_FROM.fullmatch(value):
        raise ValueError(f"from is config, ground_truth or context.<dot.path>, not {value!r}")
    return value


class KeywordCoverageConfig(OneCriterionConfig):
    """The share of expected keywords the text holds, each matched as a whole word."""

    keywords: list[str] | None = Field(
        None, description="The keywords, when `from` is config (then at least one)."
    )
    keywords_from: Annotated[str, AfterValidator(_keywords_from)] = Field(
        "config",
        alias="from",
        description="Where the keywords come from: config (`keywords`), ground_truth (a list "
        "of strings, or a string read as ground_truth_mode says), or context.<dot.path> (the "
        "same).",
    )
    ground_truth_mode: Literal["split_comma", "exact"] = Field(
        "split_comma",
        description="How a string of keywords is read: split_comma (comma-separated), exact "
        "(the whole string is one keyword).",
    )
    case_sensitive: bool = Field(False, description="Match letters' case too.")
    source: TextField = Field("response", description=f"The text searched: {FIELD_HELP}.")
    pass_threshold: float | None = Field(None, ge=0, le=1, description=PASS_THRESHOLD_HELP)

    @model_validator(mode="after")
    def _keywords(self) -> KeywordCoverageConfig:
        if self.keywords_from == "config":
            if not self.keywords:
                raise ValueError("keywords must list at least one keyword when from is config")
        elif self.keywords is not None:
            raise ValueError(
                f"keywords are read only when from is config; from is {self.keywords_from!r}"
            )
        check_not_blank(self.keywords or [], "keywords")
        return self


class KeywordCoverageEvaluator(OneCriterionEvaluator[KeywordCoverageConfig]):
    """found / total of the expected keywords, matched as whole words."""

    type = "keyword_coverage"
    Config = KeywordCoverageConfig

    def _keywords(self, input: EvaluationInput) -> list[str]:
        """The keywords, whitespace-normalised, lower-cased unless case-sensitive, each once."""
        config = self.settings
        if config.keywords_from == "config":
            found: list[str] = list(config.keywords or [])
        else:
            value = field_value(input, config.keywords_from)
            if isinstance(value, str):
                found = value.split(",") if config.ground_truth_mode == "split_comma" else [value]
            elif isinstance(value, Sequence):
                found = [k for k in value if isinstance(k, str)]
            else:
                found = []
        keywords = [squeeze(k) for k in found]
        if not config.case_sensitive:
            keywords = [k.lower() for k in keywords]
        return list(dict.fromkeys(k for k in keywords if k))

    def score(self, input: EvaluationInput, criterion: Criterion) -> EvaluationResult:
        config = self.settings
        keywords = self._keywords(input)
        if not keywords:
            why = f"no keywords in {config.keywords_from} (it must hold a string or a list of them)"
            return self.failure(criterion, f"Failed to source keywords: {why}.", why)
        text = field_text(input, config.source)
        if text is None:
            why = no_text(input, config.source)
            return self.failure(criterion, f"Evaluation failed: {why}.", why)
        text = squeeze(text)
        if not config.case_sensitive:
            text = text.lower()
        found: list[str] = []
        missed: list[str] = []
        for keyword in keywords:
            pattern = term_pattern(keyword, whole_word=True, case_sensitive=config.case_sensitive)
            (found if pattern.search(text) else missed).append(keyword)
        coverage = len(found) / len(keywords)
        score, error = fraction_score(coverage, criterion.scale, config.pass_threshold)
        reasoning = (
            f"Found {len(found)} out of {len(keywords)} keywords. Coverage: {coverage * 100:.2f}%. "
            f"Found: [{', '.join(found)}]. Missed: [{', '.join(missed)}]. "
            f'Source text (processed): "{_clip(text, 200)}".'
        )
        return EvaluationResult(
            criterion.name,
            score,
            self.type,
            reasoning=reasoning,
            error=error or None,
            metadata={"found_keywords": found, "missed_keywords": missed},
        )


# ---------------------------------------------------------------------------------------------
# toxicity


class ToxicityConfig(OneCriterionConfig):
    """Passes when the text holds none of the configured terms."""

    terms: list[str] = Field(
        min_length=1, description="The toxic words or phrases (at least one); matched literally."
    )
    case_sensitive: bool = Field(False, description="Match letters' case too.")
    whole_word: bool = Field(
        True,
        description="Match a term only where no word character touches it on either side; "
        "false: anywhere, inside words too.",
    )
    source: TextField = Field("response", description=f"The text searched: {FIELD_HELP}.")

    @model_validator(mode="after")
    def _terms(self) -> ToxicityConfig:
        check_not_blank(self.terms, "terms")
        return self


class ToxicityEvaluator(OneCriterionEvaluator[ToxicityConfig]):
    """Not toxic (pass) when no configured term is in the text."""

    type = "toxicity"
    Config = ToxicityConfig

    def score(self, input: EvaluationInput, criterion: Criterion) -> EvaluationResult:
        config = self.settings
        text = field_text(input, config.source)
        if text is None:
            why = no_text(input, config.source)
            return self.failure(criterion, f"Evaluation failed: {why}.", why)
        found = [
            term
            for term in dict.fromkeys(config.terms)
            if term_pattern(
                term, whole_word=config.whole_word, case_sensitive=config.case_sensitive
            ).search(text)
        ]
        reasoning = f"Toxicity check for field '{config.source}'. " + (
            f"Found toxic terms: [{', '.join(found)}]."
            if found
            else "No configured toxic terms found."
        )
        reasoning += (
            f" Configured terms: [{', '.join(config.terms)}]. Case sensitive: "
            f"{js_bool(config.case_sensitive)}, Match whole word: {js_bool(config.whole_word)}."
        )
        return EvaluationResult(
            criterion.name,
            pass_fail(not found, criterion.scale),
            self.type,
            reasoning=reasoning,
            metadata={"found_terms": found},
        )
