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
    _span(spec, "agent", float(session.variables.get("agent", 0.4)))


def _evaluate(session: _Session, spec: RunSpec) -> None:
    Path(spec.dir).mkdir(parents=True, exist_ok=True)  # an agent up to date made none here
    _span(spec, "evaluate", float(session.variables.get("evaluate", 0.8)))


def _report(session: _Session, spec: RunSpec) -> None:
    """A report layer: nothing to write here."""


def _runs(
    tmp_path: Path, count: int, dies: str = "", **secs: float
) -> tuple[list[RunSpec], list[Task]]:
    """`count` runs made as llmtt makes them (`llmtt.taskgraph.tasks`): an agent layer, an
    evaluate layer after it taking `secs`, and the run's own task, its report, after both (run
    `dies`: its agent kills its worker)."""
    session = _Session(tmp_path, {layer: str(s) for layer, s in secs.items()})
    tasks = []
    specs = []
    for i in range(1, count + 1):
        label = "dies" if f"r{i}" == dies else ""
        spec = RunSpec(f"r{i}", str(tmp_path / f"r{i}"), label, "cli", None, {}, "")
        specs.append(spec)
        layers = [f"r{i}:agent", f"r{i}:evaluate"]
        tasks += [
            Task(layers[0], [(_agent, [session, spec])]),
            Task(layers[1], [(_evaluate, [session, spec])], task_dep=layers[:1]),
            Task(spec.run_id, [(_report, [session, spec])], task_dep=layers),
        ]
    return specs, tasks


def _spans(
    specs: list[RunSpec], layers: tuple[str, ...] = ("agent", "evaluate")
) -> dict[tuple[str, str], tuple[float, float]]:
    out = {}
    for spec in specs:
        for layer in layers:
            start, end = (Path(spec.dir) / f"{layer}.span").read_text().split()
            out[(spec.run_id, layer)] = (float(start), float(end))
    return out


def _slotted_runner(tmp_path: Path, places: int) -> WorkerRunner:
    deps = Dependency(JsonDB, str(tmp_path / "deps.json"))
    reporter = ConsoleReporter(io.StringIO(), {})
    return WorkerRunner(deps, reporter, continue_=True, num_process=places)


def test_n_agents_at_once_and_their_runs_next_layers_beside_them(tmp_path: Path) -> None:
    # -n 2: never a third agent, but the evaluation of the first runs goes beside the next
    # two agents, in spare workers (doit's own runner: two layers at once at most).
    runner = _slotted_runner(tmp_path, 2)
    specs, tasks = _runs(tmp_path, 4)
    assert _run(runner, tasks) == 0
    spans = _spans(specs)
    agents = [span for (_, layer), span in spans.items() if layer == "agent"]
    assert most_at_once(agents) <= 2
    assert most_at_once(list(spans.values())) >= 3
    assert len(runner.workers) == 2 + min(2, cores())


def test_an_agents_place_does_not_wait_for_the_evaluations(tmp_path: Path) -> None:
    # -n 1, evaluations four times as long as the agents: the agents follow each other while
    # the spare worker evaluates (a run's next layer first would wait out each evaluation).
    runner = _slotted_runner(tmp_path, 1)
    specs, tasks = _runs(tmp_path, 3, agent=0.3, evaluate=1.2)
    assert _run(runner, tasks) == 0
    spans = _spans(specs)
    for before, after in (("r1", "r2"), ("r2", "r3")):
        gap = spans[(after, "agent")][0] - spans[(before, "agent")][1]
        assert gap < 0.5, (before, after, spans)


def test_runs_only_evaluated_again_are_n_at_once(tmp_path: Path) -> None:
    # Every agent up to date (a gate edited): the evaluations take the N places, no more, for
    # no agent is under way beside them.
    runner = _slotted_runner(tmp_path, 2)
    specs, tasks = _runs(tmp_path, 4, evaluate=0.5)
    for task in tasks:
        if task.name.endswith(":agent"):
            task.uptodate = [(lambda: True, [], {})]
    assert _run(runner, tasks) == 0
    evaluations = [span for (_, layer), span in _spans(specs, ("evaluate",)).items()]
    assert len(evaluations) == 4 and most_at_once(evaluations) <= 2


def test_a_held_agent_goes_before_the_later_layers_when_a_place_frees(tmp_path: Path) -> None:
    runner = _slotted_runner(tmp_path, 1)
    _, tasks = _runs(tmp_path, 3)
    control = TaskControl(tasks)
    control.process(None)
    runner._run_tasks_init(control.task_dispatcher())
    assert runner.spread() == 1 + min(1, cores())  # -n 1: one place, and a spare worker
    nodes = runner.task_dispatcher.nodes
    assert runner.get_next_job(None).name == "r1:agent"
    assert type(runner.get_next_job(None)).__name__ == "JobHold"  # r2's and r3's agents wait
    nodes["r1:agent"].run_status = "done"
    assert runner.get_next_job(nodes["r1:agent"]).name == "r2:agent"  # its place first
    assert runner.get_next_job(None).name == "r1:evaluate"  # then the spare worker's
    nodes["r2:agent"].run_status = "done"
    # r1's evaluation is under way: r2's waits for a worker, r3's agent does not.
    assert runner.get_next_job(nodes["r2:agent"]).name == "r3:agent"
    nodes["r1:evaluate"].run_status = "done"
    # The later layers in the order they became ready, one at a time beside the agent.
    assert runner.get_next_job(nodes["r1:evaluate"]).name == "r2:evaluate"
    assert type(runner.get_next_job(None)).__name__ == "JobHold"
    nodes["r2:evaluate"].run_status = "done"
    assert runner.get_next_job(nodes["r2:evaluate"]).name == "r1"


def test_a_dodo_files_own_tasks_keep_doits_n(tmp_path: Path) -> None:
    runner = _runner(tmp_path)
    control = TaskControl([Task(f"t{i}", [(_write, [tmp_path / f"t{i}"])]) for i in range(4)])
    control.process(None)
    runner._run_tasks_init(control.task_dispatcher())
    assert runner.spread() == 2 and runner.slots is None


def test_a_worker_killed_while_agents_wait_for_places_leaves_the_others_to_finish(
    tmp_path: Path,
) -> None:
    runner = _slotted_runner(tmp_path, 2)
    specs, tasks = _runs(tmp_path, 5, dies="r1")
    started = time.monotonic()
    assert _run(runner, tasks) == ERROR
    assert time.monotonic() - started < 10
    failures = {f["task"].name for f in runner.reporter.failures}
    assert failures == {"r1:agent", "r1:evaluate", "r1"}  # the lost one, and what needs it
    for spec in specs[1:]:
        assert (Path(spec.dir) / "evaluate.span").exists(), spec.run_id
    slots = runner.slots
    assert slots is not None and not (slots.running or slots.held or slots.ready)
