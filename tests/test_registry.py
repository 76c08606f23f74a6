"""The one registry: agents and evaluators by name, built-ins through the same entry points as a
third party's, a class accepted only as a plugin of the kind it says it is."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmtt import plugins, registry
from llmtt.agents.oracle import OracleAgent
from llmtt.errors import LlmttError
from llmtt.evaluation.evaluators.rule_based import RuleBasedEvaluator


def test_built_ins_come_through_the_entry_points() -> None:
    assert {"oracle", "claude-code", "opencode", "codex", "litellm"} <= set(registry.names("agent"))
    assert registry.load("agent", "oracle") is OracleAgent
    assert registry.load("evaluator", "rule_based") is RuleBasedEvaluator


def test_an_unknown_name_says_the_closest_and_the_known_ones() -> None:
    with pytest.raises(LlmttError, match=r"unknown agent 'oracel'; did you mean 'oracle'\?"):
        registry.load("agent", "oracel")
    said = registry.unknown("evaluator", "rule_basd", {"mine": "m:C"})
    assert "did you mean 'rule_based'?" in said and "mine" in said


def test_a_projects_own_evaluator_wins_and_must_be_an_evaluator(tmp_path: Path) -> None:
    (tmp_path / "own_evals_for_registry.py").write_text(
        "from llmtt.plugins import Evaluator\n"
        "class Mine(Evaluator):\n    type = 'rule_based'\n"
        "class NotOne:\n    plugin_kind = 'agent'\n"
    )
    own = {"rule_based": "own_evals_for_registry:Mine", "x": "own_evals_for_registry:NotOne"}
    mine = registry.load("evaluator", "rule_based", own, tmp_path)
    assert mine.__name__ == "Mine" and issubclass(mine, plugins.Evaluator)
    with pytest.raises(LlmttError, match="is not a subclass of .*Evaluator"):
        registry.load("evaluator", "x", own, tmp_path)  # an agent's kind is not an evaluator's


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("no_colon_here", "is not of the form module:Class"),
        ("no_such_module_anywhere:X", "cannot import 'no_such_module_anywhere': ModuleNotFound"),
        ("json:JSONDecoder", "is not a subclass of"),
    ],
)
def test_a_bad_target_is_said_plainly(target: str, message: str) -> None:
    with pytest.raises(LlmttError, match=message):
        registry.load("evaluator", "t", {"t": target})


def test_the_plugin_api_names_what_it_exports() -> None:
    for name in plugins.__all__:
        assert getattr(plugins, name) is not None
    assert issubclass(OracleAgent, plugins.Agent)
