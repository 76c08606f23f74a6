"""Statistics of repeats: means with standard errors, pass@k and pass^k, the Wilson interval of
a pass rate. (Paired comparisons: `llmtt.results.inference`.)"""

from __future__ import annotations

import math
from collections.abc import Sequence


def mean_se(values: Sequence[float]) -> tuple[float | None, float | None]:
    """Mean and standard error of the mean (sample standard deviation / sqrt(n))."""
    if not values:
        return None, None
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, None
    variance = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, math.sqrt(variance / n)


def pass_at_k(n: int, c: int, k: int) -> float | None:
    """Chance that at least one of k runs drawn from n (c of which passed) passes.

    The unbiased estimator 1 - C(n-c, k) / C(n, k); None when k > n.
    """
    if k > n or k < 1:
        return None
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float | None:
    """pass^k: chance that all k runs drawn from n (c of which passed) pass: C(c, k) / C(n, k)."""
    if k > n or k < 1:
        return None
    return math.comb(c, k) / math.comb(n, k)


def wilson(passed: int, n: int, z: float = 1.96) -> tuple[float, float] | None:
    """Wilson score interval (95% by default) of a pass rate; None without runs."""
    if n == 0:
        return None
    p = passed / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)
