"""What the sandbox costs: per gate (one short command), per run (`doit run` of oracle runs
with one command and one command gate each), and per relayed network (the model route a
scripted or real model needs), each side by side with `[isolation] mode = "none"`,
interleaved in one process so the machine's drift falls on both alike.

    .venv/bin/python bench/sandbox.py [--commands 200] [--runs 20] [--rounds 5] [--json FILE]

Target (issue 28): under 50 ms added per run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from llmtt.execution.isolation import sandbox
from llmtt.process.sandbox.bwrap import Confinement, View
from llmtt.process.sandbox.relay import Relay
from llmtt.process.shell import run_shell
from llmtt.spec.config import Config

DOIT = str(Path(sys.executable).parent / "doit")


def per_command(count: int, folder: Path) -> dict[str, float]:
    """Median time of `true` through run_shell, unconfined, confined, confined with a route."""
    work = folder / "work"
    work.mkdir()
    tmp = folder / "tmp"
    tmp.mkdir()
    base = sandbox(folder, folder / "results", Config())
    assert base is not None
    view = View(cwd=work, writable=(work,), tmp=tmp)
    times: dict[str, list[float]] = {"none": [], "bwrap": [], "bwrap+route": []}
    with Relay([("127.0.0.1", 9)]) as relay:
        routed = Confinement(base, View(cwd=work, writable=(work,), tmp=tmp, routes=relay.routes))
        ways = {"none": None, "bwrap": Confinement(base, view), "bwrap+route": routed}
        for _ in range(count):
            for name, confine in ways.items():
                started = time.perf_counter()
                result = run_shell(
                    "true",
                    cwd=work,
                    env={"PATH": "/usr/bin:/bin"},
                    timeout_secs=30,
                    confine=confine,
                )
                times[name].append(time.perf_counter() - started)
                assert result.exit_code == 0, result
    return {name: statistics.median(t) * 1000 for name, t in times.items()}


def per_run(runs: int, rounds: int, folder: Path) -> dict[str, float]:
    """Median wall time of `doit run -a` over `runs` oracle runs, per run, both ways."""
    project = folder / "project"
    (project / "scenarios").mkdir(parents=True)
    (project / "dodo.py").write_text("from llmtt.tasks import *  # noqa: F403\n")
    (project / "llmtt.toml").write_text(f'[target]\nbinary = "echo"\n[matrix]\nrepeats = {runs}\n')
    (project / "scenarios/s.yaml").write_text(
        "task: {prompt: x}\nsolution: [echo hi > out.txt]\n"
        "evaluation:\n  gates:\n    - {type: command_succeeds, command: test -f out.txt}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLMTT_")}
    times: dict[str, list[float]] = {"none": [], "bwrap": []}
    subprocess.run([DOIT, "run"], cwd=project, env=env, check=True, capture_output=True)
    for _ in range(rounds):
        for mode in times:
            started = time.perf_counter()
            done = subprocess.run(
                [DOIT, "run", "-a"],
                cwd=project,
                env={**env, "LLMTT_ISOLATION": mode},
                capture_output=True,
                text=True,
            )
            times[mode].append(time.perf_counter() - started)
            assert done.returncode == 0, done.stdout + done.stderr
    return {mode: statistics.median(t) / runs * 1000 for mode, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--commands", type=int, default=200)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="llmtt-bench-sandbox-") as scratch:
        folder = Path(scratch)
        command = per_command(args.commands, folder)
        run = per_run(args.runs, args.rounds, folder)
    figures: dict[str, Any] = {
        "command_ms": command,
        "run_ms": run,
        "added_per_command_ms": command["bwrap"] - command["none"],
        "added_per_route_ms": command["bwrap+route"] - command["bwrap"],
        "added_per_run_ms": run["bwrap"] - run["none"],
    }
    print(
        f"one command (median of {args.commands}): unconfined {command['none']:.1f} ms, "
        f"confined {command['bwrap']:.1f} ms, with a network route {command['bwrap+route']:.1f} ms"
    )
    print(
        f"one oracle run with a command gate (doit run -a of {args.runs}, median of "
        f"{args.rounds}): unconfined {run['none']:.1f} ms, confined {run['bwrap']:.1f} ms"
    )
    print(
        f"added: {figures['added_per_command_ms']:.1f} ms per command, "
        f"{figures['added_per_route_ms']:.1f} ms for a route, "
        f"{figures['added_per_run_ms']:.1f} ms per run (target: under 50 ms)"
    )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
