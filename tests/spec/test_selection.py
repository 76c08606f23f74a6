"""doit's variables as a selection: repeats=auto, and the rounds a session sets."""

from __future__ import annotations

import dataclasses

import pytest

from llmtt.errors import LlmttError
from llmtt.spec.selection import Selection


def test_repeats_auto_is_adaptive_and_says_so() -> None:
    auto = Selection.from_variables({"repeats": "auto", "scenario": "a"})
    assert auto.adaptive and auto.repeats is None
    assert auto.describe() == "scenario=a repeats=auto"
    assert auto.rounds is None and auto.repeats_of("a") is None  # no round known yet
    round_two = dataclasses.replace(auto, rounds=(("a", 10),))
    assert round_two.repeats_of("a") == 10 and round_two.repeats_of("b") is None
    fixed = Selection.from_variables({"repeats": "3"})
    assert (fixed.adaptive, fixed.repeats, fixed.describe()) == (False, 3, "repeats=3")


@pytest.mark.parametrize("value", ["0", "many", "Auto ", "-2"])
def test_other_repeats_are_refused_naming_what_is_expected(value: str) -> None:
    with pytest.raises(LlmttError, match=r"repeats= a whole number >= 1 or auto"):
        Selection.from_variables({"repeats": value})
