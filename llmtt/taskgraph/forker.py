"""The workers of a local `doit run -n N`, forked from a small process that never held the task
graph.

doit forks its workers from its main process once the task graph is built: each worker then
maps the whole graph (about 12 KB a run), and counts its share of those pages, however few of
them it reads. Here a small process, the forker, is forked first, before llmtt makes the tasks,
and it forks each worker when doit's main process asks for one (at the start, and in a dead
worker's place). A worker holds what the forker held: the invocation's session (its selection,
the plan's run specs, the budget ledger), the project lock's descriptor, the SIGTERM handler and
the parent-death signal (llmtt.taskgraph.signals), the watchdog's mark; not the graph. doit's
main process sends it each task whole, pickled, the objects the forker inherited (the session)
by reference to the worker's own copy.

A worker has the dodo file's module as it was imported, before the forker was forked: a global
that a task creator sets (the creators run after the fork, in doit's main process) is not seen
by a task's action in a worker, which reads the module's own copy.

    doit (main process: the graph, the dispatch)
     └─ forker (forked before the graph; forks the workers, tells doit how each ended)
         ├─ worker 1 (carries out the tasks it is sent)
         └─ worker 2
"""

from __future__ import annotations

import atexit
import io
import multiprocessing
import multiprocessing.connection
import multiprocessing.queues
import os
import pickle
import signal
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from doit.runner import JobHold, JobTask, JobTaskPickle, Runner

from llmtt.taskgraph.actions import console
from llmtt.taskgraph.signals import end_workers

FORK = multiprocessing.get_context("fork")
NAME = "llmtt-forker"  # the forker's process name (`ps`, `top`)

if TYPE_CHECKING:
    _Queue = multiprocessing.queues.Queue[Any]
else:  # not subscriptable at run time before Python 3.12
    _Queue = multiprocessing.queues.Queue


class Sent:
    """A task sent whole to a worker: pickled, the forker's objects by reference."""

    type = JobTask.type  # doit's kind of job: a task, not a wait

    def __init__(self, name: str, pickled: bytes) -> None:
        self.name = name
        self.pickled = pickled


class Jobs(_Queue):
    """doit's job queue: a task doit names (its `JobTaskPickle`, for workers that hold the
    graph) goes to the worker whole (`Sent`), less what only doit's main process uses (as
    doit's own `Task.__getstate__` leaves it out). One that still cannot be pickled (a dodo
    file's task whose action or teardown is a lambda) is carried out at once by doit's main
    process (`carry_out`, set by the runner), its result queued as a worker's would be: doit's
    own workers, forked with the graph, could carry it out."""

    def __init__(self, forker: Forker) -> None:
        super().__init__(ctx=FORK)
        self.forker = forker
        self.tasks: dict[str, Any] = {}  # doit's tasks by name, in the main process
        self.carry_out: Callable[[Any], None] | None = None

    def put(self, obj: Any, block: bool = True, timeout: float | None = None) -> None:
        """Queue a job for the workers, a named task as the task itself."""
        if isinstance(obj, JobTaskPickle):
            task = self.tasks[obj.name]
            try:
                obj = Sent(obj.name, self.forker.pickle(_sendable(task)))
            except Exception:  # noqa: BLE001 - pickle raises what the object's own code raises
                assert self.carry_out is not None
                self.carry_out(task)
                return
        super().put(obj, block, timeout)


def _sendable(task: Any) -> tuple[type[Any], dict[str, Any]]:
    """What a worker needs of `task`: its class and state, less what doit's main process alone
    uses (its title, clean actions, up-to-date checks and value savers), which a dodo file
    often writes as lambdas that cannot be pickled."""
    state = task.__getstate__()  # doit's: no up-to-date checks, value savers, action instances
    state.update(clean_actions=[], custom_title=None)
    return type(task), state


def _received(sent: tuple[type[Any], dict[str, Any]]) -> Any:
    """The task `_sendable` made, in a worker."""
    kind, state = sent
    task = object.__new__(kind)  # as pickle makes an object it then gives its state
    task.__dict__.update(state)
    return task


class _Pickler(pickle.Pickler):
    def __init__(self, file: io.BytesIO, inherited: dict[int, object]) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.inherited = inherited

    def persistent_id(self, obj: object) -> int | None:
        key = id(obj)
        return key if key in self.inherited and self.inherited[key] is obj else None


class _Unpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, inherited: dict[int, object]) -> None:
        super().__init__(file)
        self.inherited = inherited

    def persistent_load(self, pid: Any) -> object:
        return self.inherited[pid]


class Forker:
    """In doit's main process: the forker (started now, by fork) and the queues its workers
    share with doit: `jobs`, `results` (made by the caller, before the fork) and `carriers`
    (which worker carries out which task). `inherited`: the objects a task may refer to that
    each worker has of its own, sent by reference; `warm`: what the forker does before it forks
    its first worker, so that they all share it."""

    def __init__(
        self,
        results: Any,
        inherited: Iterable[object] = (),
        warm: Callable[[], None] | None = None,
    ) -> None:
        self.inherited = {id(obj): obj for obj in inherited}
        self.jobs = Jobs(self)
        self.results = results
        self.carriers: Any = FORK.SimpleQueue()
        # The workers by their number in the forker (a pid may come back, as a later worker's):
        # the pid of each still under way, the exit code of each ended, as the forker saw it.
        self.running: dict[int, int] = {}
        self.ended: dict[int, int] = {}
        self.ending = False  # told to end
        # doit's reporter class (the workers send its calls to the main process) and stream.
        self.reporting: tuple[type, Any] | None = None
        self.conn, theirs = FORK.Pipe()
        self.process = _Process(
            target=_serve,
            args=(theirs, self.conn, self.jobs, self.results, self.carriers, self.inherited, warm),
            name=NAME,
        )
        self.process.forker = self
        self.process.start()
        theirs.close()
        atexit.register(self.close)

    @property
    def gone(self) -> bool:
        """Whether the forker has ended (its workers with it)."""
        return self.process.exitcode is not None

    def pickle(self, obj: object) -> bytes:
        """`obj` pickled for a worker: the inherited objects by reference."""
        buffer = io.BytesIO()
        _Pickler(buffer, self.inherited).dump(obj)
        return buffer.getvalue()

    def start(self, count: int = 1) -> list[Worker]:
        """`count` new workers, forked by the forker (`reporting` set): asked for at once, so
        that the forker forks them one after the other, without waiting for this process."""
        assert self.reporting is not None
        reporter, stream = self.reporting
        request = self.pickle((_methods(reporter), stream))
        started: list[Worker] = []
        try:
            for _ in range(count):
                self.conn.send_bytes(request)
            while len(started) < count:
                worker = self._note(self.conn.recv())
                if worker is not None:
                    started.append(worker)
        except (OSError, EOFError):
            raise SystemExit(ended()) from None
        except BaseException:
            # ^C or SIGTERM while the forker warms up or forks: the workers still asked for
            # are never forked, nor given the jobs already queued.
            self.stop()
            raise
        return started

    def stop(self) -> None:
        """SIGTERM the forker, whose workers it stops in turn, and the workers doit knows of
        (the forker may be stopped before it could)."""
        self.ending = True
        for pid in [self.process.pid, *self.running.values()]:
            if pid is not None and not self.gone:
                _signal(pid, signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL the workers still under way, then the forker unless it ends by itself once
        it has reaped them (told to end, it does): a worker that ignores SIGTERM, left behind,
        would wait for a job for ever, holding the project's lock."""
        self.hear()
        self.end()
        for pid in self.running.values():
            if _exists(pid):  # reaped by nobody yet (the forker tells when it reaps one)
                _signal(pid, signal.SIGKILL)
        self.process.join(1.0)
        if not self.gone:
            _signal(self.process.pid, signal.SIGKILL)

    def close(self, grace_secs: float = 5.0) -> None:
        """At exit: tell the forker to end (an invocation that ends before doit made a runner,
        for an unknown task or a dodo file's error, would otherwise wait out
        `signals.end_workers`' grace for it). If it was killed, its workers are nobody's
        children that doit waits for: those still there after `grace_secs` (one stuck on its
        way out would hold the project's lock for ever) are killed."""
        self.end()
        if not self.gone:
            return  # `signals.end_workers` waits for it, then kills its workers and it
        self.hear()
        deadline = time.monotonic() + grace_secs
        while any(_exists(p) for p in self.running.values()) and time.monotonic() < deadline:
            time.sleep(0.05)
        for pid in self.running.values():
            if _exists(pid):
                _signal(pid, signal.SIGKILL)

    def hear(self, timeout: float = 0.0) -> None:
        """Note the workers that started or ended since last time (waiting up to `timeout`
        for news)."""
        try:
            while self.conn.poll(timeout):
                self._note(self.conn.recv())
                timeout = 0.0
        except (OSError, EOFError):  # the forker is gone, and its workers with it
            pass

    def _note(self, message: tuple[Any, ...]) -> Worker | None:
        """Note what the forker told; the worker it started, if that is what it told."""
        kind, number, value = message
        if kind == "started":
            self.running[number] = value
            return Worker(self, number, value)
        assert kind == "ended", message
        self.running.pop(number, None)
        self.ended[number] = value
        return None

    def end(self) -> None:
        """No more workers: the forker ends once its workers have (at once, if it forked none)."""
        if self.ending:
            return
        self.ending = True
        try:
            self.conn.send_bytes(b"")
        except OSError:
            pass


class _Process(FORK.Process):  # type: ignore[misc,name-defined]  # the context's own class
    """The forker as multiprocessing lists it among doit's children, which
    `llmtt.taskgraph.signals.end_workers` waits for and then kills: waited for, it is told to
    end; killed, its workers are killed first."""

    forker: Forker

    def join(self, timeout: float | None = None) -> None:
        """Tell the forker to end, and wait for it."""
        self.forker.end()
        super().join(timeout)

    def kill(self) -> None:
        """Kill the forker's workers, then the forker (`Forker.kill`)."""
        self.forker.kill()


def ended() -> str:
    """The line that tells the user the forker has ended."""
    return console(
        "llmtt: the process that forks the workers of `doit run` has ended; the runs under "
        "way are stopped and stay pending: run `doit run` again"
    )


class Worker:
    """In doit's main process: one worker, as doit's runner handles a `multiprocessing.Process`
    (`pid`, `exitcode`, `is_alive`, `join`, `terminate`, `kill`)."""

    def __init__(self, forker: Forker, number: int, pid: int) -> None:
        self.forker = forker
        self.number = number  # the forker's: a later worker may have this one's pid
        self.pid = pid

    @property
    def exitcode(self) -> int | None:
        """The worker's exit code (a signal's number, negated), None while it runs."""
        self.forker.hear()
        code = self.forker.ended.get(self.number)
        if code is None and self.forker.gone and not _exists(self.pid):
            code = -signal.SIGTERM  # ended with the forker (its parent-death signal)
        return code

    def is_alive(self) -> bool:
        """Whether the worker has not ended."""
        return self.exitcode is None

    def join(self, timeout: float | None = None) -> None:
        """Wait for the worker to end (at most `timeout` seconds)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.exitcode is None:
            left = 1.0 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                return
            if self.forker.gone:
                time.sleep(min(left, 0.05))
            self.forker.hear(min(left, 1.0))

    def terminate(self) -> None:
        """SIGTERM, as doit stops its workers; not once the forker is gone: the worker had the
        parent-death signal, and a second SIGTERM could cut its way out short (`close`)."""
        if self.exitcode is None and not self.forker.gone:  # not reaped: still its pid
            _signal(self.pid, signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL."""
        if self.exitcode is None:
            _signal(self.pid, signal.SIGKILL)


def _signal(pid: int, number: int) -> None:
    try:
        os.kill(pid, number)
    except ProcessLookupError:
        pass


def _exists(pid: int) -> bool:
    """Whether process `pid` has not ended. A zombie has: an orphaned worker re-parented to
    this process (doit as a container's PID 1 once the forker died) is reaped here, or
    nobody would."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            state = handle.read().rsplit(b")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    except (OSError, IndexError):  # no /proc: whether a signal could reach it
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True
    if state != b"Z":
        return True
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # another process's child: its parent reaps it
        pass
    return False


def _serve(
    conn: Any,
    doits: Any,
    jobs: Jobs,
    results: Any,
    carriers: Any,
    inherited: dict[int, object],
    warm: Callable[[], None] | None,
) -> None:
    """The forker: fork a worker for each request from doit's main process, tell it the exit
    code of each that ends, and end when told (or when doit is gone) once its workers have."""
    # doit's end of the pipe, closed here, so that doit's death is an end of file here, and
    # the forker's death one in doit.
    doits.close()
    interrupt = signal.getsignal(signal.SIGINT)
    # ^C reaches doit and the workers themselves (the terminal's whole process group): the
    # forker waits for the workers doit stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    name = _name(NAME)  # told apart from doit and its workers in `ps` and `top`
    workers: dict[int, Any] = {}  # by number, as doit knows them (a pid may come back)
    forked = 0
    listening = True
    try:
        while listening or workers:
            waits = [p.sentinel for p in workers.values()] + ([conn] if listening else [])
            ready = multiprocessing.connection.wait(waits)
            for number, process in list(workers.items()):
                if process.sentinel in ready:
                    process.join()
                    del workers[number]
                    _tell(conn, ("ended", number, process.exitcode))
            if conn not in ready:
                continue
            try:
                request = conn.recv_bytes()
            except EOFError:  # doit is gone
                request = b""
            if not request:  # no more workers
                listening = False
                continue
            if warm is not None:
                # When the first worker is asked for (a `doit run -n N` with nothing to do
                # asks for none, and pays nothing for it).
                warm()
                warm = None
            process = FORK.Process(
                target=_work,
                args=(conn, jobs, results, carriers, inherited, request, (interrupt, name)),
                name="llmtt-worker",
            )
            process.start()
            forked += 1
            workers[forked] = process
            _tell(conn, ("started", forked, process.pid))
    finally:
        # Stopped by a signal (doit gone: the parent-death signal) or by an error: the
        # workers are stopped first, and killed if they do not end.
        for process in workers.values():
            process.terminate()
        end_workers()


def _name(name: str) -> str | None:
    """Give this process `name` (Linux: its `comm`, which `ps` shows); the name it had."""
    try:
        with open("/proc/self/comm", "r+") as handle:
            had = handle.read().strip()
            handle.seek(0)
            handle.write(name)
        return had
    except OSError:
        return None


def _tell(conn: Any, message: tuple[Any, ...]) -> None:
    try:
        conn.send(message)
    except OSError:  # doit closed its end (or is gone): nobody to tell
        pass


def _methods(reporter: type) -> frozenset[str]:
    """The names of the methods of doit's reporter class (made anew for each round of
    repeats=auto, it is not among the objects the forker inherited)."""
    return frozenset(name for name in dir(reporter) if callable(getattr(reporter, name, None)))


class _Reporter:
    """In a worker: doit's reporter, each call sent to doit's main process, where the reporter
    is (doit's `MReporter`, told the reporter's method names rather than given its class)."""

    def __init__(self, results: Any, methods: frozenset[str]) -> None:
        self.results = results
        self.methods = methods

    def __getattr__(self, method: str) -> Callable[[Any], None]:
        if method not in self.methods:
            raise AttributeError(method)

        def report(task: Any) -> None:
            self.results.put({"name": task.name, "reporter": method})

        return report

    def complete_run(self) -> None:
        """doit's main process completes the run."""


class _InWorker(Runner):  # type: ignore[misc]  # doit is untyped
    """What a worker needs of doit's runner: carry out a task (reporting to doit's main
    process), then the tasks' teardowns at the end."""

    def __init__(self, results: Any, carriers: Any, methods: frozenset[str], stream: Any) -> None:
        super().__init__(None, _Reporter(results, methods), stream=stream)
        self.carriers = carriers

    def execute_task(self, task: Any) -> Any:
        """Tell doit's main process which task this worker carries out, then run it."""
        # Written at once (doit's result queue writes from a thread, which a kill right after
        # may never run): the main process knows what a worker that dies was doing.
        self.carriers.put((os.getpid(), task.name))
        return super().execute_task(task)


def _work(
    forkers: Any,
    jobs: Jobs,
    results: Any,
    carriers: Any,
    inherited: dict[int, object],
    request: bytes,
    undo: tuple[Any, str | None],
) -> None:
    """A worker: doit's `MRunner.execute_task_subprocess`, for tasks sent whole."""
    forkers.close()  # the forker's end of its pipe to doit: its death is an end of file there
    interrupt, name = undo  # what the forker changed of itself
    signal.signal(signal.SIGINT, interrupt)  # ^C as in doit's own workers
    if name is not None:
        _name(name)
    methods, stream = _Unpickler(io.BytesIO(request), inherited).load()
    runner = _InWorker(results, carriers, methods, stream)
    try:
        while True:
            job = jobs.get()
            if job is None:  # no more tasks
                runner.teardown()
                return
            if job.type is JobHold.type:
                continue
            if isinstance(job, Sent):
                task = _received(_Unpickler(io.BytesIO(job.pickled), inherited).load())
            else:  # a task doit pickled itself (a dodo file's delayed task)
                task = pickle.loads(job.task_pickle)
            results.put(carry_out(runner, task))
    except (SystemExit, KeyboardInterrupt, Exception) as exception:
        # As doit's workers: the main process ends the invocation with it.
        results.put({"exit": exception.__class__, "exception": str(exception)})


def carry_out(runner: Runner, task: Any) -> dict[str, Any]:
    """Carry out `task`: doit's result of it, for its main process."""
    result: dict[str, Any] = {"name": task.name}
    failure = runner.execute_task(task)
    if failure:
        result["failure"] = failure
    result["task"] = task.pickle_safe_dict()
    result["out"] = [action.out for action in task.actions]
    result["err"] = [action.err for action in task.actions]
    return result
