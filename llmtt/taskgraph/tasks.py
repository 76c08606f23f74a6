"""The doit surface: the plan's runs in, task dicts out. Nothing else in llmtt imports doit.

A user's `dodo.py` is `from llmtt.tasks import *`. Per run, `doit list` shows one task named
after the run (`<scenario>/<agent>[-<model>][-<variant>]/r<k>`): its last layer, which renders
`evaluation.md`. The earlier layers are its subtasks (`<run>:agent`, `<run>:evaluate`, and
`<run>:judge` when judged; `doit list --all` shows them), and `aggregate` writes the reports.
Each layer carries its own content key, so only what changed re-runs.
"""

from __future__ import annotations

import functools
import gc
import inspect
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from doit import get_var
from doit.dependency import UptodateCalculator
from doit.exceptions import TaskFailed
from doit.task import Task

from llmtt.errors import LlmttError
from llmtt.execution.budget import BudgetExhausted, Ledger, budget_limit, events_cost, expected_cost
from llmtt.plan import cache as plancache
from llmtt.plan.cache import RunSpec, TaskPlan
from llmtt.spec.selection import Selection, check_info
from llmtt.taskgraph.depfile import record_values
from llmtt.taskgraph.progress import ProgressReporter, quiet
from llmtt.util.atomic import read_json, read_jsonl
from llmtt.util.hashing import Key

if TYPE_CHECKING:
    from llmtt.plan.runs import Plan, Run
    from llmtt.spec.project import Project

__all__ = ["DOIT_CONFIG", "task_llmtt"]

EVALUATE_OUTPUTS = ("metrics.json", "gates.json", "result.json")
AGENT_OUTPUTS = ("run.json", "events.jsonl", "transcript.raw.txt")


def _processes(argv: list[str]) -> int:
    """doit's `-n N` / `--process=N` (0: no worker processes; `-P thread` runs threads)."""
    count = 0
    for i, arg in enumerate(argv):
        value = None
        if arg in ("-n", "--process") and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith("--process="):
            value = arg.partition("=")[2]
        elif arg.startswith("-n") and arg[2:].isdigit():
            value = arg[2:]
        if value is not None and value.isdigit():
            count = int(value)
    return 0 if _parallel_type(argv) == "thread" else count


_WARM = {"done": False, "evaluation": False}
# A worker's warm-up of the later layers waits this long into its first agent's run: while the
# workers are still being forked and their agents started, it would only take a core from them.
WARM_AFTER_SECS = 0.5


def _parallel_run() -> bool:
    """This is a local `doit run -n N` with worker processes."""
    return COMMAND == "run" and EXECUTOR == "local" and _processes(sys.argv[1:]) >= 2


def _warm_workers(task: Any) -> None:
    """Once a layer is found pending in a `doit run -n N`, before doit forks its workers (it
    forks once it has a first task for them): import here what every worker needs to start
    its agent, load that layer's run, and freeze it all out of the garbage collector's sight,
    so the workers share those pages and start at once instead of each doing the same work on
    two cores. What only the later layers need is left to each worker's agent run
    (`_warm_evaluation`): the first agents start that much sooner."""
    if _WARM["done"]:
        return
    _WARM["done"] = True
    if not _parallel_run():
        return
    import llmtt.agents.cli_agent  # noqa: F401
    import llmtt.execution.agent_layer  # noqa: F401
    import llmtt.plan.runs  # noqa: F401
    import llmtt.process.pty  # noqa: F401
    import llmtt.spec.project  # noqa: F401

    spec = task.actions[0].args[0] if task.actions and task.actions[0].args else None
    if isinstance(spec, RunSpec):
        try:
            _run(spec)
        except Exception:  # noqa: BLE001 - only a head start: the task meets it again and says
            pass
    gc.freeze()


def _warm_evaluation(project: Project) -> None:
    """In a worker of a `doit run -n N`, as its first agent starts: import what the evaluate
    and report layers need and compile the evaluation.md template, in a thread of its own (the
    agent's run waits on the agent, not on the interpreter), so that neither the start of the
    first agents nor the evaluation after them waits for it."""
    if _WARM["evaluation"] or not _parallel_run():
        return
    _WARM["evaluation"] = True

    def warm() -> None:
        try:
            import jinja2  # noqa: F401

            import llmtt.evaluation.evaluate  # noqa: F401
            import llmtt.executors.remote  # noqa: F401
            import llmtt.report.render

            llmtt.report.render._environment(project).get_template("evaluation.md.j2")
        except Exception:  # noqa: BLE001 - only a head start: the report layer meets it and says
            pass

    import threading

    timer = threading.Timer(WARM_AFTER_SECS, warm)
    timer.name, timer.daemon = "llmtt-warm", True
    timer.start()


class KeyCheck:
    """`uptodate` for one layer: false when any part of its key changed, saying which."""

    # doit inspects every uptodate callable's signature on every status check; declaring it
    # here spares thousands of introspections on each load of a large plan.
    __signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in ("task", "values")]
    )

    def __init__(self, layer: str, key: Key) -> None:
        self.layer = layer
        self.key = key
        self.reason = "not checked"

    def __call__(self, task: Any, values: dict[str, Any]) -> bool:
        """Compare the key saved by the last successful execution with the current one."""
        task.value_savers.append(lambda: {"llmtt_key": self.key})
        saved = values.get("llmtt_key")
        if values.get("status") == "error":
            self.reason = f"the last attempt could not be carried out: {values.get('error')}"
            return False
        if saved is None:
            self.reason = "never run"
            _warm_workers(task)
            return False
        changed = sorted(k for k in set(self.key) | set(saved) if saved.get(k) != self.key.get(k))
        if changed:
            self.reason = "changed: " + ", ".join(changed)
            _warm_workers(task)
            return False
        self.reason = "unchanged"
        return True

    def __str__(self) -> str:
        return f"{self.layer} key ({self.reason})"

    __repr__ = __str__


_FILE_REASONS = {
    "missing_target": "outputs missing",
    "changed_file_dep": "inputs changed",
    "missing_file_dep": "inputs not yet made",
}


class LayersDone(UptodateCalculator):  # type: ignore[misc]
    """`uptodate` for a run's visible task: true only when every layer is up to date."""

    def __init__(self, layers: list[str]) -> None:
        super().__init__()
        self.layers = layers
        self.pending: list[str] = []
        self._deps: Any = None

    def setup(self, dep_manager: Any, tasks_dict: dict[str, Any]) -> None:
        """Keep the dependency manager so the layers' own status can be asked."""
        super().setup(dep_manager, tasks_dict)
        self._deps = dep_manager

    def __call__(self) -> bool:
        """Up to date when no layer would run."""
        self.pending = []
        for name in self.layers:
            task = self.tasks_dict[name]
            status = self._deps.get_status(task, self.tasks_dict, get_log=True)
            if status.status != "up-to-date":
                why = [str(u) for u, _, _ in status.reasons.get("uptodate_false", [])]
                for reason, files in status.reasons.items():
                    if reason in _FILE_REASONS and files:
                        names = ", ".join(sorted({Path(f).name for f in files}))
                        why.append(f"{_FILE_REASONS[reason]}: {names}")
                self.pending.append(
                    f"{name.rsplit(':', 1)[-1]} ({'; '.join(why) or status.status})"
                )
        return not self.pending

    def __str__(self) -> str:
        return "pending layers: " + (", ".join(self.pending) or "none")

    __repr__ = __str__


def _selection() -> Selection:
    from doit import doit_cmd  # it keeps the command line's NAME=VALUE words, unlisted elsewhere

    return Selection.from_variables(doit_cmd._CMDLINE_VARS or {})


def _console(text: str) -> str:
    """A message with secrets masked (imported only when there is one to print)."""
    from llmtt.redaction import console

    return console(text)


def _load() -> tuple[Selection, TaskPlan, Plan | None]:
    """The selection and its plan's tasks (cached); the full plan too when it had to be built."""
    try:
        selection = _selection()
        tasks, plan = plancache.load(ROOT, selection)
        check_info(sys.argv[1:], tasks.task_names(), selection)
        return selection, tasks, plan
    except LlmttError as exc:
        sys.stderr.write(_console(f"llmtt: {exc}\n"))
        raise SystemExit(2) from None


_DOIT_COMMANDS = {
    "run",
    "list",
    "info",
    "clean",
    "forget",
    "ignore",
    "strace",
    "dumpdb",
    "help",
    "auto",
    "reset-dep",
    "tabcompletion",
}
# The doit commands that change a project: one at a time (llmtt.taskgraph.lock).
_WRITERS = {"run", "clean", "forget", "ignore", "strace", "auto", "reset-dep"}
COMMAND = next((a for a in sys.argv[1:] if a in _DOIT_COMMANDS), "run")
# A run's visible task is a group whose layers decide for themselves what executes; its own
# status is for display only (`list`, `info`), and computing it costs a second status check
# of every layer.
SHOW_STATUS = COMMAND in ("list", "info")

ROOT = Path.cwd().resolve()
SELECTION, TASKS, _BUILT = _load()
RESULTS = Path(TASKS.results_dir)


def _hold_project() -> int | None:
    """This invocation's hold on the project: the lock for commands that write it; for `run`,
    SIGTERM handled like ^C and a watchdog for the processes its runs start."""
    if COMMAND not in _WRITERS:
        return None
    from llmtt.process import watchdog
    from llmtt.taskgraph import lock, signals

    try:
        fd = lock.hold(RESULTS, COMMAND)
    except LlmttError as exc:
        sys.stderr.write(_console(f"llmtt: {exc}\n"))
        raise SystemExit(2) from None
    if COMMAND in ("run", "strace", "auto"):
        signals.install()
        watchdog.start()
        # The records this invocation writes say which it was (workers inherit it): a label the
        # user set, else when it began. report.html's history has a point per invocation.
        os.environ.setdefault("LLMTT_LABEL", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    return fd


_LOCK_FD = _hold_project()
DOIT_CONFIG: dict[str, Any] = {
    "dep_file": str(RESULTS / ".doit.sqlite3"),
    "backend": "llmtt-sqlite3",  # doit's sqlite3 file, read in one query (depfile.py)
    "continue": True,
    "verbosity": 2,
    "reporter": "executed-only",  # replaced below, once the session budget is known
    "default_tasks": [run.run_id for run in TASKS.runs] + ["aggregate"],
}
RESULTS.mkdir(parents=True, exist_ok=True)


@functools.cache
def _plan() -> tuple[Plan, dict[str, Run]]:
    """The full plan, for the tasks that execute: built at most once per process, and only
    when the task list came from the cache."""
    from llmtt.plan.runs import build_plan
    from llmtt.spec.project import load_project

    plan = _BUILT or build_plan(load_project(ROOT), SELECTION)
    return plan, {run.run_id: run for run in plan.runs}


def _stale(what: str) -> LlmttError:
    plancache.discard(ROOT, SELECTION)
    return LlmttError(
        f"the cached plan was out of date ({what}), so this invocation may have skipped work; "
        "the cache is removed: run doit again (and please report this)"
    )


@functools.cache
def _part(scenario_file: str) -> tuple[Project, dict[str, Run]]:
    """The plan of one scenario: what the tasks carrying out its runs need, at a cost that does
    not grow with the project (and a forked worker holds only that)."""
    from llmtt.plan.runs import build_plan
    from llmtt.spec.project import load_project

    plan = build_plan(load_project(ROOT, only=Path(scenario_file)), SELECTION, part=True)
    return plan.project, {run.run_id: run for run in plan.runs}


def _run(spec: RunSpec) -> tuple[Project, Run]:
    """The full run behind a task, with its project, checked against the keys its task was
    made with."""
    if _BUILT is not None:  # built in this process anyway: the whole plan serves
        project, runs = _BUILT.project, _plan()[1]
    else:
        project, runs = _part(spec.scenario_file)
    run = runs.get(spec.run_id)
    if run is None:
        raise _stale(f"{spec.run_id} is no longer planned")
    if RunSpec.of(run) != spec:
        raise _stale(f"the keys of {spec.run_id} changed")
    return project, run


def _ledger() -> Ledger | None:
    """This invocation's session budget, shared by parallel workers through a locked file."""
    try:
        limit = budget_limit(TASKS.budget_max_usd, get_var("budget", None))
    except LlmttError as exc:
        sys.stderr.write(_console(f"llmtt: {exc}\n"))
        raise SystemExit(2) from None
    if limit is None or COMMAND != "run":
        return None
    return Ledger.create(RESULTS / ".llmtt-cache" / "budget.json", limit)


LEDGER = _ledger()


def _executor() -> str:
    """Where this invocation carries out the layers of its runs: `executor=` on the command
    line, else [executor] kind. With Ray, doit runs the layers' actions in threads, each
    waiting for its layer on the cluster (`-n`, else [executor] max_in_flight, of them)."""
    kind = get_var("executor", None) or TASKS.executor["kind"]
    problem = None
    if kind not in ("local", "ray"):
        problem = f"executor={kind} is not an executor (use executor=local or executor=ray)"
    elif kind == "ray" and COMMAND == "run":
        import importlib.util

        parallel = _parallel_type(sys.argv[1:])
        if importlib.util.find_spec("ray") is None:
            problem = "executor=ray needs Ray on this machine: pip install 'llmtt[ray]'"
        elif parallel not in (None, "thread"):
            problem = (
                "executor=ray waits for its runs from threads of this process: leave out "
                f"-P {parallel} (-n N alone sets how many runs are under way)"
            )
        DOIT_CONFIG["num_process"] = TASKS.executor["max_in_flight"]
        DOIT_CONFIG["par_type"] = "thread"
    elif COMMAND == "run" and _parallel_type(sys.argv[1:]) == "thread":
        # The runs' processes are told apart by whose child they are, and a run's end reaps
        # and stops what is left of it: runs in threads of one process would take each
        # other's processes.
        problem = (
            "llmtt carries out each run in a process of its own: leave out -P thread "
            "(-n N alone carries out N runs at once)"
        )
    if problem:
        sys.stderr.write(f"llmtt: {problem}\n")
        raise SystemExit(2)
    return str(kind)


def _parallel_type(argv: list[str]) -> str | None:
    """The value of doit's -P / --parallel-type among `argv`, if one is given."""
    for n, arg in enumerate(argv):
        if arg in ("-P", "--parallel-type"):
            return argv[n + 1] if n + 1 < len(argv) else None
        if arg.startswith("--parallel-type="):
            return arg.split("=", 1)[1]
        if arg.startswith("-P") and not arg.startswith("--"):
            return arg[2:]
    return None


EXECUTOR = _executor()
# With Ray, the layers' actions run in threads of this process, where doit's capture of a
# task's output swaps sys.stdout for one object per task: a print in one thread could write
# to another thread's object as it was freed (seen as "'Writer' object has no attribute
# 'writers'"). Nothing reads the captured output (each task shows its output as it comes).
TASK_IO = {"capture": False} if EXECUTOR == "ray" else None
# doit's executed-only lines (thousands of up-to-date ones would bury what happened), and
# llmtt's line per run with the session's spend; `--reporter NAME` still picks another.
DOIT_CONFIG["reporter"] = ProgressReporter.configure(
    {run.run_id: Path(run.dir) for run in TASKS.runs},
    LEDGER.path if LEDGER is not None else None,
    quiet=quiet(sys.argv[1:]),
)


def task_llmtt() -> Iterator[Task | dict[str, Any]]:
    """Every run's layers and the aggregate.

    The garbage collector is off while the tasks are made and what exists then is frozen out
    of its sight: tens of thousands of live objects made at once set off collections that each
    walk them all (at 10,000 runs, 1.2 s of collecting for 0.24 s of making them), and they
    live as long as the invocation anyway.
    """
    gc.disable()
    try:
        for run in TASKS.runs:
            yield from _run_tasks(run)
        yield _aggregate_task(TASKS)
    finally:
        gc.freeze()
        gc.enable()


def _run_tasks(run: RunSpec) -> Iterator[Task]:
    """A run's layers as doit tasks; the last layer, report, is the run's visible task.

    Built as `Task` objects rather than dicts: the loader's dict handling and a group task per
    run cost a quarter of a no-op `doit run` on a plan of a thousand runs.
    """
    rid = run.run_id
    d = run.dir + os.sep
    judged = run.judge_model is not None
    layers = [f"{rid}:agent", f"{rid}:evaluate"] + ([f"{rid}:judge"] if judged else [])
    # result.json (the settled outcome) comes from the judge when there is one.
    evaluated = ["metrics.json", "gates.json"] + ([] if judged else ["result.json"])
    yield Task(
        layers[0],
        [(_agent_action, [run])],
        targets=[d + n for n in AGENT_OUTPUTS],
        uptodate=[KeyCheck("agent", run.keys["agent"])],
        clean=[(_remove_dir, [Path(run.dir)])],
        doc=f"launch {run.agent} for {run.label}",
        verbosity=2,
        io=TASK_IO,
        subtask_of=rid,
    )
    yield Task(
        layers[1],
        [(_evaluate_action, [run])],
        file_dep=[d + "run.json"],
        targets=[d + n for n in evaluated],
        uptodate=[KeyCheck("evaluate", run.keys["evaluate"])],
        clean=True,
        doc=f"metrics and gates of {run.label}",
        verbosity=2,
        io=TASK_IO,
        subtask_of=rid,
    )
    if judged:
        yield Task(
            layers[2],
            [(_judge_action, [run])],
            file_dep=[d + "metrics.json", d + "gates.json"],
            targets=[d + "judge.json", d + "result.json"],
            uptodate=[KeyCheck("judge", run.keys["judge"])],
            clean=True,
            doc=f"LLM judge ({run.judge_model}) of {run.label}",
            verbosity=2,
            subtask_of=rid,
        )
    report_check: list[Any] = [KeyCheck("report", run.keys["report"])]
    if SHOW_STATUS:
        report_check.append(LayersDone(layers))
    yield Task(
        rid,
        [(_report_action, [run])],
        file_dep=[d + n for n in EVALUATE_OUTPUTS] + ([d + "judge.json"] if judged else []),
        targets=[d + "evaluation.md"],
        task_dep=layers,
        uptodate=report_check,
        clean=True,
        doc=run.label,
        verbosity=2,
        io=TASK_IO,
    )


def _aggregate_task(tasks: TaskPlan) -> dict[str, Any]:
    return {
        "basename": "aggregate",
        "doc": "report.md and report.json over every selected run",
        "actions": [(_aggregate_action, [])],
        "file_dep": [os.path.join(run.dir, "result.json") for run in tasks.runs],
        "targets": [
            str(RESULTS / n) for n in ("report.md", "report.json", "report.html", "junit.xml")
        ],
        "uptodate": [KeyCheck("aggregate", tasks.aggregate_key)],
        "clean": True,
        "verbosity": 2,
        "io": TASK_IO,
    }


def _guarded(action: Callable[..., Any]) -> Callable[..., Any]:
    """A user's mistake met while running a task fails it with the message, not a traceback."""

    @functools.wraps(action)
    def wrapper(*args: Any) -> Any:
        try:
            return action(*args)
        except LlmttError as exc:
            return TaskFailed(_console(f"llmtt: {exc}"))
        except OSError as exc:  # the environment's fault (a folder made read-only, a full disk)
            where = args[0].run_id if args else "the reports"
            return TaskFailed(
                _console(f"llmtt: {where}: {exc.strerror or exc}: {exc.filename or ''}")
            )
        except KeyboardInterrupt as exc:
            # doit saves what finished and lets ^C end the process; the hook below reports it.
            exc.add_note(args[0].run_id if args else "the reports")
            raise

    return wrapper


def _interrupted(kind: type[BaseException], value: BaseException, tb: Any) -> None:
    """^C during `doit run`: one line saying what stays pending, not doit's traceback."""
    if not issubclass(kind, KeyboardInterrupt):
        _HOOK(kind, value, tb)
        return
    from llmtt.taskgraph.signals import Terminated, exit_terminated

    notes = getattr(value, "__notes__", [])
    where = f" during {', '.join(notes)}" if notes else ""
    how = "terminated (SIGTERM)" if isinstance(value, Terminated) else "interrupted"
    sys.stderr.write(
        f"\nllmtt: {how}{where}; what finished is kept, the rest stays pending "
        "(`doit run` carries on from there)\n"
    )
    if isinstance(value, Terminated):
        exit_terminated()


_HOOK = sys.excepthook
sys.excepthook = _interrupted


@_guarded
def _agent_action(spec: RunSpec) -> dict[str, Any]:
    import threading

    from llmtt.execution.agent_layer import execute_run

    if EXECUTOR == "local" and threading.current_thread() is not threading.main_thread():
        # doit told to run tasks in threads some other way than -P (its config, a dodo.py).
        raise LlmttError(
            "llmtt carries out each run in a process of its own, and doit runs this one in a "
            "thread: set doit's parallel type to process (par_type), or leave it out"
        )
    project, run = _run(spec)
    _warm_evaluation(project)
    key = f"{run.run_id}:agent"
    amount: float | None = None
    refusal: str | None = None
    if _paid_agent(project, run):
        try:
            amount = _reserve(run, key, functools.partial(_agent_cost_hold, project))
        except BudgetExhausted as exc:
            # Recorded as a run not carried out, so the reports list it; it stays pending.
            refusal = str(exc)
    if EXECUTOR == "ray" and refusal is None:
        record = _remote_agent(project, run, spec, amount)
    else:
        guard = LEDGER.guard(key) if LEDGER is not None and amount is not None else None
        try:
            record = execute_run(project, run, session_budget=guard, refusal=refusal)
        finally:
            if LEDGER is not None and amount is not None:
                events = run.dir / "events.jsonl"  # absent when the run broke off: cost unknown
                LEDGER.settle(key, events_cost(events) if events.exists() else None, amount)
    values: dict[str, Any] = {"status": record["status"]}
    if record["status"] == "error":
        # Carried on to evaluate, report (which fails the run with the reason) and aggregate,
        # so the reports show it; KeyCheck keeps the agent layer pending.
        values["error"] = record["error"]
    # What was paid for is on record now, even if doit is killed before it saves the task.
    record_values(DOIT_CONFIG["dep_file"], key, _saved(spec, "agent", values))
    return values


@_guarded
def _evaluate_action(spec: RunSpec) -> dict[str, Any]:
    from llmtt.evaluation.evaluate import evaluate_run
    from llmtt.executors.remote import LedgerPurse
    from llmtt.results.store import ResultsStore

    project, run = _run(spec)
    if EXECUTOR == "ray":
        record = _remote_evaluate(project, run, spec)
    else:
        purse = LedgerPurse(LEDGER, run.run_id) if LEDGER is not None else None
        store = ResultsStore(project.results_dir, project.redactor())
        record = evaluate_run(project, run, store, purse)
    if record is not None and record["outcome"] != "error":
        print(f"llmtt: {run.run_id}: {record['outcome'].upper()} - {record['outcome_reason']}")
    values: dict[str, Any] = {"status": "ok"}
    metrics = read_json(run.dir / "metrics.json")
    refused = (metrics.get("evaluators") or {}).get("refused")
    if refused:
        # An evaluator that may not call its model yet: the layer stays pending (KeyCheck),
        # the reports list the run.
        values = {"status": "error", "error": "an evaluator did not run: " + "; ".join(refused)}
    # Saved now: evaluated again after a kill, its new gates.json would re-pay the judge.
    deps = [os.path.join(spec.dir, "run.json")]
    record_values(
        DOIT_CONFIG["dep_file"], f"{run.run_id}:evaluate", _saved(spec, "evaluate", values), deps
    )
    return values


def _remote_job(layer: str, project: Project, run: Run, spec: RunSpec) -> tuple[Any, Any]:
    """The cluster (joined at the first layer sent) and the job of one layer of a run."""
    from doit import doit_cmd

    from llmtt.executors import ray as raycluster
    from llmtt.executors.remote import PASSED_ENV, Job, key_names

    try:
        cluster = raycluster.cluster(
            TASKS.executor, ROOT, RESULTS, LEDGER, key_names(project.config)
        )
    except LlmttError as exc:
        # No layer can go anywhere: the invocation ends on this one line.
        raise SystemExit(_console(f"llmtt: {exc}")) from None
    scenario = Path(spec.scenario_file)
    if not scenario.is_relative_to(ROOT):
        raise LlmttError(
            f"executor=ray sends the project folder {ROOT} to the nodes, and the scenario file "
            f"{scenario} is outside it"
        )
    words = {
        k: v for k, v in (doit_cmd._CMDLINE_VARS or {}).items() if k not in ("budget", "executor")
    }
    job = Job(
        layer=layer,
        run_id=run.run_id,
        scenario=scenario.relative_to(ROOT).as_posix(),
        keys=spec.keys,
        versions={"agent": run.agent_version, "target": run.target_version},
        selection=words,
        project=cluster.digest,
        env={name: os.environ.get(name) for name in PASSED_ENV},
    )
    return cluster, job


def _remote_agent(project: Project, run: Run, spec: RunSpec, held: float | None) -> Any:
    """The agent layer of a run on the Ray cluster."""
    from llmtt.executors import ray as raycluster

    cluster, job = _remote_job("agent", project, run, spec)
    key = f"{run.run_id}:agent"
    return raycluster.agent_layer(
        cluster,
        job,
        project,
        run,
        LEDGER,
        held,
        lambda: _reserve(run, key, functools.partial(_agent_cost_hold, project)),
    )


def _remote_evaluate(project: Project, run: Run, spec: RunSpec) -> Any:
    """The evaluate layer of a run on the Ray cluster."""
    from llmtt.executors import ray as raycluster

    cluster, job = _remote_job("evaluate", project, run, spec)
    return raycluster.evaluate_layer(cluster, job, project, run)


def _saved(spec: RunSpec, layer: str, values: dict[str, Any] | None = None) -> dict[str, Any]:
    """A layer's values as doit saves them: its action's, then its KeyCheck's."""
    return {**(values or {}), "llmtt_key": spec.keys[layer]}


@_guarded
def _judge_action(spec: RunSpec) -> dict[str, Any]:
    from llmtt.evaluation.evaluate import judge_run
    from llmtt.results.store import ResultsStore

    project, run = _run(spec)
    judge = run.judge
    assert judge is not None
    key = f"{run.run_id}:judge"
    held: list[float] = []

    def reserve(prompt: str) -> None:
        if LEDGER is not None and _paid_model(judge.model):
            amount = _judge_cost_hold(project, run, prompt)
            LEDGER.reserve(key, amount)
            held.append(amount)

    try:
        store = ResultsStore(project.results_dir, project.redactor())
        record = judge_run(project, run, store, reserve)
    finally:
        if LEDGER is not None and held:
            judged = run.dir / "judge.json"
            cost = read_json(judged).get("cost_usd") if judged.exists() else None
            LEDGER.settle(key, cost, held[0])
    values: dict[str, Any] = {"status": "ok"}
    if record["outcome"] == "error":
        # Not judged (no budget, no key...): the layer stays pending, the reports list the run.
        values = {"status": "error", "error": record["outcome_reason"]}
    else:
        print(f"llmtt: {run.run_id}: {record['outcome'].upper()} - {record['outcome_reason']}")
    # What was paid for is on record now, even if doit is killed before it saves the task.
    deps = [os.path.join(spec.dir, n) for n in ("metrics.json", "gates.json")]
    record_values(DOIT_CONFIG["dep_file"], key, _saved(spec, "judge", values), deps)
    return values


@_guarded
def _report_action(spec: RunSpec) -> TaskFailed | None:
    from llmtt.report.render import render_evaluation

    project, run = _run(spec)
    outcome, reason = render_evaluation(project, run)
    if outcome == "error":
        # The run's last layer fails, so `doit run <run>` exits non-zero too; the aggregate,
        # which needs only the evaluation, still reports it.
        return TaskFailed(f"{run.run_id}: {reason}")
    return None


@_guarded
def _aggregate_action() -> TaskFailed | None:
    from llmtt.report.aggregate import aggregate

    plan = _plan()[0]
    if TaskPlan.of(plan) != TASKS:
        raise _stale("the runs or the aggregate key changed")
    data = aggregate(plan)
    summary = data["summary"]
    results = os.path.relpath(plan.project.results_dir / "report.md")
    print(
        f"llmtt: {summary['runs']} runs: {summary['passed']} passed, {summary['failed']} failed, "
        f"{summary['errors']} could not be carried out; see {results}"
    )
    errored = [r for r in data["runs"] if r["outcome"] in ("error", "missing")]
    if errored:
        lines = "\n".join(f"  {r['run_id']}: {r['outcome_reason']}" for r in errored)
        return TaskFailed(
            f"{len(errored)} run(s) could not be carried out (they stay pending):\n{lines}"
        )
    return None


def _paid_model(model: str | None) -> bool:
    return model is not None and model != "scripted"


def _paid_agent(project: Project, run: Run) -> bool:
    from llmtt.agents.registry import make_agent

    return _paid_model(run.model) and not make_agent(project.config, project.root, run.agent).free


def _agent_cost_hold(project: Project, run: Run) -> float:
    """What a paid run holds while it runs: its own limit, else its expected cost."""
    if run.scenario.spec.cost.max_usd is not None:
        return run.scenario.spec.cost.max_usd
    history = read_jsonl(project.results_dir / "results.jsonl")
    return expected_cost(run, history, project.config.models) or 0.0


def _judge_cost_hold(project: Project, run: Run, prompt: str) -> float:
    """What the judge holds: its prompt asked twice (a malformed answer is asked to be
    repaired) with the longest answers it may give."""
    from llmtt.evaluation.judge import MAX_ANSWER_TOKENS
    from llmtt.providers import resolve_model

    assert run.judge is not None
    model = resolve_model(run.judge.model, project.config.models)
    # Three characters a token is generous for prose and JSON; the rest is the answers.
    tokens = 2 * (len(prompt) // 3 + 500) + MAX_ANSWER_TOKENS
    return model.cost(tokens, 2 * MAX_ANSWER_TOKENS) or 0.0


def _reserve(run: Run, key: str, hold: Callable[[Run], float]) -> float | None:
    """Hold money for a paid step in the session budget (BudgetExhausted when it is spent)."""
    if LEDGER is None:
        return None
    amount = hold(run)
    LEDGER.reserve(key, amount)
    return amount


def _remove_dir(path: Path) -> None:
    if path.exists():
        shutil.rmtree(path)
