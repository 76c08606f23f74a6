"""The `rule_based` evaluator (AgentDock's RuleBased): deterministic checks of a text field,
one rule per result: its length, a regular expression, substrings, whether it is JSON, and
whether that JSON matches a JSON Schema. A rule passes or fails; the score is that outcome on
the criterion's scale (`pass_fail`).

A regex is searched with the `regex` module and a time limit, so a pattern that backtracks
without end on an agent's text gives an error result instead of hanging the evaluation.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal, TypeVar

from pydantic import Field, field_validator, model_validator

from llmtt.evaluation.evaluators.base import (
    EvaluationInput,
    EvaluationResult,
    Evaluator,
    EvaluatorConfig,
    pass_fail,
)
from llmtt.evaluation.evaluators.lexical import FIELD_HELP, TextField, field_text, no_text
from llmtt.spec.evaluation import Criterion

REGEX_TIMEOUT_SECS = 1.0  # one search of one rule's pattern in one text


def regex_flags(letters: str) -> int:
    """The `regex` module's flags for letters of i (ignore case), m (multiline: ^ and $ at each
    line), s (dot matches a newline)."""
    import regex

    by_letter = {"i": regex.IGNORECASE, "m": regex.MULTILINE, "s": regex.DOTALL}
    flags = 0
    for letter in letters:
        flags |= by_letter[letter]
    return flags


def check_pattern(pattern: str, flags: str = "") -> None:
    """Raises ValueError saying why `pattern` does not compile."""
    import regex

    try:
        regex.compile(pattern, regex_flags(flags))
    except regex.error as exc:
        raise ValueError(f"pattern {pattern!r} does not compile: {exc}") from None


def search(pattern: str, flags: str, text: str) -> bool | str:
    """Whether `pattern` occurs in `text`, or (a string) why that could not be told."""
    import regex

    try:
        found = regex.search(pattern, text, regex_flags(flags), timeout=REGEX_TIMEOUT_SECS)
    except TimeoutError:
        return f"pattern /{pattern}/ took longer than {REGEX_TIMEOUT_SECS:g} s to search"
    return found is not None


class CriterionRule(EvaluatorConfig):
    """A rule that scores one criterion."""

    criterion: str = Field(min_length=1, description="The criterion this rule scores.")


RuleT = TypeVar("RuleT", bound=CriterionRule)


def score_by_rule(
    rules: Sequence[RuleT],
    criteria: Sequence[Criterion],
    score: Callable[[RuleT, Criterion], EvaluationResult],
) -> list[EvaluationResult]:
    """A result per rule whose criterion is among `criteria`, in the rules' order (AgentDock's:
    a rule of a criterion not given is skipped; two rules of one criterion give two results)."""
    by_name = {c.name: c for c in criteria}
    return [score(rule, by_name[rule.criterion]) for rule in rules if rule.criterion in by_name]


class _Rule(CriterionRule):
    source: TextField = Field("response", description=f"The text checked: {FIELD_HELP}.")


class LengthRule(_Rule):
    """Passes when the text's length (in characters) is within min..max, both inclusive."""

    kind: Literal["length"] = Field(description="length")
    min: int | None = Field(None, ge=0, description="The least length that passes.")
    max: int | None = Field(None, ge=0, description="The greatest length that passes.")

    @model_validator(mode="after")
    def _bounds(self) -> LengthRule:
        if self.min is None and self.max is None:
            raise ValueError("a length rule needs min, max or both")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min ({self.min}) must not be greater than max ({self.max})")
        return self


class RegexRule(_Rule):
    """Passes when the pattern is found in the text (expect match) or is not (no_match)."""

    kind: Literal["regex"] = Field(description="regex")
    pattern: str = Field(
        min_length=1, description="A regular expression (Python syntax), searched anywhere."
    )
    flags: str = Field(
        "", description="Letters: i (ignore case), m (^ and $ at each line), s (. matches \\n)."
    )
    expect: Literal["match", "no_match"] = Field(
        "match", description="match: passes when found; no_match: passes when not found."
    )

    @field_validator("flags")
    @classmethod
    def _flags(cls, flags: str) -> str:
        unknown = sorted(set(flags) - set("ims"))
        if unknown:
            raise ValueError(f"flags are letters among i, m and s, not {', '.join(unknown)}")
        return flags

    @model_validator(mode="after")
    def _compiles(self) -> RegexRule:
        check_pattern(self.pattern, self.flags)
        return self


class IncludesRule(_Rule):
    """Checks which of the keywords occur in the text as substrings (not whole words)."""

    kind: Literal["includes"] = Field(description="includes")
    keywords: list[Annotated[str, Field(min_length=1)]] = Field(
        min_length=1, description="The substrings looked for (at least one)."
    )
    case_sensitive: bool = Field(False, description="Match letters' case too.")
    expect: Literal["all", "any", "none"] = Field(
        "all", description="Passes when all, any (at least one) or none of them occur."
    )


class IsJsonRule(_Rule):
    """Passes when the whole text is one JSON value (strict: no NaN or Infinity)."""

    kind: Literal["is_json"] = Field(description="is_json")


class JsonSchemaRule(_Rule):
    """Passes when the text is JSON and it (or the value at `field` in it) matches `schema`."""

    kind: Literal["json_schema"] = Field(description="json_schema")
    schema_: dict[str, Any] | bool = Field(
        alias="schema", description="A JSON Schema (its $schema picks the draft; default 2020-12)."
    )
    field: str | None = Field(
        None,
        min_length=1,
        description="A dot path inside the parsed JSON to validate instead of the whole "
        "(object keys; a list's index as a number), e.g. result.items.0.",
    )

    @model_validator(mode="after")
    def _schema(self) -> JsonSchemaRule:
        from jsonschema.exceptions import SchemaError
        from jsonschema.validators import validator_for

        try:
            validator_for(self.schema_).check_schema(self.schema_)
        except SchemaError as exc:
            where = "/".join(str(p) for p in exc.absolute_path)
            at = f" at {where!r}" if where else ""
            raise ValueError(f"schema is not a valid JSON Schema{at}: {exc.message}") from None
        return self


Rule = Annotated[
    LengthRule | RegexRule | IncludesRule | IsJsonRule | JsonSchemaRule,
    Field(discriminator="kind"),
]


class RuleBasedConfig(EvaluatorConfig):
    """Rules, each scoring one criterion (several rules may score the same one: a result each)."""

    rules: list[Rule] = Field(
        min_length=1,
        description="Each {criterion, kind: length|regex|includes|is_json|json_schema, source?, "
        "...the kind's settings}.",
    )


class RuleBasedEvaluator(Evaluator):
    """Deterministic pass/fail rules on text fields."""

    type = "rule_based"
    Config = RuleBasedConfig

    def evaluate(
        self, input: EvaluationInput, criteria: Sequence[Criterion]
    ) -> list[EvaluationResult]:
        config = self.config
        assert isinstance(config, RuleBasedConfig)
        return score_by_rule(config.rules, criteria, lambda rule, c: self._score(rule, input, c))

    def _score(self, rule: Rule, input: EvaluationInput, criterion: Criterion) -> EvaluationResult:
        said = f"Rule {rule.kind} on field '{rule.source}'"
        text = field_text(input, rule.source)
        if text is None:
            why = no_text(input, rule.source)
            passed, detail, error = False, f"Cannot evaluate: {why}.", why
        else:
            passed, detail, error = _check(rule, text)
        return EvaluationResult(
            criterion.name,
            pass_fail(passed, criterion.scale),
            self.type,
            reasoning=f"{said} {'passed' if passed else 'failed'}. {detail}",
            error=error or None,
        )


def _check(rule: Rule, text: str) -> tuple[bool, str, str]:
    """Whether `rule` passes on `text`, a sentence saying why, and an error ("" when none)."""
    if isinstance(rule, LengthRule):
        return _length(rule, len(text))
    if isinstance(rule, RegexRule):
        found = search(rule.pattern, rule.flags, text)
        if isinstance(found, str):
            return False, f"Cannot evaluate: {found}.", found
        shown = f"/{rule.pattern}/{rule.flags}"
        expected = "a match" if rule.expect == "match" else "no match"
        passed = found == (rule.expect == "match")
        outcome = "matched" if found else "did not match"
        return passed, f"Pattern {shown} {outcome}; expected {expected}.", ""
    if isinstance(rule, IncludesRule):
        return _includes(rule, text)
    parsed = _parse_json(text)
    if isinstance(rule, IsJsonRule):
        if isinstance(parsed, _NotJson):
            return False, f"The text is not JSON: {parsed.why}.", ""
        return True, f"The text parses as JSON (a {_json_type(parsed)}).", ""
    return _json_schema(rule, parsed)


def _length(rule: LengthRule, length: int) -> tuple[bool, str, str]:
    if rule.min is not None and length < rule.min:
        return False, f"Length {length} is below the minimum {rule.min}.", ""
    if rule.max is not None and length > rule.max:
        return False, f"Length {length} is above the maximum {rule.max}.", ""
    low = "" if rule.min is None else f"min {rule.min}"
    high = "" if rule.max is None else f"max {rule.max}"
    return True, f"Length {length} is within {', '.join(b for b in (low, high) if b)}.", ""


def _includes(rule: IncludesRule, text: str) -> tuple[bool, str, str]:
    haystack = text if rule.case_sensitive else text.lower()
    found = [k for k in rule.keywords if (k if rule.case_sensitive else k.lower()) in haystack]
    missing = [k for k in rule.keywords if k not in found]
    if rule.expect == "all":
        passed = not missing
    elif rule.expect == "any":
        passed = bool(found)
    else:
        passed = not found
    detail = (
        f"Found {len(found)} of {len(rule.keywords)} keyword(s): [{', '.join(found)}]; "
        f"missing: [{', '.join(missing)}]; expected {rule.expect}."
    )
    return passed, detail, ""


class _NotJson:
    def __init__(self, why: str) -> None:
        self.why = why


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _parse_json(text: str) -> Any:
    """The JSON value of `text`, or a _NotJson saying why there is none (NaN and Infinity,
    which Python's json would take, are not JSON)."""
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except ValueError as exc:
        return _NotJson(str(exc))
    except RecursionError:
        return _NotJson("nested too deep to read")


def _json_type(value: Any) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return "number"


def _at_path(value: Any, path: str) -> tuple[bool, Any]:
    """(True, the value at dot path `path` in `value`) or (False, None) when it leads nowhere."""
    for step in path.split("."):
        if isinstance(value, Mapping) and step in value:
            value = value[step]
        elif isinstance(value, list) and step.isdigit() and int(step) < len(value):
            value = value[int(step)]
        else:
            return False, None
    return True, value


def _json_schema(rule: JsonSchemaRule, parsed: Any) -> tuple[bool, str, str]:
    if isinstance(parsed, _NotJson):
        return False, f"The text is not JSON: {parsed.why}.", ""
    where = "The JSON"
    if rule.field is not None:
        found, parsed = _at_path(parsed, rule.field)
        if not found:
            return False, f"The JSON has no value at '{rule.field}'.", ""
        where = f"The JSON at '{rule.field}'"
    from jsonschema.exceptions import best_match
    from jsonschema.validators import validator_for

    validator = validator_for(rule.schema_)(rule.schema_)
    error = best_match(validator.iter_errors(parsed))
    if error is None:
        return True, f"{where} matches the schema.", ""
    path = "/".join(str(p) for p in error.absolute_path)
    at = f" at '{path}'" if path else ""
    return False, f"{where} does not match the schema{at}: {error.message}.", ""
