"""doit's runner for a local `doit run -n N`, which carries on when a worker process dies.

doit's multiprocess runner (`doit.runner.MRunner`) waits for each task's result on a queue its
workers write to. A worker killed by a signal (the OOM killer, an agent's `kill -9 $PPID`)
never writes it, and `doit run -n N` waited for ever. This runner waits for a result or for a
worker's end, whichever comes first:

- a worker that dies carrying out a task: what its run started is ended, the task is recorded as
  lost (an agent layer as a run not carried out, whose run.json says why, so that the reports
  show it and the next `doit run` carries it out again; any other layer as a failed task) and a
  new worker takes its place, so the runs under way in the other workers finish;
- a worker that dies between tasks may hold the lock of doit's job queue, which no other worker
  could then read: the invocation ends at once, its runs under way stopped and left pending, as
  at ^C.

Its workers are not forked by doit's main process, which holds the task graph, but by a forker
(llmtt.taskgraph.forker) forked before the graph was made: doit sends each worker its tasks
whole, and a worker's memory does not grow with the project.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.queues
import os
import queue
import signal
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from doit.exceptions import BaseFail, TaskError
from doit.runner import MRunner, Runner

from llmtt.process import watchdog
from llmtt.taskgraph import actions
from llmtt.taskgraph.forker import FORK, Forker, carry_out, ended
from llmtt.taskgraph.pacing import PacedDispatch

# How often doit's main process, waiting for a result, looks whether a worker died.
POLL_SECS = 0.2

Message = dict[str, Any]
if TYPE_CHECKING:
    _Queue = multiprocessing.queues.Queue[Message]
else:  # not subscriptable at run time before Python 3.12
    _Queue = multiprocessing.queues.Queue


def forker(inherited: Iterable[object] = (), warm: Callable[[], None] | None = None) -> Forker:
    """A forker for this runner's workers, forked now (see llmtt.taskgraph.forker)."""
    return Forker(_Results(), inherited, warm)


def install(given: Forker | None = None) -> None:
    """Have doit's `run -n N` use this runner (in doit's main process, before it runs), its
    workers forked by `given` (else by a forker forked once doit runs)."""
    from doit import cmd_run

    cmd_run.MRunner = type("WorkerRunner", (WorkerRunner,), {"given": given})


class _Results(_Queue):
    """doit's result queue; its reader, doit's main process, also watches the workers."""

    def __init__(self) -> None:
        super().__init__(ctx=FORK)
        self.runner: WorkerRunner | None = None  # set in the main process once workers start

    def get(self, block: bool = True, timeout: float | None = None) -> Message:
        """The next result for doit (a worker's, or one made for a worker that died)."""
        if self.runner is None or not block or timeout is not None:
            return super().get(block, timeout)
        return self.runner.next_result(super().get, self.empty)


class WorkerRunner(PacedDispatch, MRunner):  # type: ignore[misc]  # doit is untyped
    """doit's multiprocess runner that outlives a worker's death (see the module), its workers
    forked by a forker (llmtt.taskgraph.forker), which lets N agents out at once under `-n N`,
    their runs' later layers beside them, and paces the runs' layers under jobs=auto
    (`llmtt.taskgraph.pacing`)."""

    given: Forker | None = None  # the forker made before the task graph (`install`)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.workers: list[Any] = []  # doit's own list: a dead one's successor joins it
        self.carrying: dict[int, str] = {}  # a worker's pid: the task it carries out
        self.mourned: set[Any] = set()  # the workers whose death was dealt with
        # Carries out, in this process, a task that cannot be sent to a worker (`Jobs`), and
        # its teardown at the end.
        self.here: Runner | None = None
        self.start_worker: Callable[[], Any] | None = None
        # Used without llmtt's loader (by its tests), the runner forks its own forker: its
        # workers then map the task graph, already built.
        self.forker = self.given or forker()
        # Which worker carries out which task, told as each starts one.
        self.carriers = self.forker.carriers
        self.queues = [self.forker.results, self.forker.jobs]

    def Queue(self) -> Any:  # noqa: N802 - doit's name
        """doit's result queue, then its job queue (made in that order): the forker's, which
        its workers inherit."""
        return self.queues.pop(0)

    def _run_start_processes(self, job_q: Any, result_q: _Results) -> list[Any]:
        forker = self.forker
        forker.reporting = self.reporter.__class__, self.stream
        forker.jobs.tasks = self.tasks  # tasks go to the workers whole: they have no graph
        forker.jobs.carry_out = self._carry_out_here
        self.start_worker = lambda: forker.start()[0]
        ready = 0
        # doit's: a worker a job, those without one told to hold on; a plain -n N of llmtt's
        # runs has spare ones for the later layers of the runs whose agent is done
        # (`PacedDispatch.spread`).
        for _ in range(self.spread()):
            job = self.get_next_job(None)
            if job is None:
                break
            job_q.put(job)
            ready += 1
        self.workers.extend(forker.start(ready))
        result_q.runner = self
        return self.workers

    def finish(self) -> Any:
        """doit's end of the run, and the forker's once its workers have ended."""
        try:
            if self.here is not None:
                self.here.teardown()
            return super().finish()
        finally:
            self.forker.end()
            # The forker outlives the run (atexit ends it): it no longer refers to the graph,
            # which a later round of repeats=auto frees before it forks its own forker.
            self.forker.jobs.tasks, self.forker.jobs.carry_out = {}, None
            self.forker.results.runner = None

    def _carry_out_here(self, task: Any) -> None:
        """Carry out `task` in this process, as a worker would, its result queued for doit's
        loop (see `llmtt.taskgraph.forker.Jobs`). Meanwhile no job is dispatched and no
        worker's death is noticed: a dodo file's task rarely takes long."""
        if self.here is None:
            self.here = Runner(None, self.reporter, stream=self.stream)
        self.forker.results.put(carry_out(self.here, task))

    def next_result(
        self, get: Callable[[bool, float], Message], empty: Callable[[], bool]
    ) -> Message:
        """In the main process: the next message for doit's loop, or, when a worker died
        carrying out a task, that task's result as lost."""
        while True:
            try:
                message = get(True, POLL_SECS)
            except queue.Empty:
                lost = self._lost(empty)
                if lost is not None:
                    return lost
                continue
            if "exit" in message and self.forker.gone:
                # A worker ended by the forker's death (the parent-death signal: exit status
                # 143), which is what the user is told.
                raise SystemExit(ended())
            self._hear()  # a task's start is told before its result is sent
            if "task" in message:  # a task's result: its worker is free again
                self.carrying = {p: n for p, n in self.carrying.items() if n != message["name"]}
            return message

    def _lost(self, empty: Callable[[], bool]) -> Message | None:
        """A result for the task of a worker that died, if one did and sent nothing more."""
        for worker in self.workers:
            code = worker.exitcode
            if code in (None, 0) or worker in self.mourned:
                continue  # alive, or ended as doit told it to (or with doit's own message)
            if not empty():
                return None  # what it sent before it died is read first
            self._hear()
            self.mourned.add(worker)
            # What its run started would otherwise run on, beyond its time limit, until doit ends.
            watchdog.end_strays([os.getpid(), *(w.pid for w in self.workers if w.is_alive())])
            how = _death(code)
            name = self.carrying.pop(worker.pid, None)
            if name is None:
                raise SystemExit(
                    actions.console(
                        f"llmtt: a worker process of `doit run` was {how} between runs; the "
                        "runs under way are stopped and stay pending: run `doit run` again"
                    )
                )
            assert self.start_worker is not None
            self.workers.append(self.start_worker())  # in doit's list: joined at the end
            return self._result_of_lost(name, how)
        return None

    def _hear(self) -> None:
        """Read which worker started which task since last time."""
        while not self.carriers.empty():
            pid, name = self.carriers.get()
            self.carrying[pid] = name

    def _result_of_lost(self, name: str, how: str) -> Message:
        """doit's result for task `name`, whose worker died: the record `actions.agent_lost`
        makes of an agent layer, else a failure saying how the worker ended."""
        task = self.tasks[name]
        cause = f"the worker process carrying it out was {how}"
        action = task.actions[0] if task.actions else None
        recorded: Any = None
        if action is not None and action.py_callable is actions.agent_action:
            recorded = actions.agent_lost(*action.args, cause)
        state = task.pickle_safe_dict()
        if isinstance(recorded, dict):
            return {"name": name, "task": {**state, "values": recorded}, "out": [], "err": []}
        failure = recorded if isinstance(recorded, BaseFail) else TaskError(f"llmtt: {cause}")
        return {"name": name, "failure": failure, "task": state, "out": [], "err": []}


def _death(code: int) -> str:
    """How a worker ended, from its exit code (a signal's number, negated)."""
    if code < 0:
        try:
            return f"killed by signal {-code} ({signal.Signals(-code).name})"
        except ValueError:
            return f"killed by signal {-code}"
    return f"ended with exit status {code}"
