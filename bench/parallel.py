"""Parallel runs: 16 runs of a 2-second agent (the oracle playing `sleep 2`) at -n 4 and -n 8,
against the ideal (16 x 2 s / n), and the peak memory of a worker.

    .venv/bin/python bench/parallel.py [--runs 16] [--secs 2] [--workers 4,8] [--times 3]

Efficiency = ideal / wall time of the first `doit run -n N` (a fresh results folder each time;
the plan cache is warm, as after any edit-free invocation). Worker memory: the largest RSS of
the doit processes, sampled every 50 ms from /proc while the run goes on.
"""

from __future__ import annotations

import argparse
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
binary = "sleep"

[matrix]
agents = ["oracle"]
repeats = {repeats}
"""

SCENARIO = """\
task:
  prompt: Wait.
solution:
  - sleep {secs}
evaluation:
  gates:
    - {{type: command_succeeds, command: "true"}}
"""


def rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def tree(pid: int) -> list[int]:
    """`pid` and its descendants (from the children lists in /proc)."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        try:
            for tid in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{tid}/children") as handle:
                    todo += [int(c) for c in handle.read().split()]
        except OSError:
            continue
    return found


def python_processes(pids: list[int]) -> list[int]:
    """The doit processes among `pids` (the harness), not the agents' `sleep`s."""
    out = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/comm") as handle:
                if handle.read().strip().startswith(("python", "doit")):
                    out.append(pid)
        except OSError:
            continue
    return out


def one(root: Path, workers: int) -> tuple[float, float]:
    """Wall time of one `doit run -n workers` from nothing, and the largest worker RSS.

    Nothing is left of the runs, their folders nor doit's record of them (a first run), but
    the plan cache is: the project was not edited."""
    results = root / "llm-tool-test-results"
    shutil.rmtree(results / "s", ignore_errors=True)
    for dep_file in results.glob(".doit.sqlite3*"):
        dep_file.unlink()
    started = time.perf_counter()
    proc = subprocess.Popen(
        [DOIT, "run", "-n", str(workers)],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    peak = 0.0
    while proc.poll() is None:
        members = python_processes(tree(proc.pid))
        workers_only = [p for p in members if p != proc.pid]
        peak = max([peak, *(rss_mb(p) for p in workers_only)])
        time.sleep(0.05)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"doit run -n {workers} failed in {root}")
    return wall, peak


def main() -> None:
    compile_llmtt()
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=16)
    parser.add_argument("--secs", type=float, default=2.0)
    parser.add_argument("--workers", default="4,8")
    parser.add_argument("--times", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("bench/out/parallel"))
    args = parser.parse_args()
    root = args.out.resolve()
    shutil.rmtree(root, ignore_errors=True)
    (root / "scenarios").mkdir(parents=True)
    (root / "llmtt.toml").write_text(TOML.format(repeats=args.runs))
    (root / "dodo.py").write_text("from llmtt.tasks import *  # noqa: F403\n")
    (root / "scenarios" / "s.yaml").write_text(SCENARIO.format(secs=args.secs))
    past = time.time() - 60  # old enough for the plan cache to take
    for path in root.rglob("*"):
        os.utime(path, (past, past))
    subprocess.run([DOIT, "list"], cwd=root, capture_output=True, check=True)
    for workers in (int(w) for w in args.workers.split(",")):
        ideal = args.runs * args.secs / workers
        results = [one(root, workers) for _ in range(args.times)]
        wall = statistics.median(r[0] for r in results)
        peak = max(r[1] for r in results)
        print(
            f"-n {workers}: {args.runs} x {args.secs:g} s runs in {wall:.2f} s (ideal "
            f"{ideal:.2f} s): {ideal / wall:.0%} of ideal; largest worker {peak:.0f} MB RSS",
            flush=True,
        )


if __name__ == "__main__":
    main()
