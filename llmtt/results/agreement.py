"""How far two ways of grading runs agree: Cohen's kappa over a 2x2 table (the judge against
the gates), and Krippendorff's alpha over any number of raters with missing values (several
judge samples or judge models on the same runs), nominal or interval.

Standard library only: the formulas are short, and the tests check them against the published
worked examples (Cohen 1960 as textbooks give it; Krippendorff 2011, "Computing Krippendorff's
Alpha-Reliability").
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

# Krippendorff's own line: below it, data support no conclusion, tentative ones above it.
ALPHA_TENTATIVE = 0.667
# Below this a kappa is "fair" at best on Landis and Koch's scale: a judge that agrees with the
# gates this little is not measuring what they measure.
KAPPA_LOW = 0.4


@dataclass(frozen=True)
class Kappa:
    """Cohen's kappa of a 2x2 table, or why it has none (`value` None, `why` said)."""

    n: int
    observed: float | None  # the share of agreeing pairs
    expected: float | None  # the share expected by chance from the two raters' margins
    value: float | None
    why: str | None = None


def cohen_kappa(both_yes: int, yes_no: int, no_yes: int, both_no: int) -> Kappa:
    """Kappa of two raters' yes/no verdicts on the same items: `yes_no` counts items the first
    said yes to and the second no. Undefined without items, or when chance alone would agree on
    every item (each rater gave one verdict throughout, the same one)."""
    n = both_yes + yes_no + no_yes + both_no
    if n == 0:
        return Kappa(0, None, None, None, "no item has both verdicts")
    observed = (both_yes + both_no) / n
    first_yes, second_yes = (both_yes + yes_no) / n, (both_yes + no_yes) / n
    expected = first_yes * second_yes + (1 - first_yes) * (1 - second_yes)
    if expected >= 1:
        return Kappa(
            n,
            observed,
            expected,
            None,
            "both raters gave one and the same verdict to every item, so chance alone agrees "
            "on all of them (expected agreement 1)",
        )
    return Kappa(n, observed, expected, (observed - expected) / (1 - expected))


Level = Literal["nominal", "interval"]


@dataclass(frozen=True)
class Alpha:
    """Krippendorff's alpha, or why it has none; `pairable`: the values in units that at least
    two raters rated (the only ones alpha reads)."""

    units: int
    pairable: int
    value: float | None
    why: str | None = None


def krippendorff_alpha(
    data: Sequence[Sequence[Hashable | None]], level: Level = "nominal"
) -> Alpha:
    """Alpha of `data`, one row per rater and one column per unit (None: that rater did not
    rate that unit). `level` "interval" needs numbers. Units rated once are left out, as
    Krippendorff does; alpha is undefined when fewer than two values are pairable or every
    pairable value is the same (no disagreement to expect)."""
    width = max((len(row) for row in data), default=0)
    units = [[row[u] for row in data if u < len(row) and row[u] is not None] for u in range(width)]
    units = [values for values in units if len(values) >= 2]
    # The coincidence matrix: every ordered pair of values of one unit from two raters,
    # weighted 1/(m_u - 1) so that each unit adds as many pairs as it has values.
    coincidences: dict[tuple[Hashable, Hashable], float] = defaultdict(float)
    for values in units:
        weight = 1 / (len(values) - 1)
        for i, c in enumerate(values):
            for j, k in enumerate(values):
                if i != j:
                    coincidences[(c, k)] += weight
    totals: dict[Hashable, float] = defaultdict(float)
    for (c, _), count in coincidences.items():
        totals[c] += count
    n = sum(totals.values())
    pairable = round(n)
    if pairable < 2:
        return Alpha(len(units), pairable, None, "no unit was rated by two raters")

    def distance(c: Hashable, k: Hashable) -> float:
        if level == "interval":
            return (float(c) - float(k)) ** 2  # type: ignore[arg-type]
        return 0.0 if c == k else 1.0

    observed = sum(count * distance(c, k) for (c, k), count in coincidences.items())
    expected = sum(totals[c] * totals[k] * distance(c, k) for c in totals for k in totals) / (n - 1)
    if expected == 0:
        return Alpha(
            len(units), pairable, None, "every rating is the same, so no disagreement is expected"
        )
    return Alpha(len(units), pairable, 1 - observed / expected)
