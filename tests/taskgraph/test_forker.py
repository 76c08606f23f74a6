"""The workers of `doit run -n N` are forked by llmtt's forker (llmtt/taskgraph/forker.py),
itself forked before the task graph is made: a worker holds the task it is sent, not the graph."""

from __future__ import annotations

import os
import signal
import time

import pytest
from conftest import GIT_TOML, TOOL_TOML, Project
from doit.reporter import ConsoleReporter
from doit.runner import JobTaskPickle
from doit.task import Stream, Task

from llmtt.process.tree import read_stat
from llmtt.taskgraph import runner, signals
from llmtt.taskgraph.forker import Forker, Worker, _exists

# A task of the dodo file's own that counts, in the worker carrying it out, doit's tasks that
# process holds (those frozen out of the garbage collector's sight included); and one that
# cannot be sent to a worker (a lambda cannot be pickled), carried out all the same.
COUNTING_DODO = """\
from pathlib import Path

from llmtt.tasks import *  # noqa: F403


def count_tasks(path):
    import gc

    from doit.task import Task

    gc.unfreeze()
    Path(path).write_text(str(sum(isinstance(o, Task) for o in gc.get_objects())))


def task_count():
    return {"actions": [(count_tasks, ["held.txt"])], "verbosity": 2}


def task_hello():
    return {"actions": [lambda: Path("hello.txt").touch()], "verbosity": 2}
"""


def test_a_worker_holds_the_task_it_carries_out_not_the_graph(project: Project) -> None:
    project.write("llmtt.toml", TOOL_TOML + "\n[matrix]\nrepeats = 20\n")
    project.write("scenarios/a.yaml", "task: {prompt: x}\nsolution: ['true']\n")
    project.write("dodo.py", COUNTING_DODO)
    done = project.doit("run", "-n", "2", "count", "hello")
    assert done.code == 0, done
    assert (project.root / "hello.txt").exists()
    # Forked from doit's main process once the graph was made, it held all 63 (each run's 3
    # layers, the aggregate, these two).
    assert (project.root / "held.txt").read_text() == "1"


# On every interpreter's start (PYTHONPATH): a line naming the process that imports litellm.
IMPORT_SPY = """\
import os
import sys


class Spy:
    def find_spec(self, name, path=None, target=None):
        if name == "litellm":
            with open(os.environ["LITELLM_IMPORTS"], "a") as handle:
                handle.write(f"{os.getpid()}\\n")
            sys.meta_path.remove(self)
        return None


sys.meta_path.insert(0, Spy())
"""


def test_litellm_is_imported_once_for_all_the_workers(project: Project, tmp_path) -> None:
    # llmtt's own agent loop imports litellm before its first run in a process (3 s of CPU
    # and 140 MB): the forker imports it for all the workers it forks, which share its pages.
    project.write("llmtt.toml", GIT_TOML + "\n[matrix]\nrepeats = 4\n")
    project.write("scenarios/s.yaml", "task: {prompt: Do it.}\nsolution:\n  - echo one\n")
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(IMPORT_SPY)
    imports = tmp_path / "imports.log"
    env = {"PYTHONPATH": str(hook), "LITELLM_IMPORTS": str(imports)}
    done = project.doit("run", "-n", "3", "agent=litellm", "model=scripted", env=env)
    assert done.code == 0, done
    records = list(project.results().glob("s/litellm-scripted/r*/run.json"))
    assert len(records) == 4
    assert len(imports.read_text().split()) == 1


def test_doit_run_that_makes_no_runner_ends_its_forker_at_once(project: Project) -> None:
    """An unknown task: doit ends before it makes a runner, which would tell the forker to end;
    it is told at exit, not killed after `signals.end_workers`' five seconds."""
    project.write("llmtt.toml", TOOL_TOML)
    project.write("scenarios/a.yaml", "task: {prompt: x}\nsolution: ['true']\n")
    started = time.monotonic()
    done = project.doit("run", "-n", "2", "no-such-task")
    assert done.code != 0 and "no-such-task" in done.err, done
    assert time.monotonic() - started < 4.5


def _started(forker: Forker, count: int = 1) -> list[Worker]:
    forker.reporting = ConsoleReporter, Stream(0)
    return forker.start(count)


def _ignore_sigterm() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _alive(pid: int) -> bool:
    stat = read_stat(pid)
    return stat is not None and stat.state != "Z"


def test_a_worker_that_ignores_sigterm_is_killed_with_its_forker_at_exit() -> None:
    """Left behind, it would wait for a job for ever, holding the project's lock."""
    forker = runner.forker()
    worker = _started(forker)[0]
    try:
        task = Task("stubborn", [(_ignore_sigterm, [])])
        forker.jobs.tasks = {task.name: task}
        forker.jobs.put(JobTaskPickle(task))
        while "task" not in forker.results.get(timeout=10):
            pass
        worker.terminate()  # as doit stops its workers at ^C: ignored
        started = time.monotonic()
        signals.end_workers(grace_secs=0.5)
        assert time.monotonic() - started < 3
        assert forker.gone
        assert not _alive(worker.pid)
    finally:
        if _alive(worker.pid):
            os.kill(worker.pid, signal.SIGKILL)


def test_an_interrupt_while_the_forker_starts_its_workers_forks_none() -> None:
    """^C while the forker warms up: the workers asked for would take the jobs queued and start
    their agents after it."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    forker = runner.forker(warm=lambda: time.sleep(1))
    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        with pytest.raises(KeyboardInterrupt):
            _started(forker, 2)
        forker.end()  # doit's `finish`
        forker.process.join(3)
        assert forker.gone
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        forker.kill()  # and the workers it forked, when it did


def test_the_forker_ends_when_doits_end_of_their_pipe_closes() -> None:
    """As when doit dies: the forker holds no copy of doit's end."""
    forker = runner.forker()
    forker.ending = True  # nothing to tell it: doit's end is closed
    forker.conn.close()
    forker.process.join(3)
    try:
        assert forker.gone
    finally:
        if not forker.gone:
            os.kill(forker.process.pid, signal.SIGKILL)


def test_a_zombie_is_no_running_worker_and_is_reaped_when_ours() -> None:
    """doit as a container's PID 1 inherits the workers of a dead forker, which nobody else
    reaps: its wait for them would never end."""
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not _exists(pid)
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
