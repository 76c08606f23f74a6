"""Parallel runs: 16 runs of a 2-second agent (the oracle playing `sleep 2`) at -n 4 and -n 8,
against the ideal (16 x 2 s / n), and the peak memory of a worker.

    .venv/bin/python bench/parallel.py [--runs 16] [--secs 2] [--workers 4,8] [--times 3]
    .venv/bin/python bench/parallel.py --runs 16,64,128 [--secs 1]

Efficiency = ideal / wall time of the first `doit run -n N` (a fresh results folder each time;
the plan cache is warm, as after any edit-free invocation). Worker memory: the largest RSS of
the doit processes, sampled every 50 ms from /proc while the run goes on.

With several sizes (`--runs 16,64,128`), the wall times are fitted to `start + slope x runs`
(least squares), for llmtt and for doit's floor: a plain dodo.py of as many tasks, each running
`sleep SECS` in a shell, under the same `doit run -n N`, measured in turn with llmtt's. The
start is what an invocation costs whatever its size (interpreter, plan, forks, aggregate,
exit); the slope against the ideal one (SECS / N a run) is the efficiency net of it. With
`--confined`, a third floor whose tasks do the least a confined run must: the sleep in a
bubblewrap sandbox, then a gate's `true` in another.
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
from procs import rss_mb, tree

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


def one(root: Path, workers: int, sample: bool = True) -> tuple[float, float]:
    """Wall time of one `doit run -n workers` from nothing, and the largest worker RSS (0 when
    not `sample`d: the fitted series time llmtt as they time the floors, without reading
    /proc every 50 ms beside it).

    Nothing is left of the runs, their folders nor doit's record of them (a first run), but
    the plan cache is: the project was not edited. The last invocation's runs are moved aside,
    not deleted, before this one (`aside`)."""
    results = root / "llm-tool-test-results"
    aside(results / "s", root.parent)
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
    while sample and proc.poll() is None:
        members = python_processes(tree(proc.pid))
        workers_only = [p for p in members if p != proc.pid]
        peak = max([peak, *(rss_mb(p) for p in workers_only)])
        time.sleep(0.05)
    proc.wait()
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"doit run -n {workers} failed in {root}")
    return wall, peak


# Where the last invocations' runs go until the benchmark ends (`aside`).
GRAVE = ".parallel-aside"


def aside(folder: Path, base: Path) -> None:
    """Move `folder` out of the way, into `base`'s grave, deleted when the benchmark ends
    (`bury`). Deleted at once, its thousands of files would be paid for by the invocation
    timed next: on an ext4 disk without a journal (this machine's), the kernel skips the inodes
    freed in the last seconds when it makes new ones, reading their blocks to tell
    (`recently_deleted`), so every folder and file a run makes pays for the files the
    benchmark itself just deleted; the floors make none. Measured on 80 runs of `sleep 0` at
    -n 4: 0.83x the wall of deleting them just before (10 interleaved pairs)."""
    if folder.exists():
        grave = base / GRAVE
        grave.mkdir(parents=True, exist_ok=True)
        folder.rename(grave / f"{folder.name}-{time.monotonic_ns()}")


def bury(base: Path) -> None:
    shutil.rmtree(base / GRAVE, ignore_errors=True)


FLOOR_DODO = """\
DOIT_CONFIG = {{"dep_file": ".doit.db", "backend": "sqlite3", "verbosity": 0}}


def task_sleep():
    for index in range({runs}):
        yield {{"name": str(index), "actions": {actions}}}
"""

# The least a confined run does besides its agent's work: the agent in a sandbox, and one gate
# in another (llmtt's own sandboxes bind more: the toolchains on PATH, the run's folders).
SANDBOX = (
    "bwrap --unshare-all --unshare-user --cap-drop ALL --die-with-parent --ro-bind /usr /usr "
    "--symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64 "
    "--ro-bind /etc /etc --proc /proc --dev /dev --tmpfs /tmp"
)


def floor_actions(secs: float, confined: bool) -> list[str]:
    """A floor task's actions: `sleep SECS`; `confined`: in a sandbox, then a gate's `true`
    in another."""
    if not confined:
        return [f"sleep {secs}"]
    return [f"{SANDBOX} sleep {secs}", f"{SANDBOX} bash -c true"]


def make_llmtt(root: Path, runs: int, secs: float) -> None:
    """The llmtt project: one scenario played `runs` times by the oracle (an earlier one moved
    aside, `aside`)."""
    aside(root, root.parent)
    (root / "scenarios").mkdir(parents=True)
    (root / "llmtt.toml").write_text(TOML.format(repeats=runs))
    (root / "dodo.py").write_text("from llmtt.tasks import *  # noqa: F403\n")
    (root / "scenarios" / "s.yaml").write_text(SCENARIO.format(secs=secs))
    past = time.time() - 60  # old enough for the plan cache to take
    for path in root.rglob("*"):
        os.utime(path, (past, past))
    subprocess.run([DOIT, "list"], cwd=root, capture_output=True, check=True)


def floor(root: Path, workers: int) -> float:
    """Wall time of one `doit run -n workers` of the floor, from nothing."""
    for dep_file in root.glob(".doit.db*"):
        dep_file.unlink()
    started = time.perf_counter()
    subprocess.run([DOIT, "run", "-n", str(workers)], cwd=root, capture_output=True, check=True)
    return time.perf_counter() - started


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least-squares `start + slope x runs` through (runs, wall) points."""
    mean_x = statistics.mean(x for x, _ in points)
    mean_y = statistics.mean(y for _, y in points)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / sum(
        (x - mean_x) ** 2 for x, _ in points
    )
    return mean_y - slope * mean_x, slope


def fitted(args: argparse.Namespace, sizes: list[int]) -> None:
    """The start and the slope, for llmtt and doit's floor, at each -n (see the module)."""
    base = args.out.resolve()
    for runs in sizes:
        make_llmtt(base / f"llmtt-{runs}", runs, args.secs)
        for name, confined in (("floor", False), ("confined", True)):
            dodo = base / f"{name}-{runs}"
            shutil.rmtree(dodo, ignore_errors=True)
            dodo.mkdir(parents=True)
            actions = floor_actions(args.secs, confined)
            (dodo / "dodo.py").write_text(FLOOR_DODO.format(runs=runs, actions=actions))
    for workers in (int(w) for w in args.workers.split(",")):
        ours: list[tuple[int, float]] = []
        theirs: list[tuple[int, float]] = []
        confined: list[tuple[int, float]] = []
        for runs in sizes:
            for _ in range(args.times):  # in turn, so that both meet the same machine
                wall, _ = one(base / f"llmtt-{runs}", workers, sample=False)
                ours.append((runs, wall))
                theirs.append((runs, floor(base / f"floor-{runs}", workers)))
                if args.confined:
                    confined.append((runs, floor(base / f"confined-{runs}", workers)))
        (start, slope), (floor_start, floor_slope) = fit(ours), fit(theirs)
        ideal = args.secs / workers
        print(
            f"-n {workers}: llmtt starts in {start:.2f} s (doit's floor {floor_start:.2f} s: "
            f"+{start - floor_start:.2f} s), then {slope:.4f} s a run against the ideal "
            f"{ideal:.4f} s: {ideal / slope:.1%} of ideal net of the start (the floor "
            f"{ideal / floor_slope:.1%}); walls {[(r, round(w, 2)) for r, w in ours]}, floor "
            f"{[(r, round(w, 2)) for r, w in theirs]}",
            flush=True,
        )
        if confined:
            boxed_start, boxed_slope = fit(confined)
            print(
                f"-n {workers}: a confined floor (each task: its sleep in a sandbox, a gate's "
                f"`true` in another) starts in {boxed_start:.2f} s, then {ideal / boxed_slope:.1%}"
                f" of ideal; walls {[(r, round(w, 2)) for r, w in confined]}",
                flush=True,
            )


def main() -> None:
    compile_llmtt()
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", default="16", help="runs; several (16,64,128): fitted")
    parser.add_argument("--secs", type=float, default=2.0)
    parser.add_argument("--workers", default="4,8")
    parser.add_argument("--times", type=int, default=3)
    parser.add_argument(
        "--confined", action="store_true", help="fitted: also a floor that confines each task"
    )
    parser.add_argument("--out", type=Path, default=Path("bench/out/parallel"))
    args = parser.parse_args()
    sizes = [int(r) for r in args.runs.split(",")]
    if len(sizes) > 1:
        fitted(args, sizes)
        bury(args.out.resolve())
        return
    args.runs = sizes[0]
    root = args.out.resolve()
    make_llmtt(root, args.runs, args.secs)
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
    bury(root.parent)


if __name__ == "__main__":
    main()
