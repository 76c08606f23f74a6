"""Fault injection: kills, concurrent invocations, a budget under -n 4, planted secrets.

    .venv/bin/python bench/faults.py [--cycles 20] [--seed 1] [--out bench/out/faults]
                                     [--json FILE] [--only kill,concurrency,budget,secrets]

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
        # 0: the invocation had finished before the signal came.
        expected = {signal.SIGKILL: (-9, 0), signal.SIGTERM: (-15, 0)}[how]
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


def concurrency(root: Path) -> list[tuple[str, str, str, bool]]:
    """Second invocations while `doit run` works: each writer refused at once in one line,
    `doit list` answered; nothing corrupt afterwards."""
    slow = "task: {prompt: Wait.}\nsolution: ['sleep 3', 'echo ok > x']\n"
    slow += "evaluation: {gates: [{type: file_exists, path: x}]}\n"
    _project(root, KILL_TOML, {"slow": slow})
    first = Doit(root, "run", "-n", "2")
    deadline = time.monotonic() + 60
    while not list((root / RESULTS).glob("slow/oracle/r*/workspace")):
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    wrong = []
    for args in (["run"], ["run", "-n", "2"], ["forget"], ["clean"], ["list", "--status"]):
        started = time.monotonic()
        code, out = _finish(root, *args)
        took = time.monotonic() - started
        reader = args[0] == "list"
        refused = code == 2 and "is in use by `doit run" in out and out.count("\n") == 1
        if (code != 0 if reader else not refused) or "Traceback" in out or took > 10:
            wrong.append(f"doit {' '.join(args)}: exit {code} after {took:.1f} s: {out[-500:]}")
    code, out = first.wait()
    if code != 0:
        wrong.append(f"the first doit run exited {code}: {out[-500:]}")
    bad = corrupt_artifacts(root) + records_disagree(root)
    return [
        ("concurrent invocations mishandled", "0", f"{len(wrong)} of 5", not wrong),
        ("corrupt after concurrent invocations", "0", str(len(bad)), not bad),
    ] + [(f"  {w}", "", "", False) for w in wrong + bad]


BUDGET_TOML = """\
[target]
binary = "echo"

[models.paid]
litellm = "openai/paid"
api_base = "{url}/v1"
api_key_env = "PAID_KEY"
input_usd_per_mtok = 1.0
output_usd_per_mtok = 10.0

[matrix]
agents = ["litellm"]
models = ["paid"]
repeats = 4

[budget]
max_usd = {budget}
"""


def budget(root: Path, limit: float = 0.1) -> list[tuple[str, str, str, bool]]:
    """Eight paid runs under -n 4 against a local fake paid model, half without cost.max_usd
    and with a stale, too-low estimate, while other doit commands run: total spend against the
    budget plus the bound."""
    from llmtt.scripted.server import ScriptedServer

    steps = [f"sleep 0.2; echo {i}" for i in range(20)]  # 21 turns, $0.046 a run
    with ScriptedServer(steps) as provider:
        scenario = "task: {prompt: Count.}\nrun: {max_turns: 30}\n"
        _project(
            root,
            BUDGET_TOML.format(url=provider.url, budget=limit),
            {"capped": scenario + "cost: {max_usd: 0.02}\n", "uncapped": scenario},
        )
        history = {"scenario": "uncapped", "agent": "litellm", "model": "paid", "cost_usd": 0.001}
        (root / RESULTS).mkdir(parents=True)
        (root / RESULTS / "results.jsonl").write_text(json.dumps(history) + "\n")
        env = {**_env(), "LLMTT_ENABLED": "1", "PAID_KEY": "k"}
        doit = Doit(root, "run", "-n", "4", env=env)
        others = []
        for args in (["list", "--status"], ["forget"], ["run"]):
            time.sleep(0.5)
            others.append(_finish(root, *args, env=env)[0])
        code, out = doit.wait()
    spent = 0.0
    dearest = 0.0
    for events in (root / RESULTS).glob("*/litellm-paid/r*/events.jsonl"):
        for line in events.read_text().splitlines():
            event = json.loads(line)
            if event["event"] == "usage":
                spent += event["cost_usd"]
                dearest = max(dearest, event["cost_usd"])
    bound = limit + max(0.02, 4 * dearest)
    reports = all((root / RESULTS / n).exists() for n in ("report.md", "report.json", "junit.xml"))
    return [
        (
            "spend vs budget (-n 4, 8 paid runs)",
            f"<= ${limit} + one run's cost.max_usd or 4 turns (${bound:.4f})",
            f"${spent:.4f}",
            spent <= bound,
        ),
        (
            "reports written when the budget ran out",
            "yes",
            "yes" if reports else "no",
            reports and "budget exhausted" in out,
        ),
        (
            "other invocations meanwhile (list ok, forget/run refused)",
            "0, 2, 2",
            str(others),
            others == [0, 2, 2],
        ),
    ]


SECRETS = {
    "process env": ("FAULTS_API_KEY", "pe7Qk2Zr9Lx4Wv8Tn3Bc6Hd1"),
    "[target] env": ("DEPLOY_TOKEN", "tg5Rw8Kq2Nz7Xm4Pv9Lc3Sj6"),
    "[agents.oracle] env": ("AGENT_SECRET", "ag3Vb7Mn1Qw5Er9Ty2Ui8Op4"),
    "key shape": (None, "sk-ant-api03-Zq8Rt5Yu2Io9Pa6Sd3Fg7Hj4Kl1"),
    "truncated": ("SIGNING_PASSWORD", "tr8Hg4Jk6Lz2Xc9Vb5Nm1Qa7Ws3"),
}


def secrets(root: Path) -> list[tuple[str, str, str, bool]]:
    """Five planted secrets; every artifact but transcript.raw.txt, and the console, searched
    for each whole and for its first and last 10 characters."""
    env_of = {label: (name, value) for label, (name, value) in SECRETS.items()}
    target_token = env_of["[target] env"][1]
    signing = env_of["truncated"][1]
    toml = (
        f'[target]\nbinary = "echo"\nenv.DEPLOY_TOKEN = "{target_token}"\n'
        f'env.SIGNING_PASSWORD = "{signing}"\n\n'
        f'[agents.oracle]\nenv.AGENT_SECRET = "{env_of["[agents.oracle] env"][1]}"\n'
    )
    key = SECRETS["key shape"][1]
    scenario = f"""\
task: {{prompt: Leak.}}
solution:
  - echo "using $FAULTS_API_KEY and $DEPLOY_TOKEN"
  - printenv AGENT_SECRET
  - echo "key {key}" && false
evaluation:
  gates:
    - type: command_output_contains
      command: 'echo "${{SIGNING_PASSWORD:0:14}}"'
      substring: never printed
    - {{type: command_output_contains, command: 'echo "$DEPLOY_TOKEN {key}"', substring: nowhere}}
"""
    _project(root, toml, {"leak": scenario})
    planted = {**_env(), "FAULTS_API_KEY": SECRETS["process env"][1]}
    code, console = _finish(root, "run", env=planted)
    masked = 0
    found: Counter[str] = Counter()
    needles = [v for _, v in SECRETS.values()]
    needles += [v[:10] for v in needles] + [v[-10:] for v in needles]
    for path in sorted((root / RESULTS).rglob("*")):
        rel = path.relative_to(root / RESULTS)
        if not path.is_file() or path.name == "transcript.raw.txt":
            continue
        if (
            rel.parts[0] == ".llmtt-cache"
            or path.name.startswith(".doit")
            or {
                "workspace",
                "home",
            }
            & set(rel.parts)
        ):
            continue
        data = path.read_bytes()
        masked += data.count(b"[REDACTED]")
        hits = sum(data.count(n.encode()) for n in needles)
        if hits:
            found[str(rel)] += hits
    found["console"] += sum(console.count(n) for n in needles)
    found = +found
    shown = ", ".join(f"{k}: {v}" for k, v in sorted(found.items())) or "0 in every artifact"
    shown += f" ({masked} masks seen)"
    # The secrets must have reached the artifacts (masked) for the zero to mean anything.
    ok = not found and code == 0 and masked >= 5
    return [("secrets found per artifact (5 planted)", "0", shown, ok)]


def main(argv: list[str] | None = None) -> int:
    """Run the parts asked for; print the table; exit 1 when a target is missed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1, help="of the kill moments and kinds")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "out" / "faults")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument(
        "--only", default="kill,concurrency,budget,secrets", help="comma list of parts"
    )
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    parts = set(args.only.split(","))
    rows: list[tuple[str, str, str, bool]] = []
    details: dict[str, Any] = {}
    if "kill" in parts:
        figures = kill_loop(args.out.resolve() / "kill", args.cycles, args.seed)
        rows += kill_rows(figures)
        details["kill"] = figures.__dict__
    if "concurrency" in parts:
        rows += concurrency(args.out.resolve() / "concurrency")
    if "budget" in parts:
        rows += budget(args.out.resolve() / "budget")
    if "secrets" in parts:
        rows += secrets(args.out.resolve() / "secrets")
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
