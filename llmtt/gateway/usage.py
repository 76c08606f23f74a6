"""A run's model requests as its gateway recorded them (`<run>/wire.jsonl`, one line per
request), folded into the run's usage: its turns and side requests, tokens, cost, the requests
whose usage the provider never finished reporting, and the faults.

A request that offers tools is a turn of the agent loop; one that offers none is a side request
(a title, a compaction, a summary), as docs/metrics.md defines them. Only an answered request
(status below 400) is either: a refused, rate-limited or failed one used nothing. A request
still under way when the run ended (`unfinished`), or whose answer the provider cut, counts
what the wire had shown of it, and is no turn.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmtt.util.atomic import read_jsonl

WIRE_FILE = "wire.jsonl"
# Faults of the provider or of the way to it, never of the agent.
PROVIDER_FAULTS = (
    "rate_limited",
    "server_error",
    "timeout",
    "connection",
    "cut",
    "refused_key",
    "billing",
)
FIGURES = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
# The output a request that names no max_tokens is held at, at its worst.
WORST_OUTPUT = 64_000

Price = Callable[[int, int, int, int], float | None]  # (input, output, cache read, cache write)


@dataclass
class Part:
    """The figures of some of a run's requests (its loop, or its side requests)."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost: float | None = 0.0

    def add(self, record: dict[str, Any], cost: float | None, *, counted: bool = True) -> None:
        """One answered request (`counted`), or what was shown of one never answered."""
        self.requests += counted
        for name in FIGURES:
            setattr(self, name, getattr(self, name) + _count(record.get(name)))
        self.cost = None if self.cost is None or cost is None else self.cost + cost


@dataclass
class WireRun:
    """A run's requests, as the wire showed them.

    `unreported` lists the answered requests whose usage the provider did not report whole (a
    stream cut short, an answer without usage): their figures are what the wire showed, so the
    run's are a lower bound. `worst_cost` holds each such request at its worst (its
    `max_tokens` of output at the price), which is what a budget must count; None when a
    price or a request's limit is unknown.
    """

    loop: Part = field(default_factory=Part)
    side: Part = field(default_factory=Part)
    sent: int = 0  # every request the agent made, refused and failed ones included
    unreported: list[str] = field(default_factory=list)
    worst_cost: float | None = 0.0
    faults: list[str] = field(default_factory=list)
    refused: str | None = None  # the first limit the gateway enforced
    last_fault: str | None = None  # the provider fault the run's last request met, if any
    # A cut answer the agent went on from (no later loop request asked for it again).
    went_on_from_cut: str | None = None

    @property
    def cost(self) -> float | None:
        """The cost of every answered request (a lower bound when some are `unreported`)."""
        if self.loop.cost is None or self.side.cost is None:
            return None
        return round(self.loop.cost + self.side.cost, 8)


def read_wire(run_dir: Path) -> list[dict[str, Any]] | None:
    """The run's gateway records, or None when the run did not go through a gateway."""
    path = run_dir / WIRE_FILE
    if not path.exists():
        return None
    return [r for r in read_jsonl(path) if isinstance(r, dict)]


def fold(records: Iterable[dict[str, Any]], price: Price) -> WireRun:
    """The run's usage from its records, in the order they were written.

    Only the agent loop's requests (those offering tools) decide whether a fault ended the run:
    the last of them met one (`last_fault`), or the provider cut one of them and the agent went
    on without asking for it again (`went_on_from_cut`). A side request's fault (a title that
    was rate-limited) loses the task nothing.
    """
    run = WireRun()
    records = list(records)
    for number, record in enumerate(records, start=1):
        run.sent += 1
        fault = record.get("fault")
        provider = fault in PROVIDER_FAULTS and not (fault == "cut" and record.get("client_gone"))
        loop = of_loop(record)
        if provider:
            run.faults.append(describe_fault(number, record))
        if loop and not record.get("unfinished"):
            # A request still under way when the run ended neither makes nor clears a fault.
            run.last_fault = describe_fault(number, record) if provider else None
            if fault == "cut" and provider and run.went_on_from_cut is None:
                later = [r for r in records[number:] if of_loop(r)]
                asked_again = any(r.get("body_sha") == record.get("body_sha") for r in later)
                if later and not asked_again:
                    run.went_on_from_cut = describe_fault(number, record)
        if record.get("refused"):
            run.refused = run.refused or str(record["refused"])
            continue
        _count_usage(run, number, record, price, provider)
    return run


def of_loop(record: dict[str, Any]) -> bool:
    """A request of the agent loop: a model request (a wire format) that offers tools; not a
    side request, nor a token count that carries the same tools."""
    return record.get("wire") is not None and bool(_count(record.get("tools")))


def _count_usage(
    run: WireRun, number: int, record: dict[str, Any], price: Price, provider: bool
) -> None:
    """One request's figures, cost and worst case into `run`."""
    status, fault = record.get("status"), record.get("fault")
    unfinished = bool(record.get("unfinished"))
    answered = isinstance(status, int) and status < 400
    # A request the provider may have received and billed without an answer: one still under
    # way at the end, or one it never answered in time.
    unanswered = (unfinished and status is None) or fault == "timeout"
    if record.get("wire") is None and not unanswered:
        return  # no model answer (a token count): nothing to count but the request
    if not (answered or unanswered):
        return
    shown = figures(record)
    known = record.get("cost_usd")
    # Priced as the run went (its record), else now.
    cost = known if isinstance(known, float | int) else price(*shown)
    # A request still unanswered when the run ended, or whose answer the provider cut, gave
    # the agent no turn (it asks again, or it cannot go on from it); what the wire showed of it
    # counts all the same.
    part = run.loop if _count(record.get("tools")) else run.side
    part.add(record, cost, counted=answered and not unfinished and not provider)
    worst = cost
    if not record.get("complete"):
        run.unreported.append(
            f"request {number} ({record.get('path', '?')}): "
            + (
                "still unanswered when the run ended"
                if unfinished
                else "no answer in time"
                if fault == "timeout"
                else "the answer was cut short"
                if fault == "cut"
                else "no usage in the answer"
            )
        )
        # At its worst: the whole request as input (a token is at least a byte of it) when
        # its input was not shown, and its max_tokens of output (else WORST_OUTPUT).
        uncached, out, read, written = shown
        worst_input = uncached if uncached + read + written else _count(record.get("body_bytes"))
        output = max(_count(record.get("max_tokens")) or WORST_OUTPUT, out)
        worst = price(worst_input, output, read, written)
    run.worst_cost = None if run.worst_cost is None or worst is None else run.worst_cost + worst


def describe_fault(number: int, record: dict[str, Any]) -> str:
    """One provider fault in words: which request, what happened, what the provider said."""
    fault = record.get("fault")
    status = record.get("status")
    words = {
        "rate_limited": "rate limited (429)",
        "server_error": f"server error ({status})",
        "timeout": "no answer in time",
        "connection": "connection failed",
        "cut": "answer cut short",
        "refused_key": f"the key was refused ({status}): check the model's api_key_env",
        "billing": "payment required (402)",
    }.get(str(fault), str(fault))
    after = record.get("retry_after")
    if fault == "rate_limited" and isinstance(after, int | float):
        words += f", Retry-After {after:g} s"
    message = record.get("message")
    return f"request {number} ({record.get('path', '?')}): {words}" + (
        f": {message}" if message else ""
    )


def figures(record: dict[str, Any]) -> tuple[int, int, int, int]:
    """A record's (input, output, cache read, cache write) tokens, as `Price` takes them."""
    i, o, r, w = (_count(record.get(name)) for name in FIGURES)
    return i, o, r, w


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
