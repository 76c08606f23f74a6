"""llmtt's statistics against independent computations (scipy, brute-force enumeration)."""

from __future__ import annotations

import itertools
import statistics

import pytest
from scipy import stats as scipy_stats

from llmtt.results.stats import mean_se, pass_at_k, pass_hat_k


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
