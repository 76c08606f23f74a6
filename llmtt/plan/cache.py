"""The plan as doit needs it (run names, folders, keys), reused while none of its inputs moved.

Every `doit` invocation loads the task list, and a full load (pydantic models, YAML with line maps,
a hash of every fixture, version probes) costs more than doit's own work on a thousand runs. So the
task-level view of a plan is written to `<results>/.llmtt-cache/plans/` together with the signatures
of everything it was built from (`llmtt.util.signatures`) and of llmtt's own code; the next
invocation with the same selection checks those signatures and, when none moved, makes its tasks
from the cache without importing the loaders at all. When a task then executes, the full plan is
built anyway and its keys are compared with the cached ones (see `llmtt.taskgraph.session`), so a
stale cache cannot pass unnoticed. `LLMTT_NO_PLAN_CACHE=1` turns the cache off.

This format is internal and plain JSON (read with the standard library: reading it through
pydantic would cost what the cache saves); `FORMAT` versions it.
"""

from __future__ import annotations

import json
import os
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmtt import __version__
from llmtt.spec.selection import Selection
from llmtt.util import signatures as inputs
from llmtt.util.atomic import write_text
from llmtt.util.hashing import Key, hash_value

if TYPE_CHECKING:
    from llmtt.plan.runs import Plan, Run

FORMAT = 3
RESULTS_DEFAULT = "llm-tool-test-results"  # [paths] results when llmtt.toml does not set it
KEEP = 32  # cached plans kept per project (one per selection); the oldest go first


@dataclass(frozen=True)
class RunSpec:
    """What doit needs of one run: its task names, folder and layer keys."""

    run_id: str
    dir: str
    label: str
    agent: str
    judge_model: str | None
    keys: dict[str, Key]  # "agent", "evaluate", "report", "judge" when judged, "triage"
    scenario_file: str  # the task that carries the run out loads this scenario alone

    @classmethod
    def of(cls, run: Run) -> RunSpec:
        """What doit needs of a full run."""
        keys = {"agent": run.agent_key, "evaluate": run.eval_key, "report": run.report_key}
        judge = None
        if run.judge is not None:
            keys["judge"] = run.judge.key
            judge = run.judge.model
        if run.triage is not None:
            keys["triage"] = run.triage
        path = str(run.scenario.path)
        return cls(run.run_id, str(run.dir), run.label, run.agent, judge, keys, path)


@dataclass(frozen=True)
class TaskPlan:
    """What doit needs of a plan."""

    results_dir: str
    budget_max_usd: float | None
    runs: list[RunSpec]
    aggregate_key: Key
    executor: dict[str, Any]  # [executor], as plain JSON
    isolation: str = "bwrap"  # [isolation] mode

    @classmethod
    def of(cls, plan: Plan) -> TaskPlan:
        """The task-level view of a full plan."""
        return cls(
            str(plan.project.results_dir),
            plan.project.config.budget.max_usd,
            [RunSpec.of(run) for run in plan.runs],
            plan.aggregate_key,
            plan.project.config.executor.model_dump(),
            plan.project.config.isolation.mode,
        )

    def task_names(self) -> set[str]:
        """The names of the doit tasks this plan makes (see `llmtt.taskgraph.tasks`)."""
        names = {"aggregate"}
        for run in self.runs:
            layers = ["agent", "evaluate", *(["judge"] if run.judge_model else [])]
            layers += ["triage"] if "triage" in run.keys else []
            names.update([run.run_id, *(f"{run.run_id}:{layer}" for layer in layers)])
        return names

    def to_json(self) -> dict[str, Any]:
        """Plain JSON; key dicts shared by many runs are stored once."""
        table: list[Key] = []
        index: dict[str, int] = {}

        def ref(key: Key) -> int:
            text = json.dumps(key, sort_keys=True)
            if text not in index:
                index[text] = len(table)
                table.append(key)
            return index[text]

        runs = [
            [
                r.run_id,
                r.dir,
                r.label,
                r.agent,
                r.judge_model,
                {k: ref(v) for k, v in r.keys.items()},
                r.scenario_file,
            ]
            for r in self.runs
        ]
        return {
            "results_dir": self.results_dir,
            "budget_max_usd": self.budget_max_usd,
            "aggregate_key": self.aggregate_key,
            "executor": self.executor,
            "isolation": self.isolation,
            "keys": table,
            "runs": runs,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TaskPlan:
        """The inverse of `to_json`."""
        table = data["keys"]
        runs = [
            RunSpec(rid, d, label, agent, judge, {k: table[i] for k, i in keys.items()}, path)
            for rid, d, label, agent, judge, keys, path in data["runs"]
        ]
        return cls(
            data["results_dir"],
            data["budget_max_usd"],
            runs,
            data["aggregate_key"],
            data["executor"],
            data.get("isolation", "bwrap"),
        )


def load(root: Path, selection: Selection) -> tuple[TaskPlan, Plan | None]:
    """The plan's tasks: from the cache when no input moved, else built (with the full plan)."""
    root = root.resolve()
    where = cache_file(root, selection)
    if where is not None and not os.environ.get("LLMTT_NO_PLAN_CACHE"):
        cached = _read(where)
        if cached is not None:
            return cached, None
    from llmtt.plan.runs import build_plan
    from llmtt.spec.project import load_project

    with inputs.recording() as noted:
        plan = build_plan(load_project(root), selection)
    spec = TaskPlan.of(plan)
    if where is not None and noted.unsettled is None and where.parents[2] == Path(spec.results_dir):
        _write(where, {"inputs": noted.to_json(), "plan": spec.to_json()})
    return spec, plan


def cache_file(root: Path, selection: Selection) -> Path | None:
    """Where the plan of this project and selection is cached (None: llmtt.toml unreadable, or
    repeats=auto, whose rounds follow the results)."""
    if selection.adaptive:
        return None
    try:
        raw = tomllib.loads((root / "llmtt.toml").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None  # the full load names what is wrong
    paths = raw.get("paths")
    results = paths.get("results") if isinstance(paths, dict) else None
    results_dir = root / (results if isinstance(results, str) else RESULTS_DEFAULT)
    name = hash_value([str(root), selection.describe()])[:16]
    return results_dir / ".llmtt-cache" / "plans" / f"{name}.json"


def discard(root: Path, selection: Selection) -> None:
    """Remove the cached plan of this project and selection (it turned out stale)."""
    where = cache_file(root.resolve(), selection)
    if where is not None:
        where.unlink(missing_ok=True)


def _read(where: Path) -> TaskPlan | None:
    try:
        data = json.loads(where.read_bytes())
        if data.get("format") != FORMAT or data.get("code") != code_signature():
            return None
        if inputs.Inputs.changed(data["inputs"]) is not None:
            return None
        return TaskPlan.from_json(data["plan"])
    except (OSError, ValueError, KeyError, TypeError):
        return None  # missing, half-written by another version, or hand-edited: rebuild


def _write(where: Path, body: dict[str, Any]) -> None:
    """Cache a plan, keeping the newest `KEEP`; a cache that cannot be written is not an error."""
    try:
        where.parent.mkdir(parents=True, exist_ok=True)
        body = {"format": FORMAT, "code": code_signature(), **body}
        write_text(where, json.dumps(body, separators=(",", ":")))
        cached = sorted(where.parent.glob("*.json"), key=lambda p: p.stat().st_mtime_ns)
        for old in cached[:-KEEP]:
            old.unlink(missing_ok=True)
    except OSError:
        pass  # read-only results, or another invocation pruning at the same time


def code_signature() -> list[Any]:
    """llmtt's own version and sources, Python, and the installed packages (where agent plugins
    come from): a plan cached by other code is not reused."""
    package = Path(__file__).parents[1]
    files = []
    for dirpath, dirnames, filenames in os.walk(package):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith((".py", ".j2")):
                path = os.path.join(dirpath, name)
                files.append([path, inputs.signature(path)])
    site = [[p, inputs.signature(p)] for p in sys.path if p.endswith(("-packages", "-packages/"))]
    # realpath: `doit`, `python -m doit` and `python3 -m doit` are one interpreter, one plan.
    return [__version__, sys.version, os.path.realpath(sys.executable), files, site]
