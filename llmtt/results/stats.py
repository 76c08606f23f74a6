"""Statistics that survive noise: means with standard errors, pass@k and pass^k over repeats,
and paired comparisons (bootstrap interval of the pass-rate difference, exact McNemar test)."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass


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


def mcnemar_exact(a_only: int, b_only: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pairs (binomial test at 1/2)."""
    n = a_only + b_only
    if n == 0:
        return 1.0
    low = min(a_only, b_only)
    tail: float = sum(math.comb(n, i) for i in range(low + 1)) / 2**n
    return min(1.0, 2 * tail)


@dataclass(frozen=True)
class Paired:
    """A paired comparison of B against A over the same scenarios and repeats."""

    pairs: int
    rate_a: float
    rate_b: float
    difference: float  # rate_b - rate_a
    low: float  # 95% bootstrap interval of the difference
    high: float
    a_only: int  # pairs where only A passed
    b_only: int
    p_value: float  # exact McNemar


def paired(
    outcomes: Sequence[tuple[bool, bool]], *, resamples: int = 2000, seed: int = 7
) -> Paired | None:
    """Compare paired outcomes (A passed, B passed); None without pairs.

    The interval is the percentile bootstrap over pairs, with a fixed seed so reports are
    reproducible.
    """
    n = len(outcomes)
    if n == 0:
        return None
    diffs = [int(b) - int(a) for a, b in outcomes]
    rng = random.Random(seed)
    means = sorted(sum(rng.choice(diffs) for _ in range(n)) / n for _ in range(resamples))
    low = means[int(0.025 * resamples)]
    high = means[min(resamples - 1, int(0.975 * resamples))]
    a_only = sum(1 for a, b in outcomes if a and not b)
    b_only = sum(1 for a, b in outcomes if b and not a)
    return Paired(
        pairs=n,
        rate_a=sum(a for a, _ in outcomes) / n,
        rate_b=sum(b for _, b in outcomes) / n,
        difference=sum(diffs) / n,
        low=low,
        high=high,
        a_only=a_only,
        b_only=b_only,
        p_value=mcnemar_exact(a_only, b_only),
    )


def wilson(passed: int, n: int, z: float = 1.96) -> tuple[float, float] | None:
    """Wilson score interval (95% by default) of a pass rate; None without runs."""
    if n == 0:
        return None
    p = passed / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)
