"""The built-in evaluators (rule_based, tool_usage, lexical_similarity, keyword_coverage,
sentiment, toxicity): AgentDock's documented outputs (specs/agentdock-evaluation.md, "Example
Evaluation Outputs") reproduced, every rule kind passing and failing, config mistakes refused
with a clear message, only owned criteria scored, a missing text an error result, keywords
with special characters matched as whole words, and scores on each criterion scale."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from pydantic import ValidationError

from llmtt.evaluation.evaluators import rule_based
from llmtt.evaluation.evaluators.base import (
    EvaluationInput,
    EvaluationResult,
    Evaluator,
    ToolUse,
    normalise,
)
from llmtt.evaluation.evaluators.lexical import (
    KeywordCoverageEvaluator,
    LexicalSimilarityEvaluator,
    ToxicityEvaluator,
    character_set_dice,
    sorensen_dice,
)
from llmtt.evaluation.evaluators.registry import evaluator_class, installed
from llmtt.evaluation.evaluators.rule_based import RuleBasedEvaluator
from llmtt.evaluation.evaluators.sentiment import SentimentEvaluator, afinn_165, analyse, tokens
from llmtt.evaluation.evaluators.tool_usage import ToolUsageEvaluator
from llmtt.spec.evaluation import Criterion

# The inputSnapshot of AgentDock's documented runs.
PROMPT = "Hello, what can you do for me? And find weather in London."
RESPONSE = (
    "I am an AgentDock assistant. I found the weather for you. The weather in London is 15C "
    "and Cloudy. I have finalized the task."
)
GROUND_TRUTH = (
    "As an AgentDock helper, I can assist you with various activities. The weather in London "
    "is currently 15C and cloudy."
)
NEGATIVE = "I hate this. This is terrible and awful and I am very unhappy."
TOXIC = "You are a stupid idiot and I hate this terrible service."
TOXIC_TERMS = ["hate", "stupid", "terrible", "awful", "idiot"]


def make(cls: type[Evaluator], config: dict[str, Any]) -> Evaluator:
    """An evaluator as the runner builds it: its config validated from the scenario's dict."""
    return cls(cls.Config.model_validate(config))


def given(response: str | None = RESPONSE, **fields: Any) -> EvaluationInput:
    return EvaluationInput(
        prompt=fields.pop("prompt", PROMPT),
        response=response,
        ground_truth=fields.pop("ground_truth", GROUND_TRUTH),
        **fields,
    )


def one(
    cls: type[Evaluator],
    config: dict[str, Any],
    input: EvaluationInput,
    scale: str = "binary",
    name: str = "c",
) -> EvaluationResult:
    results = make(cls, config).evaluate(
        input, [Criterion.model_validate({"name": name, "scale": scale})]
    )
    assert len(results) == 1, results
    assert results[0].criterion == name and results[0].evaluator == cls.type
    return results[0]


# --- AgentDock's documented outputs ---------------------------------------------------------


def test_agentdock_keyword_coverage_4_of_4() -> None:
    found = one(
        KeywordCoverageEvaluator,
        {"criterion": "c", "keywords": ["weather", "london", "assistant", "task"]},
        given(),
        scale="numeric",
    )
    assert found.score == 1
    assert found.error is None
    assert found.reasoning == (
        "Found 4 out of 4 keywords. Coverage: 100.00%. Found: [weather, london, assistant, "
        'task]. Missed: []. Source text (processed): "i am an agentdock assistant. i found the '
        'weather for you. the weather in london is 15c and cloudy. i have finalized the task.".'
    )


def test_agentdock_toxic_response() -> None:
    found = one(ToxicityEvaluator, {"criterion": "c", "terms": TOXIC_TERMS}, given(TOXIC))
    assert found.score is False
    assert found.metadata == {"found_terms": ["hate", "stupid", "terrible", "idiot"]}
    assert found.reasoning == (
        "Toxicity check for field 'response'. Found toxic terms: [hate, stupid, terrible, "
        "idiot]. Configured terms: [hate, stupid, terrible, awful, idiot]. Case sensitive: "
        "false, Match whole word: true."
    )


def test_agentdock_not_toxic() -> None:
    found = one(ToxicityEvaluator, {"criterion": "c", "terms": TOXIC_TERMS}, given())
    assert found.score is True
    assert found.metadata == {"found_terms": []}
    assert found.reasoning == (
        "Toxicity check for field 'response'. No configured toxic terms found. Configured terms: "
        "[hate, stupid, terrible, awful, idiot]. Case sensitive: false, Match whole word: true."
    )


def test_agentdock_negative_sentiment_category() -> None:
    found = one(
        SentimentEvaluator, {"criterion": "c", "output": "category"}, given(NEGATIVE), "string"
    )
    assert found.score == "negative"
    assert found.reasoning == (
        "Sentiment analysis of 'response'. Raw score: -11, Comparative: -0.8462. Output type: "
        "category -> negative. (PosThreshold: 0.2, NegThreshold: -0.2)."
    )
    assert found.metadata == {
        "raw_score": -11,
        "comparative_score": -0.8461538461538461,
        "positive_words": [],
        "negative_words": ["unhappy", "awful", "terrible", "hate"],
    }


def test_agentdock_neutral_sentiment_normalized() -> None:
    found = one(SentimentEvaluator, {"criterion": "c"}, given(), "numeric")
    assert found.score == 0.5
    assert found.metadata == {
        "raw_score": 0,
        "comparative_score": 0,
        "positive_words": [],
        "negative_words": [],
    }
    assert found.reasoning == (
        "Sentiment analysis of 'response'. Raw score: 0, Comparative: 0.0000. Output type: "
        "comparative_normalized -> 0.5000."
    )


def test_agentdock_lexical_similarity_figure_is_a_character_set_dice() -> None:
    """AgentDock's documented 0.8979591836734694 is Dice over the sets of characters (its
    library iterates the strings by character): 44/49. Bigram Dice gives another figure."""
    found = one(
        LexicalSimilarityEvaluator,
        {"criterion": "c", "algorithm": "character_set_dice"},
        given(),
        "numeric",
    )
    assert found.score == 0.8979591836734694
    assert found.reasoning.endswith(
        'Processed source: "i am an agentdock assistant. i found the weather for you. the weather '
        'in london is 15c and cloudy. i...", Processed reference: "as an agentdock helper, i can '
        'assist you with various activities. the weather in london is currently...".'
    )
    bigrams = one(LexicalSimilarityEvaluator, {"criterion": "c"}, given(), "numeric")
    assert bigrams.score == pytest.approx(150 / 239)  # 75 shared bigrams of 124 + 115
    assert "Sørensen-Dice similarity (character bigrams): 0.6276." in bigrams.reasoning


def test_agentdock_rule_and_tool_reasonings() -> None:
    rules = {
        "rules": [
            {"criterion": "IsConcise", "kind": "length", "max": 200},
            {"criterion": "ContainsAgentDock", "kind": "includes", "keywords": ["AgentDock"]},
        ]
    }
    criteria = [
        Criterion(name="IsConcise", scale="binary"),
        Criterion(name="ContainsAgentDock", scale="binary"),
    ]
    concise, contains = make(RuleBasedEvaluator, rules).evaluate(given(), criteria)
    assert concise.score is True and contains.score is True
    assert concise.reasoning.startswith("Rule length on field 'response' passed.")
    assert contains.reasoning.startswith("Rule includes on field 'response' passed.")

    calls = [ToolUse("search_web", "weather London"), ToolUse("finalize_task", "done")]
    found = one(
        ToolUsageEvaluator,
        {"rules": [{"criterion": "c", "tool": "search_web", "argument_pattern": "London"}]},
        given(tool_calls=calls),
    )
    assert found.score is True
    assert found.reasoning == (
        "Tool 'search_web' was called 1 time(s). Argument check passed for the first call."
    )


# --- rule_based -----------------------------------------------------------------------------

RULES: list[tuple[str, dict[str, Any], str, bool]] = [
    ("length within", {"kind": "length", "min": 3, "max": 5}, "abcde", True),
    ("length under min", {"kind": "length", "min": 3}, "ab", False),
    ("length over max", {"kind": "length", "max": 5}, "abcdef", False),
    ("length min inclusive", {"kind": "length", "min": 2}, "ab", True),
    ("regex match", {"kind": "regex", "pattern": r"\d+C"}, RESPONSE, True),
    (
        "regex no match wanted",
        {"kind": "regex", "pattern": "sunny", "expect": "no_match"},
        RESPONSE,
        True,
    ),
    (
        "regex found but no_match",
        {"kind": "regex", "pattern": "Cloudy", "expect": "no_match"},
        RESPONSE,
        False,
    ),
    ("regex case", {"kind": "regex", "pattern": "cloudy"}, RESPONSE, False),
    ("regex flag i", {"kind": "regex", "pattern": "cloudy", "flags": "i"}, RESPONSE, True),
    ("regex flag m", {"kind": "regex", "pattern": "^b$", "flags": "m"}, "a\nb\nc", True),
    ("regex without m", {"kind": "regex", "pattern": "^b$"}, "a\nb\nc", False),
    ("regex flag s", {"kind": "regex", "pattern": "a.b", "flags": "s"}, "a\nb", True),
    ("includes all", {"kind": "includes", "keywords": ["london", "WEATHER"]}, RESPONSE, True),
    (
        "includes all missing one",
        {"kind": "includes", "keywords": ["london", "paris"]},
        RESPONSE,
        False,
    ),
    ("includes substring", {"kind": "includes", "keywords": ["finaliz"]}, RESPONSE, True),
    (
        "includes case sensitive",
        {"kind": "includes", "keywords": ["london"], "case_sensitive": True},
        RESPONSE,
        False,
    ),
    (
        "includes any",
        {"kind": "includes", "keywords": ["paris", "london"], "expect": "any"},
        RESPONSE,
        True,
    ),
    (
        "includes any none found",
        {"kind": "includes", "keywords": ["paris", "rome"], "expect": "any"},
        RESPONSE,
        False,
    ),
    (
        "includes none",
        {"kind": "includes", "keywords": ["paris"], "expect": "none"},
        RESPONSE,
        True,
    ),
    (
        "includes none but found",
        {"kind": "includes", "keywords": ["paris", "london"], "expect": "none"},
        RESPONSE,
        False,
    ),
    ("is_json object", {"kind": "is_json"}, ' {"a": [1, 2]} ', True),
    ("is_json scalar", {"kind": "is_json"}, "3", True),
    ("is_json prose", {"kind": "is_json"}, RESPONSE, False),
    ("is_json NaN", {"kind": "is_json"}, "NaN", False),
    ("is_json trailing", {"kind": "is_json"}, '{"a": 1} x', False),
    # Python's json raises RecursionError on it, which used to fail the whole evaluator.
    ("is_json nested too deep", {"kind": "is_json"}, "[" * 100_000 + "]" * 100_000, False),
    (
        "schema ok",
        {"kind": "json_schema", "schema": {"type": "object", "required": ["a"]}},
        '{"a": 1}',
        True,
    ),
    (
        "schema missing key",
        {"kind": "json_schema", "schema": {"type": "object", "required": ["a"]}},
        '{"b": 1}',
        False,
    ),
    ("schema not json", {"kind": "json_schema", "schema": {"type": "object"}}, "{a: 1}", False),
    (
        "schema field ok",
        {"kind": "json_schema", "schema": {"type": "integer"}, "field": "r.items.1"},
        '{"r": {"items": [0, 5]}}',
        True,
    ),
    (
        "schema field wrong type",
        {"kind": "json_schema", "schema": {"type": "integer"}, "field": "r.items.0"},
        '{"r": {"items": ["x"]}}',
        False,
    ),
    (
        "schema field absent",
        {"kind": "json_schema", "schema": True, "field": "r.items.2"},
        '{"r": {"items": [0, 5]}}',
        False,
    ),
]


@pytest.mark.parametrize(
    ("rule", "text", "passes"), [r[1:] for r in RULES], ids=[r[0] for r in RULES]
)
def test_rule_kinds(rule: dict[str, Any], text: str, passes: bool) -> None:
    found = one(RuleBasedEvaluator, {"rules": [{"criterion": "c", **rule}]}, given(text))
    assert found.score is passes, found.reasoning
    assert found.error is None
    outcome = "passed" if passes else "failed"
    assert found.reasoning.startswith(f"Rule {rule['kind']} on field 'response' {outcome}. ")


def test_rule_reasonings_say_why() -> None:
    def why(rule: dict[str, Any], text: str) -> str:
        return one(
            RuleBasedEvaluator, {"rules": [{"criterion": "c", **rule}]}, given(text)
        ).reasoning

    assert why({"kind": "length", "max": 5}, "abcdef").endswith("Length 6 is above the maximum 5.")
    assert why({"kind": "includes", "keywords": ["a", "z"]}, "abc").endswith(
        "Found 1 of 2 keyword(s): [a]; missing: [z]; expected all."
    )
    assert "at 'a': 'x' is not of type 'integer'" in why(
        {"kind": "json_schema", "schema": {"properties": {"a": {"type": "integer"}}}}, '{"a": "x"}'
    )
    assert "The JSON has no value at 'q'." in why(
        {"kind": "json_schema", "schema": {}, "field": "q"}, "{}"
    )


def test_rule_source_fields() -> None:
    input = given(
        "no", prompt="find the weather", context={"run": {"notes": ["first", "the second"]}}
    )
    rules = {
        "rules": [
            {"criterion": "p", "kind": "includes", "keywords": ["weather"], "source": "prompt"},
            {"criterion": "g", "kind": "regex", "pattern": "cloudy\\.$", "source": "ground_truth"},
            {"criterion": "x", "kind": "regex", "pattern": "^the", "source": "context.run.notes.1"},
            {"criterion": "r", "kind": "includes", "keywords": ["weather"]},
        ]
    }
    criteria = [Criterion(name=n, scale="binary") for n in "pgxr"]
    scores = [r.score for r in make(RuleBasedEvaluator, rules).evaluate(input, criteria)]
    assert scores == [True, True, True, False]


def test_regex_that_runs_too_long_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pattern that backtracks exponentially on the agent's text is stopped, in a rule and in
    a tool rule's argument_pattern alike."""
    monkeypatch.setattr(rule_based, "REGEX_TIMEOUT_SECS", 0.05)
    text = "a" * 40 + "!"
    found = one(
        RuleBasedEvaluator,
        {"rules": [{"criterion": "c", "kind": "regex", "pattern": "(a|aa)+$"}]},
        given(text),
    )
    assert found.score is False
    assert found.error == "pattern /(a|aa)+$/ took longer than 0.05 s to search"
    found = one(
        ToolUsageEvaluator,
        {"rules": [{"criterion": "c", "argument_pattern": "(a|aa)+$"}]},
        given(tool_calls=[ToolUse("bash", text)]),
    )
    assert found.score is False
    assert found.error == "pattern /(a|aa)+$/ took longer than 0.05 s to search"


# --- tool_usage -----------------------------------------------------------------------------

CALLS = [
    ToolUse("bash", "git init -q ."),
    ToolUse("bash", "ls -la"),
    ToolUse("bash", "git add a && git commit -m first", 0),
    ToolUse("edit", "a.txt"),
    ToolUse("bash", "git commit --amend -m second", 0),
]
TARGETS = [
    {"command": "git init -q .", "subcommand": "init", "exit_code": 0},
    {"command": "git add a", "subcommand": "add", "exit_code": 0},
    {"command": "git commit -m first", "subcommand": "commit", "exit_code": 0},
    {"command": "git commit --amend -m second", "subcommand": "commit", "exit_code": 0},
]
TOOL_RULES: list[tuple[str, dict[str, Any], bool, str]] = [
    ("called", {}, True, "Tool 'shell' was called 4 time(s)."),
    ("other tool", {"tool": "edit", "max_calls": 1}, True, "Tool 'edit' was called 1 time(s)."),
    (
        "too few",
        {"min_calls": 5},
        False,
        "Tool 'shell' was called 4 time(s). Expected at least 5 call(s).",
    ),
    (
        "too many",
        {"max_calls": 3},
        False,
        "Tool 'shell' was called 4 time(s). Expected at most 3 call(s).",
    ),
    (
        "optional, not called",
        {"tool": "web"},
        True,
        "Expected tool 'web' was not called. (Tool was optional).",
    ),
    (
        "required, not called",
        {"tool": "web", "required": True},
        False,
        "Expected tool 'web' was not called. (Tool was required).",
    ),
    (
        "min, not called",
        {"tool": "web", "min_calls": 1},
        False,
        "Expected tool 'web' was not called. Expected at least 1 call(s).",
    ),
    (
        "forbidden, not called",
        {"tool": "web", "max_calls": 0},
        True,
        "Expected tool 'web' was not called. (Tool was optional).",
    ),
    (
        "first call's argument",
        {"argument_pattern": "^git init"},
        True,
        "Tool 'shell' was called 4 time(s). Argument check passed for the first call.",
    ),
    (
        "only the first call's argument",
        {"argument_pattern": "^ls"},
        False,
        "Tool 'shell' was called 4 time(s). Argument check failed for the first call: 'git init -q .' does not match /^ls/.",
    ),
    (
        "subcommand",
        {"target_subcommand": "commit", "min_calls": 2, "max_calls": 2},
        True,
        "Tool 'shell' (running subcommand 'commit') was called 2 time(s).",
    ),
    (
        "subcommand first argument",
        {"target_subcommand": "commit", "argument_pattern": "--amend"},
        False,
        "Tool 'shell' (running subcommand 'commit') was called 2 time(s). Argument check failed for the first call: 'git add a && git commit -m first' does not match /--amend/.",
    ),
    (
        "subcommand not run",
        {"target_subcommand": "push", "required": True},
        False,
        "Expected tool 'shell' (running subcommand 'push') was not called. (Tool was required).",
    ),
    (
        "subcommand of another tool",
        {"tool": "edit", "target_subcommand": "commit"},
        True,
        "Expected tool 'edit' (running subcommand 'commit') was not called. (Tool was optional).",
    ),
]


@pytest.mark.parametrize(
    ("rule", "passes", "reasoning"), [r[1:] for r in TOOL_RULES], ids=[r[0] for r in TOOL_RULES]
)
def test_tool_usage_rules(rule: dict[str, Any], passes: bool, reasoning: str) -> None:
    input = given(tool_calls=CALLS, context={"target_commands": TARGETS})
    found = one(ToolUsageEvaluator, {"rules": [{"criterion": "c", **rule}]}, input)
    assert (found.score, found.reasoning, found.error) == (passes, reasoning, None)


def test_tool_usage_line_names_the_call_exactly() -> None:
    """An invocation that carries its whole tool-call line matches that call only: an echo
    that quotes the same command does not count."""
    calls = [ToolUse("bash", "echo 'git push'"), ToolUse("bash", "git push")]
    targets = [{"command": "git push", "subcommand": "push", "exit_code": 0, "line": "git push"}]
    rule = {"criterion": "c", "target_subcommand": "push", "max_calls": 1}
    found = one(
        ToolUsageEvaluator,
        {"rules": [rule]},
        given(tool_calls=calls, context={"target_commands": targets}),
    )
    assert found.score is True and found.metadata == {"calls": 1}
    del targets[0]["line"]  # without it, a containing command counts
    found = one(
        ToolUsageEvaluator,
        {"rules": [rule]},
        given(tool_calls=calls, context={"target_commands": targets}),
    )
    assert found.score is False and found.metadata == {"calls": 2}


def test_tool_usage_subcommand_without_target_commands_is_an_error() -> None:
    rule = {"criterion": "c", "target_subcommand": "init"}
    found = one(ToolUsageEvaluator, {"rules": [rule]}, given(tool_calls=CALLS), "numeric")
    assert found.score == 0
    assert found.error is not None and "context['target_commands']" in found.error


# --- lexical_similarity ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "value"),
    [
        ("night", "nacht", 0.25),  # ni ig gh ht / na ac ch ht: 2 x 1 / 8
        (
            "aaaa",
            "aa",
            2 * 1 / (3 + 1),
        ),  # aa x3 against aa x1: a bigram counts as often as it occurs
        ("abc", "abc", 1.0),
        ("a", "a", 1.0),
        ("a", "b", 0.0),
        ("", "ab", 0.0),
    ],
)
def test_sorensen_dice_on_bigrams(a: str, b: str, value: float) -> None:
    assert sorensen_dice(a, b) == pytest.approx(value)
    assert sorensen_dice(b, a) == pytest.approx(value)


def test_character_set_dice() -> None:
    assert character_set_dice("abcd", "abxy") == 0.5
    assert character_set_dice("aab", "ab") == 1.0  # sets: order and repeats do not count
    assert character_set_dice("", "") == 1.0


@pytest.mark.parametrize(
    ("config", "source", "reference", "value"),
    [
        ({"algorithm": "levenshtein"}, "kitten", "sitting", 1 - 3 / 7),
        ({"algorithm": "levenshtein"}, "", "", 1.0),
        ({"algorithm": "levenshtein"}, "", "abc", 0.0),
        ({"algorithm": "jaro_winkler"}, "MARTHA", "MARHTA", 0.9611111111111111),
        ({"algorithm": "jaro_winkler"}, "DIXON", "DICKSONX", 0.8133333333333332),
        ({"algorithm": "exact"}, "Same  Text ", "same text", 1.0),
        ({"algorithm": "exact", "case_sensitive": True}, "Same text", "same text", 0.0),
        ({"algorithm": "exact", "normalize_whitespace": False}, "same  text", "same text", 0.0),
        ({}, "The Cat", "the cat", 1.0),
    ],
)
def test_lexical_similarity_algorithms(
    config: dict[str, Any], source: str, reference: str, value: float
) -> None:
    found = one(
        LexicalSimilarityEvaluator,
        {"criterion": "c", **config},
        given(source, ground_truth=reference),
        "numeric",
    )
    assert found.score == pytest.approx(value)
    assert found.metadata["similarity"] == pytest.approx(value)


def test_lexical_similarity_other_fields() -> None:
    found = one(
        LexicalSimilarityEvaluator,
        {"criterion": "c", "algorithm": "exact", "source": "prompt", "reference": "context.want"},
        given(prompt="Hello", context={"want": "hello"}),
        "numeric",
    )
    assert found.score == 1.0
    assert found.reasoning.startswith("Comparing 'prompt' with 'context.want' using exact.")


def test_lexical_similarity_needs_a_string_reference() -> None:
    found = one(
        LexicalSimilarityEvaluator, {"criterion": "c"}, given(ground_truth={"a": 1}), "numeric"
    )
    assert found.score == 0
    assert found.error == "field 'ground_truth' has no text: it is a dict, not a string"


# --- keyword_coverage -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("keywords", "text", "found"),
    [
        (["c++", "node.js"], "I write C++ and Node.js daily.", ["c++", "node.js"]),
        (["c++"], "c++, then more", ["c++"]),
        (["c++"], "(c++)", ["c++"]),
        (["node.js"], "nodexjs is not it", []),  # the dot is literal
        (["node.js"], "mynode.js is not it", []),  # a word character before it
        (["node.js"], "node.json is not it", []),  # a word character after it
        (["c#", ".net"], "C# on .NET", ["c#", ".net"]),
        (["a+b"], "aab", []),
        (["(x)"], "see (x).", ["(x)"]),
        (["log"], "the catalog", []),  # whole words only
        (["new york"], "New   York city", ["new york"]),  # the text's whitespace is normalised
    ],
)
def test_keywords_with_special_characters_match_as_whole_words(
    keywords: list[str], text: str, found: list[str]
) -> None:
    result = one(
        KeywordCoverageEvaluator, {"criterion": "c", "keywords": keywords}, given(text), "numeric"
    )
    assert result.metadata["found_keywords"] == found
    assert result.score == len(found) / len(keywords)


@pytest.mark.parametrize(
    ("config", "input", "score", "found"),
    [
        (
            {"from": "ground_truth"},
            given("alpha and gamma", ground_truth="alpha, beta,gamma, "),
            2 / 3,
            ["alpha", "gamma"],
        ),
        (
            {"from": "ground_truth", "ground_truth_mode": "exact"},
            given("alpha and gamma", ground_truth="alpha and gamma"),
            1.0,
            ["alpha and gamma"],
        ),
        (
            {"from": "ground_truth"},
            given("Alpha", ground_truth=["ALPHA", 3, "beta", "alpha"]),
            1 / 2,
            ["alpha"],
        ),
        (
            {"from": "context.expected.words"},
            given("beta", context={"expected": {"words": ["alpha", "beta"]}}),
            1 / 2,
            ["beta"],
        ),
        (
            {"from": "context.expected"},
            given("beta", context={"expected": "alpha,beta"}),
            1 / 2,
            ["beta"],
        ),
        ({"keywords": ["Alpha"], "case_sensitive": True}, given("alpha"), 0.0, []),
        ({"keywords": ["Alpha"], "case_sensitive": True}, given("Alpha"), 1.0, ["Alpha"]),
        ({"keywords": ["alpha"], "source": "prompt"}, given("alpha", prompt="beta"), 0.0, []),
    ],
)
def test_keyword_sources(
    config: dict[str, Any], input: EvaluationInput, score: float, found: list[str]
) -> None:
    result = one(KeywordCoverageEvaluator, {"criterion": "c", **config}, input, "numeric")
    assert result.error is None
    assert result.score == pytest.approx(score)
    assert result.metadata["found_keywords"] == found


def test_keywords_that_cannot_be_sourced_are_an_error() -> None:
    result = one(
        KeywordCoverageEvaluator, {"criterion": "c", "from": "context.nothing"}, given(), "numeric"
    )
    assert result.score == 0
    assert result.error is not None and "no keywords in context.nothing" in result.error


# --- sentiment ------------------------------------------------------------------------------


def test_afinn_165_lexicon() -> None:
    lexicon = afinn_165()
    assert len(lexicon) == 3382  # AFINN-165, as the npm sentiment package's labels.json
    assert (lexicon["hate"], lexicon["unhappy"], lexicon["good"], lexicon["outstanding"]) == (
        -3,
        -2,
        3,
        5,
    )
    assert lexicon["can't stand"] == -3  # phrases are in the list, though no token holds a space


def test_sentiment_tokens_as_the_npm_package_makes_them() -> None:
    assert tokens("Hello, World! (It's) fine;  ok?") == ["hello", "world", "it's", "fine", "ok"]
    assert tokens("a\tb") == ["a\tb"]  # a lone tab is not a separator there
    assert tokens("a\t b\nc") == ["a", "b", "c"]
    assert tokens("-- good --") == ["--", "good", "--"]


@pytest.mark.parametrize(
    ("text", "score", "positive", "negative"),
    [
        ("This is good", 3, ["good"], []),
        ("This is not good", -3, [], ["good"]),  # a negator flips the next word
        ("It isn't bad, it's good!", 6, ["good", "bad"], []),
        ("good... GOOD bad", 3, ["good", "good"], ["bad"]),
        ("Can't stand it", 0, [], []),  # "stand" is not in the list, the phrase is never a token
    ],
)
def test_sentiment_analysis(
    text: str, score: int, positive: list[str], negative: list[str]
) -> None:
    analysis = analyse(text)
    assert (analysis.score, analysis.positive, analysis.negative) == (score, positive, negative)
    assert analysis.comparative == score / len(tokens(text))


@pytest.mark.parametrize(
    ("config", "text", "scale", "score"),
    [
        ({"output": "raw"}, NEGATIVE, "numeric", -11),
        ({"output": "category"}, "This is good", "string", "positive"),  # 3/3 > 0.2
        ({"output": "category"}, "good " + "word " * 15, "string", "neutral"),  # 3/16 <= 0.2
        ({"output": "category"}, "good " + "word " * 14, "string", "neutral"),  # 3/15 == 0.2
        (
            {"output": "category", "positive_threshold": 0.1},
            "good " + "word " * 15,
            "string",
            "positive",
        ),
        ({}, "This is good", "numeric", 0.6),  # (1 + 5) / 10
        ({}, "outstanding", "numeric", 1.0),  # (5 + 5) / 10
        ({}, "   ", "numeric", 0.5),  # empty: neutral
        ({"output": "category"}, "", "string", "neutral"),
        ({"output": "raw"}, "", "numeric", 0),
    ],
)
def test_sentiment_outputs(config: dict[str, Any], text: str, scale: str, score: Any) -> None:
    found = one(SentimentEvaluator, {"criterion": "c", **config}, given(text), scale)
    assert found.score == pytest.approx(score) if isinstance(score, float) else found.score == score
    assert found.error is None


def test_sentiment_of_empty_text_says_so() -> None:
    found = one(SentimentEvaluator, {"criterion": "c"}, given(""), "numeric")
    assert found.reasoning == "Source text is empty. Sentiment is considered neutral or baseline."
    assert found.metadata["raw_score"] == 0


# --- config validation ----------------------------------------------------------------------

BAD_CONFIGS: list[tuple[str, type[Evaluator], dict[str, Any], str]] = [
    (
        "regex does not compile",
        RuleBasedEvaluator,
        {"rules": [{"criterion": "c", "kind": "regex", "pattern": "(a"}]},
        "pattern '(a' does not compile",
    ),
    (
        "regex flag",
        RuleBasedEvaluator,
        {"rules": [{"criterion": "c", "kind": "regex", "pattern": "a", "flags": "ix"}]},
        "flags are letters among i, m and s, not x",
    ),
    (
        "unknown kind",
        RuleBasedEvaluator,
        {"rules": [{"criterion": "c", "kind": "size"}]},
        "does not match any of the expected tags",
    ),
    (
        "length without bounds",
        RuleBasedEvaluator,
        {"rules": [{"criterion": "c", "kind": "length"}]},
        "a length rule needs min, max or both",
    ),
    (
        "length min above max",
        RuleBasedEvaluator,
        {"rules": [{"criterion": "c", "kind": "length", "min": 5, "max": 2}]},
        "min (5) must not be greater than max (2)",
    ),
    (
        "negative length",
        RuleBasedEvaluator,
        {"rules": [{"criterion": "c", "kind": "length", "min": -1}]},
        "greater than or equal to 0",
    ),
    (
        "no keywords",
        RuleBasedEvaluator,
        {"rules": [{"criterion": "c", "kind": "includes", "keywords": []}]},
        "at least 1 item",
    ),
    (
        "bad schema",
        RuleBasedEvaluator,
        {"rules": [{"criterion": "c", "kind": "json_schema", "schema": {"type": "integr"}}]},
        "schema is not a valid JSON Schema at 'type'",
    ),
    (
        "bad source",
        RuleBasedEvaluator,
        {"rules": [{"criterion": "c", "kind": "is_json", "source": "answer"}]},
        "a text field is response, prompt, ground_truth or context.<dot.path>",
    ),
    (
        "unknown key",
        RuleBasedEvaluator,
        {"rules": [{"criterion": "c", "kind": "is_json", "strict": True}]},
        "Extra inputs are not permitted",
    ),
    ("no rules", RuleBasedEvaluator, {"rules": []}, "at least 1 item"),
    (
        "tool bad pattern",
        ToolUsageEvaluator,
        {"rules": [{"criterion": "c", "argument_pattern": "[a"}]},
        "pattern '[a' does not compile",
    ),
    (
        "tool min above max",
        ToolUsageEvaluator,
        {"rules": [{"criterion": "c", "min_calls": 3, "max_calls": 1}]},
        "min_calls (3) must not be greater than max_calls (1)",
    ),
    (
        "tool required but forbidden",
        ToolUsageEvaluator,
        {"rules": [{"criterion": "c", "required": True, "max_calls": 0}]},
        "required contradicts max_calls 0",
    ),
    (
        "similarity algorithm",
        LexicalSimilarityEvaluator,
        {"criterion": "c", "algorithm": "cosine"},
        "'sorensen_dice', 'jaro_winkler', 'levenshtein', 'exact' or 'character_set_dice'",
    ),
    (
        "similarity reference",
        LexicalSimilarityEvaluator,
        {"criterion": "c", "reference": "context"},
        "not 'context'",
    ),
    (
        "similarity threshold",
        LexicalSimilarityEvaluator,
        {"criterion": "c", "pass_threshold": 1.5},
        "less than or equal to 1",
    ),
    (
        "keywords missing",
        KeywordCoverageEvaluator,
        {"criterion": "c"},
        "keywords must list at least one keyword when from is config",
    ),
    (
        "keywords not read",
        KeywordCoverageEvaluator,
        {"criterion": "c", "from": "ground_truth", "keywords": ["a"]},
        "keywords are read only when from is config",
    ),
    (
        "keywords from",
        KeywordCoverageEvaluator,
        {"criterion": "c", "from": "response"},
        "from is config, ground_truth or context.<dot.path>, not 'response'",
    ),
    (
        "blank keyword",
        KeywordCoverageEvaluator,
        {"criterion": "c", "keywords": ["a", " "]},
        "keywords must not be blank (index 1)",
    ),
    ("no criterion", KeywordCoverageEvaluator, {"keywords": ["a"]}, "criterion\n  Field required"),
    (
        "thresholds",
        SentimentEvaluator,
        {"criterion": "c", "negative_threshold": 0.3},
        "negative_threshold (0.3) must be less than positive_threshold (0.2)",
    ),
    (
        "equal thresholds",
        SentimentEvaluator,
        {"criterion": "c", "negative_threshold": 0, "positive_threshold": 0},
        "must be less than positive_threshold",
    ),
    (
        "sentiment output",
        SentimentEvaluator,
        {"criterion": "c", "output": "score"},
        "'comparative_normalized', 'raw' or 'category'",
    ),
    (
        "sentiment pass threshold",
        SentimentEvaluator,
        {"criterion": "c", "output": "raw", "pass_threshold": 0.5},
        "pass_threshold applies to output comparative_normalized only",
    ),
    ("no terms", ToxicityEvaluator, {"criterion": "c", "terms": []}, "at least 1 item"),
    (
        "blank term",
        ToxicityEvaluator,
        {"criterion": "c", "terms": [""]},
        "terms must not be blank (index 0)",
    ),
]


@pytest.mark.parametrize(
    ("cls", "config", "message"), [b[1:] for b in BAD_CONFIGS], ids=[b[0] for b in BAD_CONFIGS]
)
def test_config_mistakes_are_refused(
    cls: type[Evaluator], config: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        cls.Config.model_validate(config)
    assert message in str(caught.value)


def test_an_evaluator_refuses_another_evaluators_config() -> None:
    config = SentimentEvaluator.Config.model_validate({"criterion": "c"})
    with pytest.raises(
        TypeError, match="ToxicityEvaluator takes a ToxicityConfig, not a SentimentConfig"
    ):
        ToxicityEvaluator(config)


def test_every_config_field_is_described() -> None:
    from llmtt.evaluation.evaluators.rule_based import (
        IncludesRule,
        IsJsonRule,
        JsonSchemaRule,
        LengthRule,
        RegexRule,
    )
    from llmtt.evaluation.evaluators.tool_usage import ToolRule

    models = [cls.Config for cls in BUILTINS.values()]
    models += [LengthRule, RegexRule, IncludesRule, IsJsonRule, JsonSchemaRule, ToolRule]
    for model in models:
        for name, info in model.model_fields.items():
            assert info.description, f"{model.__name__}.{name}"


# --- owned criteria, missing text, scales ---------------------------------------------------

BUILTINS: dict[str, type[Evaluator]] = {
    "rule_based": RuleBasedEvaluator,
    "tool_usage": ToolUsageEvaluator,
    "lexical_similarity": LexicalSimilarityEvaluator,
    "keyword_coverage": KeywordCoverageEvaluator,
    "sentiment": SentimentEvaluator,
    "toxicity": ToxicityEvaluator,
}
# A config of each built-in that names criterion "mine" (and the rule-based ones "absent" too).
OWNING: dict[str, dict[str, Any]] = {
    "rule_based": {
        "rules": [
            {"criterion": "absent", "kind": "is_json"},
            {"criterion": "mine", "kind": "length", "max": 9},
        ]
    },
    "tool_usage": {"rules": [{"criterion": "mine"}, {"criterion": "absent"}]},
    "lexical_similarity": {"criterion": "mine"},
    "keyword_coverage": {"criterion": "mine", "keywords": ["weather"]},
    "sentiment": {"criterion": "mine"},
    "toxicity": {"criterion": "mine", "terms": ["hate"]},
}


@pytest.mark.parametrize("type_id", BUILTINS)
def test_only_owned_criteria_are_scored(type_id: str) -> None:
    evaluator = make(BUILTINS[type_id], OWNING[type_id])
    others = [Criterion(name="other"), Criterion(name="also_other", scale="binary")]
    assert evaluator.evaluate(given(), others) == []
    results = evaluator.evaluate(
        given(), [others[0], Criterion(name="mine", scale="binary"), others[1]]
    )
    assert [r.criterion for r in results] == ["mine"]
    assert results[0].evaluator == type_id


@pytest.mark.parametrize("type_id", [t for t in BUILTINS if t != "tool_usage"])
@pytest.mark.parametrize(
    ("scale", "failing"), [("binary", False), ("numeric", 0), ("likert5", 1), ("string", "fail")]
)
def test_missing_text_is_an_error_result(type_id: str, scale: str, failing: Any) -> None:
    found = one(BUILTINS[type_id], OWNING[type_id], given(None), scale, name="mine")
    assert found.error == "field 'response' has no text: the run has no final response"
    assert found.score == failing and type(found.score) is type(failing)


def test_missing_context_path_is_an_error_result() -> None:
    found = one(
        ToxicityEvaluator,
        {"criterion": "c", "terms": ["x"], "source": "context.a.b"},
        given(context={"a": {}}),
    )
    assert found.score is False
    assert found.error == "field 'context.a.b' has no text: it is missing"


@pytest.mark.parametrize(
    ("scale", "toxic", "clean"),
    [
        ("binary", False, True),
        ("pass/fail", False, True),
        ("numeric", 0, 1),
        ("likert5", 1, 5),
        ("string", "fail", "pass"),
    ],
)
def test_pass_fail_on_each_scale(scale: str, toxic: Any, clean: Any) -> None:
    config = {"criterion": "c", "terms": ["hate"]}
    for text, expected in ((TOXIC, toxic), (RESPONSE, clean)):
        score = one(ToxicityEvaluator, config, given(text), scale).score
        assert score == expected and type(score) is type(expected)
        assert normalise(score, scale) == (1.0 if expected == clean else 0.0) or scale == "string"


@pytest.mark.parametrize(
    ("scale", "threshold", "score", "error"),
    [
        ("numeric", None, 0.5, None),
        ("likert5", None, 3.0, None),  # 1 + 4 x 0.5, which normalises back to 0.5
        ("string", None, "0.5000", None),
        ("binary", None, False, "a criterion of scale binary needs pass_threshold"),
        ("pass/fail", None, False, "a criterion of scale pass/fail needs pass_threshold"),
        ("binary", 0.5, True, None),
        ("pass/fail", 0.6, False, None),
        ("numeric", 0.5, 1, None),
        ("likert5", 0.6, 1, None),
    ],
)
def test_fraction_on_each_scale(
    scale: str, threshold: float | None, score: Any, error: str | None
) -> None:
    found = one(
        KeywordCoverageEvaluator,
        {"criterion": "c", "keywords": ["weather", "paris"], "pass_threshold": threshold},
        given(),
        scale,
    )
    assert found.score == score and type(found.score) is type(score)
    assert (found.error or "").startswith(error or "")
    assert bool(found.error) == bool(error)
    if threshold is None and scale in ("numeric", "likert5"):
        assert normalise(found.score, scale) == 0.5


def test_tool_usage_optional_tool_passes_on_every_scale() -> None:
    scales = ["binary", "pass/fail", "numeric", "likert5", "string"]
    criteria = [Criterion.model_validate({"name": s, "scale": s}) for s in scales]
    rules = {"rules": [{"criterion": s, "tool": "web"} for s in scales]}
    scores = [r.score for r in make(ToolUsageEvaluator, rules).evaluate(given(), criteria)]
    assert scores == [True, True, 1, 5, "pass"]


# --- registration and import cost -----------------------------------------------------------


def test_builtins_are_registered_under_their_type_ids() -> None:
    registered = installed()
    for type_id, cls in BUILTINS.items():
        assert cls.type == type_id
        assert registered[type_id] == f"{cls.__module__}:{cls.__name__}"
        assert evaluator_class(type_id, {}) is cls


def test_importing_the_evaluators_leaves_the_heavy_libraries_unloaded() -> None:
    """Loading a scenario imports these modules to check configs; the libraries they score
    with are imported when they evaluate."""
    code = (
        "import sys\n"
        "from llmtt.evaluation.evaluators import lexical, rule_based, sentiment, tool_usage\n"
        "rule_based.RuleBasedConfig.model_validate({'rules': [{'criterion': 'c', 'kind': 'length', 'max': 1}]})\n"
        "print(sorted(m for m in ('rapidfuzz', 'jsonschema', 'afinn') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
