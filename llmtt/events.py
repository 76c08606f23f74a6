"""The event log (`events.jsonl`): the contract between agents and evaluation.

Adapters write these events as they happen; layer 1 reads only these.

A run's turns, tokens and cost are its usage events added up (`run_usage`), as
docs/metrics.md defines them. Agents report usage one model request at a time as it happens
(so a run killed at its time limit keeps what it spent), and some report their own totals at
the end. A `total` event replaces the per-request events before it; per-request events after
the last total (a run that went on and was killed) are added to it. Side requests (titles,
compaction) are counted apart from the agent loop's turns and tokens, and their cost is part
of the run's cost.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from llmtt.errors import LlmttError
from llmtt.util.text import Masks


class _Event(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    ts: float


class Spawn(_Event):
    """An agent process was started."""

    event: Literal["spawn"]
    command: str
    args: list[str] = Field(default_factory=list)


class Output(_Event):
    """Free text the agent printed."""

    event: Literal["output"]
    text: str


# llmtt's name for each agent's own name of a tool that every agent has in some form, so that
# "the shell tool" means the same whichever agent ran (docs/metrics.md, "Tool names"). A name
# not listed is its own llmtt name.
SHELL = "shell"
TOOL_NAMES: dict[str, str] = {
    # the shell
    "Bash": SHELL,  # claude-code
    "bash": SHELL,  # opencode, the litellm loop, the oracle
    "exec_command": SHELL,  # codex
    "shell": SHELL,  # codex (older versions), the transcript fallback
    "shell_command": SHELL,  # codex
    "local_shell": SHELL,  # codex on a local_shell_call
    # files
    "Read": "read",
    "read": "read",
    "Write": "write",
    "write": "write",
    "Edit": "edit",
    "MultiEdit": "edit",
    "edit": "edit",
    "multiedit": "edit",
    "apply_patch": "patch",  # codex
    "patch": "patch",  # opencode
    "Glob": "glob",
    "glob": "glob",
    "Grep": "grep",
    "grep": "grep",
    "LS": "list",
    "list": "list",
    # the web
    "WebFetch": "web_fetch",
    "webfetch": "web_fetch",
    "WebSearch": "web_search",
    "websearch": "web_search",
    "web_search": "web_search",
    # plans and sub-agents
    "TodoWrite": "todo",
    "todowrite": "todo",
    "todoread": "todo",
    "update_plan": "todo",  # codex
    "Task": "task",
    "task": "task",
    # skills (docs/metrics.md, "Guidance and skills")
    "Skill": "skill",  # claude-code
    "skill": "skill",  # opencode
}


def tool_name(agent_tool: str) -> str:
    """llmtt's name of a tool from an agent's own name for it (`Bash`, `exec_command` and
    `bash` are all `shell`); a name llmtt does not know is kept as it is."""
    return TOOL_NAMES.get(agent_tool, agent_tool)


class ToolCall(_Event):
    """The agent asked to run a command (`tool` is llmtt's name of the tool, `agent_tool` the
    agent's own; a shell tool's `command` is its line, another tool's its input as JSON)."""

    event: Literal["tool_call"]
    id: str | None = None
    tool: str = SHELL
    agent_tool: str | None = None  # None: not known (the transcript fallback)
    command: str

    @model_validator(mode="before")
    @classmethod
    def _older_log(cls, data: Any) -> Any:
        """A log written before tool names were normalised (no `agent_tool`) holds the
        agent's own name in `tool`: read as a new one would have been written."""
        if isinstance(data, dict) and "agent_tool" not in data:
            named = data.get("tool")
            if isinstance(named, str):
                return {**data, "tool": tool_name(named), "agent_tool": named}
        return data


class ToolResult(_Event):
    """What the command did; `exit_code` is null when truly unknown."""

    event: Literal["tool_result"]
    id: str | None = None
    output: str = ""
    exit_code: int | None = None


class Usage(_Event):
    """Tokens and cost of one model request, as soon as the agent reports it.

    `input_tokens` is uncached input only; cache reads and writes are counted apart. A `side`
    request (a title, a compaction, a summary) is not a turn of the agent loop. A `total`
    gives the agent's own final figures for the whole run: it replaces the per-request
    events before it (which a killed run keeps). `cost_usd` is known only from a price llmtt
    or the user has for the model (`cost_source` says which); what the client computed is
    `client_cost_usd`, never taken as known. See docs/metrics.md.
    """

    event: Literal["usage"]
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = None
    cost_source: str | None = None
    client_cost_usd: float | None = None
    side: bool = False
    total: bool = False


class Message(_Event):
    """A message in the conversation."""

    event: Literal["message"]
    role: str
    text: str


class Complete(_Event):
    """The agent's process ended."""

    event: Literal["complete"]
    exit_code: int | None
    duration_secs: float
    timed_out: bool = False
    natural_stop: bool | None = None
    turns: int | None = None  # model turns, when the agent counts them and usage cannot
    reason: str | None = None  # why the agent stopped early (a limit, an endpoint error)


Event = Annotated[
    Spawn | Output | ToolCall | ToolResult | Usage | Message | Complete,
    Field(discriminator="event"),
]
_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)


# In the text of an `output` event llmtt writes when a line (or record) of the agent's output had
# a shape its reader did not expect: whatever events it held are missing, and the evaluation
# warns of the run.
UNREAD = "has a shape llmtt does not read"


# The longest text an event keeps (a tool's output, a message, a line the agent printed): past
# it, the head and the tail stay with a marker between them. A command printing 100 MB then
# costs the harness no more memory or time than one printing 1 MB; the raw transcript keeps
# what the agent's own stream carried, up to its own cap (llmtt.execution.transcript).
MAX_TEXT = 1_000_000
_CLIPPED = {"tool_result": "output", "output": "text", "message": "text"}


def clip(text: str, limit: int = MAX_TEXT) -> str:
    """`text`, or its first and last `limit // 2` characters around a marker saying how many
    were cut."""
    if len(text) <= limit:
        return text
    half = limit // 2
    cut = len(text) - 2 * half
    return f"{text[:half]}\n[... {cut} characters cut by llmtt ...]\n{text[-half:]}"


_PLAIN = frozenset({int, float, bool})
_SURROGATE = re.compile("[\ud800-\udfff]")


def _encoder() -> Callable[[Any], str]:
    """json.dumps(record, ensure_ascii=False), a third faster: `JSONEncoder.encode` makes its
    C encoder anew at every call; this one is made once. Where the C accelerator is missing,
    json's own encoder."""
    plain = json.JSONEncoder(ensure_ascii=False)
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return plain.encode
    # markers (no circular check: records are made of decoded JSON), default, string encoder,
    # indent, separators, sort_keys, skipkeys, allow_nan: those of `plain`.
    encode = make(
        None, plain.default, json.encoder.encode_basestring, None, ": ", ", ", False, False, True
    )

    def dumps(record: Any) -> str:
        return "".join(encode(record, 0))

    return dumps


_ENCODE = _encoder()


class EventWriter:
    """Appends events to a file, one JSON line each, flushed as they happen.

    With a `redact`, secrets in the events' text are masked before they are written: the log
    is read by the evaluation and shown in reports, and a masked secret changes no count but
    the distinct commands a secret told apart.
    """

    def __init__(self, handle: IO[str], redact: Masks | None = None) -> None:
        self._handle = handle
        self._redact = redact
        self._held = 0  # inside `held()`: the flush waits for its end

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """The events emitted inside reach the file together at its end: one write for the
        events of one read of an agent's output, not one per event (a sixth of the parsing
        time of a stream of short lines)."""
        self._held += 1
        try:
            yield
        finally:
            self._held -= 1
            if not self._held:
                self._handle.flush()

    def emit(self, event: str, **fields: Any) -> None:
        """Write one event now."""
        field = _CLIPPED.get(event)
        if field is not None:
            text = fields.get(field)
            if isinstance(text, str) and len(text) > MAX_TEXT:
                fields[field] = clip(text)
        if self._redact:
            # The field names are llmtt's own, and so are `ts` and `event`: only the other
            # values, texts or what holds them, can hold a secret.
            text_of, value_of = self._redact.text, self._redact.value
            for key, item in fields.items():  # values replaced, none added: safe to iterate
                kind = type(item)
                if kind is str:
                    fields[key] = text_of(item)
                elif item is not None and kind not in _PLAIN:
                    fields[key] = value_of(item)
        line = _ENCODE({"ts": round(time.time(), 3), "event": event, **fields}) + "\n"
        try:
            self._handle.write(line)
        except UnicodeEncodeError:
            # A lone half of a UTF-16 pair, which a JSON escape in an agent's stream can hold
            # (a client that cut a text in the middle of an emoji): not UTF-8, so it is written
            # as the replacement character rather than failing the run.
            self._handle.write(_SURROGATE.sub("\ufffd", line))
        if not self._held:
            self._handle.flush()


def read_events(path: Path) -> list[Event]:
    """Read and validate an event log; a malformed line is an error naming its line."""
    events: list[Event] = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                events.append(_ADAPTER.validate_json(line))
            except ValidationError as exc:
                raise LlmttError(
                    f"{path}:{number}: malformed event: {exc.errors()[0]['msg']}; remove the "
                    "file and run doit again: the layer that writes it runs again"
                ) from None
    return events


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
