"""jobs=auto's rule (`llmtt.taskgraph.pacing.Pace`) on simulated runs: agents whose time
grows with the runs under way past a knee, as the real CLIs' do on a small machine."""

from __future__ import annotations

import heapq
import io
import json
import os
import random
import re
import signal
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import GIT_TOML, Project
from doit.control import TaskControl
from doit.dependency import Dependency, JsonDB
from doit.reporter import ConsoleReporter
from doit.task import Task

from llmtt.errors import LlmttError
from llmtt.plan.cache import RunSpec
from llmtt.taskgraph import concurrency
from llmtt.taskgraph.concurrency import (
    Agent,
    Found,
    cgroup_quota,
    cores,
    oversubscribed,
    remember,
    remembered,
    workers,
)
from llmtt.taskgraph.loader import _pace
from llmtt.taskgraph.pacing import Pace, _agent_time
from llmtt.taskgraph.runner import WorkerRunner
from llmtt.taskgraph.session import Session

RAY = {"jobs": "auto", "executor": "ray"}


def agent_time(
    base: float, knee: float, under_way: int, rng: random.Random, spread: float = 0.0
) -> float:
    """A run's time with `under_way` runs (itself included) sharing `knee` cores' worth of
    machine: flat up to the knee (a little contention before it), then shared; +-8% noise
    (`spread`: log-normal noise of that deviation instead)."""
    slowdown = max(1.0, under_way / knee) * (1 + 0.02 * (min(under_way, knee) - 1))
    noise = rng.lognormvariate(0, spread) if spread else rng.uniform(0.92, 1.08)
    return base * slowdown * noise


def simulate(
    pace: Pace,
    runs: dict[str, int],
    base: dict[str, float],
    knee: float,
    seed: int,
    spread: float = 0.0,
) -> tuple[list[tuple[str, int, float]], float]:
    """Carry out `runs` (per unit) under `pace`, let out by its admission as doit's main
    process lets them out (`PacedDispatch`: all held at once, then admitted one by one): the
    limit each run was let out under and its time, and when the last ended."""
    rng = random.Random(seed)
    pending = [name for name, n in runs.items() for _ in range(n)]
    rng.shuffle(pending) if len(runs) > 1 else None
    for key, name in enumerate(pending):
        pace.hold(str(key), name, name, "cli 1.0")
    now, ends, done = 0.0, [], []
    while pace.held or ends:
        while (key := pace.admitted(now)) is not None:
            name, _, limit, *_ = pace.under_way[key]
            secs = agent_time(base[name], knee, len(ends) + 1, rng, spread)
            heapq.heappush(ends, (now + secs, key, name, secs, limit))
        now, key, name, secs, limit = heapq.heappop(ends)
        pace.back(key, now, secs, "1.0")
        done.append((name, limit, secs))
    return done, now


def fixed(base: float, knee: float, seed: int, most: int) -> dict[int, float]:
    """Throughput (runs a second) at each fixed concurrency, as `doit run -n N` would give,
    of those whose agent time stays within 1.2x of one at a time (the two targets together:
    past that, more throughput is bought with agents nearer their timeouts)."""
    rng = random.Random(seed)
    times = {n: [agent_time(base, knee, n, rng) for _ in range(200)] for n in range(1, most + 1)}
    alone = statistics.median(times[1])
    return {
        n: n / statistics.mean(t) for n, t in times.items() if statistics.median(t) <= 1.2 * alone
    }


def settle(knee: float, seed: int, cap: int = 8) -> tuple[bool, bool]:
    """64 runs under jobs=auto: whether the limit found is within 10% of the best fixed
    throughput (of -n 1 to the cap), and whether its runs' median agent time stayed within
    1.2x of one at a time."""
    pace = Pace(cap, {})
    done, _ = simulate(pace, {"cli": 64}, {"cli": 4.0}, knee, seed)
    found = pace.agent("cli").found(2)
    assert found is not None
    rates = fixed(4.0, knee, seed, cap)
    near = rates.get(found.concurrency, 0) >= 0.9 * max(rates.values())
    alone = statistics.median(s for _, limit, s in done if limit == 1)
    there = [s for _, limit, s in done if limit == found.concurrency]
    return near, statistics.median(there) <= 1.2 * alone


@pytest.mark.parametrize("knee", [1.5, 2, 3, 4])
def test_settles_near_the_best_throughput_without_slowing_the_agent(knee: float):
    # The real CLIs' knees on two cores are at 2 to 8 runs at once (bench/README.md).
    assert [settle(knee, seed) for seed in range(1, 11)] == [(True, True)] * 10


@pytest.mark.parametrize("knee", [6, 8])
def test_a_late_knee_is_mostly_found_and_never_overshot(knee: float):
    # Up to a knee at 6 or 8 agent time grows 2% a run, to 1.10x or 1.14x: near the 1.15
    # margin, a noisy baseline sometimes stops the rise a step early (never late).
    outcomes = [settle(knee, seed) for seed in range(1, 11)]
    assert all(safe for _, safe in outcomes)
    assert sum(near for near, _ in outcomes) >= 7


def short_agent(knee: float, seeds: range) -> list[int]:
    """The limits found for 64 runs of a 0.7 s agent as noisy as claude-code's (a log-normal
    11%: its -n 1 runs' deviation over their median, 48 runs, bench/README.md)."""
    found = []
    for seed in seeds:
        pace = Pace(8, {})
        simulate(pace, {"cli": 64}, {"cli": 0.7}, knee, seed, spread=0.11)
        limit = pace.agent("cli").found(2)
        assert limit is not None
        found.append(limit.concurrency)
    return found


@pytest.mark.parametrize("knee, best", [(2, 2), (3, 3)])
def test_a_short_noisy_agent_is_judged_on_enough_runs(knee: float, best: int, monkeypatch):
    # At a knee of 2 (3), 2 (3) at once run within 1.02x (1.04x) and 3 (4) at 1.37x (1.36x):
    # the best within 1.2x is found in 39 (37) of 40 seeds. Judged on three runs a window,
    # and on one window each, as before, it was found in 32 (25).
    found = short_agent(knee, range(1, 41))
    assert found.count(best) >= 36 and max(found) == best  # never one past it
    monkeypatch.setattr(concurrency, "SPAN", 0.0)
    monkeypatch.setattr(concurrency, "POOL", 1)
    monkeypatch.setattr(concurrency, "WATCH", 1)
    assert short_agent(knee, range(1, 41)).count(best) < 36


def settled(agent: str, limit: int, **more: Any) -> Found:
    """What an earlier jobs=auto remembered: `agent` settled at `limit` on two cores."""
    fields = {"cores": 2, "version": None, "settled": True, "runs_per_min": None, "at": "2026"}
    return Found(agent=agent, concurrency=limit, **{**fields, **more})


def settled_at_2() -> Agent:
    """A unit as a later jobs=auto starts it: settled at 2, a 1 s agent (windows of 8)."""
    return Agent.starting("cli", 8, settled("cli", 2, baselines={"k": 1.0}), None)


@pytest.mark.parametrize("watch, first_down", [(2, 24), (1, 16)])
def test_a_settled_limit_is_left_on_two_windows_past_the_bound(monkeypatch, watch, first_down):
    # Settled at 2, a 1 s agent (windows of 8 runs): a window at 1.16x, then one at 1.3x
    # (three runs at 1.16x, five at 1.3x) moves nothing, the two together at 1.16x; the next
    # at 1.3x takes it down to 1. One window at a time, the second did.
    monkeypatch.setattr(concurrency, "WATCH", watch)
    agent = settled_at_2()
    ratios = [1.16] * 11 + [1.3] * 13
    moved = [n for n, r in enumerate(ratios, 1) if agent.back(2, "k", r, r, 2, agents=2)]
    assert moved[0] == first_down and agent.limit == 1


def drive(agent: Agent, ratio: Any, runs: int) -> list[int]:
    """Feed `agent` `runs` runs, each let out at its limit then with as many under way, and
    reading `ratio(limit, run)` times its baseline: the limits they were let out under."""
    limits = []
    for n in range(runs):
        level = agent.limit
        limits.append(level)
        r = ratio(level, n)
        agent.back(level, "k", r, r, level, agents=level)
    return limits


def test_a_limit_left_twice_for_a_slow_spell_is_tried_again_once_it_passed() -> None:
    # Settled at 2 (windows of 8), 3 above it always too many: for 80 runs another program
    # slows 2 at once to 1.4x. 2 is left at runs 8 and 24, then tried again after three windows
    # within at 1 (run 48: still the spell, left a third time), then after six (run 104): the
    # spell has passed, and 2 is kept; 3 is tried now and then (half a window each time, past
    # 1.2x) and left, ever less often.
    agent = settled_at_2()

    def ratio(level: int, n: int) -> float:
        return 1.4 if level == 3 or (level == 2 and n < 80) else 1.0

    limits = drive(agent, ratio, 240)
    assert [n for n in range(1, 240) if limits[n] == 2 and limits[n - 1] == 1] == [16, 48, 104]
    after = limits[104:]
    assert 1 not in after and after.count(2) >= 0.85 * len(after)
    tries = [n for n in range(105, 240) if limits[n] == 3 and limits[n - 1] == 2]
    gaps = [b - a for a, b in zip(tries[:-1], tries[1:], strict=True)]
    assert len(tries) >= 3 and gaps == sorted(gaps) and gaps[-1] > gaps[0], tries
    assert 2 not in agent.barred and agent.top == 3


def test_a_limit_that_keeps_passing_the_bound_is_tried_ever_less_often() -> None:
    # 2 at once always reads 1.4x: each try costs one window, and the wait before the next
    # doubles (3, 6, 12 windows of 8 at 1): over 400 runs the median stays at 1x, and most
    # runs go out one at a time.
    agent = settled_at_2()
    limits = drive(agent, lambda level, n: 1.4 if level == 2 else 1.0, 400)
    ratios = [1.4 if level == 2 else 1.0 for level in limits]
    assert statistics.median(ratios) == 1.0
    assert limits.count(2) <= 0.15 * len(limits), limits.count(2)
    # Tried five times in 50 windows (at a fixed wait of three windows: a dozen times).
    assert 3 <= agent.strikes[2] <= 6, agent.strikes


def test_one_above_a_settled_limit_is_left_on_half_a_window() -> None:
    # Settled at 2, a probe at 3 is left as soon as half its window (4 of 8) is past 1.2x.
    agent = settled_at_2()
    agent.limit = 3
    moved = [n for n in range(1, 9) if agent.back(3, "k", 1.3, 1.3, 3, agents=3)]
    assert moved == [4] and agent.limit == 2


@pytest.mark.parametrize("cap", [1, 2, 4, 6])
def test_the_worker_count_bounds_the_search_and_a_capped_limit_is_not_settled(cap: int):
    # -n 1 jobs=auto, -n 2, -n 4 and -n 6 on a knee at 4: within the cap, near its best.
    assert [settle(4, seed, cap) for seed in range(1, 6)] == [(True, True)] * 5
    pace = Pace(cap, {})
    simulate(pace, {"cli": 48}, {"cli": 4.0}, 4, 1)
    found = pace.agent("cli").found(2)
    assert found is not None and found.concurrency <= cap
    # Stopped by the cap below the knee's point past it: nothing settled to hold -n N to.
    assert (found.capped, found.settled) == ((True, False) if cap <= 4 else (False, True))


def test_a_step_past_the_point_is_seen_within_half_a_window():
    # x1.5, not x2, past 2; and at a limit past the point, as soon as half its window is past
    # 1.2x.
    pace = Pace(16, {})
    done, _ = simulate(pace, {"cli": 64}, {"cli": 4.0}, 4, 3)
    limits = [limit for _, limit, _ in done]
    tried = sorted(set(limits))
    assert tried[:4] == [1, 2, 3, 4] and 8 not in tried, tried
    # Left before a full window (6) of runs judged at it: those let out meanwhile are the
    # ones under way as the first came back, at ~1.5x rather than the ~2x of a step to 8.
    assert len(pace.agent("cli").levels.get(6, [])) < 6 and limits.count(6) <= 10, limits
    assert pace.agent("cli").limit in (4, 5)


def throughput(pace: Pace | None, knee: float, seed: int, fixed_n: int = 0) -> tuple[float, float]:
    """Runs a second of 64 runs carried out under `pace` (or `fixed_n` at once, as `-n N`),
    and their median agent time."""
    if pace is not None:
        done, end = simulate(pace, {"cli": 64}, {"cli": 4.0}, knee, seed)
        return 64 / end, statistics.median(s for _, _, s in done)
    rng = random.Random(seed)
    now, ends, times, pending = 0.0, [], [], 64
    while pending or ends:
        while pending and len(ends) < fixed_n:
            pending -= 1
            secs = agent_time(4.0, knee, len(ends) + 1, rng)
            heapq.heappush(ends, (now + secs, str(pending), secs))
        now, key, secs = heapq.heappop(ends)
        times.append(secs)
    return 64 / now, statistics.median(times)


@pytest.mark.parametrize("knee", [1.5, 2, 4, 6])
def test_the_next_jobs_auto_starts_from_what_was_found(knee: float):
    # The first invocation pays for its search (one at a time for the baseline, then the
    # rise); the next one starts where the best was measured, and may try one above it.
    for seed in (1, 2, 3):
        first = Pace(8, {})
        throughput(first, knee, seed)
        found = first.agent("cli").found(2)
        assert found is not None
        auto, median = throughput(Pace(8, {"cli": found}), knee, seed + 100)
        fixed = {n: throughput(None, knee, seed + 100, n) for n in (1, 2, 4, 8)}
        feasible = [rate for rate, m in fixed.values() if m <= 1.2 * fixed[1][1]]
        assert auto >= 0.9 * max(feasible), (found.concurrency, auto, fixed)
        assert median <= 1.2 * fixed[1][1]


def test_two_agents_share_the_machine_each_within_its_own_limit():
    pace = Pace(8, {})
    done, _ = simulate(pace, {"slow": 40, "fast": 40}, {"slow": 8.0, "fast": 2.0}, 2, 5)
    assert {name for name, _, _ in done} == {"slow", "fast"}
    # Each the other's load: together they fill a machine whose knee is at 2, each within
    # 1.2x of its runs one at a time.
    for name in ("slow", "fast"):
        assert 1 <= pace.agent(name).limit <= 3
        alone = statistics.median(s for n, limit, s in done if limit == 1 and n == name)
        assert statistics.median(s for n, _, s in done if n == name) <= 1.2 * alone
    # Settled on runs beside the other's: kept as not settled (it may be higher alone).
    slow = pace.agent("slow")
    found = slow.found(2)
    assert slow.settled and slow.shared and found is not None and not found.settled


def test_a_limit_is_judged_only_on_runs_started_with_that_many_under_way():
    agent = Agent("codex", 8)
    for level, under_way in [(1, 1)] * 3 + [(2, 2)] * 3:  # the baseline, then a rise at 2
        agent.back(level, "k", 4.0, 4.0, under_way)
    assert agent.limit == 3
    # Another CLI's runs beside it leave it two under way: no sign that 3 does not pay.
    for _ in range(6):
        assert not agent.back(3, "k", 4.0, 4.0, 2, shared=True)
    assert (agent.limit, agent.settled) == (3, False)


def test_held_runs_go_oldest_first_when_only_the_machine_is_full():
    pace = Pace(8, {})
    pace.agents["a"] = Agent("a", 8, limit=4)
    pace.hold("a1", "a")
    pace.hold("a2", "a")
    pace.hold("b1", "b")  # b at 1: it needs the whole machine
    pace.hold("a3", "a")
    assert [pace.admitted(0.0) for _ in range(3)] == ["a1", "a2", None]
    pace.back("a1", 1.0, None)
    assert pace.admitted(1.0) is None  # a3 does not pass b1, which waits for room
    pace.back("a2", 2.0, None)
    assert (pace.admitted(2.0), pace.admitted(2.0)) == ("b1", None)
    pace.back("b1", 3.0, None)
    assert pace.admitted(3.0) == "a3"


def test_each_run_is_judged_against_its_own_kind_and_model(tmp_path: Path):
    # codex settled at 4 on a fast model's 3 s runs; the same model on another scenario
    # taking 30 s a run is no slowdown, and another model starts its own search.
    found = Found(
        agent="codex",
        model="fast",
        cores=cores(),
        cli="codex 1.0",
        version="1.0",
        concurrency=4,
        settled=True,
        baselines={"short": 3.0},
        runs_per_min=80.0,
        at="2026-11-27T03:00:00+00:00",
    )
    remember(tmp_path, found)
    memory = remembered(tmp_path)
    pace = Pace(8, memory)
    for key in range(12):
        pace.hold(str(key), "codex/fast", "long" if key >= 4 else "short", "codex 1.0")
    pace.hold("other", "codex/slow", "long", "codex 1.0")
    rng, now, ends = random.Random(1), 0.0, []
    while pace.held or ends:
        while (key := pace.admitted(now)) is not None:
            base = 30.0 if pace.under_way[key][1] == "long" else 3.0
            heapq.heappush(ends, (now + base * rng.uniform(0.95, 1.05), key))
        now, key = heapq.heappop(ends)
        pace.back(key, now, now - pace.under_way[key][3], "1.0")
    assert pace.agent("codex/fast").limit >= 4  # one above where it settled may be tried
    assert pace.agent("codex/slow").limit == 1 and not pace.agent("codex/slow").settled


def test_a_run_let_out_first_under_a_remembered_limit_is_no_baseline():
    # The second jobs=auto of a 0.6 s agent settled at 2 let its first run out alone, soon
    # joined by another: it read 1.3x its baseline, and as the kind's baseline it hid a limit
    # of 3 at 1.5x behind a ratio of 1.1x (bench/README.md, session 22). The remembered
    # baseline holds.
    agent = settled_at_2()
    agent.back(2, "k", 1.35, 1.5, 1)
    assert agent.baseline("k") == 1.0 and agent.alone == []
    fresh = Agent("cli", 8)  # under a limit of one, a run let out alone is one
    fresh.back(1, "k", 0.7, 0.8, 1)
    assert fresh.baseline("k") == 0.7 and fresh.alone == [0.7]


def test_a_remembered_limit_may_rise_again():
    # A limit remembered at 1 (a busy machine then) is no ceiling: one above it is tried.
    found = Found(
        agent="cli",
        cores=2,
        version=None,
        concurrency=1,
        settled=True,
        baselines={"cli": 4.0},
        runs_per_min=15.0,
        at="2026-11-27T03:00:00+00:00",
    )
    pace = Pace(8, {"cli": found})
    done, _ = simulate(pace, {"cli": 32}, {"cli": 4.0}, 4, 2)
    assert pace.agent("cli").limit == 2
    again = pace.agent("cli").found(2)
    assert again is not None and again.concurrency == 2 and again.settled


def test_a_timeout_steps_down_and_a_failed_run_is_no_sample(tmp_path: Path):
    pace = Pace(8, {})
    pace.agents["cli"] = Agent("cli", 8, limit=4)
    for key in "abcd":
        pace.hold(key, "cli")
        pace.admitted(0.0)
    assert pace.back("a", 0.3, None) is None  # a CLI failing at once: no sample
    assert pace.agent("cli").first == {}
    assert pace.back("b", 120.0, None, timed_out=True) is not None
    assert pace.agent("cli").limit < 4
    run = tmp_path / "run"
    run.mkdir()
    record = {"agent_duration_secs": 0.3, "status": "completed", "exit_code": 1}
    for change, expected in [
        ({}, (None, None, False)),
        ({"exit_code": 0}, (0.3, None, False)),
        ({"exit_code": 0, "natural_stop": False}, (None, None, False)),
        ({"status": "timeout", "timed_out": True}, (None, None, True)),
    ]:
        (run / "run.json").write_text(json.dumps({**record, **change}))
        assert _agent_time(run, {}) == expected, change


def test_a_new_version_of_the_cli_in_the_plan_is_found_again(tmp_path: Path):
    found = Found(
        agent="codex",
        cores=2,
        cli="codex 1.0",
        version="1.0",
        concurrency=4,
        settled=True,
        runs_per_min=80.0,
        at="2026-11-27T03:00:00+00:00",
    )
    # Known from the plan, before any run of the new version comes back.
    assert Pace(8, {"codex": found}).agent("codex", "codex 2.0").limit == 1
    assert Pace(8, {"codex": found}).agent("codex", "codex 1.0").limit == 4
    assert workers(100, {"codex": found}, {"codex": "codex 2.0"}) == min(16, 4 * cores())


def test_what_was_found_is_remembered_and_warns_a_larger_n(tmp_path: Path):
    pace = Pace(8, {})
    simulate(pace, {"codex": 64}, {"codex": 3.0}, 4, 1)
    found = pace.agent("codex").found(cores())
    assert found is not None and found.settled and found.version == "1.0"
    remember(tmp_path, found)
    again = remembered(tmp_path)  # another machine's (cores) entry would not be read
    assert again["codex"].concurrency == found.concurrency
    # The next jobs=auto starts from it, watching; it does not start over from one.
    follow = Pace(8, again)
    assert follow.agent("codex").limit == found.concurrency and follow.agent("codex").settled
    plan = {"codex": "cli 1.0", "oracle": None}
    above = found.concurrency + 1
    warning = oversubscribed(tmp_path, plan, above)
    assert warning is not None and f"codex 1.0: {found.concurrency} (" in warning
    assert oversubscribed(tmp_path, plan, found.concurrency) is None
    assert oversubscribed(tmp_path, {"oracle": None}, 16) is None
    assert oversubscribed(tmp_path, {"codex": "cli 2.0"}, above) is None  # another version
    # The first format's file (the limit the runs ended at) is not read, and is replaced.
    path = tmp_path / ".llmtt" / "concurrency.json"
    first = {"format": 1, "found": [{**found.model_dump(), "agent": "oracle"}]}
    path.write_text(json.dumps(first))
    assert remembered(tmp_path) == {}
    remember(tmp_path, found)
    assert json.loads(path.read_text())["format"] == 2 and len(remembered(tmp_path)) == 1
    # A limit not settled (still rising, or stopped by the worker count) is nothing to warn of.
    remember(tmp_path, found.model_copy(update={"settled": False}))
    assert oversubscribed(tmp_path, plan, above) is None


def test_a_damaged_memory_names_the_file_and_only_warns_a_plain_n(tmp_path: Path, capsys):
    (tmp_path / ".llmtt").mkdir()
    (tmp_path / ".llmtt" / "concurrency.json").write_text('{"found": [{"agent": 1}]}')
    with pytest.raises(LlmttError, match=r"concurrency.json: .*delete it"):
        remembered(tmp_path)
    spec = RunSpec("r1", str(tmp_path / "r1"), "", "codex", None, {}, "")
    session = SimpleNamespace(
        root=tmp_path, processes=4, variables={}, tasks=SimpleNamespace(runs=[spec])
    )
    _pace(session)  # type: ignore[arg-type]
    err = capsys.readouterr().err
    assert err.count("warning:") == 1 and "concurrency.json: not what jobs=auto" in err, err
    session.variables["jobs"] = "auto"
    with pytest.raises(LlmttError, match="concurrency.json"):
        _pace(session)  # type: ignore[arg-type]


def test_the_machine_is_what_a_cgroup_quota_allows(tmp_path: Path):
    cpu_max = tmp_path / "cpu.max"
    for text, expected in [("max 100000", None), ("200000 100000", 2), ("150000 100000", 2)]:
        cpu_max.write_text(text + "\n")
        assert cgroup_quota(cpu_max) == expected
    assert cgroup_quota(tmp_path / "missing") is None
    assert 1 <= cores() <= (os.cpu_count() or 1)


def test_doit_run_jobs_auto_paces_the_agents_and_a_larger_n_is_warned(project: Project) -> None:
    project.write("llmtt.toml", GIT_TOML)
    project.write(
        "scenarios/slow.yaml",
        """\
        task:
          prompt: Make a repository, slowly.
        solution:
          - sleep 0.4
          - git init -q .
        evaluation:
          gates:
            - type: file_exists
              path: .git/HEAD
        """,
    )
    for wrong, said in [({"jobs": "3"}, "jobs=3: jobs= takes auto"), (RAY, "leave out jobs")]:
        with pytest.raises(LlmttError, match=said):
            Session.load(project.root, wrong)
    trace = project.root / "pace.jsonl"
    ran = project.doit(
        "run", "jobs=auto", "-n", "3", "repeats=17", env={"LLMTT_PACE_TRACE": str(trace)}
    )
    assert ran.code == 0, ran.out + ran.err
    spans = sorted(_agent_span(p) for p in project.results().glob("slow/*/r*/events.jsonl"))
    assert len(spans) == 17
    # Each run back is traced (LLMTT_PACE_TRACE): the limit it was let out under, its time, its
    # baseline (the first: its own time), and the limit after it.
    judged = [json.loads(line) for line in trace.read_text().splitlines()]
    assert sorted(j["run"] for j in judged) == sorted(f"slow/oracle/r{n}" for n in range(1, 18))
    assert [j["limit_then"] for j in judged[:8]] == [1] * 8, judged
    # one at a time: each agent let out with no other layer of the unit under way
    assert [j["under_way"] for j in judged[:8]] == [1] * 8, judged
    assert judged[0]["baseline"] == round(judged[0]["agent_secs"], 3) > 0.3, judged[0]
    assert judged[7]["limit"] == 2, judged  # the baseline's window done: the next limit
    # The baseline's runs one at a time (a window of 8 s of a short agent's runs, at most 8):
    # without the limit, three workers start three.
    assert all(spans[i][1] <= spans[i + 1][0] for i in range(7)), spans
    memory = json.loads((project.root / ".llmtt" / "concurrency.json").read_text())
    (found,) = memory["found"]
    # Eight runs for the baseline, nine at 2 (eight of them started with two under way, the
    # window 2 is judged on): 2 found, and rising still (1 if 2 was slower past the margin on
    # a busy machine).
    assert found["agent"] == "oracle" and found["concurrency"] in (1, 2), found
    (baseline,) = found["baselines"].values()  # one kind: one scenario on one model
    assert 0.3 < baseline < 5
    # Still rising: nothing to warn of. Settled (as a later jobs=auto would leave it): once.
    assert concurrency.oversubscribed(project.root, {"oracle": None}, 3) is None
    memory["found"][0]["settled"] = True
    (project.root / ".llmtt" / "concurrency.json").write_text(json.dumps(memory))
    again = project.doit("run", "-n", "3", "repeats=7")  # nothing to do, but -n 3 > found
    assert again.code == 0, again.out + again.err
    assert again.err.count("warning: -n 3 is above what jobs=auto found") == 1, again.err
    said = rf"oracle( \S+)?: {found['concurrency']} \(20\d\d-\d\d-\d\d\)"
    assert re.search(said, again.err), again.err


def test_runs_only_evaluated_again_under_jobs_auto_are_not_held_one_at_a_time(
    project: Project,
) -> None:
    # The agents are up to date and only the gates changed: no agent is held, under way or to
    # come, so the evaluations go as doit hands them out (three workers), not one at a time
    # at the limit of one the unit starts from.
    project.write("llmtt.toml", GIT_TOML)
    scenario = """\
        task:
          prompt: Nothing to do.
        solution:
          - "true"
        evaluation:
          gates:
            - {type: command_succeeds, command: "GATE"}
        """
    project.write("scenarios/s.yaml", scenario.replace("GATE", "true"))
    first = project.doit("run", "jobs=auto", "-n", "3", "repeats=4")
    assert first.code == 0, first.out + first.err
    project.write("scenarios/s.yaml", scenario.replace("GATE", "sleep 1.2"))
    again = project.doit("run", "jobs=auto", "-n", "3", "repeats=4")
    assert again.code == 0, again.out + again.err
    executed = again.executed()
    assert sum(t.endswith(":evaluate") for t in executed) == 4, executed
    assert not any(t.endswith(":agent") for t in executed), executed
    # When each evaluation ended: one at a time, 1.2 s or more apart; let out together, the
    # first three end within a fraction of that.
    assert _gates_ended(project, range(1, 5))[2] < 0.8
    # Likewise when doit is named three of the runs: the fourth's agent is none to wait for.
    project.write("scenarios/s.yaml", scenario.replace("GATE", "sleep 1.3"))
    named = [f"s/oracle/r{n}" for n in (1, 2, 3)]
    some = project.doit("run", "jobs=auto", "-n", "3", "repeats=4", *named)
    assert some.code == 0, some.out + some.err
    assert sorted(t for t in some.executed() if t.endswith(":evaluate")) == [
        f"{n}:evaluate" for n in named
    ]
    assert _gates_ended(project, range(1, 4))[2] < 0.8


def _gates_ended(project: Project, repeats: range) -> list[float]:
    """When each of these runs' gates.json was written, from the first of them."""
    ends = sorted(
        (project.results() / f"s/oracle/r{n}/gates.json").stat().st_mtime for n in repeats
    )
    return [end - ends[0] for end in ends]


def _agent_span(events: Path) -> tuple[float, float]:
    """When a run's agent started and ended (its first and last event)."""
    lines = [json.loads(line) for line in events.read_text().splitlines() if line.strip()]
    return _seconds(lines[0]["ts"]), _seconds(lines[-1]["ts"])


def _seconds(ts: str | float) -> float:
    if isinstance(ts, int | float):
        return float(ts)
    import datetime as dt

    return dt.datetime.fromisoformat(ts).timestamp()


@dataclass
class _Session:
    """What the paced dispatch reads of a session."""

    root: Path
    variables: dict[str, str]


def _agent(session: _Session, spec: RunSpec) -> dict[str, Any]:
    """An agent layer: one that kills its worker, or a 0.3 s run recorded as the agent layer
    records one (run.json's agent time), with when it ran."""
    if spec.run_id == "r1":
        os.kill(os.getpid(), signal.SIGKILL)
    started = time.time()
    time.sleep(0.3)
    Path(spec.dir).mkdir(parents=True)
    record = {"agent_duration_secs": time.time() - started, "status": "completed", "exit_code": 0}
    (Path(spec.dir) / "run.json").write_text(json.dumps(record))
    (Path(spec.dir) / "span").write_text(f"{started} {time.time()}")
    return {"status": "completed"}


def test_the_paced_dispatch_outlives_a_dead_worker(tmp_path: Path) -> None:
    deps = Dependency(JsonDB, str(tmp_path / "deps.json"))
    runner = WorkerRunner(deps, ConsoleReporter(io.StringIO(), {}), continue_=True, num_process=3)
    session = _Session(tmp_path, {"jobs": "auto"})
    specs = [
        RunSpec(f"r{i}", str(tmp_path / f"r{i}"), "", "cli", None, {}, "") for i in (1, 2, 3, 4)
    ]
    tasks = [Task(f"{s.run_id}:agent", [(_agent, [session, s])]) for s in specs]
    tasks += [Task("report", [(lambda: None, [])], task_dep=[t.name for t in tasks])]
    control = TaskControl(tasks)
    control.process(None)
    runner.run_all(control.task_dispatcher())
    failures = {f["task"].name for f in runner.reporter.failures}
    assert failures == {"r1:agent", "report"}  # the lost one, and what needs it
    assert runner.pace is not None and runner.pace.under_way == {}
    # The runs after it one at a time still (a baseline is three runs carried out).
    spans = sorted(
        tuple(map(float, (tmp_path / f"r{i}" / "span").read_text().split())) for i in (2, 3, 4)
    )
    assert spans[0][1] <= spans[1][0] and spans[1][1] <= spans[2][0], spans
    assert runner.pace.agent("cli").baseline("cli") is not None


def test_the_workers_started_follow_what_was_found(monkeypatch) -> None:
    found = settled("codex", 3, at="2026-11-27T03:00:00+00:00")
    most = min(16, 4 * cores())
    codex = {"codex": None}
    assert workers(100, {}, codex) == most  # nothing found: for the most it may reach
    # Its limit, one above it that may be tried, and one for the other layers.
    assert workers(100, {"codex": found}, codex) == min(most, 5)
    assert workers(100, {"codex": found}, {**codex, "opencode": None}) == most  # unknown
    rising = found.model_copy(update={"settled": False})
    assert workers(100, {"codex": rising}, codex) == most  # it may go higher
    assert workers(2, {}, codex) == 2
    monkeypatch.setattr(concurrency, "cores", lambda: 64)  # 256 workers would be ~11 GB
    assert workers(1000, {}, codex) == 16


def _evaluate(session: _Session, spec: RunSpec) -> None:
    """An evaluate layer, never carried out here."""


def test_a_runs_other_layers_take_a_place_of_the_limit_and_go_first(tmp_path: Path) -> None:
    # At a limit of one with a worker to spare: as under -n 1, a run's evaluate layer goes
    # before the next agent, which waits for it; once no agent is left to pace it beside, a
    # run's layer goes as doit hands it out.
    deps = Dependency(JsonDB, str(tmp_path / "deps.json"))
    runner = WorkerRunner(deps, ConsoleReporter(io.StringIO(), {}), continue_=True, num_process=2)
    session = _Session(tmp_path, {"jobs": "auto"})
    specs = [RunSpec(f"r{i}", str(tmp_path / f"r{i}"), "", "cli", None, {}, "") for i in (1, 2)]
    tasks = [Task(f"{s.run_id}:agent", [(_agent, [session, s])]) for s in specs]
    tasks += [
        Task(f"{s.run_id}:evaluate", [(_evaluate, [session, s])], task_dep=[f"{s.run_id}:agent"])
        for s in specs
    ]
    control = TaskControl(tasks)
    control.process(None)
    runner._run_tasks_init(control.task_dispatcher())
    assert runner.get_next_job(None).name == "r1:agent"
    assert type(runner.get_next_job(None)).__name__ == "JobHold"  # r2 held: limit 1
    nodes = runner.task_dispatcher.nodes
    nodes["r1:agent"].run_status = "done"
    assert runner.pace is not None
    runner.pace.back("r1:agent", 1.0, 0.3)
    assert runner.get_next_job(nodes["r1:agent"]).name == "r1:evaluate"
    assert type(runner.get_next_job(None)).__name__ == "JobHold"  # r2 waits for it
    assert runner.pace.running("cli") == 1 and list(runner.pace.held) == ["cli"]
    nodes["r1:evaluate"].run_status = "done"
    assert runner.pace.back_other("r1:evaluate") and runner.pace.running("cli") == 0
    assert runner.get_next_job(nodes["r1:evaluate"]).name == "r2:agent"
    nodes["r2:agent"].run_status = "done"
    runner.pace.back("r2:agent", 2.0, 0.3)
    # No agent left: r2's evaluate layer is not held, nor counted.
    assert runner.get_next_job(nodes["r2:agent"]).name == "r2:evaluate"
    assert runner.pace.running("cli") == 0 and not runner.pace.waiting


def test_a_runs_next_layer_waiting_for_room_holds_back_other_units_agents() -> None:
    # a at a limit of 2 (a layer takes half the machine), b at 4 (a quarter): a's evaluate
    # layer waits for half the machine, and b's agents, which would fit, wait with it.
    pace = Pace(8, {})
    pace.agent("a").limit, pace.agent("b").limit = 2, 4
    for key in ("a1", "a2"):
        pace.hold(key, "a")
        assert pace.admitted(0.0) == key
    pace.back("a1", 1.0, 1.0)
    for key in ("b1", "b2"):
        pace.hold(key, "b")
        assert pace.admitted(1.0) == key
    assert pace.hold_other("a1:evaluate", "a")  # a's agent a2 is under way
    pace.back("b1", 2.0, 1.0)
    pace.hold("b3", "b")
    assert pace.admitted(2.0) is None  # a quarter free: not the half a1:evaluate needs
    pace.back("b2", 3.0, 1.0)
    assert pace.admitted(3.0) == "a1:evaluate"
    assert pace.admitted(3.0) is None  # a1:evaluate and a2 fill it


def test_a_layer_is_paced_while_an_agent_of_its_unit_is_still_to_come() -> None:
    # A run whose agent is up to date (a resumed invocation) has its evaluate layer handed out
    # before the next run's agent: still held, or it would run beside the first agents alone.
    pace = Pace(8, {})
    pace.unseen["cli"] = 1
    assert pace.hold_other("r1:evaluate", "cli")
    assert pace.admitted(0.0) == "r1:evaluate"
    pace.unseen["cli"] = 0
    assert not pace.hold_other("r2:evaluate", "cli")  # nothing left to pace it beside
