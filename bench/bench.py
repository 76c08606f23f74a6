"""Benchmark: a 1,000-run oracle plan; no-op `doit run`, `doit list`, harness overhead per run.

    .venv/bin/python bench/bench.py [--scenarios 100] [--repeats 10] [--out bench/out]

Overhead per run = (wall time of `doit run` - the solution commands' own time) / runs, where a
command's own time is the gap between its `tool_call` and `tool_result` events.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from installed import compile_llmtt

DOIT = str(Path(sys.executable).parent / "doit")

TOML = """\
[target]
binary = "echo"
command_pattern = '(?<![\\w./-])echo(?![\\w.-])(?:\\s+([a-z][\\w-]*))?'

[matrix]
agents = ["oracle"]
repeats = {repeats}
"""

SCENARIO = """\
name: s{index:03d}
tags: [bench]
task:
  prompt: Write the word {index} to out.txt.
fixture: fixture
solution:
  - echo {index} > out.txt
evaluation:
  gates:
    - type: file_contains
      path: out.txt
      substring: "{index}"
"""


def make_project(root: Path, scenarios: int, repeats: int) -> None:
    """A project of `scenarios` one-command scenarios, each planned `repeats` times."""
    if root.exists():
        shutil.rmtree(root)
    (root / "scenarios" / "fixture").mkdir(parents=True)
    (root / "scenarios" / "fixture" / "README.md").write_text("bench fixture\n")
    (root / "llmtt.toml").write_text(TOML.format(repeats=repeats))
    (root / "dodo.py").write_text("from llmtt.tasks import *  # noqa: F403\n")
    for index in range(scenarios):
        (root / "scenarios" / f"s{index:03d}.yaml").write_text(SCENARIO.format(index=index))


def timed(root: Path, *args: str, cold: bool = False) -> float:
    """Wall time of one doit invocation (`cold`: without the plan cache); fails loudly."""
    env = {**os.environ, "LLMTT_NO_PLAN_CACHE": "1"} if cold else None
    started = time.perf_counter()
    proc = subprocess.run(
        [DOIT, *args], cwd=root, capture_output=True, text=True, timeout=3600, env=env
    )
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(
            f"doit {' '.join(args)} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
        )
    return elapsed


def command_time(root: Path) -> float:
    """Sum of the solution commands' own time over every run of the project."""
    total = 0.0
    for events in (root / "llm-tool-test-results").glob("*/*/*/events.jsonl"):
        calls: dict[str, float] = {}
        for line in events.read_text().splitlines():
            event = json.loads(line)
            if event["event"] == "tool_call":
                calls[event["id"]] = event["ts"]
            elif event["event"] == "tool_result":
                total += event["ts"] - calls.pop(event["id"])
    return total


def median_of(root: Path, runs: int, *args: str, cold: bool = False) -> float:
    """Median wall time of `runs` invocations."""
    return statistics.median(timed(root, *args, cold=cold) for _ in range(runs))


def main() -> None:
    """Run every measurement and print one JSON object of figures."""
    compile_llmtt()
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenarios", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path("bench/out"))
    args = parser.parse_args()
    runs = args.scenarios * args.repeats
    figures: dict[str, float | int] = {"runs": runs}
    for workers in (1, 4):
        root = args.out / f"n{workers}"
        make_project(root, args.scenarios, args.repeats)
        wall = timed(root, "run", "-n", str(workers))
        own = command_time(root)
        figures[f"first_run_n{workers}_secs"] = round(wall, 2)
        figures[f"commands_own_time_n{workers}_secs"] = round(own, 2)
        # With n workers, n runs overlap: per-run overhead is measured in worker time.
        figures[f"overhead_per_run_n{workers}_ms"] = round((wall * workers - own) / runs * 1000, 1)
        figures[f"wall_per_run_n{workers}_ms"] = round(wall / runs * 1000, 1)
    root = args.out / "n1"
    # The project's files are older than the plan cache's settling time by now, so the first
    # invocation writes the cache and the rest read it (warm); cold ones load the project.
    timed(root, "list")
    figures["noop_run_secs"] = round(median_of(root, 5, "run"), 3)
    figures["list_secs"] = round(median_of(root, 5, "list"), 3)
    figures["list_status_secs"] = round(median_of(root, 3, "list", "--status"), 3)
    figures["noop_run_cold_secs"] = round(median_of(root, 5, "run", cold=True), 3)
    figures["list_cold_secs"] = round(median_of(root, 5, "list", cold=True), 3)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
