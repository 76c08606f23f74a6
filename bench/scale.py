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

`--pending-only` takes only the last figure, in projects made before; each figure there comes
with its CPU time too (other work on the machine moves it less than the wall time), and with
`--before DIR` (another llmtt checkout, e.g. `git archive` of the commit before a change,
unpacked) the same pending run is measured with that code as well, interleaved with this one,
in copies of the projects.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
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
    return timed(root, *args)[0]


def timed(root: Path, *args: str, code: Path | None = None) -> tuple[float, float]:
    """Wall time and CPU time (user + system, the invocation and every process it waited
    for) of one doit invocation; fails loudly. The CPU time moves less than the wall time when
    other work shares the machine. `code`: the llmtt checkout whose code runs (default: this
    one, or what PYTHONPATH gives)."""
    env = {**os.environ, "PYTHONPATH": str(code)} if code is not None else None
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(
        [DOIT, *args], cwd=root, capture_output=True, text=True, timeout=7200, env=env
    )
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"doit {' '.join(args)} in {root} failed:\n{proc.stdout[-2000:]}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return elapsed, cpu


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
    parser.add_argument(
        "--before",
        type=Path,
        help="another llmtt checkout (e.g. `git archive` of the commit before a change): the "
        "pending run is measured with its code too, interleaved, in copies of the projects",
    )
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
    codes: list[Path | None] = [None]
    if args.before is not None:
        if not compileall.compile_dir(str(args.before / "llmtt"), quiet=1):
            raise SystemExit(f"{args.before}/llmtt could not be compiled")
        codes.append(args.before.resolve())
    # Each code runs in its own copies of the projects: the plan cache is keyed by llmtt's
    # code, so one project run by both in turn would load its plan cold every time.
    roots: dict[tuple[Path | None, int], Path] = {}
    for code in codes:
        for size, root in ((10, small), (max(sizes), large)):
            copy = root if code is None else root.with_name(root.name + "-before")
            if code is not None:
                # Made again each time: one left by an earlier call may be of other --sizes,
                # or hold results and a .doit.db of a project since made again.
                shutil.rmtree(copy, ignore_errors=True)
                shutil.copytree(root, copy, symlinks=True)
            timed(copy, "run", task, code=code)  # the plan cache, warm
            roots[code, size] = copy
    # Wall and CPU times of each invocation, with the run pending and with nothing pending.
    pending: dict[tuple[Path | None, int], list[tuple[float, float]]] = {k: [] for k in roots}
    idle: dict[tuple[Path | None, int], list[tuple[float, float]]] = {k: [] for k in roots}
    for _ in range(args.times):
        for (code, size), root in roots.items():
            shutil.rmtree(root / "llm-tool-test-results" / task)
            pending[code, size].append(timed(root, "run", task, code=code))
            idle[code, size].append(timed(root, "run", task, code=code))
    for code in codes:
        keys = [(code, 10), (code, max(sizes))]
        print(json.dumps(_pending_row(keys, pending, idle, code)))


def _pending_row(
    keys: list[tuple[Path | None, int]],
    pending: dict[tuple[Path | None, int], list[tuple[float, float]]],
    idle: dict[tuple[Path | None, int], list[tuple[float, float]]],
    code: Path | None,
) -> dict[str, object]:
    """What one pending run adds, in the small project and the large one, by one code."""

    def median(times: list[tuple[float, float]], which: int) -> float:
        return statistics.median(t[which] for t in times)

    added = [median(pending[k], 0) - median(idle[k], 0) for k in keys]
    added_cpu = [median(pending[k], 1) - median(idle[k], 1) for k in keys]
    fastest = [min(t[0] for t in pending[k]) - min(t[0] for t in idle[k]) for k in keys]
    return {
        "code": "this checkout" if code is None else str(code),
        "one_pending_run": [size for _, size in keys],
        "wall_secs": [round(median(pending[k], 0), 3) for k in keys],
        "noop_secs": [round(median(idle[k], 0), 3) for k in keys],
        "added_secs": [round(a, 3) for a in added],
        "ratio": round(added[1] / added[0], 2),
        # The same from the fastest invocation of each, which other work reaches least.
        "added_fastest_secs": [round(a, 3) for a in fastest],
        "fastest_ratio": round(fastest[1] / fastest[0], 2),
        # The same from the CPU time, which other work on the machine moves less.
        "noop_cpu_secs": [round(median(idle[k], 1), 3) for k in keys],
        "added_cpu_secs": [round(a, 3) for a in added_cpu],
        "cpu_ratio": round(added_cpu[1] / added_cpu[0], 2),
    }


if __name__ == "__main__":
    main()
