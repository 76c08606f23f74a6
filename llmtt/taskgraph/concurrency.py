"""`doit run jobs=auto`: how many agents run at once, found as the runs go, and remembered.

Past a point, more agents at once on one machine finish no more runs a minute: each run's agent
just takes longer (opencode's 18x at -n 16 on two cores), until its timeout is charged to the
agent. Under `jobs=auto` doit starts workers for the most that may be allowed (`workers`), and
doit's main process lets only so many of a unit's layers out at once (llmtt/taskgraph/pacing.py):
its agents and its runs' other layers (evaluation, judge, triage, report) alike (let out beside
the agents, they made a 0.75 s claude-code run 1.12-1.20x slower at a limit of one, which a
limit judged on agent times must not mistake for the agents' own crowding; a plain `-n N` lets
them go beside its N agents, pacing.Slots); the aggregate goes as doit hands it out. A limit is
kept per agent CLI and model (a "unit": `codex/gpt-5`, or the agent alone without a model): a
slow remote model leaves the machine idle where a fast local one fills it. It is found by
`Agent`:

- every run is judged against a baseline of its own kind (its scenario, variant, model and the
  agent's settings: the agent key but the repeat): the median agent time of that kind's first
  runs carried out alone (under a limit of one, no other layer of the unit under way: a run
  let out first under a higher limit is soon joined by others); a kind with none yet uses the
  time remembered for it, else its own first runs at the lowest concurrency it was seen at
  (a kind first seen at a limit remembered from before is its own yardstick there: only a
  slowdown that comes later, or the throughput, moves the limit for its runs);
- one at a time first (the first runs give the baselines), then a higher limit (x2 up to 2,
  then x1.5: 1, 2, 3, 4, 6, 9) while the median of the runs' agent times over their baselines
  stays within `WITHIN` and the throughput (agents under way / median time from dispatch to
  result, each over its baseline: Little's law, steadier than counting completions in a short
  window) rose by `RISE`; once a limit is past that point, one more at a time from the best
  limit below it;
- a limit is judged on a window of runs: at least three, as many as the limit, and as many
  as take `SPAN` seconds alone (up to `MOST_WINDOW`): a short agent's runs are noisier and
  cheap, and three of them carry the whole margin between 1.15x and 1.2x;
- a limit is judged only on runs let out while the unit really had `limit` layers under way,
  and at a new limit (not a settled one) as soon as half its window is past `MOST`, or a run
  timed out at any limit (a timeout is no sample of the agent's time, but the strongest sign
  of too many at once), it is past the point at once, without waiting for the window;
- it settles at the limit of the best throughput among those whose agent time stayed within
  `MOST` over its last `POOL` windows; settled, a window whose median passes `MOST` takes the
  limit down one when the last `WATCH` windows together pass it too, and a window
  within `WITHIN` back up one, no higher than one above where it settled (a slow spell,
  another program on the machine, passes); a limit that passed `MOST` twice is gone back to
  only after `RECOVER` windows within `WITHIN` one below it, twice as many each time it
  passes again.

Units are paced apart and share the machine: a layer takes 1/limit of it, so two run together
fill it no further than either would alone (an opencode at limit 2 and a codex at limit 4 run
one opencode beside two codex runs). Held runs go oldest first: a run held only because the
machine is full holds back the younger runs of every unit (one at its own limit holds back no
other unit's), so a unit at limit 1 is not starved by one at 4 refilling as its runs end.

What was found is kept in the project's `.llmtt/concurrency.json`, per unit and machine
(cores), with the CLI's identity in the plan (its version and settings), the baselines of the
kinds measured and when: the best limit measured (not the one the runs ended at), settled or
not. The next `jobs=auto` starts from it (from one again when the plan names another version),
and `doit run -n N` with N above a settled limit warns once (`oversubscribed`). A limit that
stopped rising only at the worker count (`-n N`, or the most jobs=auto starts), or one
measured while another unit's runs shared the machine, is kept as not settled: it is no
ceiling, and nothing to warn of.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ValidationError

from llmtt.errors import LlmttError
from llmtt.plan.cache import RunSpec
from llmtt.util.atomic import read_json, write_json
from llmtt.util.hashing import hash_value

WITHIN = 1.15  # raise the limit while the median agent time stays within this of the baseline
MOST = 1.2  # never settle where it is past this; settled, a window past it steps down
RISE = 1.05  # a limit must raise the throughput by this much to count as better
BASELINE_RUNS = 3  # the least runs one at a time for the baseline (its noise is in every
# comparison)
WINDOW = 3  # the least runs a higher limit is judged on
SPAN = 8.0  # and a window holds at least this much agent time run alone: a short run is
# noisier (a scheduler's hiccup is a larger part of it) and cheaper to repeat
POOL = 4  # windows: a limit's standing, to settle or remember it
WATCH = 2  # windows: settled, a step down needs these past MOST as well as the last
RECOVER = 3  # windows: settled, within below a limit that went past MOST twice, to try it again
MOST_WINDOW = 8  # but no more runs than this for the span (a higher limit: as many as it)
PER_CORE = 4  # the most agents at once jobs=auto may reach: this many per core
MOST_WORKERS = 16  # and no more workers than this (~45 MB each) unless -n N says more
KINDS = 64  # the most kinds' baselines remembered per unit (the latest measured)
MEMORY = Path(".llmtt") / "concurrency.json"
FORMAT = 2  # 1: one baseline an agent, and the limit the runs ended at (not read)
CPU_MAX = Path("/sys/fs/cgroup/cpu.max")


def cores() -> int:
    """The cores this process may run on: those it may be scheduled on, no more than a cgroup
    v2 CPU quota allows (`docker --cpus=2` on 64 cores leaves the affinity at 64)."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        usable = os.cpu_count() or 1
    quota = cgroup_quota(CPU_MAX)
    return max(1, min(usable, quota)) if quota is not None else usable


def cgroup_quota(path: Path) -> int | None:
    """The cores a cgroup v2 `cpu.max` ("QUOTA PERIOD", or "max PERIOD": no quota) allows,
    rounded up; None without a quota or a readable file."""
    try:
        parts = path.read_text().split()
    except OSError:
        return None
    if len(parts) != 2 or parts[0] == "max":
        return None
    try:
        quota, period = int(parts[0]), int(parts[1])
    except ValueError:
        return None
    return math.ceil(quota / period) if quota > 0 and period > 0 else None


def unit_of(spec: RunSpec) -> str:
    """The unit a run is paced in: its agent, and its model when it has one."""
    model = spec.keys.get("agent", {}).get("model")
    return spec.agent if model in (None, "none") else f"{spec.agent}/{model}"


def cli_of(spec: RunSpec) -> str | None:
    """The plan's identity of a run's CLI (the agent key's part: its name, version and
    settings), known before any run comes back."""
    return spec.keys.get("agent", {}).get("agent")


def kind_of(spec: RunSpec) -> str:
    """A run's kind: its agent key but the repeat (scenario, variant, model, settings)."""
    key = {k: v for k, v in spec.keys.get("agent", {}).items() if k != "repeat"}
    return hash_value(key)[:16] if key else spec.agent


def units(runs: Iterable[RunSpec]) -> dict[str, str | None]:
    """The units of a plan's runs, with their CLI's identity."""
    return {unit_of(run): cli_of(run) for run in runs}


def workers(runs: int, found: Mapping[str, Found], plan: Mapping[str, str | None]) -> int:
    """The worker processes `jobs=auto` starts (`-n N` overrides it): for the most agents at
    once it may reach (PER_CORE a core, at most MOST_WORKERS), or, when every unit of the plan
    has a settled limit, for the largest of them plus one (it may try one above) and a worker
    for the layers not paced (the aggregate, the last runs' layers once no agent is left); no
    more than there are runs. The runs counted are all those planned:
    which are pending is known only once doit has checked each layer's status, after it has
    read this."""
    most = min(MOST_WORKERS, PER_CORE * cores())
    limits = [
        found[u].concurrency + 2 if u in found and _holds(found[u], cli) else most
        for u, cli in plan.items()
    ]
    return max(1, min(most, max(limits, default=most), runs))


def _holds(found: Found, cli: str | None) -> bool:
    """Whether a remembered limit is one to go by: settled, and for this CLI."""
    return found.settled and (cli is None or found.cli is None or found.cli == cli)


class Found(BaseModel):
    """What jobs=auto found for one unit (agent, model) on one machine."""

    agent: str
    model: str | None = None
    cores: int
    cli: str | None = None  # the plan's identity of the CLI (version, settings)
    version: str | None  # the CLI's version, when a run recorded it
    concurrency: int  # the best limit measured
    settled: bool  # False: still rising, stopped by the worker count, or measured shared
    capped: bool = False  # it stopped rising at the worker count, not past the point
    baselines: dict[str, float] = {}  # by kind: median agent time carried out alone
    runs_per_min: float | None  # at `concurrency`, each run counted as its time / baseline
    at: str  # when (UTC, ISO 8601)

    @property
    def unit(self) -> str:
        return self.agent if self.model is None else f"{self.agent}/{self.model}"


class Memory(BaseModel):
    """.llmtt/concurrency.json."""

    format: int = FORMAT
    found: list[Found] = []


def remembered(root: Path) -> dict[str, Found]:
    """What earlier jobs=auto found on this machine (its cores), by unit; a damaged file is
    an LlmttError naming it, an older format's nothing (found again)."""
    path = root / MEMORY
    if not path.exists():
        return {}
    try:
        raw = read_json(path)
        if isinstance(raw, dict) and raw.get("format", FORMAT) != FORMAT:
            return {}
        memory = Memory.model_validate(raw)
    except (ValidationError, LlmttError) as exc:
        said = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
        raise LlmttError(
            f"{path}: not what jobs=auto writes ({said}); delete it, and the next "
            "`doit run jobs=auto` finds each agent's concurrency again"
        ) from None
    here = cores()
    return {f.unit: f for f in memory.found if f.cores == here}


def remember(root: Path, found: Found) -> None:
    """Keep what was found for a unit (in place of what was there for it and these cores)."""
    path = root / MEMORY
    try:
        raw = read_json(path) if path.exists() else {}
        old = isinstance(raw, dict) and raw.get("format", FORMAT) != FORMAT
        kept = [] if old else Memory.model_validate(raw).found
    except (ValidationError, LlmttError):
        kept = []  # damaged: what is found now replaces it
    # (An older format's entries are dropped: they meant another thing.)
    kept = [f for f in kept if (f.unit, f.cores) != (found.unit, found.cores)]
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, Memory(found=[*kept, found]).model_dump())


def oversubscribed(root: Path, plan: Mapping[str, str | None], processes: int) -> str | None:
    """The one-line warning for `doit run -n N` when N is above the settled limit jobs=auto
    found for a unit of the plan on this machine (None: it is not, or nothing settled)."""
    found = remembered(root)
    over = [found[u] for u in sorted(plan) if u in found and _holds(found[u], plan[u])]
    over = [f for f in over if processes > f.concurrency]
    if not over:
        return None
    said = ", ".join(
        f"{f.unit}{' ' + f.version if f.version else ''}: {f.concurrency} ({f.at[:10]})"
        for f in over
    )
    return (
        f"-n {processes} is above what jobs=auto found this machine ({cores()} cores) runs at "
        f"once without slowing each agent: {said}; more only lengthens each run (nearer its "
        "timeout): try `doit run jobs=auto`"
    )


@dataclass
class _Sample:
    """A run let out while its unit had `limit` of them under way."""

    kind: str
    agent_secs: float
    run_secs: float  # dispatch to result, in doit's process
    under_way: int  # the unit's layers under way at dispatch, itself included
    agents: int  # of them, agent layers (the runs whose agents are under way)


@dataclass
class Agent:
    """One unit's limit, and what it is found from (see the module)."""

    name: str
    cap: int
    cli: str | None = None
    limit: int = 1
    settled: bool = False
    capped: bool = False  # settled only because the cap stopped the rise
    ceiling: int = 0  # settled: the most a window within WITHIN may take it back up to
    top: int = 0  # settled: the ceiling before any limit was barred
    home: int = 0  # settled: the limit it settled at (above it, a probe)
    tripped: int | None = None  # the lowest limit found past the point, while rising
    strikes: dict[int, int] = field(default_factory=dict)  # settled: steps down from a limit
    barred: dict[int, int] = field(default_factory=dict)  # settled: windows before it is tried
    version: str | None = None
    guesses: dict[str, float] = field(default_factory=dict)  # by kind: remembered baselines
    runs_per_min: float | None = None  # remembered at `remembered`, for a first comparison
    remembered: int = 0
    first: dict[str, list[tuple[int, float]]] = field(default_factory=dict)  # by kind
    alone: list[float] = field(default_factory=list)  # the first runs alone, any kind
    levels: dict[int, list[_Sample]] = field(default_factory=dict)
    fresh: int = 0  # runs judged at `limit` since it was set
    over: int = 0  # of them, past MOST
    shared: bool = False  # a judged run ran beside another unit's

    @classmethod
    def starting(cls, name: str, cap: int, found: Found | None, cli: str | None) -> Agent:
        """A unit's pacing: from what was found before for this CLI, else one at a time."""
        if found is None or (cli is not None and found.cli is not None and found.cli != cli):
            return cls(name, cap, cli)
        limit = max(1, min(found.concurrency, cap))
        return cls(
            name,
            cap,
            cli,
            limit=limit,
            settled=found.settled,
            ceiling=min(found.concurrency + 1, cap) if found.settled else 0,
            top=min(found.concurrency + 1, cap) if found.settled else 0,
            home=limit if found.settled else 0,
            version=found.version,
            guesses=dict(found.baselines),
            runs_per_min=found.runs_per_min,
            remembered=found.concurrency,
        )

    def window(self, level: int) -> int:
        """The runs a limit is judged on: the baseline's, else at least WINDOW and as many
        as the limit (each run under way once); and, up to MOST_WINDOW, as many as take SPAN
        seconds alone (three runs of a 0.7 s agent read 0.70 s where 64 read 0.75 s: a
        higher limit's 1.15x read as 1.23x)."""
        least = BASELINE_RUNS if level == 1 else max(WINDOW, level)
        typical = self._typical()
        if not typical:
            return least
        return max(least, min(MOST_WINDOW, math.ceil(SPAN / typical)))

    def _typical(self) -> float | None:
        """The unit's agent time alone: its first runs alone in this invocation (any kind),
        else the baselines remembered."""
        if self.alone:
            return statistics.median(self.alone)
        return statistics.median(self.guesses.values()) if self.guesses else None

    def baseline(self, kind: str) -> float | None:
        """The agent time of a kind's runs carried out alone (see the module)."""
        seen = self.first.get(kind, [])
        alone = [secs for n, secs in seen if n == 1]
        if alone:
            return statistics.median(alone)
        if kind in self.guesses:
            return self.guesses[kind]
        if not seen:
            return None
        low = min(n for n, _ in seen)
        return statistics.median(secs for n, secs in seen if n == low)

    def back(
        self,
        level: int,
        kind: str,
        agent_secs: float | None,
        run_secs: float,
        under_way: int,
        *,
        agents: int | None = None,
        shared: bool = False,
        timed_out: bool = False,
    ) -> bool:
        """A run let out under limit `level` came back (`agent_secs` None: no sample of the
        agent's time); True when the limit moved."""
        if timed_out:
            return level == self.limit and level > 1 and self._past(level)
        if agent_secs is None:
            return False
        seen = self.first.setdefault(kind, [])
        # Alone only under a limit of one: let out first under a higher limit, a run is soon
        # joined by others (it ran with two at once, and read 1.3x as a baseline).
        together = under_way if level == 1 else max(under_way, 2)
        if together == 1 and len(self.alone) < MOST_WINDOW:
            self.alone.append(agent_secs)
        if sum(1 for n, _ in seen if n == together) < self.window(1):
            seen.append((together, agent_secs))
        if level != self.limit:
            return False  # let out under an earlier limit: it says nothing of this one
        baseline = self.baseline(kind)
        assert baseline is not None  # this run's own time is one
        if level > 1 and (not self.settled or level > self.home) and agent_secs > MOST * baseline:
            # Past MOST with fewer under way than the limit is as plain a sign, and sooner.
            # (Settled, the limit it settled at is left only on whole windows: `_decide`.)
            self.over += 1
            if self.over >= math.ceil(self.window(level) / 2):
                return self._past(level)  # half a window past MOST: no need to see the rest
        if under_way != level:
            return False  # the unit had fewer under way: says nothing of the limit's pace
        sample = _Sample(kind, agent_secs, run_secs, under_way, agents or under_way)
        self.levels.setdefault(level, []).append(sample)
        self.shared = self.shared or shared
        self.fresh += 1
        if self.fresh < self.window(level):
            return False
        return self._decide(level)

    def _ratios(self, level: int, last: int) -> tuple[list[float], list[float], list[int]]:
        """The last runs at `level`: agent and run times over their kind's baselines, and the
        agents under way."""
        runs = self.levels.get(level, [])[-last:]
        bases = [self.baseline(s.kind) or s.agent_secs for s in runs]
        return (
            [s.agent_secs / b for s, b in zip(runs, bases, strict=True)],
            [s.run_secs / b for s, b in zip(runs, bases, strict=True)],
            [s.agents for s in runs],
        )

    def _slower(self, level: int, windows: int = 1) -> float:
        """The median agent time over its baseline of the last `windows` windows at
        `level`."""
        return statistics.median(self._ratios(level, windows * self.window(level))[0])

    def _decide(self, level: int) -> bool:
        slower = self._slower(level)
        if self.settled:
            # A window past MOST steps down only when the last WATCH windows are past it too:
            # at a limit that stood near MOST, one noisy window would undo it.
            if slower > MOST and self._slower(level, WATCH) <= MOST:
                return self._stay()
            return self._watch(level, slower)
        lower = [n for n in self.levels if n < level and self._throughput(n) is not None]
        below = self._throughput(max(lower)) if lower else self._throughput(level - 1)
        now = self._throughput(level)
        rose = below is None or (now is not None and now >= RISE * below)
        if slower <= WITHIN and rose:
            return self._up(level)
        return self._past(level)

    def _past(self, level: int) -> bool:
        """`level` is past the point: the best limit below it, or, when a step passed over
        limits not tried, the one above the best (settled: one down)."""
        if self.settled:
            return self._watch(level, math.inf)
        self.tripped = min(self.tripped or level, level)
        measured = len(self.levels.get(level, [])) >= self.window(level)
        best = self._best(below=level + 1 if measured else level)
        if best + 1 < self.tripped and self._throughput(best + 1) is None:
            return self._move(best + 1)
        return self._settle(best)

    def _watch(self, level: int, slower: float) -> bool:
        """Settled: one down past MOST, and back up once within again, to no more than the
        ceiling; a limit that went past MOST twice is gone back to only after RECOVER windows
        within at the limit below it, twice as many each time it goes past again (a slow
        spell that passed no longer holds a long invocation below its best)."""
        if slower > MOST and level > 1:
            self.strikes[level] = self.strikes.get(level, 0) + 1
            if self.strikes[level] > 1:
                self.barred[level] = RECOVER * 2 ** (self.strikes[level] - 2)
                self._bar()
            return self._move(level - 1)
        if slower <= WITHIN:
            above = level + 1
            if above in self.barred:
                self.barred[above] -= 1
                if self.barred[above] <= 0:
                    del self.barred[above]
                    self._bar()
            if level < self.ceiling:
                return self._move(above)
        return self._stay()

    def _bar(self) -> None:
        """The ceiling: where it was set, below every limit barred."""
        self.ceiling = min([self.top, *(level - 1 for level in self.barred)])

    def _up(self, level: int) -> bool:
        """Within and faster at `level`: a step up (x2 to 2, then x1.5: past the point, a
        step lets out more runs past the 1.2x target before it is seen) until a limit is
        found past the point, then one more at a time below it; settled at the best when none
        is left (capped when it was the cap, not a point past it, that left none)."""
        higher = level + 1 if self.tripped is not None else max(level + 1, level * 3 // 2)
        higher = min(higher, self.cap, (self.tripped or self.cap + 1) - 1)
        if higher <= level:
            self.capped = self.tripped is None and level >= self.cap
            return self._settle(self._best(below=level + 1))
        return self._move(higher)

    def _throughput(self, level: int) -> float | None:
        """Runs a second measured at `level` in this invocation (or remembered for it), each
        counted as its time over its kind's baseline."""
        last = self.window(level)
        if len(self.levels.get(level, [])) >= last:
            _, runs, under_way = self._ratios(level, last)
            return statistics.mean(under_way) / statistics.median(runs)
        if level == self.remembered and self.runs_per_min is not None:
            return self.runs_per_min / 60
        return None

    def _measured(self) -> list[int]:
        return sorted(n for n, runs in self.levels.items() if len(runs) >= self.window(n))

    def _best(self, below: int) -> int:
        """The lowest limit under `below` within RISE of the best throughput measured at a
        limit whose agent time stayed within MOST of the baseline (none: one below the lowest
        measured)."""
        measured = {
            n: self._throughput(n) or 0.0
            for n in self._measured()
            if n < below and self._slower(n, POOL) <= MOST
        }
        if not measured:
            return max(1, min([n for n in self._measured() if n < below] or [below]) - 1)
        best = max(measured.values())
        return min(level for level, t in measured.items() if t * RISE >= best)

    def _move(self, limit: int) -> bool:
        self.limit, self.fresh, self.over = max(1, limit), 0, 0
        return True

    def _settle(self, limit: int) -> bool:
        self.settled, self.ceiling = True, max(1, limit)
        self.home = self.top = self.ceiling
        return self._move(limit)

    def _stay(self) -> bool:
        self.fresh = self.over = 0  # settled and within: watch the next window
        return False

    def found(self, machine: int) -> Found | None:
        """What to remember (None: no limit measured in this invocation): the best limit
        measured, settled only when the search ended past a point, on runs that had the
        machine to their unit."""
        measured = self._measured()
        if not measured:
            return None
        limit = self._best(below=max(measured) + 1)
        rate = self._throughput(limit)
        kinds = {k: b for k in self.first if (b := self.baseline(k)) is not None}
        kinds = {**self.guesses, **kinds}
        agent, _, model = self.name.partition("/")
        return Found(
            agent=agent,
            model=model or None,
            cores=machine,
            cli=self.cli,
            version=self.version,
            concurrency=limit,
            settled=self.settled and not self.capped and not self.shared,
            capped=self.capped,
            baselines={k: round(b, 3) for k, b in list(kinds.items())[-KINDS:]},
            runs_per_min=round(rate * 60, 2) if rate is not None else None,
            at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        )
