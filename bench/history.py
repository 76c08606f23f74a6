"""The history behind every report (report.html's trend section): its query's time at a given
number of records in results.db, made of few large invocations or of many re-runs.

    .venv/bin/python bench/history.py [--records 10000,50000] [--runs 500] [--times 7]

results.db is filled as llmtt fills it (results.jsonl, then the catch-up that mirrors it into
results.db); each figure is the median of `--times` calls of `llmtt.results.trends.history`
in this process, after one call to warm the file cache. `--runs` is the runs an invocation
evaluates: 50,000 records at 500 runs are 100 invocations, of which the history shows 20.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from llmtt.results.store import sync_results_db
from llmtt.results.trends import history


def fill(folder: Path, records: int, runs: int) -> Path:
    """results.jsonl and results.db with `records` results: invocations of `runs` runs each
    (10 scenarios x 5 agents x the rest in repeats), a third of them failed."""
    lines = []
    for index in range(records):
        invocation, run = divmod(index, runs)
        scenario, rest = f"s{run % 10}", run // 10
        agent, repeat = f"a{rest % 5}", rest // 5
        lines.append(
            json.dumps(
                {
                    "run_id": f"{scenario}/{agent}/r{repeat}",
                    "scenario": scenario,
                    "agent": agent,
                    "model": "m",
                    "variant": None,
                    "repeat": repeat,
                    "outcome": "fail" if index % 3 == 0 else "pass",
                    "cost_usd": 0.01,
                    "timestamp": "2026-11-27T00:00:00+00:00",
                    "invocation": f"2026-11-27T{invocation // 60:02d}:{invocation % 60:02d}:00",
                }
            )
        )
    jsonl = folder / "results.jsonl"
    jsonl.write_text("\n".join(lines) + "\n")
    sync_results_db(jsonl)
    return folder / "results.db"


def timed(db: Path, times: int) -> tuple[float, int]:
    """The median time of the history query, and how many points it found."""
    found = history(db, None)
    spent = []
    for _ in range(times):
        start = time.perf_counter()
        history(db, None)
        spent.append(time.perf_counter() - start)
    return statistics.median(spent), len(found["points"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", default="10000,50000")
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--times", type=int, default=7)
    args = parser.parse_args()
    for records in [int(n) for n in args.records.split(",")]:
        for runs in (args.runs, records):  # re-runs of one project; one invocation of all
            with tempfile.TemporaryDirectory() as tmp:
                start = time.perf_counter()
                db = fill(Path(tmp), records, runs)
                filled = time.perf_counter() - start
                median, points = timed(db, args.times)
            invocations = -(-records // runs)
            print(
                f"{records:>7,} records, {invocations:>4} invocation(s) of {runs:,} runs: "
                f"history {median * 1000:7.1f} ms ({points} points shown; results.db made "
                f"from results.jsonl in {filled:.1f} s)",
                flush=True,
            )


if __name__ == "__main__":
    main()
