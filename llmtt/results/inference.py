"""Paired inference that stays honest at small n: the interval and verdict of variant B (the
treatment) against variant A (the baseline), the level that keeps a report's verdicts right
together and under repeated looks, and how many pairs would decide a comparison.

Methods, and what each assumes:

- Pass rates (`rate_difference`). A and B's runs pair by scenario, agent, model and repeat; the
  pairs are taken as independent draws from one distribution over four cells (both pass, only B
  passes: a gain, only A passes: a loss, neither). The interval of d = rate_b - rate_a is
  Tango's (1998) score interval: every d in [-1, 1] whose score statistic, with the unknown
  discordance at its maximum-likelihood value given d, lies within the normal quantile. Unlike a
  Wald or bootstrap interval it has width when no pair is discordant and never leaves [-1, 1].
  Its coverage is asymptotic; tests/results/test_inference.py measures it exactly by
  enumeration for n from 3 to 40. The p-value is McNemar's score test, the same statistic at
  d = 0, so p < 1 - level exactly when 0 is outside the interval. Like that test it is liberal
  when only a few pairs are discordant and nearly all are (4 of 4 one way gives Z = 2, a
  false direction with chance 2/16): the tests pin where, and how far.
- Metric means (`mean_difference`): the paired t interval of the mean of b - a, assuming the
  differences are near normal or many enough for their mean to be; none below MIN_METRIC_PAIRS.
- Verdicts (`verdict`) are read from an interval alone: better (all above 0), worse (all below
  0), no_difference (all inside +-min_effect) or cant_tell. A verdict can be wrong only when its
  interval misses the true difference, so intervals that cover together bound every error,
  no_difference included.
- The family and the looks (`interval_level`): every interval of a report is built at
  1 - alpha / (comparisons * looks). Over the comparisons this is Bonferroni, which gives
  simultaneous intervals; Holm's step-down is uniformly more powerful as a set of tests but
  yields no intervals, and no_difference needs one. Over the planned looks of an adaptive
  session it is a union bound spending alpha equally on each look: it holds whatever the
  looks' timing, their correlation and the stopping rule, at the price of being conservative.
- Planning (`pairs_to_decide`, `planned_pairs`): the score test's normal-approximation sample
  size (the variance Tango's statistic assumes at the interval's end, the true variance
  discordance - d^2 for the estimate), never below the fewest pairs with which Tango's
  interval could decide at all. Estimates, not guarantees: the tests hold them to the exact
  pairs needed, found by enumeration.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

ALPHA = 0.05  # family-wise error of a report's verdicts
DEFAULT_MIN_EFFECT = 0.1  # the smallest pass-rate difference that matters (10 points)
MIN_METRIC_PAIRS = 5  # below this a metric difference gets no interval ("too few pairs")

Verdict = Literal["better", "worse", "no_difference", "cant_tell"]

# Acklam's rational approximation of the normal quantile (relative error below 1.2e-9): the
# central region's numerator and denominator in (p - 1/2)^2, the tail's in sqrt(-2 log p).
_CENTRAL_NUMERATOR = (
    -3.969683028665376e01,
    2.209460984245205e02,
    -2.759285104469687e02,
    1.383577518672690e02,
    -3.066479806614716e01,
    2.506628277459239e00,
)
_CENTRAL_DENOMINATOR = (
    -5.447609879822406e01,
    1.615858368580409e02,
    -1.556989798598866e02,
    6.680131188771972e01,
    -1.328068155288572e01,
    1.0,
)
_TAIL_NUMERATOR = (
    -7.784894002430293e-03,
    -3.223964580411365e-01,
    -2.400758277161838e00,
    -2.549732539343734e00,
    4.374664141464968e00,
    2.938163982698783e00,
)
_TAIL_DENOMINATOR = (
    7.784695709041462e-03,
    3.224671290700398e-01,
    2.445134137142996e00,
    3.754408661907416e00,
    1.0,
)
_TAIL_BELOW = 0.02425
_ENDPOINT_TOLERANCE = 1e-10  # how closely the ends of Tango's interval are found


def _polynomial(coefficients: Sequence[float], x: float) -> float:
    value = 0.0
    for c in coefficients:
        value = value * x + c
    return value


def _check_probability(p: float, what: str) -> None:
    if not 0.0 < p < 1.0:
        raise ValueError(f"{what} must be strictly between 0 and 1, got {p}")


def normal_quantile(p: float) -> float:
    """The standard normal quantile of p in (0, 1): Acklam's approximation refined by one
    Halley step on math.erfc, accurate to about 1e-15 relative."""
    _check_probability(p, "normal_quantile's p")
    if p > 0.5:
        return -normal_quantile(1.0 - p)  # 1 - p is exact for p >= 1/2
    if p < _TAIL_BELOW:
        r = math.sqrt(-2.0 * math.log(p))
        x = _polynomial(_TAIL_NUMERATOR, r) / _polynomial(_TAIL_DENOMINATOR, r)
    else:
        r = p - 0.5
        x = r * _polynomial(_CENTRAL_NUMERATOR, r * r) / _polynomial(_CENTRAL_DENOMINATOR, r * r)
    density = math.exp(-x * x / 2.0) / math.sqrt(2.0 * math.pi)
    if density == 0.0:  # p below ~1e-300: the approximation alone is all there is
        return x
    u = (0.5 * math.erfc(-x / math.sqrt(2.0)) - p) / density
    return x - u / (1.0 + x * u / 2.0)


def _beta_ratio(x: float, y: float, a: float, b: float) -> float:
    """The regularised incomplete beta I_x(a, b), with y = 1 - x given by the caller so neither
    loses digits: the continued fraction (DLMF 8.17.22) by the modified Lentz method, on the
    side of the symmetry I_x(a, b) = 1 - I_y(b, a) where it converges fast."""
    if x <= 0.0:
        return 0.0
    if y <= 0.0:
        return 1.0
    if x > (a + 1.0) / (a + b + 2.0):
        return 1.0 - _beta_ratio(y, x, b, a)
    log_front = a * math.log(x) + b * math.log(y) - math.log(a)
    log_front -= math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
    tiny = 1e-300
    # f = 1 + d1 / (1 + d2 / (1 + ...)), evaluated from the front
    f = c = 1.0
    d = 0.0
    for m in range(1, 20_000):
        k = m // 2
        if m % 2:
            term = -(a + k) * (a + b + k) * x / ((a + 2 * k) * (a + 2 * k + 1))
        else:
            term = k * (b - k) * x / ((a + 2 * k - 1) * (a + 2 * k))
        d = 1.0 + term * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + term / c
        c = c if abs(c) > tiny else tiny
        f *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return math.exp(log_front) / f


def _t_lower_tail(t: float, df: int) -> float:
    """P(T <= -t) for t >= 0: half of I_{df/(df+t^2)}(df/2, 1/2)."""
    return 0.5 * _beta_ratio(df / (df + t * t), t * t / (df + t * t), df / 2.0, 0.5)


def _t_log_density_scale(df: int) -> float:
    return math.lgamma((df + 1) / 2.0) - math.lgamma(df / 2.0) - 0.5 * math.log(df * math.pi)


def _cornish_fisher(z: float, df: int) -> float:
    """The t quantile's expansion in 1/df about the normal quantile z (Abramowitz and Stegun
    26.7.5): Newton's start, within about 1% for df >= 3 away from the far tails."""
    z2 = z * z
    terms = (
        z * (z2 + 1.0) / 4.0,
        z * ((5.0 * z2 + 16.0) * z2 + 3.0) / 96.0,
        z * (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) / 384.0,
    )
    return z + sum(term / float(df) ** power for power, term in enumerate(terms, start=1))


def t_quantile(p: float, df: int) -> float:
    """Student's t quantile of p in (0, 1) with df >= 1 degrees of freedom: exact forms for 1
    and 2, otherwise Newton's method on the t tail from the Cornish-Fisher expansion, kept
    inside a shrinking bracket. Relative error below 1e-12 up to df = 1000 and 2e-9 up to
    df = 10^6, where lgamma's large values cost digits."""
    _check_probability(p, "t_quantile's p")
    if df < 1:
        raise ValueError(f"t_quantile needs df >= 1, got {df}")
    if p > 0.5:
        return -t_quantile(1.0 - p, df)
    if p == 0.5:
        return 0.0
    if df == 1:
        return -1.0 / math.tan(math.pi * p)  # tan(pi (p - 1/2)), without losing p's digits
    if df == 2:
        return (2.0 * p - 1.0) / math.sqrt(2.0 * p * (1.0 - p))
    # find t > 0 with P(T <= -t) = p by Newton's method in log t against log p, where the
    # heavy tail (P ~ t^-df) is near a straight line; the tail falls as t grows, so each point
    # tried narrows a bracket that catches any step that overshoots
    log_scale = _t_log_density_scale(df)
    low, high = 0.0, math.inf
    t = _cornish_fisher(-normal_quantile(p), df)
    for _ in range(100):
        tail = _t_lower_tail(t, df)
        if tail > p:
            low = t
        else:
            high = t
        if tail == 0.0:  # so far out that the tail underflows
            step = -30.0
        else:  # d(log P) / d(log t) = -t density / P
            log_slope = math.log(t) + log_scale - (df + 1) / 2.0 * math.log1p(t * t / df)
            step = math.log(tail / p) * math.exp(min(700.0, math.log(tail) - log_slope))
        following = t * math.exp(max(-30.0, min(30.0, step)))
        if abs(step) <= 1e-10:  # Newton: the error left is about this squared
            return -following
        if not low < following < high:
            following = math.sqrt(low * high)
        t = following
    return -t


@dataclass(frozen=True)
class RateDifference:
    """B's pass rate against A's over paired runs: the difference, its interval at `level`, and
    McNemar's score-test p-value (below 1 - level exactly when 0 is outside the interval)."""

    pairs: int
    gains: int  # pairs where B passed and A failed
    losses: int  # pairs where A passed and B failed
    rate_a: float
    rate_b: float
    difference: float  # rate_b - rate_a = (gains - losses) / pairs
    low: float
    high: float
    level: float
    p_value: float


def _restricted_discordance(gains: float, losses: float, pairs: float, d: float) -> float:
    """Maximum-likelihood P(a loss) given P(a gain) - P(a loss) = d.

    With q = P(loss), P(gain) = q + d and both concordant cells merged to 1 - 2q - d, the
    log-likelihood g log(q + d) + l log q + c log(1 - 2q - d) (c = n - g - l) has derivative
    g / (q + d) + l / q - 2c / (1 - 2q - d); times q (q + d) (1 - 2q - d), its zero is the
    quadratic 2n q^2 + b q - l d (1 - d) = 0 with b = (2n - g + l) d - g - l. On the feasible
    range the derivative has the sign of minus that quadratic, rising between its roots and
    falling after the larger, which is so the maximum; it is clamped into the range against
    rounding.
    """
    n = pairs
    b = (2 * n - gains + losses) * d - gains - losses
    discriminant = b * b + 8.0 * n * losses * d * (1.0 - d)
    q = (math.sqrt(max(0.0, discriminant)) - b) / (4.0 * n)
    return min(max(q, 0.0, -d), (1.0 - d) / 2.0)


def _score(gains: int, losses: int, pairs: int, d: float) -> float:
    """Tango's statistic at difference d: (g - l - n d) / sqrt(n (2q + d (1 - d))), where the
    denominator is the standard deviation of g - l when a pair's outcome difference (+1 a gain,
    -1 a loss) has mean d and E[x^2] = P(gain) + P(loss) = 2q + d."""
    q = _restricted_discordance(gains, losses, pairs, d)
    variance = 2.0 * q + d * (1.0 - d)
    excess = gains - losses - pairs * d
    if variance <= 0.0:  # d = +-1 with every pair discordant that way: no spread at all
        return 0.0 if excess == 0 else math.copysign(math.inf, excess)
    return excess / math.sqrt(pairs * variance)


def _interval_end(
    score: Callable[[float], float], z: float, inside: float, outside: float
) -> float:
    """The end of {d : |score(d)| <= z} between a d inside it and one outside, by the Illinois
    method: regula falsi on |score| - z, halving the weight of an end that has stayed put twice
    (so both ends close in), bisecting while the outer value is infinite. The point returned
    is inside, within _ENDPOINT_TOLERANCE of the end."""
    excess_in, excess_out = abs(score(inside)) - z, abs(score(outside)) - z
    kept = 0  # which end stayed put last time: -1 inside, 1 outside
    for _ in range(200):  # about 10 are needed; bisection alone would take 34
        if abs(outside - inside) <= _ENDPOINT_TOLERANCE:
            break
        middle = (inside + outside) / 2.0
        if math.isfinite(excess_out):
            crossing = inside + (outside - inside) * excess_in / (excess_in - excess_out)
            if min(inside, outside) < crossing < max(inside, outside):
                middle = crossing
        excess = abs(score(middle)) - z
        if excess <= 0:
            inside, excess_in = middle, excess
            excess_out = excess_out / 2.0 if kept == 1 else excess_out
            kept = 1
        else:
            outside, excess_out = middle, excess
            excess_in = excess_in / 2.0 if kept == -1 else excess_in
            kept = -1
    return inside


def rate_difference(
    outcomes: Sequence[tuple[bool, bool]], level: float = 0.95
) -> RateDifference | None:
    """Compare paired outcomes (A passed, B passed) by Tango's score interval at `level`; None
    without pairs."""
    _check_probability(level, "level")
    n = len(outcomes)
    if n == 0:
        return None
    gains = sum(1 for a, b in outcomes if b and not a)
    losses = sum(1 for a, b in outcomes if a and not b)
    discordant = gains + losses
    p_value = 1.0 if discordant == 0 else math.erfc(abs(gains - losses) / math.sqrt(2 * discordant))
    zero_outside = p_value < 1.0 - level
    z = normal_quantile((1.0 + level) / 2.0)
    centre = (gains - losses) / n

    def score(d: float) -> float:
        return _score(gains, losses, n, d)

    # Z falls as d rises, so each end lies between the centre and a boundary; 0 is put on the
    # side the p-value says, so the interval and the test can never disagree.
    if centre > 0 and zero_outside:
        low = _interval_end(score, z, centre, 0.0)
    elif abs(score(-1.0)) <= z:
        low = -1.0
    else:
        low = _interval_end(score, z, 0.0 if centre > 0 else centre, -1.0)
    if centre < 0 and zero_outside:
        high = _interval_end(score, z, centre, 0.0)
    elif abs(score(1.0)) <= z:
        high = 1.0
    else:
        high = _interval_end(score, z, 0.0 if centre < 0 else centre, 1.0)
    return RateDifference(
        pairs=n,
        gains=gains,
        losses=losses,
        rate_a=sum(1 for a, _ in outcomes if a) / n,
        rate_b=sum(1 for _, b in outcomes if b) / n,
        difference=centre,
        low=low,
        high=high,
        level=level,
        p_value=p_value,
    )


@dataclass(frozen=True)
class MeanDifference:
    """B's mean of a metric against A's over paired runs, with the paired t interval of the
    difference at `level` (None below MIN_METRIC_PAIRS pairs)."""

    pairs: int
    mean_a: float
    mean_b: float
    difference: float  # mean of (b - a)
    low: float | None
    high: float | None
    level: float


def mean_difference(
    pairs: Sequence[tuple[float, float]], level: float = 0.95
) -> MeanDifference | None:
    """The paired t interval of the mean of b - a over pairs (a, b); None without pairs, and no
    interval below MIN_METRIC_PAIRS. When every difference is the same the interval has zero
    width at that value: the data show no spread to widen it by."""
    _check_probability(level, "level")
    n = len(pairs)
    if n == 0:
        return None
    differences = [b - a for a, b in pairs]
    mean = math.fsum(differences) / n
    low = high = None
    if n >= MIN_METRIC_PAIRS:
        if max(differences) == min(differences):
            mean = differences[0]
            half = 0.0
        else:
            variance = math.fsum((x - mean) ** 2 for x in differences) / (n - 1)
            half = t_quantile((1.0 + level) / 2.0, n - 1) * math.sqrt(variance / n)
        low, high = mean - half, mean + half
    return MeanDifference(
        pairs=n,
        mean_a=math.fsum(a for a, _ in pairs) / n,
        mean_b=math.fsum(b for _, b in pairs) / n,
        difference=mean,
        low=low,
        high=high,
        level=level,
    )


def verdict(low: float, high: float, min_effect: float) -> Verdict:
    """What an interval of B - A says: better (above 0), worse (below 0), no_difference (inside
    +-min_effect, so containing 0), else cant_tell. Higher is better, as for a pass rate."""
    if low > 0:
        return "better"
    if high < 0:
        return "worse"
    if -min_effect < low and high < min_effect:
        return "no_difference"
    return "cant_tell"


def interval_level(comparisons: int, looks: int = 1, alpha: float = ALPHA) -> float:
    """The level of each interval so that all of a report's `comparisons`, over all `looks` of
    an adaptive session, are right together with chance at least 1 - alpha:
    1 - alpha / (comparisons * looks) (Bonferroni and a union bound over the looks; the module
    docstring says why not Holm)."""
    if comparisons < 1 or looks < 1:
        raise ValueError(f"need at least one comparison and one look, got {comparisons}, {looks}")
    _check_probability(alpha, "alpha")
    return 1.0 - alpha / (comparisons * looks)


def _fewest_pairs(z: float, min_effect: float | None) -> int:
    """The fewest pairs with which Tango's interval can decide at all. Its width is never below
    2 z^2 / (n + z^2) (the tests check every outcome up to 30 pairs), the width with every pair
    discordant one way ([(n - z^2) / (n + z^2), 1] when all are gains) or none discordant
    (+-z^2 / (n + z^2)). So better or worse needs n > z^2 (min_effect None), and no_difference
    needs z^2 / (n + z^2) < min_effect."""
    if min_effect is None:
        return math.floor(z * z) + 1
    return math.floor(z * z * (1.0 - min_effect) / min_effect) + 1


def _normal_cdf(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def _pairs_needed(
    gain: float, loss: float, d: float, min_effect: float, level: float, power: float, either: bool
) -> int | None:
    """Pairs to decide with chance `power` when a pair is a gain with chance `gain`, a loss with
    chance `loss`, and the difference to plan for is d: better/worse when d != 0, no_difference
    when |d| < min_effect and (unless `either`, which takes whichever needs fewer) d == 0; None
    when neither applies.

    The score test's sample size (Connor 1987; Nam 1997): the interval's end at d0 excludes
    d0 once |d_hat - d0| sqrt(n) > z s0, where s0^2 = 2 q(d0) + d0 (1 - d0) is the variance Tango's
    statistic assumes at d0 (q its restricted estimate, here from the cell chances), while
    d_hat varies with the true variance s^2 = gain + loss - d^2.
    """
    _check_probability(level, "level")
    _check_probability(power, "power")
    if min_effect < 0:
        raise ValueError(f"min_effect must not be negative, got {min_effect}")
    z = normal_quantile((1.0 + level) / 2.0)
    spread = math.sqrt(max(0.0, gain + loss - (gain - loss) ** 2))

    def assumed(d0: float) -> float:
        q = _restricted_discordance(gain, loss, 1.0, d0)
        return math.sqrt(max(0.0, 2.0 * q + d0 * (1.0 - d0)))

    options = []
    if d != 0:
        root_n = (z * assumed(0.0) + normal_quantile(power) * spread) / abs(d)
        options.append(max(math.ceil(root_n**2), _fewest_pairs(z, None)))
    if abs(d) < min_effect and (either or d == 0):
        sides = [(min_effect - d, assumed(min_effect)), (min_effect + d, assumed(-min_effect))]

        def chance(n: int) -> float:
            # both ends inside +-min_effect (the far side matters when d is near 0)
            chances = []
            for distance, s0 in sides:
                margin = distance * math.sqrt(n) - z * s0
                chances.append(_normal_cdf(margin / spread) if spread > 0 else float(margin > 0))
            return chances[0] + chances[1] - 1.0

        options.append(max(_fewest(chance, power), _fewest_pairs(z, min_effect)))
    return min(options) if options else None


def _fewest(chance: Callable[[int], float], power: float) -> int:
    """The least n >= 1 with chance(n) >= power, chance rising in n: doubling, then bisection."""
    low, high = 0, 1
    while chance(high) < power:
        low, high = high, 2 * high
    while high - low > 1:
        middle = (low + high) // 2
        if chance(middle) >= power:
            high = middle
        else:
            low = middle
    return high


def pairs_to_decide(
    gains: int, losses: int, pairs: int, min_effect: float, level: float, power: float = 0.8
) -> int | None:
    """How many pairs in all (never fewer than `pairs`) would with chance `power` decide a
    comparison whose pairs so far show these gains and losses, if what they show is the truth:
    better/worse for a nonzero difference, no_difference for one inside +-min_effect, whichever
    needs fewer.

    The cell chances that set the variances are the observed ones with half a pseudo-pair added
    to each of the four cells, so that a few pairs with no discordance do not promise certainty;
    the difference planned for is the observed one. None when nothing can be decided: no pairs
    yet, or an observed difference of 0 with min_effect 0 (no_difference would need an interval
    of no width).
    """
    if pairs < 1:
        return None
    gain, loss = (gains + 0.5) / (pairs + 2), (losses + 0.5) / (pairs + 2)
    needed = _pairs_needed(gain, loss, (gains - losses) / pairs, min_effect, level, power, True)
    return None if needed is None else max(needed, pairs)


def planned_pairs(
    rate_a: float,
    rate_b: float,
    min_effect: float,
    level: float,
    power: float = 0.8,
    discordance: float | None = None,
) -> int:
    """Pairs to run, before any run, to detect rate_b - rate_a with chance `power` or, when the
    rates are equal, to show no_difference within +-min_effect. A pair's two outcomes are taken
    as independent unless `discordance` (the chance that they differ) is given: scenarios that
    both variants pass or both fail make it lower than independence, and fewer pairs enough."""
    for rate in (rate_a, rate_b):
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"pass rates must lie in [0, 1], got {rate}")
    d = rate_b - rate_a
    if discordance is None:
        discordance = rate_b * (1.0 - rate_a) + rate_a * (1.0 - rate_b)
    elif not abs(d) <= discordance <= min(rate_a + rate_b, 2.0 - rate_a - rate_b):
        raise ValueError(
            f"discordance {discordance} is impossible with pass rates {rate_a} and {rate_b}: "
            "it must be at least their difference and at most the rate of either passing alone"
        )
    gain, loss = (discordance + d) / 2.0, (discordance - d) / 2.0
    needed = _pairs_needed(gain, loss, d, min_effect, level, power, either=False)
    if needed is None:
        raise ValueError("equal pass rates with min_effect 0: no number of pairs decides")
    return needed
