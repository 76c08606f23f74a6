"""llmtt's runner for `doit run -n N` (llmtt/taskgraph/runner.py), driven in this process over
plain doit tasks: a worker that dies never leaves doit waiting for it."""

from __future__ import annotations

import io
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from doit.control import TaskControl
from doit.dependency import Dependency, JsonDB
from doit.reporter import ConsoleReporter
from doit.runner import ERROR
from doit.task import Task

from llmtt.plan.cache import RunSpec
from llmtt.process.tree import children
from llmtt.taskgraph.concurrency import cores
from llmtt.taskgraph.runner import WorkerRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from concurrency import most_at_once  # noqa: E402


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


# A plain `doit run -n N` of llmtt's runs: N places for the agents, and spare workers for the
# later layers of the runs whose agent is done (llmtt.taskgraph.pacing.Slots).


@dataclass
class _Session:
    """What the dispatch reads of a session: its variables (no jobs=auto)."""

    root: Path
    variables: dict[str, str]


def _span(spec: RunSpec, layer: str, secs: float) -> None:
    """A layer that takes `secs` and writes when it ran."""
    started = time.time()
    time.sleep(secs)
    (Path(spec.dir) / f"{layer}.span").write_text(f"{started} {time.time()}")


def _agent(session: _Session, spec: RunSpec) -> None:
    Path(spec.dir).mkdir(parents=True, exist_ok=True)
    if spec.label == "dies":
        os.kill(os.getpid(), signal.SIGKILL)
    _span(spec, "agent", 0.4)


def _evaluate(session: _Session, spec: RunSpec) -> None:
    _span(spec, "evaluate", 0.8)


class _Told(ConsoleReporter):  # type: ignore[misc]
    """doit's reporter, noting when each task was said to start."""

    def __init__(self, outstream: Any, options: dict[str, Any]) -> None:
        super().__init__(outstream, options)
        self.told: dict[str, float] = {}

    def execute_task(self, task: Any) -> None:
        self.told[task.name] = time.time()
        super().execute_task(task)


def _runs(tmp_path: Path, count: int, dies: str = "") -> tuple[list[RunSpec], list[Task]]:
    """`count` runs, each an agent layer and an evaluate layer after it (run `dies`: its
    agent kills its worker)."""
    session = _Session(tmp_path, {})
    specs = [
        RunSpec(
            f"r{i}", str(tmp_path / f"r{i}"), "dies" if f"r{i}" == dies else "", "cli", None, {}, ""
        )
        for i in range(1, count + 1)
    ]
    tasks = [Task(f"{s.run_id}:agent", [(_agent, [session, s])]) for s in specs]
    tasks += [
        Task(f"{s.run_id}:evaluate", [(_evaluate, [session, s])], task_dep=[f"{s.run_id}:agent"])
        for s in specs
    ]
    return specs, tasks


def test_n_agents_at_once_and_their_runs_next_layers_beside_them(tmp_path: Path) -> None:
    # -n 2: never a third agent, but the evaluation of the first runs goes beside the next
    # two agents, in spare workers, instead of keeping their places (doit's own runner: two
    # layers at once at most).
    reporter = _Told(io.StringIO(), {})
    deps = Dependency(JsonDB, str(tmp_path / "deps.json"))
    runner = WorkerRunner(deps, reporter, continue_=True, num_process=2)
    specs, tasks = _runs(tmp_path, 4)
    assert _run(runner, tasks) == 0
    spans = {
        (s.run_id, layer): tuple(map(float, (Path(s.dir) / f"{layer}.span").read_text().split()))
        for s in specs
        for layer in ("agent", "evaluate")
    }
    agents = [span for (_, layer), span in spans.items() if layer == "agent"]
    assert most_at_once(agents) == 2
    assert most_at_once(list(spans.values())) >= 3
    assert len(runner.workers) == 2 + min(2, cores())
    # An agent held for a place is said to start only when it has one: after an agent ended.
    first_end = min(spans[(r, "agent")][1] for r in ("r1", "r2"))
    for run in ("r3", "r4"):
        assert reporter.told[f"{run}:agent"] >= first_end - 0.05, (run, reporter.told, spans)


def test_a_held_agent_goes_as_a_place_frees_after_its_runs_next_layer(tmp_path: Path) -> None:
    deps = Dependency(JsonDB, str(tmp_path / "deps.json"))
    runner = WorkerRunner(deps, ConsoleReporter(io.StringIO(), {}), continue_=True, num_process=1)
    _, tasks = _runs(tmp_path, 2)
    control = TaskControl(tasks)
    control.process(None)
    runner._run_tasks_init(control.task_dispatcher())
    assert runner.spread() == 1 + min(1, cores())  # -n 1: one place, and a spare worker
    nodes = runner.task_dispatcher.nodes
    assert runner.get_next_job(None).name == "r1:agent"
    assert type(runner.get_next_job(None)).__name__ == "JobHold"  # r2's agent waits
    assert nodes["r2:agent"].run_status is None  # held unselected: not said to start
    nodes["r1:agent"].run_status = "done"
    # The run's next layer first, then the held agent beside it.
    assert runner.get_next_job(nodes["r1:agent"]).name == "r1:evaluate"
    assert runner.get_next_job(None).name == "r2:agent"
    assert type(runner.get_next_job(None)).__name__ == "JobHold"
    nodes["r1:evaluate"].run_status = "done"
    assert type(runner.get_next_job(nodes["r1:evaluate"])).__name__ == "JobHold"
    nodes["r2:agent"].run_status = "done"
    assert runner.get_next_job(nodes["r2:agent"]).name == "r2:evaluate"
    nodes["r2:evaluate"].run_status = "done"
    assert runner.get_next_job(nodes["r2:evaluate"]) is None  # nothing left


def test_a_dodo_files_own_tasks_keep_doits_n(tmp_path: Path) -> None:
    runner = _runner(tmp_path)
    control = TaskControl([Task(f"t{i}", [(_write, [tmp_path / f"t{i}"])]) for i in range(4)])
    control.process(None)
    runner._run_tasks_init(control.task_dispatcher())
    assert runner.spread() == 2 and runner.slots is None


def test_a_worker_killed_while_agents_wait_for_places_leaves_the_others_to_finish(
    tmp_path: Path,
) -> None:
    deps = Dependency(JsonDB, str(tmp_path / "deps.json"))
    runner = WorkerRunner(deps, ConsoleReporter(io.StringIO(), {}), continue_=True, num_process=2)
    specs, tasks = _runs(tmp_path, 5, dies="r1")
    started = time.monotonic()
    assert _run(runner, tasks) == ERROR
    assert time.monotonic() - started < 10
    failures = {f["task"].name for f in runner.reporter.failures}
    assert failures == {"r1:agent", "r1:evaluate"}  # the lost one, and what needs it
    for spec in specs[1:]:
        assert (Path(spec.dir) / "evaluate.span").exists(), spec.run_id
    assert runner.slots is not None and not runner.slots.running and not runner.slots.held
