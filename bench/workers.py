"""Worker memory against project size: the proportional set size (PSS) of each `doit run -n 2`
worker of projects of 16 to 10,000 oracle runs.

    .venv/bin/python bench/workers.py [--sizes 16,1000,5000,10000] [--secs 20]

Each project's runs are `sleep RUN_SECS` (default 0: a worker carries out run after run, and
Python's garbage collector goes through its objects as it would in a long invocation): `doit
run -n 2` loads the whole task graph, forks its two workers, and they carry out runs. Every
200 ms for `--secs` seconds the PSS of each worker is read from /proc/PID/smaps_rollup (its
private pages, and its share of those it still shares with doit's main process, the forker and
the other workers); the figure is each worker's largest. The workers are the children of doit's
main process with its command line, or those of the forker (llmtt/taskgraph/forker.py), whose
own PSS is shown apart. Then the invocation is interrupted (^C), as a user would. RSS is shown
beside it: it counts every shared page whole.
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
from parallel import SCENARIO, TOML, tree  # noqa: E402

DOIT = str(Path(sys.executable).parent / "doit")
FORKER = "llmtt-forker"  # the process name of the forker (llmtt/taskgraph/forker.py)


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


def measure(root: Path, secs: float) -> tuple[float, float, int, float]:
    """The largest worker PSS and RSS of one `doit run -n 2`, how many workers were seen, and
    the largest PSS of the forker they are forked from (0 when doit forks them itself)."""
    proc = subprocess.Popen(
        [DOIT, "run", "-n", "2"],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    pss = rss = forker_pss = 0.0
    seen: set[int] = set()
    started = None
    try:
        while proc.poll() is None:
            workers, forkers = _family(proc.pid)
            if workers and started is None:
                started = time.monotonic()
            for pid in workers:
                seen.add(pid)
                now_pss, now_rss = memory_mb(pid)
                pss, rss = max(pss, now_pss), max(rss, now_rss)
            for pid in forkers:
                forker_pss = max(forker_pss, memory_mb(pid)[0])
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
    return pss, rss, len(seen), forker_pss


def _family(top: int) -> tuple[list[int], list[int]]:
    """doit's workers (its command line, forked by its main process `top` or by the forker)
    and its forker (`llmtt-forker`, a child of `top`), if any."""
    stats: dict[int, tuple[str, int]] = {}
    for pid in tree(top):
        try:
            with open(f"/proc/{pid}/stat") as handle:
                name, rest = handle.read().split("(", 1)[1].rsplit(")", 1)
            stats[pid] = (name, int(rest.split()[1]))
        except (OSError, ValueError, IndexError):
            continue
    forkers = [pid for pid, (name, parent) in stats.items() if name == FORKER and parent == top]
    workers = [
        pid
        for pid, (name, parent) in stats.items()
        if pid != top and name != FORKER and parent in (top, *forkers) and _same(pid, top)
    ]
    return workers, forkers


def _same(pid: int, other: int) -> bool:
    """Whether two processes run the same command line."""
    try:
        return (
            Path(f"/proc/{pid}/cmdline").read_bytes() == Path(f"/proc/{other}/cmdline").read_bytes()
        )
    except OSError:
        return False


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
            pss, rss, count, forker = measure(root, args.secs)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        print(
            f"{runs:>6,} runs: largest worker PSS {pss:6.1f} MB, RSS {rss:6.1f} MB "
            f"({count} workers seen); forker PSS {forker:.1f} MB",
            flush=True,
        )


if __name__ == "__main__":
    main()
