"""Cohen's kappa and Krippendorff's alpha against their published worked examples, against a
second computation written another way, and on simulated raters that agree by chance only or
always."""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np
import pytest

from llmtt.results.agreement import cohen_kappa, krippendorff_alpha

N = None

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: four observers,
# twelve units, values 1-5, with missing values. Published: nominal .743, interval .849.
RELIABILITY_DATA: list[list[int | None]] = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, N, N, N],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, N, 3],
    [N, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, N],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, N],
]


@pytest.mark.parametrize(
    ("table", "published"),
    [
        # The textbook 2x2 (Wikipedia's "Cohen's kappa", worked example): 50 proposals, two
        # readers; observed 0.7, expected 0.5, kappa 0.4.
        ((20, 5, 10, 15), 0.4),
        # The same article's pair with equal observed agreement (0.6) and kappas 0.1304 and
        # 0.2593, from their different margins.
        ((45, 15, 25, 15), 0.1304),
        ((25, 35, 5, 35), 0.2593),
    ],
)
def test_kappa_matches_published_examples(
    table: tuple[int, int, int, int], published: float
) -> None:
    found = cohen_kappa(*table)
    assert found.value == pytest.approx(published, abs=5e-5)
    assert found.value == pytest.approx(_kappa_from_labels(*table))


def test_kappa_of_the_first_example_gives_its_observed_and_expected_agreement() -> None:
    found = cohen_kappa(20, 5, 10, 15)
    assert (found.n, found.observed, found.expected) == (50, 0.7, 0.5)


def test_kappa_is_undefined_when_chance_agrees_on_every_item() -> None:
    found = cohen_kappa(7, 0, 0, 0)
    assert found.value is None and "expected agreement 1" in (found.why or "")
    assert cohen_kappa(0, 0, 0, 0).value is None


def test_alpha_matches_krippendorffs_worked_examples() -> None:
    nominal = krippendorff_alpha(RELIABILITY_DATA, "nominal")
    interval = krippendorff_alpha(RELIABILITY_DATA, "interval")
    assert nominal.value == pytest.approx(0.743, abs=5e-4)
    assert interval.value == pytest.approx(0.849, abs=5e-4)
    # Unit 12 was rated once and is left out; 40 values remain pairable.
    assert (nominal.units, nominal.pairable) == (11, 40)
    # Section A of the same paper: binary data, two observers, no missing value: .095.
    binary = [[0, 1, 0, 0, 0, 0, 0, 0, 1, 0], [1, 1, 1, 0, 0, 1, 0, 0, 0, 0]]
    assert krippendorff_alpha(binary).value == pytest.approx(0.095, abs=5e-4)


@pytest.mark.parametrize("level", ["nominal", "interval"])
def test_alpha_agrees_with_its_pairwise_form(level: str) -> None:
    """The coincidence-matrix computation against alpha's pairwise definition, written with
    numpy, on random data with missing values."""
    rng = random.Random(7)
    for _ in range(20):
        data = [[rng.choice([1, 2, 3, 4, N]) for _ in range(15)] for _ in range(rng.randint(2, 5))]
        found = krippendorff_alpha(data, level)  # type: ignore[arg-type]
        expected = _alpha_pairwise(data, level)
        if expected is None:
            assert found.value is None
        else:
            assert found.value == pytest.approx(expected)


def test_alpha_is_undefined_without_pairs_or_disagreement() -> None:
    assert krippendorff_alpha([[1, N], [N, 2]]).value is None
    same = krippendorff_alpha([[True, True], [True, True]])
    assert same.value is None and "no disagreement" in (same.why or "")


def test_chance_agreement_is_near_zero_and_perfect_agreement_is_one() -> None:
    """Raters who each flip their own coin agree by chance only: kappa and alpha near 0 on
    average (alpha's small-sample correction makes it slightly negative, never large); raters
    who copy one another agree perfectly: 1."""
    rng = random.Random(2026)
    kappas, alphas, interval = [], [], []
    for _ in range(300):
        first = [rng.random() < 0.6 for _ in range(60)]
        second = [rng.random() < 0.6 for _ in range(60)]
        kappa = cohen_kappa(*_table(first, second)).value
        alpha = krippendorff_alpha([first, second]).value
        scores = [[rng.randint(0, 10) / 10 for _ in range(60)] for _ in range(3)]
        assert kappa is not None and alpha is not None
        kappas.append(kappa)
        alphas.append(alpha)
        interval.append(krippendorff_alpha(scores, "interval").value or 0.0)
    assert abs(float(np.mean(kappas))) < 0.02
    assert abs(float(np.mean(alphas))) < 0.02
    assert abs(float(np.mean(interval))) < 0.02
    assert float(np.std(kappas)) < 0.2  # each one near 0 too, not only their mean
    same = [rng.random() < 0.5 for _ in range(40)]
    assert cohen_kappa(*_table(same, same)).value == pytest.approx(1.0)
    assert krippendorff_alpha([same, same, same]).value == pytest.approx(1.0)
    scores = [rng.random() for _ in range(40)]
    assert krippendorff_alpha([scores, scores], "interval").value == pytest.approx(1.0)


def _table(first: Sequence[bool], second: Sequence[bool]) -> tuple[int, int, int, int]:
    pairs = list(zip(first, second, strict=True))
    return (
        pairs.count((True, True)),
        pairs.count((True, False)),
        pairs.count((False, True)),
        pairs.count((False, False)),
    )


def _kappa_from_labels(both_yes: int, yes_no: int, no_yes: int, both_no: int) -> float:
    """Kappa from the two raters' label vectors, with numpy's means for the margins."""
    a = np.array([1] * both_yes + [1] * yes_no + [0] * no_yes + [0] * both_no)
    b = np.array([1] * both_yes + [0] * yes_no + [1] * no_yes + [0] * both_no)
    observed = float(np.mean(a == b))
    expected = float(np.mean(a) * np.mean(b) + np.mean(1 - a) * np.mean(1 - b))
    return (observed - expected) / (1 - expected)


def _alpha_pairwise(data: list[list[int | None]], level: str) -> float | None:
    """alpha = 1 - (n - 1) * sum_u [sum of within-unit pair distances / (m_u - 1)] divided by
    the sum of distances over all pairs of pairable values (Krippendorff's pairwise form)."""
    values = np.array([[np.nan if v is None else v for v in row] for row in data], dtype=float)

    def delta(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return (x - y) ** 2 if level == "interval" else (x != y).astype(float)

    within, pooled = 0.0, []
    for unit in values.T:
        present = unit[~np.isnan(unit)]
        if len(present) < 2:
            continue
        pooled.extend(present)
        within += float(delta(present[:, None], present[None, :]).sum()) / (len(present) - 1)
    if len(pooled) < 2:
        return None
    everything = np.array(pooled)
    between = float(delta(everything[:, None], everything[None, :]).sum())
    if between == 0:
        return None
    return 1 - (len(pooled) - 1) * within / between
