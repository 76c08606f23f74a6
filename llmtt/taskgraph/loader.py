"""doit's task loader for llmtt: what doit parsed of its command line reaches llmtt here, and the
project is held when doit asks for the tasks, never when a module is imported.

doit drives a loader in three steps (`TaskLoader2`), each from the command it runs:

1. `setup(options)`: doit's dodo loading (`-f`, `-d`, `-k`) imports the dodo file, which does
   nothing by itself; the options doit parsed are kept.
2. `load_doit_config()`: the plan for doit's NAME=VALUE variables (from the plan cache when
   nothing moved), and llmtt's part of doit's configuration under the dodo file's own
   `DOIT_CONFIG`. Nothing is held; only the results folder and the plan cache are written;
   from here on ^C ends the command with one line (`_InterruptHook`).
3. `load_tasks(cmd, pos_args)`: doit names the command. `doit info NAME` of a task the plan
   lacks is one line; a parallel type llmtt cannot work with is refused; the commands that
   write the project take its lock, and `doit run` also handles SIGTERM as ^C, starts the
   watchdog, sets LLMTT_LABEL, opens the budget ledger and has its workers forked. Then the
   tasks: llmtt's and the dodo file's own.

doit reaches it through `llmtt doit ...` (`DoitMain` with this loader), through doit's own
configuration (`loader = "llmtt"` under `[tool.doit]` in pyproject.toml or `[GLOBAL]` in
doit.cfg; the `doit.LOADER` entry point `llmtt` names this class), or from an unchanged
`dodo.py` under a plain `doit` (`llmtt.taskgraph.dodo`).
"""

from __future__ import annotations

import functools
import gc
import os
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NoReturn

from doit.cmd_base import DodoTaskLoader
from doit.exceptions import InvalidDodoFile
from doit.task import Task

from llmtt.errors import LlmttError, no_space
from llmtt.spec.selection import check_info
from llmtt.spec.variables import apply_seed_names
from llmtt.taskgraph.actions import console
from llmtt.taskgraph.progress import quiet
from llmtt.taskgraph.session import RUNNERS, WRITERS, Session
from llmtt.taskgraph.tasks import make_tasks


class LlmttLoader(DodoTaskLoader):  # type: ignore[misc]  # doit is untyped
    """doit's dodo-file loader, with llmtt's configuration and tasks (see the module)."""

    def __init__(self) -> None:
        super().__init__()
        self.options: Mapping[str, Any] = {}  # doit's options; doit adds the config to them
        self.given: dict[str, Any] = {}  # the options as doit parsed them, before any config
        self.session: Session | None = None
        self.lock_fd: int | None = None  # the project's lock, held while the process lives
        self.namespace: dict[str, Any] = {}  # the dodo file's module (set by setup)
        self.quiet = False  # doit's verbosity asks llmtt's progress lines to be quiet
        self.reporter: Any = None  # llmtt's progress reporter class of this invocation

    @classmethod
    def adopt(cls, loader: Any, options: Mapping[str, Any]) -> LlmttLoader:
        """This loader over the module another of doit's loaders has already imported."""
        adopted = cls()
        adopted.cmd_names, adopted.config = loader.cmd_names, loader.config
        adopted.task_opts, adopted.namespace = loader.task_opts, loader.namespace
        adopted._keep(options)
        return adopted

    def setup(self, opt_values: Mapping[str, Any]) -> None:
        """Import the dodo file, as doit's own loader does, and keep doit's options."""
        super().setup(opt_values)
        self._keep(opt_values)

    def _keep(self, options: Mapping[str, Any]) -> None:
        self.options = options
        self.given = dict(options)

    def load_doit_config(self) -> dict[str, Any]:
        """llmtt's doit configuration, and the dodo file's DOIT_CONFIG over it."""
        from doit import doit_cmd  # doit keeps the command line's NAME=VALUE words there

        _report_interrupts()  # a doit command is under way: ^C is one line from here on
        own = self.namespace.get("DOIT_CONFIG", {})
        if not isinstance(own, dict):
            raise InvalidDodoFile(f"DOIT_CONFIG must be a dict, not {type(own).__name__}")
        own = dict(own)  # what the dodo file set itself (see llmtt.taskgraph.dodo.DodoConfig)
        for warning in apply_seed_names():  # the seed's LLM_TOOL_TEST_* names
            sys.stderr.write(console(f"llmtt: warning: {warning}\n"))
        variables = dict(doit_cmd._CMDLINE_VARS or {})
        if "agent" not in variables and os.environ.get("LLMTT_AGENTS"):
            variables["agent"] = os.environ["LLMTT_AGENTS"]  # the agents when none are named
        try:
            session = Session.load(Path.cwd().resolve(), variables)
            session.results.mkdir(parents=True, exist_ok=True)  # where doit's file goes
        except LlmttError as exc:
            fail(exc)
        except OSError as exc:  # a full disk, a folder made read-only
            fail(_environment(exc))
        self.session = session
        verbosity = self.given.get("verbosity")
        self.quiet = quiet(own.get("verbosity") if verbosity is None else verbosity)
        config = session.doit_config(quiet=self.quiet)
        self.reporter = config["reporter"]
        return {**config, **own}

    def load_tasks(self, cmd: Any, pos_args: list[str]) -> list[Task]:
        """Hold the project as the command needs it, then make the tasks."""
        session = self.session
        if session is None:
            raise RuntimeError("doit asked for the tasks before the configuration")
        command = str(cmd.get_name())
        try:
            if command == "info":
                check_info(pos_args, session.tasks.task_names(), session.selection)
            processes = _workers(session, command, self.given, self.options)
            if command in RUNNERS and session.executor == "local":
                from llmtt.execution import isolation

                # Before any run: a run that cannot be confined is never started unconfined.
                isolation.check_mode(session.tasks.isolation)
            if command in WRITERS:
                self.lock_fd = _hold(session, command)
            session.begin(command, processes)
            _pace(session)
        except LlmttError as exc:
            fail(exc)
        except OSError as exc:
            fail(_environment(exc))

        if command == "run" and session.selection.adaptive:
            self._in_rounds(cmd, pos_args)
        return self._tasks(cmd, pos_args, session)

    def _tasks(self, cmd: Any, pos_args: list[str], session: Session) -> list[Task]:
        def task_llmtt() -> Iterator[Task | dict[str, Any]]:
            """Every run's layers and the aggregate."""
            return make_tasks(session)

        if session.processes:
            _start_forker(session)  # before the graph, which it never holds
        # doit's own loading makes the tasks, with the dodo file's other task creators.
        self.namespace = {**self.namespace, "task_llmtt": task_llmtt}
        tasks: list[Task] = super().load_tasks(cmd, pos_args)
        return tasks

    def _in_rounds(self, cmd: Any, pos_args: list[str]) -> None:
        """repeats=auto: doit's run of the tasks, again for each next round
        (`llmtt.results.adaptive`) while a round's runs all went through doit without a task
        failing; each round with the tasks (and workers, and a dependency file opened again)
        of its own plan, and the reports written at its end."""
        from doit.dependency import Dependency
        from doit.globals import Globals

        execute = cmd._execute
        first = list(cmd.sel_tasks or []) if not cmd.sel_default_tasks else None

        @functools.wraps(execute)  # doit passes its options by the names _execute takes
        def rounds(**params: Any) -> int:
            while True:
                code = int(execute(**params) or 0)
                # -a re-runs what is done once, in the first round: the rounds after it run
                # only what they add.
                params["always"] = False
                session = self.session
                assert session is not None
                try:
                    following = session.next_round()
                except LlmttError as exc:
                    fail(exc)
                # A round that failed (a run not carried out: it stays pending for the next
                # `doit run`) ends the rounds; so does a round after which nothing moved on.
                if code != 0 or following.selection.rounds == session.selection.rounds:
                    sys.stdout.write(console(f"llmtt: repeats=auto: {_rounds(following)}\n"))
                    return code
                sys.stdout.write(
                    console(f"llmtt: repeats=auto: next round: {_rounds(following)}\n")
                )
                self.session = following
                # This round's graph, dropped before the next round's forker is forked from
                # this process: the forker and its workers would otherwise hold it too. It was
                # frozen out of the collector's sight (`make_tasks`), and its tasks refer to
                # each other: only a collection with it thawed frees it.
                cmd.task_list = []
                del session
                gc.unfreeze()
                gc.collect()
                cmd.task_list = self._tasks(cmd, pos_args, following)
                config = following.doit_config(quiet=self.quiet)
                if first is None:
                    cmd.sel_tasks = config["default_tasks"]
                if params.get("reporter") is self.reporter:
                    params["reporter"] = self.reporter = config["reporter"]
                done = cmd.dep_manager  # closed by doit at the end of the round
                cmd.dep_manager = Dependency(
                    done.db_class,
                    done.name,
                    checker_cls=type(done.checker),
                    codec_cls=type(done.backend.codec),
                )
                Globals.dep_manager = cmd.dep_manager

        cmd._execute = rounds


def _rounds(session: Session) -> str:
    """Where each comparing scenario stands, in one line."""
    said = {
        "running": "undecided so far",
        "decided": "decided",
        "bound": "stopped at max_repeats, undecided",
    }
    rounds = sorted(session.rounds.items())
    parts = [f"{name} {r.repeats} repeats ({said[r.status]})" for name, r in rounds]
    return "; ".join(parts) or "no scenario compares variants"


def _environment(exc: OSError) -> LlmttError:
    """The environment's fault met while doit loads, as a user's error naming the file."""
    where = f"{exc.filename}: " if exc.filename else ""
    return no_space(exc) or LlmttError(f"{where}{exc.strerror or exc}")


def fail(exc: LlmttError) -> NoReturn:
    """A user's mistake met while doit loads: one line and exit status 2, no traceback."""
    sys.stderr.write(console(f"llmtt: {exc}\n"))
    raise SystemExit(2)


def _workers(
    session: Session, command: str, given: Mapping[str, Any], options: Mapping[str, Any]
) -> int:
    """The worker processes of a local `doit run -n N` (0: none), after refusing a parallel
    type llmtt cannot work with. `given` are doit's options as parsed, `options` with the
    configuration (llmtt's and the dodo file's) under them."""
    if command != "run":
        return 0
    parallel = options.get("par_type")
    if session.executor == "ray":
        import importlib.util

        if importlib.util.find_spec("ray") is None:
            raise LlmttError("executor=ray needs Ray on this machine: pip install 'llmtt[ray]'")
        if parallel != "thread":
            raise LlmttError(
                "executor=ray waits for its runs from threads of this process: leave out "
                f"-P {parallel} (-n N alone sets how many runs are under way)"
            )
        return 0
    if given.get("par_type") == "thread":
        # The runs' processes are told apart by whose child they are, and a run's end reaps
        # and stops what is left of it: runs in threads of one process would take each
        # other's processes.
        raise LlmttError(
            "llmtt carries out each run in a process of its own: leave out -P thread "
            "(-n N alone carries out N runs at once)"
        )
    if parallel == "thread":  # a dodo file's DOIT_CONFIG: each action refuses its thread
        return 0
    processes = int(options.get("num_process") or 0)
    if processes:
        _fork_workers()
    return processes


def _pace(session: Session) -> None:
    """jobs=auto: what it found before is read now (a damaged file is a located error before
    any run: the user asked for the pacing it holds). `doit run -n N` above a limit it found
    for a unit of the plan: one line (the file is advisory there: a damaged one is a warning,
    and the runs go on)."""
    from llmtt.taskgraph import concurrency

    if session.processes < 1:
        return
    if session.variables.get("jobs") == "auto":
        concurrency.remembered(session.root)
        return
    plan = concurrency.units(session.tasks.runs)
    try:
        warning = concurrency.oversubscribed(session.root, plan, session.processes)
    except LlmttError as exc:
        warning = f"{exc} (read only to warn of -n {session.processes})"
    if warning is not None:
        sys.stderr.write(console(f"llmtt: warning: {warning}\n"))


def _fork_workers() -> None:
    """doit's parallel runner starts its workers with multiprocessing's default start method;
    llmtt's must be forked. Each worker carries out runs with what doit's main process set up
    for the invocation: the session and its plans, the budget ledger, the project lock's
    descriptor, the SIGTERM handler and parent-death signal (signals.py), the watchdog's mark.
    Spawn or forkserver (Python 3.14's default on Linux) would start workers that have none of
    it. And doit's runner is llmtt's (`llmtt.taskgraph.runner`), which carries on when a worker
    dies; its workers are forked by a forker the loader starts once all that is set up, before
    it makes the tasks (`_start_forker`)."""
    import multiprocessing

    from llmtt.taskgraph import runner

    if multiprocessing.get_start_method(allow_none=True) != "fork":
        multiprocessing.set_start_method("fork", force=True)
    runner.install()  # a worker that dies ends neither the invocation nor the others' runs


def _start_forker(session: Session) -> None:
    """Fork the process that forks the workers of this `doit run -n N` (or of its round):
    forked now, with everything `_fork_workers` names set up and before the task graph is
    made, it gives each worker all of that and none of the graph (llmtt.taskgraph.forker)."""
    from llmtt.taskgraph import runner
    from llmtt.taskgraph.warm import warm_forker

    # The tasks refer to the session: a worker has its own.
    forker = runner.forker((session,), functools.partial(warm_forker, session))
    runner.install(forker)
    session.warmed.add("workers")  # the forker's head start (warm_forker), not this process's


def _hold(session: Session, command: str) -> int:
    """This invocation's hold on the project: the lock, for the commands that write it; for
    `run`, SIGTERM handled like ^C and a watchdog for the processes its runs start."""
    from llmtt.process import watchdog
    from llmtt.taskgraph import lock, signals

    fd = lock.hold(session.results, command)
    if command in RUNNERS:
        signals.install()
        watchdog.start()
        # The records this invocation writes say which it was (workers inherit it): a label the
        # user set, else when it began. report.html's history has a point per invocation.
        os.environ.setdefault("LLMTT_LABEL", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    return fd


class _InterruptHook:
    """^C during `doit run`: one line saying what stays pending, not doit's traceback."""

    def __init__(self, previous: Any) -> None:
        self.previous = previous

    def __call__(self, kind: type[BaseException], value: BaseException, tb: Any) -> None:
        if not issubclass(kind, KeyboardInterrupt):
            self.previous(kind, value, tb)
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


def _report_interrupts() -> None:
    """From here on, ^C (or SIGTERM) ends the invocation with `_InterruptHook`'s line."""
    if not isinstance(sys.excepthook, _InterruptHook):
        sys.excepthook = _InterruptHook(sys.excepthook)


def main(argv: list[str]) -> int:
    """doit's command line with this loader (`llmtt doit`); doit's exit status."""
    from doit.doit_cmd import DoitMain

    class LlmttDoit(DoitMain):  # type: ignore[misc]  # doit is untyped
        BIN_NAME = "llmtt doit"  # doit's messages name the command to type

    return int(LlmttDoit(LlmttLoader()).run(argv) or 0)  # None: a command with nothing to say
