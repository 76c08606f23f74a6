"""One doit invocation's view of the project: the plan it loaded and what doit was asked to do.

The loader (`llmtt.taskgraph.loader`) makes a session when doit asks for its configuration, and
tells it the command once doit asks for the tasks; every task's action gets it as its first
argument. A forked worker of `doit run -n N` has its parent's session, plans and ledger included.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmtt.errors import LlmttError
from llmtt.execution.budget import Ledger, budget_limit
from llmtt.plan import cache as plancache
from llmtt.plan.cache import RunSpec, TaskPlan
from llmtt.spec.selection import Selection
from llmtt.taskgraph.progress import ProgressReporter

if TYPE_CHECKING:
    from llmtt.plan.runs import Plan, Run
    from llmtt.results.adaptive import Round
    from llmtt.spec.project import Project

EXECUTORS = ("local", "ray")
# The doit commands that change a project: one at a time (llmtt.taskgraph.lock).
WRITERS = frozenset({"run", "clean", "forget", "ignore", "strace", "auto", "reset-dep"})
# The writers that carry out runs: SIGTERM as ^C, a watchdog, a label for the records.
RUNNERS = frozenset({"run", "strace", "auto"})
DEP_FILE = ".doit.sqlite3"  # doit's dependency file, in the results folder


@dataclass
class Session:
    """The selection, its plan's tasks (cached) and, once doit names it, the command."""

    root: Path
    variables: Mapping[str, str]  # doit's NAME=VALUE words
    selection: Selection
    tasks: TaskPlan
    built: Plan | None  # the full plan, when it had to be built to make the tasks
    executor: str  # where the layers are carried out: "local" or "ray"
    budget: float | None  # the session budget, whatever the command
    command: str = ""  # the doit command; "" when no doit command asked (a script)
    processes: int = 0  # worker processes of a local `doit run -n N` (0: none)
    ledger: Ledger | None = None  # the session budget's ledger, for `doit run`
    warmed: set[str] = field(default_factory=set)  # what this process warmed (warm.py)
    rounds: dict[str, Round] = field(default_factory=dict)  # repeats=auto: per scenario
    _plan: tuple[Plan, dict[str, Run]] | None = None
    _parts: dict[str, tuple[Project, dict[str, Run]]] = field(default_factory=dict)

    @classmethod
    def load(cls, root: Path, variables: Mapping[str, str]) -> Session:
        """The plan's tasks for doit's variables in the project at `root` (LlmttError: a
        user's mistake, in the project or the variables)."""
        selection = Selection.from_variables(variables)
        rounds: dict[str, Round] = {}
        if selection.adaptive:
            selection, rounds = adaptive_round(root, selection)
        tasks, built = plancache.load(root, selection)
        kind = variables.get("executor") or tasks.executor["kind"]
        if kind not in EXECUTORS:
            raise LlmttError(
                f"executor={kind} is not an executor (use executor=local or executor=ray)"
            )
        jobs = variables.get("jobs")
        if jobs is not None and jobs != "auto":
            raise LlmttError(
                f"jobs={jobs}: jobs= takes auto (doit run jobs=auto finds how many runs to "
                "carry out at once); -n N carries out N at once"
            )
        if jobs == "auto" and kind == "ray":
            raise LlmttError(
                "jobs=auto paces the runs on this machine; with executor=ray, -n N (or "
                "[executor] max_in_flight) sets how many runs are under way: leave out jobs=auto"
            )
        budget = budget_limit(tasks.budget_max_usd, variables.get("budget"))
        session = cls(root, dict(variables), selection, tasks, built, str(kind), budget)
        session.rounds = rounds
        return session

    def next_round(self) -> Session:
        """repeats=auto: the session the results call for once this round's runs are done
        (the same rounds as this one's when no scenario moved on: each is decided, at its
        bound, or has runs not carried out). It spends from this session's budget ledger."""
        following = Session.load(self.root, self.variables)
        following.command, following.processes = self.command, self.processes
        following.ledger = self.ledger
        return following

    @property
    def results(self) -> Path:
        """The results folder."""
        return Path(self.tasks.results_dir)

    @property
    def dep_file(self) -> str:
        """doit's dependency file."""
        return str(self.results / DEP_FILE)

    @property
    def ledger_path(self) -> Path:
        """Where `doit run` keeps the session budget's ledger."""
        return self.results / ".llmtt-cache" / "budget.json"

    @property
    def task_io(self) -> dict[str, Any] | None:
        """The tasks' `io`: with Ray, the layers' actions run in threads of this process, where
        doit's capture of a task's output swaps sys.stdout for one object per task, and a print
        in one thread could write to another thread's object as it was freed (seen as
        "'Writer' object has no attribute 'writers'"). Nothing reads the captured output (each
        task shows its output as it comes)."""
        return {"capture": False} if self.executor == "ray" else None

    @property
    def show_status(self) -> bool:
        """Whether a run's visible task computes its own status: for display only (`list`,
        `info`); elsewhere it would cost a second status check of every layer."""
        return self.command in ("list", "info")

    def doit_config(self, *, quiet: bool) -> dict[str, Any]:
        """What llmtt sets of doit's configuration (a dodo file's DOIT_CONFIG may override it)."""
        config: dict[str, Any] = {
            "dep_file": self.dep_file,
            "backend": "llmtt-sqlite3",  # doit's sqlite3 file, read in one query (depfile.py)
            "continue": True,
            "verbosity": 2,
            # doit's executed-only lines (thousands of up-to-date ones would bury what
            # happened), and llmtt's line per run with the session's spend; `--reporter NAME`
            # still picks another.
            "reporter": ProgressReporter.configure(
                {run.run_id: Path(run.dir) for run in self.tasks.runs},
                self.ledger_path if self.budget is not None else None,
                quiet=quiet,
            ),
            "default_tasks": [run.run_id for run in self.tasks.runs] + ["aggregate"],
        }
        if self.variables.get("jobs") == "auto":
            from llmtt.taskgraph import concurrency

            # Workers for the most agents jobs=auto may let out at once (-n N: N of them).
            try:
                found = concurrency.remembered(self.root)
            except LlmttError:  # damaged: said when doit asks for the tasks
                found = {}
            plan = concurrency.units(self.tasks.runs)
            config["num_process"] = concurrency.workers(len(self.tasks.runs), found, plan)
        if self.executor == "ray":
            # doit runs the layers' actions in threads, each waiting for its layer on the
            # cluster (`-n`, else [executor] max_in_flight, of them).
            config["num_process"] = self.tasks.executor["max_in_flight"]
            config["par_type"] = "thread"
        return config

    def begin(self, command: str, processes: int = 0) -> None:
        """doit named the command (and, for a local `doit run -n N`, its worker processes):
        `doit run` opens the session budget's ledger."""
        self.command = command
        self.processes = processes if command == "run" and self.executor == "local" else 0
        if command == "run" and self.budget is not None:
            self.ledger = Ledger.create(self.ledger_path, self.budget)

    def plan(self) -> tuple[Plan, dict[str, Run]]:
        """The full plan, for the tasks that execute: built at most once per process, and only
        when the task list came from the cache."""
        if self._plan is None:
            from llmtt.plan.runs import build_plan
            from llmtt.spec.project import load_project

            plan = self.built or build_plan(load_project(self.root), self.selection)
            self._plan = plan, {run.run_id: run for run in plan.runs}
        return self._plan

    def part(self, scenario_file: str) -> tuple[Project, dict[str, Run]]:
        """The plan of one scenario: what the tasks carrying out its runs need, at a cost that
        does not grow with the project (and a forked worker holds only that)."""
        if scenario_file not in self._parts:
            from llmtt.plan.runs import build_plan
            from llmtt.spec.project import load_project

            project = load_project(self.root, only=Path(scenario_file))
            plan = build_plan(project, self.selection, part=True)
            self._parts[scenario_file] = plan.project, {r.run_id: r for r in plan.runs}
        return self._parts[scenario_file]

    def run(self, spec: RunSpec) -> tuple[Project, Run]:
        """The full run behind a task, with its project, checked against the keys its task
        was made with."""
        if self.built is not None:  # built in this process anyway: the whole plan serves
            project, runs = self.built.project, self.plan()[1]
        else:
            project, runs = self.part(spec.scenario_file)
        run = runs.get(spec.run_id)
        if run is None:
            raise self.stale(f"{spec.run_id} is no longer planned")
        if RunSpec.of(run) != spec:
            raise self.stale(f"the keys of {spec.run_id} changed")
        return project, run

    def stale(self, what: str) -> LlmttError:
        """The error for a cached plan found out of date; the cache is removed."""
        plancache.discard(self.root, self.selection)
        return LlmttError(
            f"the cached plan was out of date ({what}), so this invocation may have skipped "
            "work; the cache is removed: run doit again (and please report this)"
        )


def adaptive_round(root: Path, selection: Selection) -> tuple[Selection, dict[str, Round]]:
    """repeats=auto: the selection of the round the results call for now (see
    `llmtt.results.adaptive`), and each comparing scenario's round."""
    import dataclasses

    from llmtt.plan.runs import build_plan
    from llmtt.results.adaptive import plan_rounds
    from llmtt.spec.project import load_project

    every = dataclasses.replace(selection, rounds=None)  # every repeat they may take
    rounds = plan_rounds(build_plan(load_project(root), every))
    repeats = tuple(sorted((name, r.repeats) for name, r in rounds.items()))
    return dataclasses.replace(selection, rounds=repeats), rounds
