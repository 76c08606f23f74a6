"""Turns, tokens and cost of a run from its usage events, as docs/metrics.md defines them.

Agents report usage one model request at a time as it happens (so a run killed at its time
limit keeps what it spent), and some report their own totals at the end. A `total` event
replaces the per-request events before it; per-request events after the last total (a run
that went on and was killed) are added to it. Side requests (titles, compaction) are counted
apart from the agent loop's turns and tokens, and their cost is part of the run's cost.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from llmtt.events import Usage


@dataclass
class Tally:
    """Summed figures of some usage events; `cost` is None as soon as one cost is unknown."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost: float | None = 0.0
    client_cost: float | None = None
    sources: set[str] = field(default_factory=set)
    events: int = 0

    def add(self, usage: Usage) -> None:
        """Count one event in."""
        self.merge(
            Tally(
                usage.input_tokens,
                usage.output_tokens,
                usage.cache_read_tokens,
                usage.cache_write_tokens,
                usage.cost_usd,
                usage.client_cost_usd,
                {usage.cost_source} if usage.cost_source else set(),
                1,
            )
        )

    def merge(self, other: Tally) -> None:
        """Count another tally in."""
        for name in ("input", "output", "cache_read", "cache_write", "events"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.cost = None if self.cost is None or other.cost is None else self.cost + other.cost
        if other.client_cost is not None:
            self.client_cost = (self.client_cost or 0.0) + other.client_cost
        self.sources |= other.sources


@dataclass
class RunUsage:
    """A run's usage: the agent loop (its turns and figures) and the side requests."""

    loop: Tally
    side: Tally
    requests: int  # per-request events of the loop: the turns, when the agent reports them

    @property
    def cost(self) -> float | None:
        """What the run cost, side requests included; None when any part is unknown."""
        if self.loop.cost is None or self.side.cost is None:
            return None
        return round(self.loop.cost + self.side.cost, 8)


def run_usage(usages: Iterable[Usage]) -> RunUsage:
    """Fold a run's usage events, in order."""
    settled, pending, side = Tally(), Tally(), Tally()
    requests = 0
    for usage in usages:
        if usage.side:
            side.add(usage)
        elif usage.total:
            settled.add(usage)
            pending = Tally()  # what the total covers
        else:
            pending.add(usage)
            requests += 1
    settled.merge(pending)
    return RunUsage(settled, side, requests)


def usage_metrics(
    usages: Sequence[Usage], agent_turns: int | None, *, free: bool
) -> dict[str, Any]:
    """The turn, token and cost fields of metrics.json.

    `agent_turns` is the agent's own count, used only when it reports no per-request usage.
    A run without any usage event costs 0 only for a free agent (the oracle); for a paid
    one nothing is known, and its cost is null, never a made-up 0.
    """
    usage = run_usage(usages)
    turns: int | None = usage.requests
    if usage.requests == 0 and usage.loop.events:
        turns = agent_turns  # only totals: the agent's own count, if it gives one
    elif not usages:
        turns = agent_turns if agent_turns is not None else 0
    cost = usage.cost if usages else (0.0 if free else None)
    return {
        "turns": turns,
        "input_tokens": usage.loop.input,
        "output_tokens": usage.loop.output,
        "cache_read_tokens": usage.loop.cache_read,
        "cache_write_tokens": usage.loop.cache_write,
        "cost_usd": None if cost is None else round(cost, 6),
        "cost_source": ",".join(sorted(usage.loop.sources | usage.side.sources)) or None,
        "client_cost_usd": _round(usage.loop.client_cost, usage.side.client_cost),
        "side_requests": usage.side.events,
        "side_input_tokens": usage.side.input,
        "side_output_tokens": usage.side.output,
        "side_cost_usd": None if usage.side.cost is None else round(usage.side.cost, 6),
    }


def _round(*parts: float | None) -> float | None:
    known = [p for p in parts if p is not None]
    return round(sum(known), 6) if known else None
