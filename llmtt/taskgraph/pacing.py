"""How a local `doit run -n N` lets the runs' layers out, in doit's main process
(`PacedDispatch`):

- plainly, N agents at once (`Slots`): the later layers of the runs whose agent is done
  (evaluation, judge, triage, report) take the places no agent holds and, beside N agents, a
  few spare workers (`spare_workers`), so that an agent's place is not kept waiting while its
  run is evaluated;
- under `jobs=auto`, as `Pace` says: the units' limits (each found by
  `llmtt.taskgraph.concurrency.Agent`), their held layers and those under way, driven by doit's
  main process, or by a simulation (the tests). See llmtt/taskgraph/concurrency.py for the
  rule."""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import time
from collections import Counter, deque
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from doit.runner import JobHold, JobTask, JobTaskPickle
from doit.task import DelayedLoaded

from llmtt.errors import LlmttError
from llmtt.plan.cache import RunSpec
from llmtt.taskgraph.concurrency import (
    Agent,
    Found,
    cli_of,
    cores,
    kind_of,
    remember,
    remembered,
    unit_of,
)
from llmtt.util.atomic import read_json

# A file each run that comes back under jobs=auto is told in (a JSON line: its agent time, the
# baseline it was judged against, the limit before and after), to see why a limit was chosen.
TRACE = "LLMTT_PACE_TRACE"


class Pace:
    """The units' limits under jobs=auto, their held runs and those under way (see the
    module). Times are given to it, so a simulation can drive it as doit's main process does."""

    def __init__(self, cap: int, found: Mapping[str, Found]) -> None:
        self.cap = cap
        self.found = found
        self.agents: dict[str, Agent] = {}
        self.held: dict[str, deque[tuple[int, str, str]]] = {}  # by unit: (order, key, kind)
        self.order = 0
        # key: unit, kind, limit, at, the unit's layers and agents under way, another unit's
        self.under_way: dict[str, tuple[str, str, int, float, int, int, bool]] = {}
        self.others: dict[str, str] = {}  # a run's other layers under way: key -> unit
        self.waiting: deque[tuple[str, str]] = deque()  # and held, oldest first: (key, unit)
        self.unseen: Counter[str] = Counter()  # agent layers doit has not handed out, by unit

    def agent(self, name: str, cli: str | None = None) -> Agent:
        if name not in self.agents:
            self.agents[name] = Agent.starting(name, self.cap, self.found.get(name), cli)
        return self.agents[name]

    def running(self, name: str) -> int:
        """Unit `name`'s layers under way: its agents and its runs' other layers."""
        return self._units().count(name)

    def agents_running(self, name: str) -> int:
        return sum(1 for a, *_ in self.under_way.values() if a == name)

    def hold_other(self, key: str, name: str, cli: str | None = None) -> bool:
        """Another layer of a run of unit `name` (its evaluation, judge, triage or report)
        waits to be let out (True): it takes a place of the unit's limit as its agent did, as
        under `-n N` (a short agent's runs are slowed as much by the layers beside them as by
        other agents). False: the unit has no agent held, under way or still to come from
        doit (runs evaluated again, the last runs' reports), so there is no agent to pace it
        beside, and it goes as doit hands it out."""
        self.agent(name, cli)
        if self._unpaced(name):
            return False
        self.waiting.append((key, name))
        return True

    def _unpaced(self, name: str) -> bool:
        """Unit `name` has no agent held, under way or still to come from doit: its runs'
        other layers are not held beside agents that are not there."""
        return not self.held.get(name) and not self.agents_running(name) and not self.unseen[name]

    def back_other(self, key: str) -> bool:
        """Another layer came back (False: not one let out here)."""
        return self.others.pop(key, None) is not None

    def hold(self, key: str, name: str, kind: str = "", cli: str | None = None) -> None:
        """A run of unit `name` waits to be let out (`key` names it)."""
        self.agent(name, cli)
        self.order += 1
        self.held.setdefault(name, deque()).append((self.order, key, kind))

    def blocked(self, name: str) -> str | None:
        """Why a run of unit `name` may not start now: "limit" (its unit has its limit under
        way), "share" (the machine is full beside the other units' runs: each takes 1/limit
        of it), or None."""
        if not self.under_way and not self.others:
            return None
        agent = self.agent(name)
        if self.running(name) >= agent.limit:
            return "limit"
        taken = sum(1 / self.agent(a).limit for a in self._units())
        return None if taken + 1 / agent.limit <= 1 + 1e-9 else "share"

    def admitted(self, now: float) -> str | None:
        """The held layer to let out now (its key; None: none): a run's other layer first (it
        ends a run), the oldest whose unit is not at its limit; else the oldest held agent
        whose unit is not at its limit, unless an older one waits only for room on the
        machine."""
        room = True  # no held other layer waits only for room on the machine
        for index, (key, name) in enumerate(self.waiting):
            # Held while its unit's agents were still to come from doit, which then found
            # them all done (runs evaluated again): it goes now, as `hold_other` would let it.
            unpaced = self._unpaced(name)
            why = None if unpaced else self.blocked(name)
            if why is None:
                del self.waiting[index]
                if not unpaced:  # as `hold_other` lets one go: no place taken
                    self.others[key] = name
                return key
            room = room and why != "share"
        if not room:
            return None  # a run's next layer waits for room: no agent of any unit passes it
        for name, queue in sorted(self.held.items(), key=lambda item: item[1][0][0]):
            why = self.blocked(name)
            if why == "share":
                return None  # the oldest that may go next waits for room: no younger passes
            if why is None:
                _, key, kind = queue.popleft()
                if not queue:
                    del self.held[name]
                self.start(key, name, now, kind)
                return key
        return None

    def start(self, key: str, name: str, now: float, kind: str = "") -> None:
        """A run of unit `name` was let out."""
        others = self._shared(name)
        limit = self.agent(name).limit
        slots, agents = self.running(name) + 1, self.agents_running(name) + 1
        self.under_way[key] = (name, kind, limit, now, slots, agents, others)

    def _shared(self, name: str) -> bool:
        """Another unit has a layer under way."""
        return any(a != name for a in self._units())

    def _units(self) -> list[str]:
        """The unit of each layer under way."""
        return [a for a, *_ in self.under_way.values()] + list(self.others.values())

    def back(
        self,
        key: str,
        now: float,
        agent_secs: float | None,
        version: str | None = None,
        *,
        timed_out: bool = False,
    ) -> Agent | None:
        """A run came back (`agent_secs` None: no sample of the agent's time: not carried
        out, failed, or timed out); the unit whose limit moved, if it did."""
        name, kind, limit, at, under_way, agents, shared = self.under_way.pop(key)
        shared = shared or self._shared(name)
        agent = self.agent(name)
        agent.version = agent.version or version
        moved = agent.back(
            limit,
            kind,
            agent_secs,
            now - at,
            under_way,
            agents=agents,
            shared=shared,
            timed_out=timed_out,
        )
        return agent if moved else None


def spare_workers(places: int) -> int:
    """The workers a plain `doit run -n N` of llmtt's runs starts beside its N: one a core, no
    more than N. They carry out the later layers of the runs whose agent is done, short and
    bound by the machine, while the next agents start."""
    return min(places, cores())


class Slots:
    """A plain `doit run -n N` of llmtt's runs: at most N tasks under way that are not a run's
    later layer (evaluation, judge, triage, report): its agents, and the aggregate or a dodo
    file's own tasks. Those doit hands out wait here for a place (`held`), oldest first; the
    later layers for a worker (`ready`). A free worker takes a held task when there is a place
    for it, else a later layer: N agents stay under way while `spare` workers evaluate beside
    them. Later layers alone (runs only evaluated or judged again) are N at once, as before."""

    def __init__(self, limit: int, spare: int) -> None:
        self.limit = limit
        self.spare = spare
        self.running: set[str] = set()  # the counted tasks under way, by name
        self.beside: set[str] = set()  # and the later layers
        self.held: deque[Any] = deque()  # doit's nodes of the counted tasks waiting, selected
        self.ready: deque[Any] = deque()  # and of the later layers waiting for a worker

    def add(self, node: Any) -> None:
        """A task doit handed out (selected: it is to run)."""
        (self.held if counted(node.task) else self.ready).append(node)

    def next(self) -> Any:
        """The node a free worker takes; None: none may go now."""
        if self.held and len(self.running) < self.limit:
            node = self.held.popleft()
            self.running.add(node.task.name)
            return node
        room = max(self.spare, self.limit - len(self.running))
        if self.ready and len(self.beside) < room:
            node = self.ready.popleft()
            self.beside.add(node.task.name)
            return node
        return None

    def end(self, name: str) -> None:
        """A task ended: its place is free."""
        self.running.discard(name)
        self.beside.discard(name)


def counted(task: Any) -> bool:
    """Whether a task takes one of the N places of a plain `doit run -n N`: every task but a
    run's later layers."""
    return _run_of(task) is None or _agent_of(task) is not None


class PacedDispatch:
    """doit's multiprocess dispatch (`MRunner.get_next_job`) with the runs' layers held back
    under jobs=auto: a held layer waits in doit's main process, its worker given doit's
    'hold on' meanwhile, and goes as soon as `Pace` admits it (see the module); under a plain
    `-n N` of llmtt's runs, as `Slots` lets them go. Mixed into
    `llmtt.taskgraph.runner.WorkerRunner`; for a dodo file's own tasks alone it is doit's
    dispatch.

    A task's end is told to doit before anything is let out, so that the run's next layer is
    held beside the held agents (under jobs=auto, it goes first)."""

    pace: Pace | None = None
    slots: Slots | None = None  # a plain `doit run -n N` (`spread`)
    root: Path | None = None
    exhausted = False  # doit's dispatcher has no task left to hand out (held ones aside)
    ours = False  # doit's tasks hold llmtt's runs

    def _run_tasks_init(self, task_dispatcher: Any) -> None:
        super()._run_tasks_init(task_dispatcher)  # type: ignore[misc]
        self.nodes: dict[str, Any] = {}  # held layers, by task name
        self.unsent: list[Any] = []  # ended tasks doit has not been told of yet
        self.slots, self.exhausted = None, False
        session = _session(self.tasks.values())  # type: ignore[attr-defined]
        self.ours = session is not None  # a plan of llmtt's runs (not a dodo file's alone)
        if session is not None and session.variables.get("jobs") == "auto":
            self.root = Path(session.root)
            try:
                found = remembered(self.root)
            except LlmttError:  # damaged since doit loaded (which said so): found again
                found = {}
            self.pace = Pace(self.num_process, found)  # type: ignore[attr-defined]
            # The agent layers doit may hand out: those of the tasks named (`doit run RUN`
            # names a few) and of the tasks they depend on.
            tasks = self.tasks  # type: ignore[attr-defined]
            for name in _closure(tasks, task_dispatcher.selected_tasks):
                if (spec := _agent_of(tasks[name])) is not None:
                    self.pace.unseen[unit_of(spec)] += 1

    def spread(self) -> int:
        """The workers to start. A plain `doit run -n N` of llmtt's runs (no jobs=auto): N
        places for the agents (`Slots`) and `spare_workers` more for their runs' later layers.
        Otherwise doit's N."""
        places: int = self.num_process  # type: ignore[attr-defined]
        if self.pace is not None or not self.ours:
            return places
        spare = spare_workers(places)
        self.slots = Slots(places, spare)
        return places + spare

    def get_next_job(self, completed: Any) -> Any:
        """The next job for a worker: doit's, with the runs' layers held as `Pace` says, or
        with N agents under way and their runs' later layers beside them (`Slots`)."""
        if self.pace is None:
            if self.slots is not None:
                return self._slotted(completed)
            return super().get_next_job(completed)  # type: ignore[misc]
        if self._stop_running:  # type: ignore[attr-defined]
            return None
        if completed is not None:
            self.unsent.append(completed)
        while True:
            if not self.unsent and (admitted := self._admitted()) is not None:
                return self._job(admitted)
            node = self._dispatched(self.unsent.pop(0) if self.unsent else None)
            if node is None or node == "hold on":  # nothing doit can hand out now
                if self.unsent:
                    continue  # an end not told yet may let out what it waits for
                if (admitted := self._admitted()) is not None:
                    return self._job(admitted)
                if node is None and not self.nodes:
                    return None  # nothing left at all: the worker may end
                self.free_proc += 1  # type: ignore[attr-defined]
                return JobHold()  # the worker waits for what a result lets out
            if (agent := _agent_of(node.task)) is not None and self.pace.unseen[unit_of(agent)]:
                self.pace.unseen[unit_of(agent)] -= 1  # (never below none: see `_closure`)
            if not self.select_task(node, self.tasks):  # type: ignore[attr-defined]
                self.unsent.append(node)  # up to date (or failed its dependencies)
                continue
            spec = _run_of(node.task)
            if spec is None:
                return self._job(node)  # the aggregate, or a dodo file's own task
            if _agent_of(node.task) is None:
                if not self.pace.hold_other(node.task.name, unit_of(spec), cli_of(spec)):
                    return self._job(node)
            else:
                self.pace.hold(node.task.name, unit_of(spec), kind_of(spec), cli_of(spec))
            self.nodes[node.task.name] = node

    def _slotted(self, completed: Any) -> Any:
        """`get_next_job` under `Slots`: every end is told to doit, and what it hands out
        then is taken in (an up-to-date task is told back at once); a free worker then takes
        the oldest held agent if a place is free, else a run's later layer."""
        slots = self.slots
        assert slots is not None
        if self._stop_running:  # type: ignore[attr-defined]
            return None
        if completed is not None:
            slots.end(completed.task.name)
            self.unsent.append(completed)
        while True:
            node = self._dispatched(self.unsent.pop(0) if self.unsent else None)
            if node is None or node == "hold on":  # nothing more doit can hand out now
                if self.unsent:
                    continue  # an end not told yet may let out what it waits for
                break
            if self.select_task(node, self.tasks):  # type: ignore[attr-defined]
                slots.add(node)
            else:
                self.unsent.append(node)  # up to date (or failed its dependencies)
        node = slots.next()
        if node is not None:
            return self._job(node)
        if self.exhausted and not slots.held and not slots.ready:
            return None  # nothing left at all: the worker may end
        self.free_proc += 1  # type: ignore[attr-defined]
        return JobHold()  # the worker waits for what a result lets out

    def _dispatched(self, completed: Any) -> Any:
        """doit's dispatcher's next node, "hold on", or None when it has none left."""
        if self.exhausted:
            return None
        try:
            return self.task_dispatcher.generator.send(completed)  # type: ignore[attr-defined]
        except StopIteration:
            self.exhausted = True
            return None

    def _admitted(self) -> Any:
        """The held layer `Pace` lets out now (None: none)."""
        assert self.pace is not None
        key = self.pace.admitted(time.monotonic())
        return None if key is None else self.nodes.pop(key)

    def _job(self, node: Any) -> Any:
        """doit's job for a task (as `MRunner.get_next_job` makes it)."""
        task = node.task
        if task.loader is DelayedLoaded and self.Child is multiprocessing.Process:  # type: ignore[attr-defined]
            return JobTask(task)
        return JobTaskPickle(task)

    def _process_result(self, node: Any, task: Any, result: Mapping[str, Any]) -> None:
        super()._process_result(node, task, result)  # type: ignore[misc]
        if self.pace is None or self.pace.back_other(task.name):
            return
        if task.name not in self.pace.under_way:
            return
        spec = _agent_of(task)
        assert spec is not None and self.root is not None
        secs, version, timed_out = _agent_time(Path(spec.dir), result)
        _, kind, level, _, under_way, *_ = self.pace.under_way[task.name]
        moved = self.pace.back(task.name, time.monotonic(), secs, version, timed_out=timed_out)
        if trace := os.environ.get(TRACE):
            agent = self.pace.agent(unit_of(spec))
            _trace(trace, agent, task.name, level, under_way, secs, kind, timed_out)
        found = moved.found(cores()) if moved is not None else None
        if found is not None:
            try:
                remember(self.root, found)
            except OSError as exc:  # the runs go on; only the next jobs=auto starts from one
                sys.stderr.write(f"llmtt: warning: jobs=auto could not remember its pace: {exc}\n")


def _trace(
    path: str,
    agent: Agent,
    task: str,
    level: int,
    under_way: int,
    secs: float | None,
    kind: str,
    timed_out: bool,
) -> None:
    """One line of LLMTT_PACE_TRACE: a run back, what it was judged against and where its
    unit's limit stands after it."""
    baseline = agent.baseline(kind)
    line = {
        "at": round(time.time(), 3),
        "unit": agent.name,
        "run": task.removesuffix(":agent"),
        "limit_then": level,
        "under_way": under_way,
        "agent_secs": secs,
        "timed_out": timed_out,
        "baseline": round(baseline, 3) if baseline is not None else None,
        "limit": agent.limit,
        "settled": agent.settled,
    }
    try:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(line) + "\n")
    except OSError as exc:
        sys.stderr.write(f"llmtt: warning: {TRACE}: {exc}\n")


def _closure(tasks: Mapping[str, Any], selected: Iterable[str]) -> set[str]:
    """The names of the `selected` tasks and of every task they depend on (their task and
    setup dependencies); every task when one of them is still to be loaded (a dodo file's
    `create_after`), whose dependencies are not known yet."""
    seen: set[str] = set()
    todo = [name for name in selected if name in tasks]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            task = tasks[name]
            if task.loader:  # a DelayedLoader still to run (DelayedLoaded, once run, is False)
                return set(tasks)
            deps = [*task.task_dep, *task.setup_tasks, *getattr(task, "calc_dep", ())]
            todo.extend(d for d in deps if d in tasks and d not in seen)
    return seen


def _agent_of(task: Any) -> RunSpec | None:
    """The RunSpec of an agent layer's task (`RUN:agent`; None: another task)."""
    return _run_of(task) if task.name.endswith(":agent") else None


def _run_of(task: Any) -> RunSpec | None:
    """The RunSpec of a run's layer (its action is given the session and the run; None: the
    aggregate, or a dodo file's own task)."""
    if not task.actions:
        return None
    args = getattr(task.actions[0], "args", None) or []
    return args[1] if len(args) == 2 and isinstance(args[1], RunSpec) else None


def _session(tasks: Iterable[Any]) -> Any:
    """The session of this invocation: the first argument of every agent layer's action."""
    for task in tasks:
        if _agent_of(task) is not None:
            return task.actions[0].args[0]
    return None


def _agent_time(run_dir: Path, result: Mapping[str, Any]) -> tuple[float | None, str | None, bool]:
    """From a run that came back, its run.json: its agent time when it is a sample of the
    agent's normal time (completed, exit code 0, a natural stop: a CLI that fails at once
    says nothing of the pace), the CLI's version, and whether it timed out."""
    values = result.get("task", {}).get("values") or {}
    if result.get("failure") is not None or values.get("status") == "error":
        return None, None, False
    try:
        record = read_json(run_dir / "run.json")
    except (OSError, LlmttError):
        return None, None, False
    version = (record.get("versions") or {}).get("agent")
    version = str(version) if version else None
    if record.get("timed_out") or record.get("status") == "timeout":
        return None, version, True
    secs = record.get("agent_duration_secs")
    normal = (
        record.get("status") == "completed"
        and record.get("exit_code") == 0
        and record.get("natural_stop") is not False
    )
    return (float(secs) if normal and isinstance(secs, int | float) else None), version, False
