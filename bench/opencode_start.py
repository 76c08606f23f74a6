"""opencode's time per run on the scripted model, with this checkout's code and another's,
interleaved: what llmtt's preparation of a run's HOME costs opencode.

    .venv/bin/python bench/opencode_start.py --before DIR [--rounds 3] [--repeats 3]

DIR is another llmtt checkout (e.g. `git archive` of the commit before a change, unpacked).
One project, one one-command scenario, `agent=opencode model=scripted`, `repeats` runs a
`doit run`; each code has a copy of the project, and each round runs one `doit run` of each in
turn into a fresh results folder (after a first round of each, not counted, that fills the
plan cache and whatever a code keeps under `.llmtt/`). Per code it prints the median of the
runs' agent time (run.json `agent_duration_secs`: opencode's start, its two model requests and
the command, from its launch to its exit) and the CPU time of the `doit run`s (user + system of
every process they waited for: opencode's own CPU is most of it) per run. The CPU figure moves
less than the wall time when other work shares the machine.
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

from installed import ROOT, compile_llmtt

DOIT = str(Path(sys.executable).parent / "doit")

TOML = """\
[target]
binary = "sh"

[agents.opencode]
executable = "{exe}"

[matrix]
agents = ["opencode"]
models = ["scripted"]
repeats = {repeats}
"""

SCENARIO = """\
task:
  prompt: Write hello to out.txt.
solution:
  - echo hello > out.txt
run: {timeout_secs: 120}
evaluation:
  gates:
    - {type: file_exists, path: out.txt}
"""


def make_project(root: Path, repeats: int) -> None:
    """The project: opencode from this checkout's node_modules."""
    exe = ROOT / "node_modules" / ".bin" / "opencode"
    if not exe.exists():
        raise SystemExit(f"{exe} missing: run ./scripts/setup test (npm install)")
    shutil.rmtree(root, ignore_errors=True)
    (root / "scenarios").mkdir(parents=True)
    (root / "llmtt.toml").write_text(TOML.format(exe=exe, repeats=repeats))
    (root / "dodo.py").write_text("from llmtt.tasks import *  # noqa: F403\n")
    (root / "scenarios" / "hello.yaml").write_text(SCENARIO)


def invocation(root: Path, code: Path) -> tuple[list[float], float, float]:
    """One `doit run` into a fresh results folder: each run's agent time, the wall time and
    the CPU time of the invocation."""
    shutil.rmtree(root / "llm-tool-test-results", ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(code)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(
        [DOIT, "run"], cwd=root, env=env, capture_output=True, text=True, timeout=1800
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"doit run in {root} failed:\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}")
    agents = [
        json.loads(path.read_text())["agent_duration_secs"]
        for path in (root / "llm-tool-test-results").glob("*/*/*/run.json")
    ]
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return agents, wall, cpu


def main() -> None:
    compile_llmtt()
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--before", type=Path, required=True, help="another llmtt checkout")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3, help="runs per `doit run`")
    parser.add_argument("--out", type=Path, default=Path("bench/out/opencode-start"))
    args = parser.parse_args()
    if not compileall.compile_dir(str(args.before / "llmtt"), quiet=1):
        raise SystemExit(f"{args.before}/llmtt could not be compiled")
    codes = {"this checkout": ROOT, "before": args.before.resolve()}
    agent: dict[str, list[float]] = {name: [] for name in codes}
    cpu: dict[str, list[float]] = {name: [] for name in codes}
    wall: dict[str, list[float]] = {name: [] for name in codes}
    for name in codes:
        make_project(args.out / name.replace(" ", "-"), args.repeats)
    for round_ in range(args.rounds + 1):
        for name, code in codes.items():
            agents, took, used = invocation(args.out / name.replace(" ", "-"), code)
            if round_ == 0:
                continue  # the first round of each fills what a code keeps between runs
            agent[name] += agents
            wall[name].append(took / len(agents))
            cpu[name].append(used / len(agents))
            print(f"round {round_} {name}: agent {[round(a, 2) for a in agents]}", flush=True)
    for name in codes:
        row = {
            "code": name,
            "runs": len(agent[name]),
            "agent_secs_median": round(statistics.median(agent[name]), 3),
            "agent_secs_fastest": round(min(agent[name]), 3),
            "wall_per_run_median": round(statistics.median(wall[name]), 3),
            "cpu_per_run_median": round(statistics.median(cpu[name]), 3),
        }
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
