"""Money: the session budget shared by parallel runs through a locked ledger, and estimates.

Each paid run reserves its cost before it starts — the scenario's `cost.max_usd` when it has
one, else the expected cost — and settles the real cost when it ends. A run starts only while
spent + reserved stays under the budget. While it runs, its agent reports its running cost
(`Ledger.guard`) as usage arrives, and is stopped once what is spent and what every running run
has spent so far reach the budget: an estimate that was too low cannot overspend it. The total
exceeds the budget by at most the last turn of each run under way.

The ledger lives as long as one `doit run` (only `doit run` creates it, under the project's
lock): no other invocation resets it.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmtt.errors import LlmttError
from llmtt.gateway.usage import fold, read_wire
from llmtt.util.atomic import read_jsonl

if TYPE_CHECKING:
    from llmtt.agents.pricing import Pricing
    from llmtt.plan.runs import Run


BUDGET_EXHAUSTED = "budget exhausted"  # how each of the budget's refusals begins


class BudgetExhausted(LlmttError):
    """No money left in this invocation's budget for another paid run."""


@dataclass(frozen=True)
class Ledger:
    """One invocation's ledger file: budget, what was spent, what running runs reserved."""

    path: Path
    budget: float

    @classmethod
    def create(cls, path: Path, budget: float) -> Ledger:
        """A fresh ledger for a new invocation."""
        path.parent.mkdir(parents=True, exist_ok=True)
        state = {"budget": budget, "spent": 0.0, "reserved": {}, "running": {}}
        path.write_text(json.dumps(state))
        return cls(path, budget)

    @contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        with open(self.path, "r+", encoding="utf-8") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                state: dict[str, Any] = json.load(handle)
                yield state
                handle.seek(0)
                handle.truncate()
                json.dump(state, handle)
                handle.flush()
                os.fsync(handle.fileno())
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def reserve(self, key: str, amount: float) -> None:
        """Hold `amount` for a run about to start, or raise BudgetExhausted."""
        with self._locked() as state:
            committed = state["spent"] + sum(state["reserved"].values())
            if committed >= self.budget:
                raise BudgetExhausted(
                    f"{BUDGET_EXHAUSTED}: spent ${state['spent']:.4f} of ${self.budget:.4f} "
                    f"(${sum(state['reserved'].values()):.4f} held by running runs); "
                    "this run stays pending for the next invocation"
                )
            state["reserved"][key] = amount

    def guard(self, key: str) -> Callable[[float], str | None]:
        """For a running step: given what it has spent so far, why it must stop, or None."""

        def check(spent: float) -> str | None:
            with self._locked() as state:
                # Two counters report a run's spend (its stream, the gateway): the larger holds.
                state["running"][key] = max(spent, state["running"].get(key, 0.0))
                total = state["spent"] + sum(state["running"].values())
                if total < self.budget:
                    return None
                return (
                    f"{BUDGET_EXHAUSTED} while running: ${total:.4f} spent of ${self.budget:.4f} "
                    "(this run included); the run stays pending for the next invocation"
                )

        return check

    def settle(self, key: str, cost: float | None, fallback: float) -> None:
        """Replace a run's reservation by what it really cost (its reservation if unknown)."""
        with self._locked() as state:
            held = state["reserved"].pop(key, fallback)
            running = state["running"].pop(key, None)
            if cost is None:
                cost = held if running is None else max(held, running)
            state["spent"] = round(state["spent"] + cost, 8)

    def spent(self) -> float:
        """Money spent so far in this invocation."""
        with self._locked() as state:
            return float(state["spent"])


def budget_limit(config_max: float | None, variable: str | None) -> float | None:
    """The session budget: the doit variable, else LLMTT_BUDGET_USD, else [budget] max_usd."""
    for source in (variable, os.environ.get("LLMTT_BUDGET_USD")):
        if source:
            try:
                value = float(source)
            except ValueError:
                raise LlmttError(f"budget must be a number of US dollars, not {source!r}") from None
            if value < 0:
                raise LlmttError("budget must not be negative")
            return value
    return config_max


def expected_cost(run: Run, history: list[dict[str, Any]], models: Any) -> float | None:
    """What a pending run is expected to cost: the mean of earlier runs of the same scenario,
    agent and model, else a token estimate from the prompt and fixture size; None if unknown."""
    from llmtt.providers import SCRIPTED, resolve_model

    if run.model is None or run.model == SCRIPTED:
        return 0.0
    earlier: list[float] = [
        r["cost_usd"]
        for r in history
        if isinstance(r, dict)
        and (r.get("scenario"), r.get("agent"), r.get("model"))
        == (run.scenario.name, run.agent, run.model)
        and r.get("cost_usd") is not None
    ]
    if earlier:
        return round(sum(earlier) / len(earlier), 6)
    fixture = run.scenario.fixture_dir
    size = sum(p.stat().st_size for p in fixture.rglob("*") if p.is_file()) if fixture else 0
    # Every turn re-reads the conversation: prompt, guidance-sized context and outputs so far.
    per_turn = (len(run.scenario.spec.task.prompt) + min(size, 200_000)) // 4 + 2_000
    turns = max(1, run.max_turns // 2)
    model = resolve_model(run.model, models)
    return model.cost(per_turn * turns, 400 * turns)


def spent_by(run_dir: Path, pricing: Pricing) -> float | None:
    """What a run's agent layer spent, as the ledger books it: the gateway's record when the
    run went through one (a request whose usage the provider never reported at its worst), else
    its usage events; 0 when it never started its agent (a refusal, a failed set-up); None when
    unknown."""
    records = read_wire(run_dir)
    if records is not None:
        return fold(records, pricing.price).worst_cost
    events = run_dir / "events.jsonl"
    if events.exists():
        return events_cost(events)
    if (run_dir / "events.jsonl.part").exists():
        return None  # the run broke off while its agent worked
    return 0.0


def events_cost(path: Path) -> float | None:
    """What a run's usage events add up to (an agent's totals replacing the per-request
    figures before them, side requests included); None when any needed cost is unknown."""
    return usage_cost(read_jsonl(path))


def usage_cost(events: Iterable[dict[str, Any]]) -> float | None:
    """`events_cost` of events already read."""
    from pydantic import ValidationError

    from llmtt.events import Usage, run_usage

    usages = []
    for event in events:
        if event.get("event") == "usage":
            try:
                usages.append(Usage.model_validate(event))
            except ValidationError:
                return None
    return run_usage(usages).cost
