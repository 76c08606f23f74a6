"""`doit run jobs=auto`: how many agents run at once, found as the runs go, and remembered.

Past a point, more agents at once on one machine finish no more runs a minute: each run's agent
just takes longer (opencode's 18x at -n 16 on two cores), until its timeout is charged to the
agent. Under `jobs=auto` doit starts workers for the most that may be allowed (`workers`), and
doit's main process lets only so many *agent* layers out at once (`PacedDispatch`); the other
layers are cheap and go as doit hands them out. The limit of each agent (CLI) is found by `Pace`:

- one at a time first, for a baseline: the median agent time of its first runs;
- then twice the limit at a time (1, 2, 4, 8: few runs are spent far below the point), while
  the median agent time of the runs let out at the new limit stays within `WITHIN` of the
  baseline and the throughput (runs under way / median time from dispatch to result, Little's
  law, steadier than counting completions in a short window) rose by `RISE`; once a limit is
  past that point, one more at a time from the best limit below it;
- it settles at the limit of the best throughput among those whose agent time stayed within
  `MOST`; settled, a window whose median passes `MOST` takes the limit down one, and a window
  within `WITHIN` back up one, no higher than where it settled (a slow spell, another program
  on the machine, passes); a limit that passed `MOST` twice is not gone back to.

Agents are paced apart, each against its own baseline, and share the machine: a run takes
1/limit of it, so two CLIs run together fill it no further than either would alone (an opencode
at limit 2 and a codex at limit 4 run one opencode beside two codex runs). Pacing them by the
most sensitive one would leave the others slower than they need be when they run alone.

What was found is kept in the project's `.llmtt/concurrency.json`, per agent and machine
(cores), with the CLI's version and when: the next `jobs=auto` starts from it, and `doit run -n
N` with N above it warns once (`oversubscribed`).
"""

from __future__ import annotations

import datetime as dt
import multiprocessing
import os
import statistics
import sys
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from doit.runner import JobHold, JobTask, JobTaskPickle
from doit.task import DelayedLoaded
from pydantic import BaseModel, ValidationError

from llmtt.errors import LlmttError
from llmtt.plan.cache import RunSpec
from llmtt.util.atomic import read_json, write_json

WITHIN = 1.15  # raise the limit while the median agent time stays within this of the baseline
MOST = 1.2  # never settle where it is past this; settled, a window past it steps down
RISE = 1.05  # a limit must raise the throughput by this much to count as better
BASELINE_RUNS = 3  # runs one at a time for the baseline (its noise is in every comparison)
WINDOW = 3  # the least runs a higher limit is judged on
PER_CORE = 4  # the most agents at once jobs=auto may reach: this many per core
MEMORY = Path(".llmtt") / "concurrency.json"
FORMAT = 1


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def workers(runs: int, found: Mapping[str, Found], agents: Iterable[str]) -> int:
    """The worker processes `jobs=auto` starts (`-n N` overrides it): for the most agents at
    once it may reach, PER_CORE a core, or one more than an agent's settled limit when every
    agent of the plan has one (a worker each agent layer under way, and one for the other
    layers); no more than there are runs."""
    most = PER_CORE * cores()
    limits = [found[a].concurrency if a in found and found[a].settled else most for a in agents]
    if limits:
        most = min(most, max(limits) + 1)
    return max(1, min(most, runs))


class Found(BaseModel):
    """What jobs=auto found for one agent on one machine."""

    agent: str
    cores: int
    version: str | None  # the CLI's version, when the run recorded it
    concurrency: int  # the limit reached
    settled: bool  # False: the runs ended while it was still rising (it may go higher)
    baseline_secs: float  # median agent time one at a time
    runs_per_min: float | None  # the throughput measured at `concurrency`
    at: str  # when (UTC, ISO 8601)


class Memory(BaseModel):
    """.llmtt/concurrency.json."""

    format: int = FORMAT
    found: list[Found] = []


def remembered(root: Path) -> dict[str, Found]:
    """What earlier jobs=auto found on this machine (its cores), by agent; a damaged file is
    an LlmttError naming it."""
    path = root / MEMORY
    if not path.exists():
        return {}
    try:
        memory = Memory.model_validate(read_json(path))
    except ValidationError as exc:
        raise LlmttError(
            f"{path}: not what jobs=auto writes ({exc.errors()[0]['msg']}); delete it, and "
            "the next `doit run jobs=auto` finds each agent's concurrency again"
        ) from None
    here = cores()
    return {f.agent: f for f in memory.found if f.cores == here}


def remember(root: Path, found: Found) -> None:
    """Keep what was found for an agent (in place of what was there for it and these cores)."""
    path = root / MEMORY
    try:
        kept = Memory.model_validate(read_json(path)).found if path.exists() else []
    except (ValidationError, LlmttError):
        kept = []  # damaged: what is found now replaces it
    kept = [f for f in kept if (f.agent, f.cores) != (found.agent, found.cores)]
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, Memory(found=[*kept, found]).model_dump())


def oversubscribed(root: Path, agents: Iterable[str], processes: int) -> str | None:
    """The one-line warning for `doit run -n N` when N is above what jobs=auto found for an
    agent of the plan on this machine (None: it is not, or nothing was found)."""
    found = remembered(root)
    over = [found[a] for a in sorted(set(agents)) if a in found]
    over = [f for f in over if processes > f.concurrency]
    if not over:
        return None
    said = ", ".join(
        f"{f.agent}{' ' + f.version if f.version else ''}: {f.concurrency} ({f.at[:10]})"
        for f in over
    )
    return (
        f"-n {processes} is above what jobs=auto found this machine ({cores()} cores) runs at "
        f"once without slowing each agent: {said}; more only lengthens each run (nearer its "
        "timeout): try `doit run jobs=auto`"
    )


@dataclass
class _Level:
    """The runs of one agent let out under one limit."""

    agent_secs: list[float] = field(default_factory=list)
    run_secs: list[float] = field(default_factory=list)  # dispatch to result, in doit's process
    under_way: list[int] = field(default_factory=list)  # the agent's runs under way, at dispatch

    def throughput(self, last: int) -> float:
        """Runs a second over the last `last` runs (Little's law)."""
        return statistics.mean(self.under_way[-last:]) / statistics.median(self.run_secs[-last:])


@dataclass
class Agent:
    """One agent's limit, and what it is found from (see the module)."""

    name: str
    cap: int
    limit: int = 1
    baseline: float | None = None
    settled: bool = False
    ceiling: int = 0  # settled: the limit it settled at, which a step down may return to
    tripped: int | None = None  # the lowest limit found past the point, while rising
    strikes: dict[int, int] = field(default_factory=dict)  # settled: steps down from a limit
    version: str | None = None
    runs_per_min: float | None = None  # remembered at `remembered`, for a first comparison
    remembered: int = 0
    levels: dict[int, _Level] = field(default_factory=dict)
    fresh: int = 0  # runs let out under `limit` that have come back since it was set

    @classmethod
    def starting(cls, name: str, cap: int, found: Found | None) -> Agent:
        """An agent's pacing: from what was found before, else one at a time."""
        if found is None:
            return cls(name, cap)
        return cls(
            name,
            cap,
            limit=min(found.concurrency, cap),
            baseline=found.baseline_secs,
            settled=found.settled,
            ceiling=min(found.concurrency, cap) if found.settled else 0,
            version=found.version,
            runs_per_min=found.runs_per_min,
            remembered=found.concurrency,
        )

    def window(self, level: int) -> int:
        """The runs a limit is judged on: the baseline's, else at least WINDOW and as many
        as the limit (each run under way once)."""
        return BASELINE_RUNS if level == 1 else max(WINDOW, level)

    def back(
        self, level: int, agent_secs: float, run_secs: float, under_way: int, version: str | None
    ) -> bool:
        """A run let out under limit `level` came back; True when the limit moved."""
        if version is not None and self.version is not None and version != self.version:
            # Another version of the CLI than the one remembered: found again from the start.
            fresh = Agent(self.name, self.cap, version=version)
            self.__dict__.update(fresh.__dict__)
            return True
        self.version = self.version or version
        lv = self.levels.setdefault(level, _Level())
        lv.agent_secs.append(agent_secs)
        lv.run_secs.append(run_secs)
        lv.under_way.append(under_way)
        if level != self.limit:
            return False  # let out under an earlier limit: it says nothing of this one
        self.fresh += 1
        # The first run let out under a higher limit overlaps runs of the lower one as they
        # end, which make it look faster than the limit makes it: a window begins after it.
        if self.fresh < self.window(level) + (level > 1):
            return False
        return self._decide(level)

    def _decide(self, level: int) -> bool:
        lv = self.levels[level]
        last = self.window(level)
        median = statistics.median(lv.agent_secs[-last:])
        if self.baseline is None:
            self.baseline = median
            return self._up(level)
        slower = median / self.baseline
        if self.settled:
            return self._watch(level, slower)
        lower = [n for n in self.levels if n < level and self._throughput(n) is not None]
        below = self._throughput(max(lower)) if lower else self._throughput(level - 1)
        rose = below is None or lv.throughput(last) >= RISE * below
        if slower <= WITHIN and rose:
            return self._up(level)
        # Past the point: the best limit below it, or, when a doubling passed over limits
        # not tried, the one above the best.
        self.tripped = min(self.tripped or level, level)
        best = self._best(below=level + 1)
        if best + 1 < self.tripped and self._throughput(best + 1) is None:
            return self._move(best + 1)
        return self._settle(best)

    def _watch(self, level: int, slower: float) -> bool:
        """Settled: one down past MOST, and back up to where it settled once within again
        (a slow spell, another program busy on the machine); a limit that went past MOST
        twice is not gone back to."""
        if slower > MOST and level > 1:
            self.strikes[level] = self.strikes.get(level, 0) + 1
            if self.strikes[level] > 1:
                self.ceiling = min(self.ceiling, level - 1)
            return self._move(level - 1)
        if slower <= WITHIN and level < self.ceiling:
            return self._move(level + 1)
        return self._stay()

    def _up(self, level: int) -> bool:
        """Within and faster at `level`: twice the limit until a limit is found past the
        point, then one more at a time below it; settled at the best when none is left."""
        higher = level * 2 if self.tripped is None else level + 1
        higher = min(higher, self.cap, (self.tripped or self.cap + 1) - 1)
        if higher <= level:
            return self._settle(self._best(below=level + 1))
        return self._move(higher)

    def _throughput(self, level: int) -> float | None:
        """Runs a second measured at `level` in this invocation (or remembered for it)."""
        lv = self.levels.get(level)
        if lv is not None and len(lv.run_secs) >= self.window(level):
            return lv.throughput(self.window(level))
        if level == self.remembered and self.runs_per_min is not None:
            return self.runs_per_min / 60
        return None

    def _best(self, below: int) -> int:
        """The lowest limit under `below` within RISE of the best throughput measured at a
        limit whose agent time stayed within MOST of the baseline."""
        assert self.baseline is not None
        measured: dict[int, float] = {}
        for level, lv in self.levels.items():
            last = self.window(level)
            if level >= below or len(lv.agent_secs) < last:
                continue
            if statistics.median(lv.agent_secs[-last:]) <= MOST * self.baseline:
                measured[level] = lv.throughput(last)
        if not measured:
            return max(1, below - 1)
        best = max(measured.values())
        return min(level for level, t in measured.items() if t * RISE >= best)

    def _move(self, limit: int) -> bool:
        self.limit, self.fresh = max(1, limit), 0
        return True

    def _settle(self, limit: int) -> bool:
        self.settled, self.ceiling = True, max(1, limit)
        return self._move(limit)

    def _stay(self) -> bool:
        self.fresh = 0  # settled and within: watch the next window
        return False

    def found(self, machine: int) -> Found | None:
        """What to remember (None: no baseline yet): the limit settled at, or, while it is
        still rising, the best limit measured so far."""
        if self.baseline is None:
            return None
        limit = self.limit if self.settled else self._best(below=self.limit + 1)
        measured = self._throughput(limit)
        return Found(
            agent=self.name,
            cores=machine,
            version=self.version,
            concurrency=limit,
            settled=self.settled,
            baseline_secs=round(self.baseline, 3),
            runs_per_min=round(measured * 60, 2) if measured is not None else None,
            at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        )


class Pace:
    """The agents' limits under jobs=auto, and the runs under way (see the module). Times are
    given to it, so a simulation can drive it."""

    def __init__(self, cap: int, found: Mapping[str, Found]) -> None:
        self.cap = cap
        self.found = found
        self.agents: dict[str, Agent] = {}
        self.under_way: dict[str, tuple[str, int, float, int]] = {}  # key: agent, limit, at, n

    def agent(self, name: str) -> Agent:
        if name not in self.agents:
            self.agents[name] = Agent.starting(name, self.cap, self.found.get(name))
        return self.agents[name]

    def running(self, name: str) -> int:
        return sum(1 for a, *_ in self.under_way.values() if a == name)

    def admits(self, name: str) -> bool:
        """Whether a run of agent `name` may start now: under its limit, and within the
        machine beside the other agents' runs (each takes 1/limit of it)."""
        if not self.under_way:
            return True
        agent = self.agent(name)
        if self.running(name) >= agent.limit:
            return False
        taken = sum(1 / self.agent(a).limit for a, *_ in self.under_way.values())
        return taken + 1 / agent.limit <= 1 + 1e-9

    def start(self, key: str, name: str, now: float) -> None:
        """A run of agent `name` was let out (`key` names it when it comes back)."""
        self.under_way[key] = (name, self.agent(name).limit, now, self.running(name) + 1)

    def back(
        self, key: str, now: float, agent_secs: float | None, version: str | None = None
    ) -> Agent | None:
        """A run came back (`agent_secs` None: it was not carried out, and says nothing of the
        pace); the agent whose limit moved, if it did."""
        name, limit, at, under_way = self.under_way.pop(key)
        if agent_secs is None:
            return None
        agent = self.agent(name)
        moved = agent.back(limit, agent_secs, now - at, under_way, version)
        return agent if moved else None


class PacedDispatch:
    """doit's multiprocess dispatch (`MRunner.get_next_job`) with the agent layers held back
    under jobs=auto: a held agent layer waits in doit's main process, its worker given doit's
    'hold on' meanwhile, and goes as soon as `Pace` admits it (see the module). Mixed into
    `llmtt.taskgraph.runner.WorkerRunner`; without jobs=auto it is doit's dispatch."""

    pace: Pace | None = None
    root: Path | None = None
    held: dict[str, deque[tuple[int, Any]]]  # by agent: (order held in, doit's node)
    exhausted = False  # doit's dispatcher has no task left to hand out (held ones aside)

    def _run_tasks_init(self, task_dispatcher: Any) -> None:
        super()._run_tasks_init(task_dispatcher)  # type: ignore[misc]
        self.held = {}
        self.order = 0
        session = _session(self.tasks.values())  # type: ignore[attr-defined]
        if session is not None and session.variables.get("jobs") == "auto":
            self.root = Path(session.root)
            try:
                found = remembered(self.root)
            except LlmttError:  # damaged since doit loaded (which said so): found again
                found = {}
            self.pace = Pace(self.num_process, found)  # type: ignore[attr-defined]

    def get_next_job(self, completed: Any) -> Any:
        """The next job for a worker: doit's, with agent layers held as `Pace` says."""
        if self.pace is None:
            return super().get_next_job(completed)  # type: ignore[misc]
        if self._stop_running:  # type: ignore[attr-defined]
            return None
        send = completed
        while True:
            if send is None and (admitted := self._admitted()) is not None:
                return self._job(admitted)
            node = self._dispatched(send)
            send = None
            if node is None or node == "hold on":  # nothing doit can hand out now
                if (admitted := self._admitted()) is not None:
                    return self._job(admitted)
                if node is None and not self.held:
                    return None  # nothing left at all: the worker may end
                self.free_proc += 1  # type: ignore[attr-defined]
                return JobHold()  # the worker waits for what a result lets out
            if not self.select_task(node, self.tasks):  # type: ignore[attr-defined]
                send = node  # up to date (or failed its dependencies): done with at once
                continue
            spec = _agent_of(node.task)
            if spec is None:
                return self._job(node)
            self.order += 1  # in turn, behind the agent layers held before it
            self.held.setdefault(spec.agent, deque()).append((self.order, node))

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
        """The held agent layer to let out now, the longest held first among the agents
        `Pace` admits a run of (None: none). An agent at its limit holds back no other's."""
        assert self.pace is not None
        for agent, queue in sorted(self.held.items(), key=lambda item: item[1][0][0]):
            if self.pace.admits(agent):
                _, node = queue.popleft()
                if not queue:
                    del self.held[agent]
                self.pace.start(node.task.name, agent, time.monotonic())
                return node
        return None

    def _job(self, node: Any) -> Any:
        """doit's job for a task (as `MRunner.get_next_job` makes it)."""
        task = node.task
        if task.loader is DelayedLoaded and self.Child is multiprocessing.Process:  # type: ignore[attr-defined]
            return JobTask(task)
        return JobTaskPickle(task)

    def _process_result(self, node: Any, task: Any, result: Mapping[str, Any]) -> None:
        super()._process_result(node, task, result)  # type: ignore[misc]
        if self.pace is None or task.name not in self.pace.under_way:
            return
        spec = _agent_of(task)
        assert spec is not None and self.root is not None
        secs, version = _agent_time(Path(spec.dir), result)
        moved = self.pace.back(task.name, time.monotonic(), secs, version)
        found = moved.found(cores()) if moved is not None else None
        if found is not None:
            try:
                remember(self.root, found)
            except OSError as exc:  # the runs go on; only the next jobs=auto starts from one
                sys.stderr.write(f"llmtt: warning: jobs=auto could not remember its pace: {exc}\n")


def _agent_of(task: Any) -> RunSpec | None:
    """The RunSpec of an agent layer's task (`RUN:agent`, whose action is given the session
    and the run; None: another task)."""
    if not task.name.endswith(":agent") or not task.actions:
        return None
    args = task.actions[0].args
    return args[1] if len(args) == 2 and isinstance(args[1], RunSpec) else None


def _session(tasks: Iterable[Any]) -> Any:
    """The session of this invocation: the first argument of every agent layer's action."""
    for task in tasks:
        if _agent_of(task) is not None:
            return task.actions[0].args[0]
    return None


def _agent_time(run_dir: Path, result: Mapping[str, Any]) -> tuple[float | None, str | None]:
    """The agent time of a run that came back, and its CLI's version, from its run.json (None:
    it was not carried out: refused, lost, failed before its agent started)."""
    values = result.get("task", {}).get("values") or {}
    if result.get("failure") is not None or values.get("status") == "error":
        return None, None
    try:
        record = read_json(run_dir / "run.json")
    except (OSError, LlmttError):
        return None, None
    secs = record.get("agent_duration_secs")
    if not isinstance(secs, int | float) or record.get("status") == "error":
        return None, None
    version = (record.get("versions") or {}).get("agent")
    return float(secs), str(version) if version else None
