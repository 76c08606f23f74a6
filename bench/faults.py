"""Fault injection: kills, concurrent invocations, a budget under -n 4, planted secrets.

    .venv/bin/python bench/faults.py [--cycles 20] [--out bench/out/faults] [--json FILE]
                                     [--only kill,concurrency,budget,secrets]

Each part builds a real temporary project, drives the real `doit`, injects its fault and counts
what was lost. The table it prints is the issue's: cycles, finished runs redone, corrupt
artifacts, leftover processes, spend against budget, secrets found per artifact; the targets
are 0, 0, 0, 0, within bound, 0. `tests/test_faults.py` runs it with few cycles.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

DOIT = str(Path(sys.executable).parent / "doit")
RESULTS = "llm-tool-test-results"

KILL_TOML = """\
[target]
binary = "echo"

[matrix]
agents = ["oracle"]
repeats = 3
"""

# One step logs that the run's agent executed (its workspace names the run), the others take
# a while so that kills land inside agents, gates and saves alike.
KILL_SCENARIO = """\
task: {{prompt: Take a while.}}
solution:
  - pwd >> {log}
  - sleep {pause} && echo one > out.txt
  - sleep {pause} && echo two >> out.txt
evaluation:
  gates:
    - {{type: file_contains, path: out.txt, substring: two}}
    - {{type: command_succeeds, command: sleep 0.1}}
"""


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("LLMTT_")}


class Doit:
    """One `doit` invocation in the background; its output goes to a file, not a pipe, so a
    process it leaves behind cannot keep the reader waiting."""

    def __init__(self, root: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.output = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [DOIT, *args],
            cwd=root,
            env=env or _env(),
            stdout=self.output,
            stderr=subprocess.STDOUT,
        )

    def wait(self, timeout: float = 600) -> tuple[int, str]:
        """Its exit status and output, once it ended."""
        code = self.proc.wait(timeout=timeout)
        self.output.seek(0)
        return code, self.output.read().decode(errors="replace")


def _finish(root: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    return Doit(root, *args, env=env).wait()


def _project(root: Path, toml: str, scenarios: dict[str, str]) -> None:
    if root.exists():
        shutil.rmtree(root)
    (root / "scenarios").mkdir(parents=True)
    (root / "llmtt.toml").write_text(toml)
    (root / "dodo.py").write_text("from llmtt.tasks import *  # noqa: F403\n")
    for name, text in scenarios.items():
        (root / "scenarios" / f"{name}.yaml").write_text(text)


def project_processes(root: Path) -> list[str]:
    """Processes working inside `root` (doit, its workers, agents, their commands)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            cwd = os.readlink(f"/proc/{name}/cwd")
            with open(f"/proc/{name}/cmdline", "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if cwd == str(root) or cwd.startswith(str(root) + os.sep):
            found.append(f"{name} {cmdline}")
    return found


def _wait_for_no_processes(root: Path, secs: float) -> list[str]:
    deadline = time.monotonic() + secs
    while True:
        left = project_processes(root)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.1)


def _run_dirs(root: Path) -> list[Path]:
    return sorted(p.parent for p in (root / RESULTS).glob("*/*/r*/run.json"))


def finished_runs(root: Path) -> set[str]:
    """Runs whose agent layer finished: a whole run.json that is not an error."""
    done = set()
    for run_dir in (root / RESULTS).glob("*/*/r*"):
        try:
            record = json.loads((run_dir / "run.json").read_text())
        except (OSError, ValueError):
            continue
        if record.get("status") in ("completed", "timeout"):
            done.add(str(run_dir / "workspace"))
    return done


def corrupt_artifacts(root: Path) -> list[str]:
    """Artifacts that exist but are not whole: JSON that does not parse, events.jsonl lines
    that do not, and runs whose later layer exists without its earlier one."""
    bad = []
    results = root / RESULTS
    for path in list(results.glob("*/*/r*/*.json")) + list(results.glob("report.json")):
        try:
            json.loads(path.read_text())
        except ValueError:
            bad.append(str(path.relative_to(root)))
    for path in list(results.glob("*/*/r*/events.jsonl")) + list(results.glob("results.jsonl")):
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            try:
                json.loads(line)
            except ValueError:
                bad.append(f"{path.relative_to(root)}:{number}")
    for run_dir in results.glob("*/*/r*"):
        layers = ["run.json", "metrics.json", "evaluation.md"]
        present = [(run_dir / n).exists() for n in layers]
        if any(later and not earlier for earlier, later in pairwise(present)):
            bad.append(f"{run_dir.relative_to(root)}: a later layer without its earlier one")
    return bad


def records_disagree(root: Path) -> list[str]:
    """Where results.jsonl, results.db and report.json disagree."""
    results = root / RESULTS
    if not (results / "report.json").exists():
        return ["there is no report.json"]
    lines = [json.loads(x) for x in (results / "results.jsonl").read_text().splitlines() if x]
    with sqlite3.connect(results / "results.db") as conn:
        rows = [json.loads(r[0]) for r in conn.execute("SELECT record FROM results ORDER BY id")]
    conn.close()
    problems = []
    if lines != rows:
        problems.append(f"results.jsonl has {len(lines)} records, results.db {len(rows)}")
    latest = {r["run_id"]: r for r in lines}
    report = json.loads((results / "report.json").read_text())
    for run in report["runs"]:
        mine = latest.get(run["run_id"])
        if mine is None or mine["outcome"] != run["outcome"]:
            problems.append(f"{run['run_id']}: report.json says {run['outcome']}")
    return problems


@dataclass
class KillFigures:
    """What the kill loop counted."""

    cycles: int = 0
    kills: Counter[str] = field(default_factory=Counter)
    finished_before_kills: int = 0
    finished_runs_redone: list[str] = field(default_factory=list)
    corrupt: list[str] = field(default_factory=list)
    leftover: list[str] = field(default_factory=list)
    disagreements: list[str] = field(default_factory=list)
    wrong_exit: list[str] = field(default_factory=list)


def kill_loop(root: Path, cycles: int, seed: int = 1) -> KillFigures:
    """`cycles` kills (SIGKILL or SIGTERM, -n 1 or -n 2, at a random moment) of `doit run`
    over a 12-run project; after each, what finished must not run again."""
    rng = random.Random(seed)
    log = root.parent / f"{root.name}.executions.log"
    log.unlink(missing_ok=True)
    scenarios = {
        f"s{i}": KILL_SCENARIO.format(log=log, pause=round(0.15 + 0.1 * i, 2)) for i in range(4)
    }
    _project(root, KILL_TOML, scenarios)
    figures = KillFigures()
    for cycle in range(cycles):
        if cycle and not (set(_all_runs(root)) - finished_runs(root)):
            # Everything finished: clean a random half so that the next kill has work to hit.
            for run_dir in rng.sample(_run_dirs(root), k=6):
                shutil.rmtree(run_dir)
        finished = finished_runs(root)
        executed_before = _executions(log)
        workers = rng.choice([["-n", "1"], ["-n", "2"]])
        how = rng.choice([signal.SIGKILL, signal.SIGTERM])
        doit = Doit(root, "run", *workers)
        time.sleep(rng.uniform(0.3, 3.0))
        doit.proc.send_signal(how)
        code, out = doit.wait(timeout=120)
        expected = {signal.SIGKILL: (-9,), signal.SIGTERM: (-15, 0)}[how]
        if code not in expected or "Traceback" in out:
            figures.wrong_exit.append(f"cycle {cycle}: {how.name}: exit {code}: {out[-2000:]}")
        figures.cycles += 1
        figures.kills[f"{how.name} {' '.join(workers)}"] += 1
        figures.leftover += [f"cycle {cycle}: {p}" for p in _wait_for_no_processes(root, 5.0)]
        figures.corrupt += [f"cycle {cycle}: {c}" for c in corrupt_artifacts(root)]
        again = Counter(_executions(log)[len(executed_before) :])
        figures.finished_before_kills += len(finished)
        figures.finished_runs_redone += [f"cycle {cycle}: {r}" for r in finished if again[r]]
    # A last, uninterrupted run completes the project; then the three records must agree.
    before = _executions(log)
    finished = finished_runs(root)
    code, out = _finish(root, "run")
    again = Counter(_executions(log)[len(before) :])
    figures.finished_runs_redone += [f"final: {r}" for r in finished if again[r]]
    if code != 0:
        figures.disagreements.append(f"the final doit run exited {code}: {out[-1000:]}")
    figures.corrupt += [f"final: {c}" for c in corrupt_artifacts(root)]
    figures.disagreements += records_disagree(root)
    return figures


def _all_runs(root: Path) -> list[str]:
    return [
        str(root / RESULTS / f"s{i}/oracle/r{k}/workspace") for i in range(4) for k in (1, 2, 3)
    ]


def _executions(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def _table(rows: list[tuple[str, str, str, bool]]) -> str:
    lines = ["| measure | target | measured | met |", "| --- | --- | --- | --- |"]
    lines += [f"| {m} | {t} | {v} | {'yes' if ok else 'NO'} |" for m, t, v, ok in rows]
    return "\n".join(lines)


def kill_rows(f: KillFigures) -> list[tuple[str, str, str, bool]]:
    """The kill loop's rows of the table."""
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(f.kills.items()))
    return [
        ("kill cycles", "-", f"{f.cycles} ({kinds})", f.cycles > 0),
        (
            "finished runs redone",
            "0",
            f"{len(f.finished_runs_redone)} of {f.finished_before_kills} finished at a kill",
            not f.finished_runs_redone,
        ),
        ("corrupt artifacts", "0", str(len(f.corrupt)), not f.corrupt),
        ("leftover processes (5 s after a kill)", "0", str(len(f.leftover)), not f.leftover),
        (
            "results.jsonl / results.db / report.json disagree",
            "0",
            str(len(f.disagreements)),
            not f.disagreements,
        ),
        ("unexpected exit status after a kill", "0", str(len(f.wrong_exit)), not f.wrong_exit),
    ]


def main(argv: list[str] | None = None) -> int:
    """Run the parts asked for; print the table; exit 1 when a target is missed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "out" / "faults")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument("--only", default="kill", help="comma list of parts")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    parts = set(args.only.split(","))
    rows: list[tuple[str, str, str, bool]] = []
    details: dict[str, Any] = {}
    if "kill" in parts:
        figures = kill_loop(args.out.resolve() / "kill", args.cycles)
        rows += kill_rows(figures)
        details["kill"] = figures.__dict__
    print(_table(rows))
    for name, value in details.items():
        for key, items in value.items():
            if isinstance(items, list) and items:
                print(f"\n{name} {key}:\n  " + "\n  ".join(items[:20]))
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "details": details}, default=str))
    return 0 if all(ok for *_, ok in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
