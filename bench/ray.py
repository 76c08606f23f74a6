"""Runs through Ray: 64 runs of a 2-second agent (the oracle playing `sleep 2`) on a local two-node
Ray cluster (tests/executors/ray_cluster.py: a head and a second node, each declaring `--cpus` CPUs,
in a network namespace of their own), against `doit run -n N` on this machine alone, and the
controller's own cost per run.

    .venv/bin/python bench/ray.py [--runs 64] [--secs 2] [--slots 8] [--cpus 4]

Both sides keep `--slots` runs under way (`-n` locally; `-n` in threads with executor=ray,
the cluster declaring 2 x `--cpus` CPUs). Efficiency = ideal (runs x secs / slots) / wall time
of the first `doit run` (a fresh results folder; the plan cache warm). The controller's cost
per run is the CPU time of the `doit run` process and its children on the controller (for Ray:
the doit process only; the nodes' work is in the Ray daemons) divided by the runs. The cluster's
start is not counted (it is up before, as a cluster is).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "executors"))

from installed import compile_llmtt  # noqa: E402
from ray_cluster import RayCluster  # noqa: E402

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


def make(root: Path, runs: int, secs: float) -> None:
    (root / "scenarios").mkdir(parents=True)
    (root / "llmtt.toml").write_text(TOML.format(repeats=runs))
    (root / "scenarios" / "wait.yaml").write_text(SCENARIO.format(secs=secs))
    (root / "dodo.py").write_text("from llmtt.tasks import *  # noqa: F403\n")


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(run: object) -> tuple[float, float]:
    """Wall seconds and CPU seconds of the children it waited for."""
    cpu, started = children_cpu(), time.monotonic()
    done = run()  # type: ignore[operator]
    wall, used = time.monotonic() - started, children_cpu() - cpu
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return wall, used


def main() -> None:
    compile_llmtt()
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=64)
    parser.add_argument("--secs", type=float, default=2.0)
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--cpus", type=int, default=4)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="llmtt-bench-ray-"))
    ideal = args.runs * args.secs / args.slots
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLMTT_")}
    started = time.monotonic()
    cluster = RayCluster(head_cpus=args.cpus, node_cpus=args.cpus)
    up = time.monotonic() - started
    try:
        figures = {}
        for side in ("local", "ray"):
            root = work / side
            make(root, args.runs, args.secs)
            # The plan cache warm, the results folder fresh, as after an edit-free invocation.
            warm = cluster.run([DOIT, "list"], cwd=root)
            assert warm.returncode == 0, warm.stderr
            shutil.rmtree(root / "llm-tool-test-results" / "wait", ignore_errors=True)
            words = ["run", "-n", str(args.slots)] + (["executor=ray"] if side == "ray" else [])
            figures[side] = timed(lambda w=words, r=root: cluster.run([DOIT, *w], cwd=r, **env))
        print(f"Ray cluster: 2 nodes x {args.cpus} CPUs, up in {up:.1f} s (not counted)")
        print(
            f"{args.runs} runs of a {args.secs:g} s agent, {args.slots} under way; "
            f"ideal {ideal:.1f} s"
        )
        for side, (wall, cpu) in figures.items():
            print(
                f"  {side:5}  wall {wall:6.1f} s  efficiency {ideal / wall:4.0%}  "
                f"controller CPU {cpu * 1000 / args.runs:6.1f} ms a run"
            )
        overhead = (figures["ray"][0] - ideal) / args.runs * args.slots
        print(f"  ray: wall time beyond ideal, per run and slot: {overhead * 1000:.0f} ms")
    finally:
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
