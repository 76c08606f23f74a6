"""llmtt's runner for `doit run -n N` (llmtt/taskgraph/runner.py), driven in this process over
plain doit tasks: a worker that dies never leaves doit waiting for it."""

from __future__ import annotations

import io
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from doit.control import TaskControl
from doit.dependency import Dependency, JsonDB
from doit.reporter import ConsoleReporter
from doit.runner import ERROR
from doit.task import Task

from llmtt.process.tree import children
from llmtt.taskgraph.runner import WorkerRunner


def _runner(tmp_path: Path) -> WorkerRunner:
    deps = Dependency(JsonDB, str(tmp_path / "deps.json"))
    reporter = ConsoleReporter(io.StringIO(), {})
    return WorkerRunner(deps, reporter, continue_=True, num_process=2)


def _run(runner: WorkerRunner, tasks: list[Task]) -> int:
    control = TaskControl(tasks)
    control.process(None)
    return int(runner.run_all(control.task_dispatcher()))


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _write(path: Path) -> None:
    path.write_text("done")


def test_a_worker_killed_carrying_out_a_task_fails_that_task_and_the_rest_go_on(
    tmp_path: Path,
) -> None:
    runner = _runner(tmp_path)
    tasks = [
        Task("dies", [(_die, [])]),
        Task("after", [(_write, [tmp_path / "after"])], task_dep=["dies"]),
        *(Task(f"lives{i}", [(_write, [tmp_path / f"lives{i}"])]) for i in range(3)),
    ]
    started = time.monotonic()
    assert _run(runner, tasks) == ERROR
    assert time.monotonic() - started < 10
    failures = {f["task"].name: str(f["exception"]) for f in runner.reporter.failures}
    assert "the worker process carrying it out was killed by signal 9 (SIGKILL)" in failures.pop(
        "dies"
    )
    assert failures == {"after": failures["after"]}  # not run: what it needs failed
    assert all((tmp_path / f"lives{i}").exists() for i in range(3))  # in the dead one's stead too
    assert not (tmp_path / "after").exists()
    assert len(runner.workers) == 3  # the two, and the one started in the dead one's place


def _kill_the_idle_worker() -> None:
    """Kill the other worker, which waits for a task (doit has none ready for it), then wait
    to be stopped."""
    me, parent = os.getpid(), os.getppid()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        others = [pid for pid in children(parent) or [] if pid != me and _same_program(pid, me)]
        if others:
            time.sleep(0.2)  # in its wait for a task by now
            os.kill(others[0], signal.SIGKILL)
            break
        time.sleep(0.01)
    time.sleep(30)


def _same_program(pid: int, other: int) -> bool:
    try:
        return (
            Path(f"/proc/{pid}/cmdline").read_bytes() == Path(f"/proc/{other}/cmdline").read_bytes()
        )
    except OSError:
        return False


def test_a_worker_killed_between_tasks_ends_the_invocation_at_once(tmp_path: Path) -> None:
    """It may have died holding the lock of doit's job queue, which no worker could read again:
    the invocation ends, stopping the others' tasks, which stay pending."""
    runner = _runner(tmp_path)
    tasks: list[Any] = [
        Task("first", [(_kill_the_idle_worker, [])]),
        Task("second", [(_write, [tmp_path / "second"])], task_dep=["first"]),
    ]
    started = time.monotonic()
    with pytest.raises(SystemExit, match="was killed by signal 9 \\(SIGKILL\\) between runs"):
        _run(runner, tasks)
    assert time.monotonic() - started < 10  # not the 30 s of the task under way
    for worker in runner.workers:
        worker.join(5)
        assert worker.exitcode is not None
    assert not (tmp_path / "second").exists()


def _write_pid(path: Path) -> None:
    path.write_text(str(os.getpid()))


def test_a_task_with_a_lambda_doit_alone_uses_is_carried_out_by_a_worker(tmp_path: Path) -> None:
    """A dodo file's title, clean action or up-to-date check written as a lambda: a worker needs
    none of them."""
    runner = _runner(tmp_path)
    titled = Task(
        "titled",
        [(_write_pid, [tmp_path / "pid"])],
        title=lambda task: "titled",
        clean=[lambda: None],
        uptodate=[lambda: False],
    )
    assert _run(runner, [titled]) == 0
    assert int((tmp_path / "pid").read_text()) != os.getpid()


def test_a_task_doit_carries_out_itself_has_its_teardown_run_at_the_end(tmp_path: Path) -> None:
    """Its action is a lambda: it cannot be sent to a worker."""
    runner = _runner(tmp_path)
    inline = Task(
        "inline", [lambda: (tmp_path / "done").touch()], teardown=[(_write, [tmp_path / "torn"])]
    )
    assert _run(runner, [inline]) == 0
    assert (tmp_path / "done").exists() and (tmp_path / "torn").exists()
