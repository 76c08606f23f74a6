"""A command printing 100 MB, played by the oracle in a real `doit run`: the harness's peak
memory, what the transcript and the event log keep, and the time.

    .venv/bin/python bench/big_output.py [--mb 100] [--out bench/out/big-output]

The peak is the `doit` process's maximum resident set size (the harness: the run executes in
it); the command itself (`head` and `tr`) is measured apart by the kernel and is not in it.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

from installed import compile_llmtt

DOIT = str(Path(sys.executable).parent / "doit")

TOML = """\
[target]
binary = "head"

[matrix]
agents = ["oracle"]
"""

SCENARIO = """\
task:
  prompt: Print a lot.
solution:
  - head -c {size} /dev/zero | tr '\\0' 'a'; echo; echo the end
evaluation:
  gates:
    - {{type: command_succeeds, command: "true"}}
"""


def main() -> None:
    compile_llmtt()
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--out", type=Path, default=Path("bench/out/big-output"))
    args = parser.parse_args()
    root = args.out.resolve()
    shutil.rmtree(root, ignore_errors=True)
    (root / "scenarios").mkdir(parents=True)
    (root / "llmtt.toml").write_text(TOML)
    (root / "dodo.py").write_text("from llmtt.tasks import *  # noqa: F403\n")
    size = args.mb * 1_000_000
    (root / "scenarios" / "big.yaml").write_text(SCENARIO.format(size=size))
    started = time.perf_counter()
    done = subprocess.run([DOIT, "run"], cwd=root, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"doit run failed:\n{done.stdout}{done.stderr}")
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    run = root / "llm-tool-test-results" / "big" / "oracle" / "r1"
    transcript = (run / "transcript.raw.txt").stat().st_size
    events = (run / "events.jsonl").stat().st_size
    result = next(
        json.loads(line)
        for line in (run / "events.jsonl").read_text().split("\n")
        if '"tool_result"' in line
    )
    print(f"command output         {size / 1e6:.0f} MB")
    print(f"harness peak RSS       {peak_mb:.0f} MB")
    print(f"transcript.raw.txt     {transcript / 1e6:.1f} MB")
    print(f"events.jsonl           {events / 1e6:.2f} MB")
    print(f"tool_result output     {len(result['output']) / 1e6:.2f} M characters")
    print(f"  ends with            {result['output'][-20:]!r}")
    print(f"doit run wall time     {wall:.1f} s")


if __name__ == "__main__":
    main()
