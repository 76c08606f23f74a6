"""Outcome rule and the optional composite score."""

from __future__ import annotations

from typing import Any

import pytest

from llmtt.evaluation.outcome import composite_score, decide
from llmtt.spec.evaluation import CompositeSpec


def gate(index: int, passed: bool) -> dict[str, Any]:
    return {"index": index, "type": "file_exists", "passed": passed, "message": f"m{index}"}


def test_pass_only_when_every_gate_passes() -> None:
    assert decide([gate(1, True), gate(2, True)], None) == ("pass", "all 2 gates passed")
    outcome, reason = decide([gate(1, True), gate(2, False), gate(3, False)], None)
    assert outcome == "fail"
    assert reason == "gate 2 (file_exists): m2; gate 3 (file_exists): m3"


def test_judge_enters_the_outcome() -> None:
    failed_judge = {"passed": False, "reason": "judge score 0.4 < 0.7"}
    assert decide([gate(1, True)], failed_judge) == ("fail", "judge score 0.4 < 0.7")
    assert decide([gate(1, True)], {"passed": True, "weighted_score": 0.9})[0] == "pass"


def test_no_gates_passes_but_says_so() -> None:
    assert decide([], None) == ("pass", "no gates defined (nothing was checked)")


def test_composite_only_when_defined_and_rescaled_over_present_parts() -> None:
    gates = [gate(1, True), gate(2, False)]
    assert composite_score(None, gates, None, 1.0) is None
    spec = CompositeSpec(gate_weight=0.5, judge_weight=0.3, interaction_weight=0.2)
    # judge absent: (0.5 * 0.5 + 0.2 * 1.0) / 0.7
    assert composite_score(spec, gates, None, 1.0) == pytest.approx(0.45 / 0.7, abs=1e-6)
    assert composite_score(spec, gates, 0.9, 0.5) == pytest.approx(0.25 + 0.27 + 0.1)


def untold(index: int) -> dict[str, Any]:
    return {"index": index, "type": "check", "passed": None, "message": f"m{index}"}


def test_a_gate_that_cannot_tell_is_neither_a_pass_nor_a_fail() -> None:
    assert decide([gate(1, True), untold(2)], None) == (
        "pass",
        "the 1 gate(s) that could tell passed; gate 2 (check) cannot tell: m2",
    )
    assert decide([gate(1, False), untold(2)], None) == (
        "fail",
        "gate 1 (file_exists): m1; gate 2 (check) cannot tell: m2",
    )
    assert decide([untold(1)], None) == (
        "pass",
        "no gate could tell; gate 1 (check) cannot tell: m1",
    )
    spec = CompositeSpec(gate_weight=1.0, judge_weight=0.0, interaction_weight=0.0)
    # The gate share is over the gates that could tell: 1 of 2, not 1 of 3.
    assert composite_score(spec, [gate(1, True), gate(2, False), untold(3)], None, None) == 0.5
    assert composite_score(spec, [untold(1)], None, None) is None  # nothing to score
