"""Scale: the no-op `doit run` and `doit list` of llmtt projects of 1,000 / 5,000 / 10,000
oracle runs against doit's own floor on the same task graph, and one pending run in a large
project against the same in a small one.

    .venv/bin/python bench/scale.py [--sizes 1000,5000,10000] [--out bench/out/scale]

The floor is a plain dodo.py (no llmtt) that declares the same tasks llmtt declares for the
same number of runs — per run an agent task (3 targets, a key check), an evaluate task (1 file
dependency, 3 targets, a key check) and the run's task (3 file dependencies, 1 target, 2 task
dependencies, a key check) — and an aggregate over every run's result.json, each action writing
its targets. Both projects are filled by a first `doit run -n 2`; then every figure is a median
of interleaved invocations (llmtt, floor, llmtt, floor, ...), so the ratio holds even when the
machine's speed moves.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from installed import compile_llmtt  # noqa: E402

from bench import make_project  # noqa: E402

DOIT = str(Path(sys.executable).parent / "doit")

FLOOR_DODO = '''\
"""doit's floor: llmtt's task graph for {runs} runs, with no llmtt in it."""
import os
from doit.task import Task

RUNS = {runs}
ROOT = "out"
DOIT_CONFIG = {{"dep_file": ".doit.db", "backend": "sqlite3", "verbosity": 0}}


class Key:
    def __init__(self, key):
        self.key = key

    def __call__(self, task, values):
        task.value_savers.append(lambda: {{"key": self.key}})
        return values.get("key") == self.key


def write(paths):
    for path in paths:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as handle:
            handle.write("x")


def task_floor():
    results = []
    for index in range(RUNS):
        rid = f"s{{index // 10:04d}}/oracle/r{{index % 10 + 1}}"
        d = f"{{ROOT}}/{{rid}}/"
        agent = [d + n for n in ("run.json", "events.jsonl", "transcript.raw.txt")]
        evaluated = [d + n for n in ("metrics.json", "gates.json", "result.json")]
        yield Task(f"{{rid}}:agent", [(write, [agent])], targets=agent,
                   uptodate=[Key(rid + "a")], subtask_of=rid)
        yield Task(f"{{rid}}:evaluate", [(write, [evaluated])], file_dep=[d + "run.json"],
                   targets=evaluated, uptodate=[Key(rid + "e")], subtask_of=rid)
        yield Task(rid, [(write, [[d + "evaluation.md"]])], file_dep=evaluated,
                   targets=[d + "evaluation.md"], task_dep=[f"{{rid}}:agent", f"{{rid}}:evaluate"],
                   uptodate=[Key(rid + "r")])
        results.append(d + "result.json")
    yield {{"basename": "aggregate", "actions": [(write, [[ROOT + "/report.md"]])],
           "file_dep": results, "targets": [ROOT + "/report.md"], "uptodate": [Key("agg")]}}
'''


def doit(root: Path, *args: str) -> float:
    """Wall time of one doit invocation; fails loudly."""
    started = time.perf_counter()
    proc = subprocess.run([DOIT, *args], cwd=root, capture_output=True, text=True, timeout=7200)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"doit {' '.join(args)} in {root} failed:\n{proc.stdout[-2000:]}")
    return elapsed


def interleaved(a: Path, b: Path, times: int, *args: str) -> tuple[float, float]:
    """Medians of `times` invocations in `a` and in `b`, taken in turn."""
    ta, tb = [], []
    for _ in range(times):
        ta.append(doit(a, *args))
        tb.append(doit(b, *args))
    return statistics.median(ta), statistics.median(tb)


def main() -> None:
    compile_llmtt()
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1000,5000,10000")
    parser.add_argument("--times", type=int, default=5)
    parser.add_argument(
        "--pending-only", action="store_true", help="only the pending run (projects made before)"
    )
    parser.add_argument("--out", type=Path, default=Path("bench/out/scale"))
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    for runs in [] if args.pending_only else sizes:
        llmtt, floor = args.out / f"llmtt-{runs}", args.out / f"floor-{runs}"
        make_project(llmtt, runs // 10, 10)
        shutil.rmtree(floor, ignore_errors=True)
        floor.mkdir(parents=True)
        (floor / "dodo.py").write_text(FLOOR_DODO.format(runs=runs))
        fill = doit(llmtt, "run", "-n", "2"), doit(floor, "run", "-n", "2")
        doit(llmtt, "list")  # writes the plan cache: the figures are warm
        run_l, run_f = interleaved(llmtt, floor, args.times, "run")
        list_l, list_f = interleaved(llmtt, floor, args.times, "list")
        row = {
            "runs": runs,
            "fill_secs": [round(fill[0], 1), round(fill[1], 1)],
            "noop_run": [round(run_l, 3), round(run_f, 3), round(run_l / run_f, 2)],
            "list": [round(list_l, 3), round(list_f, 3), round(list_l / list_f, 2)],
        }
        print(json.dumps(row), flush=True)
    # One pending run (its folder removed: agent, evaluation and report again; the task named,
    # so the aggregate, which reads every run, is not part of it) in a 10-run project and in
    # the largest one, in turn. What the run adds is its time less the same command's time
    # with nothing pending (doit loading the project's tasks: the no-op figures above).
    small, large = args.out / "llmtt-10", args.out / f"llmtt-{max(sizes)}"
    make_project(small, 1, 10)
    doit(small, "run")
    task = "s000/oracle/r1"
    pending: dict[Path, list[float]] = {small: [], large: []}
    idle: dict[Path, list[float]] = {small: [], large: []}
    for _ in range(args.times):
        for root in (small, large):
            shutil.rmtree(root / "llm-tool-test-results" / task)
            pending[root].append(doit(root, "run", task))
            idle[root].append(doit(root, "run", task))
    added = [statistics.median(pending[r]) - statistics.median(idle[r]) for r in (small, large)]
    row = {
        "one_pending_run": [10, max(sizes)],
        "wall_secs": [round(statistics.median(pending[r]), 3) for r in (small, large)],
        "noop_secs": [round(statistics.median(idle[r]), 3) for r in (small, large)],
        "added_secs": [round(a, 3) for a in added],
        "ratio": round(added[1] / added[0], 2),
    }
    print(json.dumps(row))


if __name__ == "__main__":
    main()
