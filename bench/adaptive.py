"""What `doit run repeats=auto` saves: pairs (and dollars) to a verdict, against a fixed number
of repeats with the same power.

For a true pass-rate difference d (0.1, 0.2, 0.4; baseline 0.4, outcomes of a pair independent),
the adaptive design of llmtt is simulated exactly as `llmtt.results.adaptive` runs it: rounds of
`max_repeats / 4` pairs, a look after each (K = 4), every interval at `interval_level(1, 4)`,
stopping at the first decided verdict. `max_repeats` is what `llmtt estimate` would plan for 90%
power at that level. The fixed design is one look at 95% after N pairs, N the least that
reaches the adaptive design's power. Both are simulated with the same seeded draws (2,000
experiments each). The figure is the adaptive mean of pairs against N, and dollars at a stated
$0.05 a run (a pair is two runs).

Run: `.venv/bin/python bench/adaptive.py` (about a minute). Figures go to bench/README.md.
"""

from __future__ import annotations

import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from llmtt.results.inference import interval_level, planned_pairs, rate_difference, verdict

BASE = 0.4
EFFECTS = (0.1, 0.2, 0.4)
LOOKS = 4
MIN_EFFECT = 0.1
EXPERIMENTS = 2000
USD_PER_RUN = 0.05


def pair(rng: random.Random, rate_b: float) -> tuple[bool, bool]:
    return rng.random() < BASE, rng.random() < rate_b


def adaptive(rng: random.Random, rate_b: float, step: int) -> tuple[int, str]:
    level = interval_level(1, LOOKS)
    pairs: list[tuple[bool, bool]] = []
    said = "cant_tell"
    for _ in range(LOOKS):
        pairs += [pair(rng, rate_b) for _ in range(step)]
        found = rate_difference(pairs, level)
        assert found is not None
        said = verdict(found.low, found.high, MIN_EFFECT)
        if said != "cant_tell":
            break
    return len(pairs), said


def fixed_power(rate_b: float, n: int, seed: int) -> float:
    rng = random.Random(seed)
    better = 0
    for _ in range(EXPERIMENTS):
        found = rate_difference([pair(rng, rate_b) for _ in range(n)], 0.95)
        assert found is not None
        better += verdict(found.low, found.high, MIN_EFFECT) == "better"
    return better / EXPERIMENTS


def main() -> None:
    print(
        f"| effect | max_repeats (K = {LOOKS}) | repeats=auto: mean pairs | its power | "
        "fixed N, same power | saving | dollars auto / fixed |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for d in EFFECTS:
        rate_b = BASE + d
        planned = planned_pairs(BASE, rate_b, MIN_EFFECT, interval_level(1, LOOKS), 0.9)
        step = -(-planned // LOOKS)
        rng = random.Random(20261126)
        runs = [adaptive(rng, rate_b, step) for _ in range(EXPERIMENTS)]
        mean = statistics.fmean(n for n, _ in runs)
        power = sum(v == "better" for _, v in runs) / EXPERIMENTS
        low, high = 2, step * LOOKS
        while high - low > 1:  # the least N whose power reaches the adaptive design's
            middle = (low + high) // 2
            if fixed_power(rate_b, middle, 7) >= power:
                high = middle
            else:
                low = middle
        usd_auto, usd_fixed = 2 * mean * USD_PER_RUN, 2 * high * USD_PER_RUN
        print(
            f"| {d:g} | {step * LOOKS} | {mean:.1f} | {power:.3f} | {high} | "
            f"{1 - mean / high:+.0%} | ${usd_auto:.2f} / ${usd_fixed:.2f} |"
        )


if __name__ == "__main__":
    main()
