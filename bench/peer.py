"""Peer comparison: llmtt's cost of an extra trivial run against inspect_ai's per-sample cost.

    .venv/bin/python bench/peer.py [-n 300] [--reps 5] [--max-samples 1] [--generate]
                                   [--profile TOP] [--keep]

Both sides do the same trivial work per item, on the same machine, interleaved:

- llmtt: a project of N one-command oracle scenarios (bench.py's `make_project`: a fixture,
  `echo K > out.txt`, a `file_contains` gate); the first `doit run` (`-n 1`) into a fresh
  results folder.
- inspect_ai: an eval of N samples with the `mockllm/model` model in the `local` sandbox; each
  sample copies the same fixture file in, a solver runs `echo K > out.txt` through
  `sandbox().exec`, a scorer reads out.txt and checks it holds K; `display="none"`, the log
  written as inspect writes it by default (`.eval`, samples and events in it) to a new folder;
  `--generate` adds one mockllm call per sample, whose answer is the command.

Cost per item = (wall(2N) - wall(N)) / N, each the median of `--reps` invocations, so the
start-up of each process (interpreter, imports, plan or task set-up) cancels out. Printed
beside it, less sensitive to other load on a shared machine: the same from the fastest
invocation of each size, and from CPU time (user + system of all child processes).
Nothing is deleted until the figures are taken (see `set_aside`).

inspect_ai is installed, pinned, into its own virtualenv (bench/out/peer-venv) the first time
this runs; nothing else installs it.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.metadata
import json
import platform
import pstats
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from installed import compile_llmtt  # noqa: E402

from bench import make_project, timed  # noqa: E402  (bench/bench.py, beside this file)

INSPECT_VERSION = "0.3.285"
OUT = Path(__file__).resolve().parent / "out"
VENV = OUT / "peer-venv"
WORK = OUT / "peer"

# Runs in the peer virtualenv: argv = samples, log folder, fixture file, max_samples, generate.
INSPECT_SCRIPT = '''\
import sys

from inspect_ai import Task, eval
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Target, accuracy, scorer
from inspect_ai.solver import Generate, TaskState, generate, solver
from inspect_ai.util import sandbox

samples, log_dir, fixture, max_samples, with_generate = sys.argv[1:6]


def play(messages, tools, tool_choice, config):
    """The mock model answers with the command the prompt asks for, its usage given (mockllm
    would otherwise count tokens with tiktoken, whose encoding it downloads)."""
    word = messages[-1].text.split()[3]
    output = ModelOutput.from_content(model="mockllm", content=f"echo {word} > out.txt")
    output.usage = ModelUsage(input_tokens=8, output_tokens=6, total_tokens=14)
    return output


@solver
def run_command():
    """The oracle's part: one bash command in the sample's sandbox (the model's answer after
    a generate step, else the sample's own command)."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        command = state.output.completion or state.metadata["command"]
        result = await sandbox().exec(["bash", "-c", command])
        state.metadata["exit_code"] = result.returncode
        return state

    return solve


@scorer(metrics=[accuracy()])
def file_contains():
    """The gate: out.txt holds the sample's target."""

    async def score(state: TaskState, target: Target) -> Score:
        try:
            text = await sandbox().read_file("out.txt")
        except FileNotFoundError:
            text = ""
        return Score(value=CORRECT if target.text in text else INCORRECT)

    return score


dataset = [
    Sample(
        id=index,
        input=f"Write the word {index} to out.txt.",
        target=str(index),
        metadata={"command": f"echo {index} > out.txt"},
        files={"README.md": fixture},
    )
    for index in range(int(samples))
]
if with_generate == "1":
    steps, model = [generate(), run_command()], get_model("mockllm/model", custom_outputs=play)
else:
    steps, model = [run_command()], get_model("mockllm/model")
task = Task(dataset=dataset, solver=steps, scorer=file_contains(), sandbox="local")
[log] = eval(
    task,
    model=model,
    display="none",
    log_dir=log_dir,
    max_samples=int(max_samples),
)
correct = sum(
    1 for sample in log.samples or [] if sample.scores["file_contains"].value == CORRECT
)
if log.status != "success" or correct != int(samples):
    sys.exit(f"inspect eval: status {log.status}, {correct} of {samples} correct")
'''


def peer_python() -> Path:
    """The peer virtualenv's interpreter, with inspect_ai installed (once)."""
    python = VENV / "bin" / "python"
    probe = [str(python), "-c", "import inspect_ai; print(inspect_ai.__version__)"]
    if python.exists():
        found = subprocess.run(probe, capture_output=True, text=True)
        if found.returncode == 0 and found.stdout.strip() == INSPECT_VERSION:
            return python
        shutil.rmtree(VENV)
    print(f"installing inspect_ai=={INSPECT_VERSION} into {VENV} ...", file=sys.stderr)
    subprocess.run(["python3", "-m", "venv", str(VENV)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", f"inspect-ai=={INSPECT_VERSION}"], check=True
    )
    return python


def children_cpu() -> float:
    """User + system CPU seconds of every waited-for child process so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def set_aside(folder: Path, work: Path) -> None:
    """Move a results folder out of the way, to delete with `work` once every figure is taken.

    Deleting thousands of files between invocations slows the next ones down: ext4 skips
    inodes deleted in the last ~30 s when it allocates new ones (`recently_deleted`, seen
    with perf), so every file and folder a run creates would cost more, rep after rep.
    """
    if folder.exists():
        trash = work / "set-aside"
        trash.mkdir(exist_ok=True)
        folder.rename(trash / f"{folder.parent.name}-{time.monotonic_ns()}")


def inspect_wall(
    python: Path, samples: int, fixture: Path, work: Path, args: argparse.Namespace
) -> float:
    """Wall time of one inspect eval of `samples` samples, into a new log folder."""
    log_dir = work / f"inspect-logs-{time.monotonic_ns()}"
    command = [str(python), str(WORK / "inspect_task.py"), str(samples), str(log_dir)]
    command += [str(fixture), str(args.max_samples), "1" if args.generate else "0"]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=work, capture_output=True, text=True, timeout=3600)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"inspect eval failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return elapsed


def llmtt_wall(root: Path, work: Path) -> float:
    """Wall time of the first `doit run` of the project, into a fresh results folder."""
    set_aside(root / "llm-tool-test-results", work)
    return timed(root, "run")


def profile_llmtt(root: Path, work: Path, top: int) -> None:
    """cProfile one first `doit run` in this process and print the top functions."""
    import os

    from doit.doit_cmd import DoitMain

    set_aside(root / "llm-tool-test-results", work)
    here = Path.cwd()
    os.chdir(root)
    profiler = cProfile.Profile()
    try:
        profiler.enable()
        DoitMain().run(["run"])
        profiler.disable()
    finally:
        os.chdir(here)
    stats = pstats.Stats(profiler, stream=sys.stderr)
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)


def version(python: str, package: str) -> str:
    """A package's version as seen by one interpreter."""
    code = f"import importlib.metadata as m; print(m.version({package!r}))"
    return subprocess.run([python, "-c", code], capture_output=True, text=True).stdout.strip()


def commit() -> str:
    """The llmtt checkout's commit, `-dirty` when its files differ from it."""
    repo = Path(__file__).resolve().parent.parent
    command = ["git", "describe", "--always", "--dirty", "--exclude", "*"]
    return subprocess.run(command, cwd=repo, capture_output=True, text=True).stdout.strip()


def ratio(llmtt: float, inspect: float) -> float | None:
    """llmtt's figure over inspect's; none when inspect's is not positive (noise at small N)."""
    return round(llmtt / inspect, 2) if inspect > 0 else None


def main() -> None:
    compile_llmtt()
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=300, help="items in the smaller run (N)")
    parser.add_argument("--reps", type=int, default=5, help="invocations per size (median)")
    parser.add_argument(
        "--max-samples", type=int, default=1, help="inspect's concurrent samples (1: like -n 1)"
    )
    parser.add_argument("--generate", action="store_true", help="one mockllm call per sample")
    parser.add_argument("--profile", type=int, default=0, metavar="TOP", help="cProfile llmtt")
    parser.add_argument("--keep", action="store_true", help="keep the projects, results, logs")
    args = parser.parse_args()
    python = peer_python()
    WORK.mkdir(parents=True, exist_ok=True)
    (WORK / "inspect_task.py").write_text(INSPECT_SCRIPT)
    # Everything this invocation writes goes under one new folder, deleted only at the end.
    work = WORK / time.strftime("%Y%m%d-%H%M%S")
    sizes = (args.n, 2 * args.n)
    roots = {size: work / f"llmtt-{size}" for size in sizes}
    for size, root in roots.items():
        make_project(root, scenarios=size, repeats=1)
    fixture = roots[args.n] / "scenarios" / "fixture" / "README.md"
    keys = [(side, size) for side in ("llmtt", "inspect") for size in sizes]
    walls: dict[tuple[str, int], list[float]] = {key: [] for key in keys}
    cpus: dict[tuple[str, int], list[float]] = {key: [] for key in keys}
    for rep in range(args.reps):
        # Alternate which size and which side go first, so drift in the machine's speed
        # falls on both.
        order = sizes if rep % 2 == 0 else sizes[::-1]
        for size in order:
            sides = ("llmtt", "inspect") if rep % 2 == 0 else ("inspect", "llmtt")
            for side in sides:
                cpu = children_cpu()
                if side == "llmtt":
                    wall = llmtt_wall(roots[size], work)
                else:
                    wall = inspect_wall(python, size, fixture, work, args)
                cpu = children_cpu() - cpu
                walls[(side, size)].append(wall)
                cpus[(side, size)].append(cpu)
                print(
                    f"rep {rep + 1} {side:7} {size:5} items {wall:6.2f} s wall {cpu:6.2f} s cpu",
                    file=sys.stderr,
                )

    def per_item(
        series: dict[tuple[str, int], list[float]], pick: Callable[[list[float]], float]
    ) -> dict[str, float]:
        """Cost per extra item in ms, from `pick` (median or min) of each size's figures."""
        return {
            side: (pick(series[(side, sizes[1])]) - pick(series[(side, sizes[0])])) / args.n * 1e3
            for side in ("llmtt", "inspect")
        }

    median = {key: statistics.median(values) for key, values in walls.items()}
    wall_median = per_item(walls, statistics.median)
    wall_min = per_item(walls, min)
    cpu_median = per_item(cpus, statistics.median)
    figures = {
        "n": args.n,
        "reps": args.reps,
        "inspect_max_samples": args.max_samples,
        "inspect_generate": args.generate,
        "llmtt_per_run_ms": round(wall_median["llmtt"], 1),
        "inspect_per_sample_ms": round(wall_median["inspect"], 1),
        "ratio_llmtt_over_inspect": ratio(wall_median["llmtt"], wall_median["inspect"]),
        # Less sensitive to other load on a shared machine: the fastest invocation of each
        # size, and the CPU time (user + system, every child process) instead of wall time.
        "from_min_wall_ms": {side: round(v, 1) for side, v in wall_min.items()},
        "from_min_wall_ratio": ratio(wall_min["llmtt"], wall_min["inspect"]),
        "from_median_cpu_ms": {side: round(v, 1) for side, v in cpu_median.items()},
        "from_median_cpu_ratio": ratio(cpu_median["llmtt"], cpu_median["inspect"]),
        "median_walls_secs": {f"{side}_{size}": round(v, 2) for (side, size), v in median.items()},
        "versions": {
            "python": platform.python_version(),
            "llmtt": importlib.metadata.version("llmtt"),
            "llmtt_commit": commit(),
            "doit": importlib.metadata.version("doit"),
            "inspect_ai": version(str(python), "inspect_ai"),
        },
    }
    print(json.dumps(figures, indent=2))
    if args.profile:
        profile_llmtt(roots[sizes[1]], work, args.profile)
    if not args.keep:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
