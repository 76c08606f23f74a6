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


def test_tier_n_is_the_seeds_n_and_below_and_a_range_selects_exactly() -> None:
    """The seed's `--tier N` runs tiers 0 to N (0 = smoke, 1 = smoke + quick, ...); `A-B` keeps
    a selection of exact tiers possible (`tier=1-1`: tier 1 alone)."""
    smoke = Selection.from_variables({"tier": "0"})
    assert [smoke.tier_selected(t) for t in (0, 1)] == [True, False]
    quick = Selection.from_variables({"tier": "1"})
    assert [quick.tier_selected(t) for t in (0, 1, 2)] == [True, True, False]
    exact = Selection.from_variables({"tier": "1-1,3-4"})
    assert [exact.tier_selected(t) for t in range(6)] == [False, True, False, True, True, False]
    assert exact.describe() == "tier=1-1,3-4" and quick.describe() == "tier=1"
    assert Selection().tier_selected(7)
    for bad in ("one", "2-1", "-1", "1-"):
        with pytest.raises(LlmttError, match="tier= takes a whole number N"):
            Selection.from_variables({"tier": bad})
