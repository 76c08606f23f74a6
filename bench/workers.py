"""Worker memory against project size: the proportional set size (PSS) of each `doit run -n 2`
worker of projects of 16 to 10,000 oracle runs.

    .venv/bin/python bench/workers.py [--sizes 16,1000,5000,10000] [--secs 20]

Each project's runs are `sleep RUN_SECS` (default 0: a worker carries out run after run, and
Python's garbage collector goes through its objects as it would in a long invocation): `doit
run -n 2` loads the whole task graph, forks its two workers, and they carry out runs. Every
200 ms for `--secs` seconds the PSS of each worker is read from /proc/PID/smaps_rollup (its
private pages, and its share of those it still shares with doit's main process and the other
worker); the figure is each worker's largest. Then the invocation is interrupted (^C), as a
user would. RSS is shown beside it: it counts every shared page whole.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from installed import compile_llmtt  # noqa: E402
from parallel import SCENARIO, TOML, python_processes, tree  # noqa: E402

DOIT = str(Path(sys.executable).parent / "doit")


def memory_mb(pid: int) -> tuple[float, float]:
    """(PSS, RSS) of a process in MB; zeros once it is gone."""
    found = {"Pss:": 0.0, "Rss:": 0.0}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as handle:
            for line in handle:
                key = line.split(maxsplit=1)[0]
                if key in found:
                    found[key] = int(line.split()[1]) / 1024
    except OSError:
        pass
    return found["Pss:"], found["Rss:"]


def project(root: Path, runs: int, run_secs: float) -> None:
    """`runs` runs: 100 scenarios (fewer for small sizes), the rest in repeats."""
    scenarios = min(100, runs)
    (root / "scenarios").mkdir(parents=True)
    (root / "llmtt.toml").write_text(TOML.format(repeats=runs // scenarios))
    (root / "dodo.py").write_text("from llmtt.tasks import *  # noqa: F403\n")
    for index in range(scenarios):
        (root / "scenarios" / f"s{index:03d}.yaml").write_text(SCENARIO.format(secs=run_secs))


def measure(root: Path, secs: float) -> tuple[float, float, int]:
    """The largest worker PSS and RSS of one `doit run -n 2`, and how many workers were seen."""
    proc = subprocess.Popen(
        [DOIT, "run", "-n", "2"],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    pss = rss = 0.0
    seen: set[int] = set()
    started = None
    try:
        while proc.poll() is None:
            workers = [p for p in python_processes(tree(proc.pid)) if p != proc.pid]
            workers = [p for p in workers if _is_worker(p, proc.pid)]
            if workers and started is None:
                started = time.monotonic()
            for pid in workers:
                seen.add(pid)
                now_pss, now_rss = memory_mb(pid)
                pss, rss = max(pss, now_pss), max(rss, now_rss)
            if started is not None and time.monotonic() - started > secs:
                break
            time.sleep(0.2)
    finally:
        if proc.poll() is None:  # still carrying out runs: stopped as a user would
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        elif proc.returncode != 0:
            raise SystemExit(f"doit run -n 2 failed (status {proc.returncode}) in {root}")
    return pss, rss, len(seen)


def _is_worker(pid: int, parent: int) -> bool:
    """doit's forked workers: direct children of its main process with its command line."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            ppid = int(handle.read().rsplit(")", 1)[1].split()[1])
        same = (
            Path(f"/proc/{pid}/cmdline").read_bytes()
            == Path(f"/proc/{parent}/cmdline").read_bytes()
        )
    except (OSError, ValueError, IndexError):
        return False
    return ppid == parent and same


def main() -> None:
    compile_llmtt()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="16,1000,5000,10000")
    parser.add_argument("--secs", type=float, default=60.0)
    parser.add_argument("--run-secs", type=float, default=0.0)
    args = parser.parse_args()
    for runs in [int(n) for n in args.sizes.split(",")]:
        root = Path(tempfile.mkdtemp(prefix="llmtt-workers-"))
        try:
            project(root, runs, args.run_secs)
            pss, rss, count = measure(root, args.secs)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        print(
            f"{runs:>6,} runs: largest worker PSS {pss:6.1f} MB, RSS {rss:6.1f} MB "
            f"({count} workers seen)",
            flush=True,
        )


if __name__ == "__main__":
    main()
