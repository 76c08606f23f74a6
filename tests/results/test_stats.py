"""llmtt's statistics against independent computations (scipy, brute-force enumeration)."""

from __future__ import annotations

import itertools
import math
import statistics

import numpy as np
import pytest
from scipy import stats as scipy_stats

from llmtt.results.stats import mcnemar_exact, mean_se, paired, pass_at_k, pass_hat_k


def test_mean_and_standard_error_match_scipy() -> None:
    values = [0.2, 0.5, 0.9, 0.4, 0.7]
    mean, se = mean_se(values)
    assert mean == pytest.approx(statistics.mean(values))
    assert se == pytest.approx(scipy_stats.sem(values))
    assert mean_se([1.0]) == (1.0, None) and mean_se([]) == (None, None)


@pytest.mark.parametrize(
    ("n", "c", "k"), [(5, 2, 1), (5, 2, 2), (5, 2, 3), (5, 0, 2), (5, 5, 5), (10, 3, 4), (3, 1, 3)]
)
def test_pass_at_k_and_pass_hat_k_match_enumeration(n: int, c: int, k: int) -> None:
    outcomes = [True] * c + [False] * (n - c)
    draws = list(itertools.combinations(range(n), k))
    at_least_one = sum(any(outcomes[i] for i in d) for d in draws) / len(draws)
    all_pass = sum(all(outcomes[i] for i in d) for d in draws) / len(draws)
    assert pass_at_k(n, c, k) == pytest.approx(at_least_one)
    assert pass_hat_k(n, c, k) == pytest.approx(all_pass)
    assert pass_at_k(n, c, n + 1) is None


@pytest.mark.parametrize(("b", "c"), [(0, 0), (3, 0), (5, 2), (2, 9), (10, 10), (1, 14)])
def test_exact_mcnemar_matches_scipy_binomial_test(b: int, c: int) -> None:
    expected = 1.0 if b + c == 0 else scipy_stats.binomtest(b, b + c, 0.5).pvalue
    assert mcnemar_exact(b, c) == pytest.approx(expected)


def test_paired_comparison_counts_and_interval() -> None:
    # 20 pairs: B passes 15, A passes 9; 8 pairs only B, 2 only A.
    outcomes = [(True, True)] * 7 + [(False, True)] * 8 + [(True, False)] * 2 + [(False, False)] * 3
    result = paired(outcomes)
    assert result is not None
    assert (result.pairs, result.a_only, result.b_only) == (20, 2, 8)
    assert result.rate_a == 0.45 and result.rate_b == 0.75
    assert result.difference == pytest.approx(0.3)
    assert result.low <= 0.3 <= result.high  # (p = 0.11: the interval reaches 0)
    assert result.p_value == pytest.approx(scipy_stats.binomtest(2, 10, 0.5).pvalue)
    # the percentile bootstrap agrees with an independent one (numpy), within resampling noise
    rng = np.random.default_rng(1)
    diffs = np.array([float(b) - float(a) for a, b in outcomes])
    means = rng.choice(diffs, size=(4000, len(diffs)), replace=True).mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    assert math.isclose(result.low, low, abs_tol=0.06) and math.isclose(
        result.high, high, abs_tol=0.06
    )
    assert paired([]) is None
